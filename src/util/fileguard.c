// fileguard — an output that names an input is refused before the work
// (fileguard.h).
#include "fileguard.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"

// The folder part of path ("." when it has none) into buf, and its name
// part returned.
static const char *split_path(const char *path, char *buf, size_t size) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(buf, size, ".");
    else if (slash == path) snprintf(buf, size, "/");
    else snprintf(buf, size, "%.*s", (int)(slash - path), path);
    return slash ? slash + 1 : path;
}

int fileguard_same(const char *a, const char *b) {
    struct stat sa, sb;
    int ha = stat(a, &sa) == 0, hb = stat(b, &sb) == 0;
    if (ha && hb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ha != hb) return 0;
    // Neither exists yet: the same name in the same folder? (A folder that
    // does not exist holds nothing to lose.)
    char fa[4096], fb[4096];
    const char *na = split_path(a, fa, sizeof fa), *nb = split_path(b, fb, sizeof fb);
    return strcmp(na, nb) == 0 && stat(fa, &sa) == 0 && stat(fb, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

static int clash(Lang lang, const FileRole *out, const FileRole *other, const char *what_en,
                 const char *what_zh) {
    fileio_error(lang, "%s %s is the same file as %s %s: kvdemo would replace %s; give %s another path",
                 "%s %s 与 %s %s 是同一个文件：kvdemo 会覆盖%s；请给 %s 换一个路径", out->option, out->path,
                 other->option, other->path, fileio_text(lang, what_en, what_zh), out->option);
    return 2;
}

int fileguard_check(Lang lang, const FileRole *outputs, int n_outputs, const FileRole *inputs, int n_inputs) {
    for (int o = 0; o < n_outputs; o++) {
        if (!outputs[o].path) continue;
        for (int i = 0; i < n_inputs; i++)
            if (inputs[i].path && fileguard_same(outputs[o].path, inputs[i].path))
                return clash(lang, &outputs[o], &inputs[i], "its own input", "它自己的输入");
        for (int p = 0; p < o; p++)
            if (outputs[p].path && fileguard_same(outputs[o].path, outputs[p].path))
                return clash(lang, &outputs[o], &outputs[p], "one output with another", "一个输出文件被另一个覆盖");
    }
    return 0;
}
