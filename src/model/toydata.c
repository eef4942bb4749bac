// toydata — the numbers of the article's 4-dim example, read from a text file.
#include "toydata.h"

#include "fileio.h"
#include "paths.h"
#include "utf8.h"

#include <errno.h>
#include <float.h>
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

// One line of f into line (size bytes; its newline kept). Returns 1, 0 at
// the end of the file, -1 when the line has no room (*at: its length so far)
// and -2 at a NUL byte (*at: which byte of the line, from 1), which a text file never
// holds. The byte order mark that Notepad puts before the first line is
// dropped (first: this is the first line).
static int read_line(FILE *f, char *line, size_t size, int first, size_t *at) {
    size_t n = 0;
    int c;
    while ((c = getc(f)) != EOF) {
        if (c == '\0') {
            *at = n + 1;
            return -2;
        }
        if (n + 1 == size) {
            *at = n;
            return -1;
        }
        line[n++] = (char)c;
        if (first && n == 3 && !memcmp(line, "\xef\xbb\xbf", 3)) n = 0;
        if (c == '\n') break;
    }
    line[n] = '\0';
    return n > 0 || c != EOF;
}

// Where token stops being printable UTF-8 text: 0 when it never does, else
// the byte (from 1) that starts an invalid sequence (*cp = 0xFFFFFFFF) or a
// control character (*cp its code point: U+0000..U+001F, U+007F..U+009F).
static size_t not_text_at(const char *token, uint32_t *cp) {
    const unsigned char *p = (const unsigned char *)token;
    size_t n = strlen(token);
    for (size_t i = 0; i < n;) {
        int len = utf8_decode(cp, p + i, n - i);
        if (len == 0) *cp = 0xFFFFFFFFu;
        if (len == 0 || *cp < 0x20 || (*cp >= 0x7F && *cp <= 0x9F)) return i + 1;
        i += (size_t)len;
    }
    return 0;
}

// A token of X that is not printable UTF-8 text: 0, or -1 with err.
static int check_token(const char *token, const char *path, int lineno, Err err) {
    uint32_t cp;
    size_t at = not_text_at(token, &cp);
    if (!at) return 0;
    char shown[96];
    utf8_quote(shown, sizeof shown, token, 24);
    if (cp == 0xFFFFFFFFu)
        return fileio_fail2(err, "%s:%d: token \"%s\" is not valid UTF-8 (byte %zu); save the file as UTF-8",
                            "%s:%d：token“%s”不是合法的 UTF-8（第 %zu 个字节）；请把文件存成 UTF-8", path, lineno, shown, at);
    return fileio_fail2(err, "%s:%d: token \"%s\" holds the control character U+%04X; a token is text to show",
                        "%s:%d：token“%s”含有控制字符 U+%04X；token 必须是能显示的文字", path, lineno, shown, (unsigned)cp);
}

static int matrix_index(const char *name) {
    for (int m = 0; m < M_COUNT; m++)
        if (strcmp(name, MATRIX_NAMES[m]) == 0) return m;
    return -1;
}

// What has been read so far: rows go into fixed-size tables first; the
// sizes come from them.
enum { MAXR = TOY_MAX_TOKENS > TOY_MAX_WIDTH ? TOY_MAX_TOKENS : TOY_MAX_WIDTH };
typedef struct {
    float (*cells)[MAXR][TOY_MAX_WIDTH];   // [matrix][row][column]
    int rows[M_COUNT], cols[M_COUNT], seen[M_COUNT];
    int current;                          // the matrix being read; -1 none
    int have_scale;
    const char *path;
    int lineno;
    Err err;
} Reading;

