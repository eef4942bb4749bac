// paths — where kvdemo finds the files it ships (data/...): in the current
// folder when run from the project, else next to the kvdemo binary.
#ifndef KVDEMO_PATHS_H
#define KVDEMO_PATHS_H

#include <stddef.h>

// The path of a shipped file such as "data/tianqi.txt": rel itself when it
// is readable from here, else the same path next to the binary when that is
// readable, else rel (so that an error names it). May use buf.
const char *paths_shipped(const char *rel, char *buf, size_t size);

#endif
