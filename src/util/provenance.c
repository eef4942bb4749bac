// provenance — the model files a run read and their checksums (provenance.h).
#include "provenance.h"

#include <stdio.h>
#include <string.h>

static ProvenanceFile files[PROVENANCE_MAX];
static int nfiles;

void provenance_note(const char *path, uint32_t sum) {
    for (int i = 0; i < nfiles; i++)
        if (!strncmp(files[i].path, path, sizeof files[i].path - 1) && files[i].adler32 == sum) return;
    if (nfiles == PROVENANCE_MAX) return;
    snprintf(files[nfiles].path, sizeof files[nfiles].path, "%s", path);
    files[nfiles++].adler32 = sum;
}

int provenance_count(void) {
    return nfiles;
}

const ProvenanceFile *provenance_get(int i) {
    return i >= 0 && i < nfiles ? &files[i] : NULL;
}