// A line that is "scale N" or a matrix name: returns 1, 0 when it is
// neither, -1 with err when it is malformed.
static int read_name(Reading *rd, ToyData *t, char **fields, int nf) {
    if (strcmp(fields[0], "scale") == 0) {
        if (nf != 2 || !parse_float(fields[1], &t->scale) || t->scale <= 0)
            return fileio_fail2(rd->err, "%s:%d: expected \"scale N\" with a positive number",
                                "%s:%d：这里应是“scale N”，N 为正数", rd->path, rd->lineno);
        if (t->scale < FLT_MIN)   // scores / a subnormal scale overflow
            return fileio_fail2(rd->err,
                                "%s:%d: scale %g is below %g, float32's smallest normal number; give a larger scale",
                                "%s:%d：scale %g 小于 float32 最小的正规数 %g；请给更大的 scale", rd->path, rd->lineno,
                                (double)t->scale, (double)FLT_MIN);
        rd->have_scale = 1;
        rd->current = -1;
        return 1;
    }
    int m = matrix_index(fields[0]);
    if (m < 0) return 0;
    if (nf != 1)
        return fileio_fail2(rd->err, "%s:%d: the name %s goes on a line of its own, its rows below it",
                            "%s:%d：矩阵名 %s 要单独占一行，它的各行写在下面", rd->path, rd->lineno, fields[0]);
    if (rd->seen[m])
        return fileio_fail2(rd->err, "%s:%d: %s appears twice", "%s:%d：%s 出现了两次", rd->path, rd->lineno,
                            fields[0]);
    rd->seen[m] = 1;
    rd->current = m;
    return 1;
}

// A row of the current matrix: in X the first field may be the token; the
// rest are numbers. Returns 0, or -1 with err.
static int read_row(Reading *rd, ToyData *t, char **fields, int nf) {
    const char *path = rd->path;
    int lineno = rd->lineno, cur = rd->current, first = 0;
    if (cur < 0) {
        char shown[96];
        return fileio_fail2(rd->err, "%s:%d: expected a matrix name (X, W_Q, W_K or W_V) or \"scale N\", found \"%s\"",
                            "%s:%d：这里应是矩阵名（X、W_Q、W_K 或 W_V）或“scale N”，却是“%s”", path, lineno,
                            utf8_quote(shown, sizeof shown, fields[0], 24));
    }
    float v;
    if (cur == M_X && !parse_float(fields[0], &v)) {
        if (check_token(fields[0], path, lineno, rd->err)) return -1;
        if (strlen(fields[0]) >= TOY_TOKEN_BYTES)
            return fileio_fail2(rd->err, "%s:%d: token \"%s\" is longer than %d bytes", "%s:%d：token“%s”超过 %d 字节",
                                path, lineno, fields[0], TOY_TOKEN_BYTES - 1);
        first = 1;
    }
    int r = rd->rows[cur];
    int limit = cur == M_X ? TOY_MAX_TOKENS : TOY_MAX_WIDTH;
    if (r == limit)
        return fileio_fail2(rd->err, "%s:%d: %s has more than %d rows", "%s:%d：%s 超过 %d 行", path, lineno,
                            MATRIX_NAMES[cur], limit);
    int nnum = nf - first;
    if (nnum == 0)
        return fileio_fail2(rd->err, "%s:%d: row %d of %s has a token but no numbers", "%s:%d：第 %d 行（%s）只有 token，没有数",
                            path, lineno, r + 1, MATRIX_NAMES[cur]);
    if (r > 0 && nnum != rd->cols[cur])
        return fileio_fail2(rd->err, "%s:%d: row %d of %s has %d numbers, expected %d like the rows above",
                            "%s:%d：第 %d 行（%s）有 %d 个数，应与上面各行一样是 %d 个", path, lineno, r + 1,
                            MATRIX_NAMES[cur], nnum, rd->cols[cur]);
    for (int c = 0; c < nnum; c++)
        if (!parse_float(fields[first + c], &rd->cells[cur][r][c])) {
            char shown[96];
            return fileio_fail2(rd->err, "%s:%d: \"%s\" is not a number (row %d of %s)", "%s:%d：“%s”不是数（第 %d 行，%s）",
                                path, lineno, utf8_quote(shown, sizeof shown, fields[first + c], 24), r + 1,
                                MATRIX_NAMES[cur]);
        }
    if (cur == M_X) {
        if (first) snprintf(t->tokens[r], TOY_TOKEN_BYTES, "%s", fields[0]);
        else snprintf(t->tokens[r], TOY_TOKEN_BYTES, "t%d", r);
    }
    rd->cols[cur] = nnum;
    rd->rows[cur]++;
    return 0;
}

