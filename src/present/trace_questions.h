// trace_questions — the class questions of a lesson's doc page
// (docs/lesson-ID.md, "## Questions for the class", and its Chinese twin
// docs/zh/lesson-ID.md, "## 课堂提问"), read for the last slide of the
// lesson's page (trace_doc.c), where each answer opens on a click.
#ifndef KVDEMO_TRACE_QUESTIONS_H
#define KVDEMO_TRACE_QUESTIONS_H

#include "fileio.h"   // Lang

typedef struct {
    char *question;   // the item up to its first question mark
    char *answer;     // the rest: the answer, then its "Run:" lines; "" when none
} Question;

// The questions of lesson id in one language (zh 0 or 1), at most max, into
// out; returns how many (0 when the page or its section is not found). A
// page that exists but cannot be read is said on stderr in lang.
int questions_read(Lang lang, Question *out, int max, const char *id, int zh);
void questions_free(Question *q, int n);

#endif
