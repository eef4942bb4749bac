// main — kvdemo's entry point; everything else is in cli.c. What main adds:
// output that could not be written (a full disk, /dev/full, a closed
// standard output) is a failure, said once at the end as coreutils says it.
#include "cli.h"
#include "fileio.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

// Flushes and closes standard output. Returns rc, or 1 after one line on
// stderr (in lang) when something written to it was lost. A closed standard output
// that nothing was written to is no error.
static int close_stdout(int rc, Lang lang) {
    int lost = ferror(stdout);
    int e = fflush(stdout) == 0 ? 0 : errno;
    if (fclose(stdout) != 0 && !e && errno != EBADF) e = errno;
    if (lost && !e) e = fileio_stdout_error();
    // Text the trace lost for want of memory (trace.c), unless the run's
    // own error line has said so.
    if (!lost && !e && rc == 0) e = fileio_stdout_error();
    if (!lost && !e) return rc;
    if (e) fileio_error(lang, "error writing standard output: %s", "写标准输出时出错：%s", fileio_strerror(lang, e));
    else fileio_error(lang, "error writing standard output", "写标准输出时出错");
    return 1;
}

int main(int argc, char **argv) {
    Lang lang = LANG_EN;
    int rc = cli_main(argc, argv, &lang);
    return close_stdout(rc, lang);
}
