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

#include <stdio.h>

// Returns 0 on success, 1 on a failure (after printing one line on stderr).
typedef int (*LessonRun)(const Options *opt, Trace *tr);

typedef struct {
    const char *id;        // "2", "2.1", "6.2"
    const char *title_en;
    const char *title_zh;
    const char *section;   // "000 §2.1"
    LessonRun run;         // NULL while the lesson is not built yet
    // The options it honours: 1 at their OptionId (the command line says
    // so of every other option given).
    unsigned char options[NUM_OPTION_IDS];
    const char *shows_en;  // what it shows, a sentence for its help (or NULL)
    const char *shows_zh;
} Lesson;

extern const Lesson LESSONS[];
extern const int NUM_LESSONS;

// The lesson with this id, or NULL.
const Lesson *lessons_find(const char *id);

// The section a lesson follows, with the document named as a class knows it
// ("KV Cache article §2.1", "KV Cache 篇 §2.1", "the numpy chapter"), not by
// its file id ("000 §2.1"), which a class would read as a random seed.
const char *lessons_section(const Lesson *l, Lang lang, char *buf, int size);
// The lesson's first heading, from its row of the table so that `kvdemo list`
// and the lesson say the same: "Lesson 2.1 — TITLE (KV Cache article §2.1)".
void lessons_heading(Trace *tr);
// `kvdemo list` (brief 0) and the list under `kvdemo help` (brief 1), in the
// trace's language, columns measured in terminal columns.
void lessons_print_list(FILE *f, Lang lang, int brief);

int lesson1_run(const Options *opt, Trace *tr);
int lesson2_run(const Options *opt, Trace *tr);    // both runs and the comparison
int lesson21_run(const Options *opt, Trace *tr);   // 2.1: without the cache
int lesson22_run(const Options *opt, Trace *tr);   // 2.2: with the cache
int lesson3_run(const Options *opt, Trace *tr);    // LLaMA generate, with and without the cache
int lesson61_run(const Options *opt, Trace *tr);   // 6.1: a paged KV cache
int lesson4_run(const Options *opt, Trace *tr);    // what the cache saves: FLOPs and time per token
int lesson5_run(const Options *opt, Trace *tr);    // what the cache costs: bytes held
int lesson62_run(const Options *opt, Trace *tr);   // 6.2: MHA, GQA and MQA side by side
int lesson8_run(const Options *opt, Trace *tr);    // GPT-3's 164 GB, factor by factor
int lesson63_run(const Options *opt, Trace *tr);   // 6.3: FlashAttention, tiles and an online softmax
int lesson7_run(const Options *opt, Trace *tr);
int lesson9_run(const Options *opt, Trace *tr);
int lesson10_run(const Options *opt, Trace *tr);
int lesson11_run(const Options *opt, Trace *tr);   // beyond: cache bugs injected and caught
int lesson12_run(const Options *opt, Trace *tr);   // beyond: precision and a quantised cache
int lesson13_run(const Options *opt, Trace *tr);   // beyond: speculative decoding
int lesson14_run(const Options *opt, Trace *tr);   // beyond: past the window

#endif
