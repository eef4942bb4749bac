// options — what the command line asked for, shared by every command and
// lesson. cli.c fills it from argv (a table of options there says which
// command accepts which); lessons and commands only read it.
#ifndef KVDEMO_OPTIONS_H
#define KVDEMO_OPTIONS_H

#include "fileio.h"   // Lang

#include <stdint.h>

enum { RUN_NOCACHE = 1, RUN_CACHE = 2, RUN_BOTH = 3 };
enum { MAX_PROMPTS = 8 };

// Every option, by name. A lesson says which it honours in its row of
// lessons.c, and cli.c's table says which commands accept each one. A new
// option is one name here and one row in cli.c's OPTIONS. Sets of options
// are arrays indexed by these ids, so there is no limit to their number.
typedef enum {
    OPT_CACHE, OPT_NO_CACHE, OPT_TRACE, OPT_PRECISION, OPT_FORMAT, OPT_LANG, OPT_STEP, OPT_COLOR,
    OPT_REPEAT, OPT_DATA, OPT_MODEL, OPT_INIT, OPT_PRESET, OPT_SEED, OPT_STEPS, OPT_PROMPT,
    OPT_TEMPERATURE, OPT_TOP_K, OPT_TOP_P, OPT_THREADS, OPT_CSV, OPT_SVG, OPT_BENCH_TRAIN, OPT_OUT, OPT_CONTEXT,
    OPT_EMBEDDING, OPT_HEADS, OPT_BLOCKS, OPT_ITERS, OPT_BATCH, OPT_LR, OPT_EVAL_EVERY,
    OPT_RESUME, OPT_PAGED, OPT_BLOCK_SIZE, OPT_NUM_BLOCKS, OPT_SAMPLES, OPT_TOKENS, OPT_LAYERS,
    OPT_KV_HEADS, OPT_HEAD_DIM, OPT_DTYPE, OPT_GPU_MEMORY, OPT_LIST, OPT_ATTENTION, OPT_TILE,
    OPT_MAX_N, OPT_BUG, OPT_KV_DTYPE, OPT_LOG, OPT_HELP, OPT_VERSION,
    OPT_WIDTH, OPT_NO_RACE,
    OPT_DRAFT, OPT_GAMMA, OPT_TOKENIZER,
    OPT_ARCH, OPT_HIDDEN,
    OPT_FROM, OPT_CONVERT, OPT_WINDOW, OPT_ROLLING,
    OPT_THEN,
    OPT_WARMUP,
    NUM_OPTION_IDS
} OptionId;

typedef struct Options {
    Lang lang;                          // --lang en|zh (else LANG): the language of every message
    int runs;                           // --cache / --no-cache: RUN_* bits
    int repeat;                         // --repeat N: timings are medians of N (0: the lesson's default)
    const char *data_path;              // --data FILE, or NULL for the default
    const char *model_path;             // --model FILE, or NULL
    const char *tokenizer_path;         // --tokenizer FILE: llama2.c's tokenizer.bin (--model is then its checkpoint), or NULL
    const char *prompts[MAX_PROMPTS];   // --prompt TEXT (repeatable)
    int n_prompts;
    uint64_t seed;                      // --seed N (42 unless given)
    int given_seed;                     // 1 when --seed was given
    int steps;                          // --steps N, or -1 for the default
    const char *steps_list;             // --steps LIST for bench ("16,64,256")
    int threads;                        // --threads N, 0 for all cores
    double temperature;                 // --temperature T (0: argmax; -1: the default)
    int top_k;                          // --top-k K (0: off)
    double top_p;                       // --top-p P (-1: the default)
    const char *csv_path;               // --csv FILE
    const char *svg_path;               // --svg FILE: bench's chart
    int bench_train;                    // --train: bench times training too
    const char *out_path;               // --out FILE
    const char *init;                   // --init random
    const char *preset;                 // --preset seed|tiny
    int context, embedding, heads, blocks;   // model shape overrides for train (0: the preset's)
    int iters, batch, eval_every;       // training (batch: memory's sequences too)
    double lr;
    int warmup;                         // --warmup N: train's warm-up steps (default the recipe's)
    const char *resume_path;            // --resume CHECKPOINT
    const char *log_path;               // --log FILE: train's loss curve as CSV
    int paged;                          // --paged: generate on the paged KV cache
    int block_size, num_blocks, samples;   // --block-size B, --num-blocks N, --samples N (0: the default)
    // kvdemo memory (0 or NULL: not given)
    int64_t tokens;                     // --tokens N: tokens per sequence
    int layers, kv_heads, head_dim;     // --layers, --kv-heads, --head-dim: a shape
    const char *dtype;                  // --dtype fp32|fp16|bf16|fp8|int8|int4
    const char *gpu_memory;             // --gpu-memory 80GB
    int list;                           // --list: the presets
    const char *attention;              // --attention plain|flash (NULL: plain)
    int tile;                           // --tile N: keys per tile of flash attention (0: the default)
    int max_n;                          // --max-n N: lesson 6.3's longest measured sequence (0: the default)
    const char *bug;                    // --bug NAME: a classic cache mistake (lesson 11), or NULL
    const char *kv_dtype;               // --kv-dtype fp32|bf16|fp16|int8|int4 (lesson 12), or NULL
    int no_race;                        // --no-race: lesson 10 on a terminal as on a pipe, not the race
    const char *draft_path;             // --draft FILE: speculative decoding's draft model (lesson 13), or NULL
    int gamma;                          // --gamma K: tokens drafted a round
    const char *arch;                   // --arch gpt|llama: what train trains (NULL: gpt)
    int hidden;                         // --hidden F: SwiGLU's hidden size for train --arch llama (0: derived)
    const char *from_path;              // --from FILE: train --arch llama uptrains that model, converted (NULL: no)
    const char *convert;                // --convert mean|first|random: how --from's key/value heads are shared
    int window;                         // train --window W: the band mask of sliding-window attention (0: none)
    const char *rolling;                // generate --window W or S,W: a rolling cache of W rows, S of them sinks (lesson 14)
    const char *then_text;              // generate --then TEXT: a second turn after the first's text, or NULL
    // Which options were given (1 at their OptionId), so that a command can
    // tell a default from a choice.
    unsigned char given[NUM_OPTION_IDS];
} Options;

#endif
