// paths — where kvdemo finds the files it ships (data/...): in the current
// folder when run from the project, next to the kvdemo binary when it runs
// from its build folder, and in the installed data folder
// (PREFIX/share/kvdemo, found from the binary's own place: BIN/../share/kvdemo)
// after `make install`.
#ifndef KVDEMO_PATHS_H
#define KVDEMO_PATHS_H

#include <stddef.h>

// The path of a shipped file such as "data/tianqi.txt": rel itself when it
// is readable from here, else the first readable one of EXE_DIR/rel and
// EXE_DIR/../share/kvdemo/rel, else rel (so that an error names it). May use
// buf.
const char *paths_shipped(const char *rel, char *buf, size_t size);

#endif