// The largest |entry| of a (n, k) @ b (k, m), computed in double.
static double max_abs_product(const float *a, const float *b, int n, int k, int m) {
    double top = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) {
            double sum = 0;
            for (int p = 0; p < k; p++) sum += (double)a[i * k + p] * b[p * m + j];
            top = fmax(top, fabs(sum));
        }
    return top;
}

// Numbers that every entry of which is finite but whose products overflow
// float32 would make the lessons print inf and nan as results: Q, K, V and
// the scores Q @ K.T / scale are bounded here, in double, with a margin of
// 1000 for the sums of the later steps (weights @ V, a second layer).
static int toydata_check_range(ToyData *t, const char *path, Err err) {
    const double limit = FLT_MAX / 1000;
    double q = max_abs_product(t->X, t->W_Q, t->n, t->d, t->dk);
    double k = max_abs_product(t->X, t->W_K, t->n, t->d, t->dk);
    double v = max_abs_product(t->X, t->W_V, t->n, t->d, t->dv);
    double scores = q * k * t->dk / t->scale;   // |q . k| <= dk max|q| max|k|
    const char *what = v > limit ? "X @ W_V" : q > limit ? "X @ W_Q" : k > limit ? "X @ W_K" : scores > limit ? "Q @ K.T / scale" : NULL;
    if (!what) return 0;
    double reach = v > limit ? v : q > limit ? q : k > limit ? k : scores;
    toydata_free(t);
    return fileio_fail2(err, "%s: %s may reach %.3g, past what float32 holds (%.3g) with room for the sums after it; use smaller numbers%s",
                        "%s：%s 可能达到 %.3g，超出 float32 在留出后续求和余量后能表示的范围（%.3g）；请用更小的数%s", path, what, reach, limit,
                        scores > limit && what[0] == 'Q' ? fileio_text(err.lang, " or a larger scale", "或更大的 scale") : "");
}

// The tables read checked against each other and copied into t. Returns 0,
// or -1 with err.
static int finish(ToyData *t, const Reading *rd) {
    const char *path = rd->path;
    const int *rows = rd->rows, *cols = rd->cols, *seen = rd->seen;
    Err err = rd->err;
    if (rd->lineno == 0 || (!seen[M_X] && !seen[M_WQ] && !seen[M_WK] && !seen[M_WV]))
        return fileio_fail2(err, "%s: no matrices found: expected X, W_Q, W_K and W_V, each a name line followed by its rows",
                            "%s：没有找到矩阵：应有 X、W_Q、W_K 和 W_V，每个先写一行矩阵名，下面是它的各行", path);
    for (int m = 0; m < M_COUNT; m++) {
        if (!seen[m]) return fileio_fail2(err, "%s: the matrix %s is missing (expected X, W_Q, W_K and W_V)",
                                             "%s：缺少矩阵 %s（应有 X、W_Q、W_K 和 W_V）", path, MATRIX_NAMES[m]);
        if (rows[m] == 0) return fileio_fail2(err, "%s: the matrix %s has no rows", "%s：矩阵 %s 没有行", path,
                                                  MATRIX_NAMES[m]);
    }
    t->n = rows[M_X];
    t->d = cols[M_X];
    t->dk = cols[M_WQ];
    t->dv = cols[M_WV];
    for (int m = M_WQ; m < M_COUNT; m++)
        if (rows[m] != t->d)
            return fileio_fail2(err, "%s: %s has %d rows but X has %d columns; they must match (X @ %s)",
                                "%s：%s 有 %d 行，X 却有 %d 列；两者必须相等（X @ %s）", path, MATRIX_NAMES[m], rows[m],
                                t->d, MATRIX_NAMES[m]);
    if (cols[M_WK] != t->dk)
        return fileio_fail2(err, "%s: W_K has %d columns but W_Q has %d; Q @ K.T needs them equal",
                            "%s：W_K 有 %d 列，W_Q 却有 %d 列；Q @ K.T 要求两者相等", path, cols[M_WK], t->dk);
    if (t->n < 2) return fileio_fail2(err, "%s: X has %d row; the lessons need at least 2 tokens",
                                    "%s：X 只有 %d 行；课程至少需要 2 个 token", path, t->n);
    if (!rd->have_scale) t->scale = sqrtf((float)t->dk);

    t->X = malloc(sizeof(float) * (size_t)(t->n * t->d + t->d * (2 * t->dk + t->dv)));
    if (!t->X) return fileio_fail2(err, "%s: out of memory", "%s：内存不足", path);
    t->W_Q = t->X + t->n * t->d;
    t->W_K = t->W_Q + t->d * t->dk;
    t->W_V = t->W_K + t->d * t->dk;
    float *dst[M_COUNT] = {t->X, t->W_Q, t->W_K, t->W_V};
    for (int m = 0; m < M_COUNT; m++)
        for (int r = 0; r < rows[m]; r++)
            memcpy(dst[m] + r * cols[m], rd->cells[m][r], sizeof(float) * (size_t)cols[m]);
    for (int r = 0; r < t->n; r++) t->rows[r] = t->tokens[r];
    return toydata_check_range(t, path, err);
}

