// paths — where kvdemo finds the files it ships.
#include "paths.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *paths_shipped(const char *rel, char *buf, size_t size) {
    if (access(rel, R_OK) == 0) return rel;
    // Next to the binary: /proc/self/exe is .../kvdemo, the file .../data/...
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(buf, size, "%s/%s", exe, rel);
            if (access(buf, R_OK) == 0) return buf;
        }
    }
    return rel;
}
