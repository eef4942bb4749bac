// provenance — the model files a run read, each with the checksum it
// carries (the Adler-32 at the end of a kvdemo model file, checked as it
// was read), so that what the run printed can say which weights made it:
// the lesson page's footer (trace_doc.c) shows them beside the command line.
//
// A simplification: one list for the whole process, as kvdemo runs one
// command; a file read twice is listed once.
#ifndef KVDEMO_PROVENANCE_H
#define KVDEMO_PROVENANCE_H

#include <stdint.h>

enum { PROVENANCE_MAX = 8 };   // files kept; more are not listed

typedef struct {
    char path[512];   // as kvdemo opened it (cut at 511 bytes)
    uint32_t adler32; // the file's own checksum
} ProvenanceFile;

// Notes that path was read and its checksum sum held.
void provenance_note(const char *path, uint32_t sum);
// How many files were noted, and the i-th (0 .. count-1) in the order read.
int provenance_count(void);
const ProvenanceFile *provenance_get(int i);

#endif
