// toydata — the numbers of the article's 4-dim example, read from a text file.
#include "toydata.h"

#include "paths.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { M_X, M_WQ, M_WK, M_WV, M_COUNT };
static const char *const MATRIX_NAMES[M_COUNT] = {"X", "W_Q", "W_K", "W_V"};

const char *toydata_default_path(char *buf, size_t size) {
    return paths_shipped("data/tianqi.txt", buf, size);
}

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

// Splits a line into whitespace-separated fields, in place; drops comments.
static int split(char *line, char **fields, int max) {
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    int n = 0;
    for (char *tok = strtok(line, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
        if (n == max) return max + 1;
        fields[n++] = tok;
    }
    return n;
}

static int parse_float(const char *s, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v) || fabs(v) > 3.0e38) return 0;
    *out = (float)v;
    return 1;
}

static int matrix_index(const char *name) {
    for (int m = 0; m < M_COUNT; m++)
        if (strcmp(name, MATRIX_NAMES[m]) == 0) return m;
    return -1;
}

int toydata_load(ToyData *t, const char *path, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "r");
    if (!f) return fail(err, errlen, "cannot open data file %s: %s", path, strerror(errno));

    // Rows are read into fixed-size tables first; the sizes come from them.
    enum { MAXR = TOY_MAX_TOKENS > TOY_MAX_WIDTH ? TOY_MAX_TOKENS : TOY_MAX_WIDTH };
    static float cells[M_COUNT][MAXR][TOY_MAX_WIDTH];
    int rows[M_COUNT] = {0}, cols[M_COUNT] = {0}, seen[M_COUNT] = {0};
    int current = -1, have_scale = 0, lineno = 0, rc = 0;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = fail(err, errlen, "%s:%d: line too long (at most %zu bytes)", path, lineno, sizeof line - 2);
            break;
        }
        char *fields[TOY_MAX_WIDTH + 2];
        int nf = split(line, fields, TOY_MAX_WIDTH + 1);
        if (nf == 0) continue;
        if (nf > TOY_MAX_WIDTH + 1) {
            rc = fail(err, errlen, "%s:%d: more than %d numbers on a line", path, lineno, TOY_MAX_WIDTH);
            break;
        }
        if (strcmp(fields[0], "scale") == 0) {
            if (nf != 2 || !parse_float(fields[1], &t->scale) || t->scale <= 0) {
                rc = fail(err, errlen, "%s:%d: expected \"scale N\" with a positive number", path, lineno);
                break;
            }
            have_scale = 1;
            current = -1;
            continue;
        }
        int m = matrix_index(fields[0]);
        if (m >= 0) {
            if (nf != 1) {
                rc = fail(err, errlen, "%s:%d: the name %s goes on a line of its own, its rows below it", path, lineno, fields[0]);
                break;
            }
            if (seen[m]) {
                rc = fail(err, errlen, "%s:%d: %s appears twice", path, lineno, fields[0]);
                break;
            }
            seen[m] = 1;
            current = m;
            continue;
        }
        if (current < 0) {
            rc = fail(err, errlen, "%s:%d: expected a matrix name (X, W_Q, W_K or W_V) or \"scale N\", found \"%s\"", path, lineno, fields[0]);
            break;
        }
        // A row: in X the first field may be the token; the rest are numbers.
        int first = 0;
        float v;
        if (current == M_X && !parse_float(fields[0], &v)) {
            if (strlen(fields[0]) >= TOY_TOKEN_BYTES) {
                rc = fail(err, errlen, "%s:%d: token \"%s\" is longer than %d bytes", path, lineno, fields[0], TOY_TOKEN_BYTES - 1);
                break;
            }
            first = 1;
        }
        int r = rows[current];
        int limit = current == M_X ? TOY_MAX_TOKENS : TOY_MAX_WIDTH;
        if (r == limit) {
            rc = fail(err, errlen, "%s:%d: %s has more than %d rows", path, lineno, MATRIX_NAMES[current], limit);
            break;
        }
        int nnum = nf - first;
        if (nnum == 0) {
            rc = fail(err, errlen, "%s:%d: row %d of %s has a token but no numbers", path, lineno, r + 1, MATRIX_NAMES[current]);
            break;
        }
        if (r > 0 && nnum != cols[current]) {
            rc = fail(err, errlen, "%s:%d: row %d of %s has %d numbers, expected %d like the rows above", path, lineno, r + 1, MATRIX_NAMES[current], nnum, cols[current]);
            break;
        }
        for (int c = 0; c < nnum && rc == 0; c++)
            if (!parse_float(fields[first + c], &cells[current][r][c]))
                rc = fail(err, errlen, "%s:%d: \"%s\" is not a number (row %d of %s)", path, lineno, fields[first + c], r + 1, MATRIX_NAMES[current]);
        if (rc) break;
        if (current == M_X) {
            if (first) snprintf(t->tokens[r], TOY_TOKEN_BYTES, "%s", fields[0]);
            else snprintf(t->tokens[r], TOY_TOKEN_BYTES, "t%d", r);
        }
        cols[current] = nnum;
        rows[current]++;
    }
    if (rc == 0 && ferror(f)) rc = fail(err, errlen, "%s: read error", path);
    fclose(f);
    if (rc) return rc;

    if (lineno == 0 || (!seen[M_X] && !seen[M_WQ] && !seen[M_WK] && !seen[M_WV]))
        return fail(err, errlen, "%s: no matrices found: expected X, W_Q, W_K and W_V, each a name line followed by its rows", path);
    for (int m = 0; m < M_COUNT; m++) {
        if (!seen[m]) return fail(err, errlen, "%s: the matrix %s is missing (expected X, W_Q, W_K and W_V)", path, MATRIX_NAMES[m]);
        if (rows[m] == 0) return fail(err, errlen, "%s: the matrix %s has no rows", path, MATRIX_NAMES[m]);
    }
    t->n = rows[M_X];
    t->d = cols[M_X];
    t->dk = cols[M_WQ];
    t->dv = cols[M_WV];
    for (int m = M_WQ; m < M_COUNT; m++)
        if (rows[m] != t->d)
            return fail(err, errlen, "%s: %s has %d rows but X has %d columns; they must match (X @ %s)", path, MATRIX_NAMES[m], rows[m], t->d, MATRIX_NAMES[m]);
    if (cols[M_WK] != t->dk)
        return fail(err, errlen, "%s: W_K has %d columns but W_Q has %d; Q @ K.T needs them equal", path, cols[M_WK], t->dk);
    if (t->n < 2) return fail(err, errlen, "%s: X has %d row; the lessons need at least 2 tokens", path, t->n);
    if (!have_scale) t->scale = sqrtf((float)t->dk);

    t->X = malloc(sizeof(float) * (size_t)(t->n * t->d + t->d * (2 * t->dk + t->dv)));
    if (!t->X) return fail(err, errlen, "%s: out of memory", path);
    t->W_Q = t->X + t->n * t->d;
    t->W_K = t->W_Q + t->d * t->dk;
    t->W_V = t->W_K + t->d * t->dk;
    float *dst[M_COUNT] = {t->X, t->W_Q, t->W_K, t->W_V};
    for (int m = 0; m < M_COUNT; m++)
        for (int r = 0; r < rows[m]; r++)
            memcpy(dst[m] + r * cols[m], cells[m][r], sizeof(float) * (size_t)cols[m]);
    for (int r = 0; r < t->n; r++) t->rows[r] = t->tokens[r];
    return 0;
}

void toydata_free(ToyData *t) {
    free(t->X);
    memset(t, 0, sizeof *t);
}
