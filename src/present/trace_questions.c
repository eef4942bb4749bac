// trace_questions — a lesson's class questions, from its doc page
// (trace_questions.h).
//
// The section is a numbered list; an item's lines after its first are
// indented, and its "- Run:" / "- It prints:" lines are a list of their
// own. A prose line that goes on is joined to the one before (with a space
// between two Latin letters or digits, without one beside Chinese).
#include "trace_questions.h"

#include "buf.h"
#include "fileio.h"
#include "paths.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { MAX_PAGE_BYTES = 1 << 20 };   // a lesson's page is some 20 kB

// The page at path, or NULL: silently when there is none (a command's
// "lesson" has no page), with a line on stderr when it cannot be read (a
// folder, a FIFO, no permission, cut short): the page goes on without it.
static char *slurp(Lang lang, const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0 && errno == ENOENT) return NULL;
    char err[4600];
    size_t len;
    char *page = fileio_read_text(path, MAX_PAGE_BYTES, 0, &len, ERR(lang, err));
    if (!page)
        fileio_error(lang, "%s; the page goes on without its class questions", "%s；页面里就不放课堂提问了", err);
    return page;
}

// Splits item text at its first question mark ("?" or "？"), which stays
// with the question.
static void split(Question *q, char *text) {
    char *a = strstr(text, "？"), *e = strchr(text, '?');
    char *at = a && (!e || a < e) ? a + strlen("？") : e ? e + 1 : text + strlen(text), *rest = at;
    while (*rest == ' ') rest++;
    q->answer = strdup(rest);
    *at = '\0';
    q->question = text;
}

// Adds one line of an item to b: a "- " line on a line of its own, prose
// joined to the line before.
static void add_line(Buf *b, const char *s, size_t n) {
    while (n && *s == ' ') s++, n--;
    if (!n) return;
    if (b->len) {
        unsigned char before = (unsigned char)b->s[b->len - 1], after = (unsigned char)s[0];
        if (n >= 2 && !strncmp(s, "- ", 2)) buf_append(b, "\n");
        else if (before < 0x80 && after < 0x80) buf_append(b, " ");
    }
    buf_appendn(b, s, n);
}

// The item gathered in item, as the next question (item emptied).
static void take(Question *out, int *n, int max, Buf *item) {
    char *text = buf_take(item);
    if (!text) return;
    if (*n < max) split(&out[(*n)++], text);
    else free(text);
}

int questions_read(Lang lang, Question *out, int max, const char *id, int zh) {
    char rel[64], where[4096];
    snprintf(rel, sizeof rel, zh ? "docs/zh/lesson-%s.md" : "docs/lesson-%s.md", id);
    char *page = slurp(lang, paths_shipped(rel, where, sizeof where));
    if (!page) return 0;
    const char *head = zh ? "\n## 课堂提问" : "\n## Questions for the class", *p = strstr(page, head);
    int n = 0;
    Buf item;
    buf_init(&item);
    for (p = p ? strchr(p + 1, '\n') : NULL; p && *p;) {
        p++;
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (!strncmp(p, "## ", 3)) break;
        const char *dot = p;
        while (isdigit((unsigned char)*dot)) dot++;
        if (dot > p && !strncmp(dot, ". ", 2)) {   // a new item
            if (item.len) take(out, &n, max, &item);
            buf_free(&item);
            add_line(&item, dot + 2, len - (size_t)(dot + 2 - p));
        } else if (item.len) {
            add_line(&item, p, len);
        }
        p = end;
    }
    if (item.len) take(out, &n, max, &item);
    buf_free(&item);
    free(page);
    for (int i = 0; i < n; i++)
        if (!out[i].question || !out[i].answer) {   // out of memory: none
            questions_free(out, n);
            return 0;
        }
    return n;
}

void questions_free(Question *q, int n) {
    for (int i = 0; i < n; i++) {
        free(q[i].question);
        free(q[i].answer);
        q[i].question = q[i].answer = NULL;
    }
}
