// kvcmd — the command-line side of lessons 11 and 12: --bug and --kv-dtype
// for generate, bench and eval.
#ifndef KVDEMO_KVCMD_H
#define KVDEMO_KVCMD_H

#include "kvvariant.h"
#include "options.h"

// v = what --bug and --kv-dtype ask for; *set = 1 when either was given (the
// caller then runs its GptState with it: kvvariant_attach). Returns 0, or 2 after one
// line on stderr (--bug with --no-cache: the bug lives in the cached path).
int kvcmd_variant(GptVariant *v, int *set, const Options *opt);

// kvdemo eval --kv-dtype TYPE: the validation loss through such a cache, and
// its bytes per token. Returns 0, or an exit status after one line on stderr.
int kvcmd_eval(const Options *opt);

#endif
