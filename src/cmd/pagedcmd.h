// pagedcmd — kvdemo generate --paged: parallel sampling on the paged KV cache.
#ifndef KVDEMO_PAGEDCMD_H
#define KVDEMO_PAGEDCMD_H

#include "options.h"
#include "trace.h"

// N continuations of one prompt sharing its blocks, with the blocks they
// used against N separate caches. Returns 0, 2 (usage) or 1 (failure) after
// one line on stderr.
int pagedcmd_generate(const Options *opt, Trace *tr);

#endif