int toydata_load(ToyData *t, const char *path, Err err) {
    memset(t, 0, sizeof *t);
    uint64_t size;
    char why[512];
    FILE *f = fileio_open_read(path, &size, ERR(err.lang, why));
    if (!f) return fileio_fail2(err, "data file %s", "数据文件 %s", why);
    static float cells[M_COUNT][MAXR][TOY_MAX_WIDTH];
    Reading rd = {.cells = cells, .current = -1, .path = path, .err = err};
    int rc = 0;
    char line[4096];
    size_t at = 0;
    for (int got; rc == 0 && (got = read_line(f, line, sizeof line, rd.lineno == 0, &at)) != 0;) {
        rd.lineno++;
        if (got == -2) {
            rc = fileio_fail2(err, "%s:%d: byte %zu is a NUL byte; the data file must be text",
                              "%s:%d：第 %zu 个字节是零字节（0x00）；数据文件必须是文本", path, rd.lineno, at);
            break;
        }
        if (got == -1) {
            rc = fileio_fail2(err, "%s:%d: line too long (at most %zu bytes)", "%s:%d：这一行太长（最多 %zu 字节）",
                              path, rd.lineno, sizeof line - 2);
            break;
        }
        char *fields[TOY_MAX_WIDTH + 2];
        int nf = split(line, fields, TOY_MAX_WIDTH + 1);
        if (nf == 0) continue;
        if (nf > TOY_MAX_WIDTH + 1) {
            rc = fileio_fail2(err, "%s:%d: more than %d numbers on a line", "%s:%d：一行超过 %d 个数", path,
                              rd.lineno, TOY_MAX_WIDTH);
            break;
        }
        int name = read_name(&rd, t, fields, nf);
        if (name < 0) rc = -1;
        else if (name == 0) rc = read_row(&rd, t, fields, nf);
    }
    if (rc == 0 && ferror(f)) rc = fileio_fail2(err, "%s: read error: %s", "%s：读取出错：%s", path,
                                                   fileio_strerror(err.lang, errno ? errno : EIO));
    // Ended before its size (a line cut short says more than what it lacks).
    long read_to = feof(f) ? ftell(f) : -1;
    if (read_to >= 0 && (uint64_t)read_to < size)
        rc = fileio_fail2(err, "%s: truncated: read %ld of its %llu bytes (did it change while it was read?)",
                          "%s：文件不完整：只读到 %ld 字节，它有 %llu 字节（读取时它被改动了吗？）", path, read_to,
                          (unsigned long long)size);
    fclose(f);
    return rc ? rc : finish(t, &rd);
}

void toydata_free(ToyData *t) {
    free(t->X);
    memset(t, 0, sizeof *t);
}
