// lessons — the table of lessons, one per section of the documents.
//
// A lesson is a function that runs its section's example and tells the trace
// what happened. Each lesson file (lesson2.c, ...) reads like its section and
// exports one run function; the table below the declarations in lessons.c
// gives every lesson id of DESIGN.md, with NULL for those not built yet.
#ifndef KVDEMO_LESSONS_H
#define KVDEMO_LESSONS_H

#include "options.h"
#include "trace.h"

// Returns 0 on success, 1 on a failure (after printing one line on stderr).
typedef int (*LessonRun)(const Options *opt, Trace *tr);

typedef struct {
    const char *id;        // "2", "2.1", "6.2"
    const char *title_en;
    const char *title_zh;
    const char *section;   // "000 §2.1"
    LessonRun run;         // NULL while the lesson is not built yet
    const char *options;   // the lesson-specific options it understands,
                           // space separated ("--data --repeat"); the common
                           // ones (--cache, --trace, --format, ...) always apply
} Lesson;

extern const Lesson LESSONS[];
extern const int NUM_LESSONS;

// The lesson with this id, or NULL.
const Lesson *lessons_find(const char *id);

int lesson1_run(const Options *opt, Trace *tr);
int lesson2_run(const Options *opt, Trace *tr);    // both runs and the comparison
int lesson21_run(const Options *opt, Trace *tr);   // 2.1: without the cache
int lesson22_run(const Options *opt, Trace *tr);   // 2.2: with the cache
int lesson3_run(const Options *opt, Trace *tr);    // LLaMA generate, with and without the cache
int lesson62_run(const Options *opt, Trace *tr);   // 6.2: MHA, GQA and MQA side by side
int lesson63_run(const Options *opt, Trace *tr);   // 6.3: FlashAttention, tiles and an online softmax
int lesson7_run(const Options *opt, Trace *tr);
int lesson9_run(const Options *opt, Trace *tr);
int lesson10_run(const Options *opt, Trace *tr);

#endif
