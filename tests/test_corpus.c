// test_corpus — every file of tests/fuzz/corpus replayed through the parser
// its folder names (tests/fuzz/targets.c), in the normal build: an input that
// once crashed a parser under the fuzzer stays fixed even where clang is
// absent. The parsers' messages on stderr are sent to /dev/null meanwhile.
//
// Besides "no crash" (and no sanitizer report under make asan), each valid
// seed named valid-* must be accepted and every other file refused by the
// loaders; the option parser's seeds may go either way.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz/targets.h"
#include "testutil.h"

static unsigned char *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    size_t got;
    while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            unsigned char *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
        }
    }
    fclose(f);
    *size = n;
    return b;
}

static void test_replay_corpus(void **state) {
    (void)state;
    int files = 0;
    for (int t = 0; t < NUM_FUZZ_TARGETS; t++) {
        char dir[256];
        snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", FUZZ_TARGETS[t].name);
        DIR *d = opendir(dir);
        if (!d) fail_msg("%s: missing (every fuzz target has a seed corpus)", dir);
        int here = 0;
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            char path[600];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            size_t size = 0;
            unsigned char *data = read_all(path, &size);
            if (!data) fail_msg("%s: cannot read", path);
            fflush(stderr);
            int saved = dup(2);
            assert_non_null(freopen("/dev/null", "w", stderr));
            int rc = FUZZ_TARGETS[t].run(data, size);
            fflush(stderr);
            dup2(saved, 2);
            close(saved);
            free(data);
            int valid = strncmp(e->d_name, "valid-", 6) == 0;
            if (strcmp(FUZZ_TARGETS[t].name, "options") != 0 && rc != !valid)
                fail_msg("%s: expected it to be %s, it was %s", path, valid ? "accepted" : "refused",
                         rc ? "refused" : "accepted");
            here++;
        }
        closedir(d);
        if (here == 0) fail_msg("%s: empty (every fuzz target has a seed corpus)", dir);
        files += here;
    }
    print_message("replayed %d corpus files through %d parsers\n", files, NUM_FUZZ_TARGETS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
