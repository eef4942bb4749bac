// fileguard — keeps a command from destroying its own inputs. Before any
// work, every file a command would write is compared with every file it
// reads and with every other file it writes, as cp compares its source and
// its target: `train --data text.txt --out text.txt` would turn the only
// copy of a text into a model, `bench --model m.bin --csv m.bin` would
// replace the model. Two names are the same file when they lead to the same
// device and inode (a hard or symbolic link included), or, for a file not
// written yet, when they name the same entry of the same folder.
#ifndef KVDEMO_FILEGUARD_H
#define KVDEMO_FILEGUARD_H

#include "fileio.h"   // Lang

// One file of a command: the option that names it (e.g. "--out", or
// "--out's checkpoint") and its path (NULL: not given, skipped).
typedef struct {
    const char *option;
    const char *path;
} FileRole;

// 1 when paths a and b name the same file (see above), else 0.
int fileguard_same(const char *a, const char *b);

// Checks that no output is an input or another output. On a clash prints
// one line on stderr in lang naming both options and the file, and returns
// 2 (a usage error); else 0.
int fileguard_check(Lang lang, const FileRole *outputs, int n_outputs, const FileRole *inputs, int n_inputs);

#endif
