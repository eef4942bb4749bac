// paths — where kvdemo finds the files it ships.
#include "paths.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *paths_shipped(const char *rel, char *buf, size_t size) {
    if (access(rel, R_OK) == 0) return rel;
    // /proc/self/exe is EXE_DIR/kvdemo: try EXE_DIR/data/... (the project's
    // own build) and EXE_DIR/../share/kvdemo/data/... (an installed copy).
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return rel;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return rel;
    *slash = '\0';
    static const char *const places[] = {"%s/%s", "%s/../share/kvdemo/%s"};
    for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
        int len = snprintf(buf, size, places[i], exe, rel);
        if (len > 0 && (size_t)len < size && access(buf, R_OK) == 0) return buf;
    }
    return rel;
}
