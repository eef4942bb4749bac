// cli — the command line: kvdemo [global options] COMMAND [ARGS] [options].
//
// Two tables drive it. OPTIONS has one row per option: its name, what kind of
// value it takes, where the value goes (an offset into Cli), which commands
// accept it (a mask of CMD_ bits) and its help in English and Chinese.
// COMMANDS has one row per command: its name, the function that runs it, how
// many plain arguments it takes and its help. Lessons say which options they
// honour in their own table (lessons.c), an array indexed by OptionId.
//
// To add an option: a name in OptionId (options.h), a field where its value
// goes (Options, or Cli below for how the output looks), and one row in
// OPTIONS; then add O(NEW) to the rows of LESSONS (lessons.c) that honour
// it (and ONLY_WHERE_HONOURED to its row if a lesson that does not honour it
// must refuse it rather than ignore it). To add a command: a CMD_ name below, its cmd_ function (declared above
// COMMANDS), one row in COMMANDS, and CMD_BIT(CMD_NEW) in the rows of the
// options it accepts. Choices are matched without case ("--format JSON").
//
// The parser is written by hand rather than with getopt_long because getopt
// cannot do what the tables ask: options before and after the command with
// the command deciding which are valid, the same name meaning a number for one
// command and a list for another (--steps), a repeated option collected into
// a list (--prompt), a "did you mean" for a misspelt name, and values checked
// against a range or a list of choices. Bad input gets one line on stderr
// naming the problem and what would be valid, and exit status 2.
#include "cli.h"

#include "bench.h"
#include "specbench.h"
#include "fileio.h"
#include "gptcmd.h"
#include "llama2ccmd.h"
#include "llamacmd.h"
#include "lessons.h"
#include "memory.h"
#include "options.h"
#include "paths.h"
#include "pool.h"
#include "screen.h"
#include "trace.h"
#include "utf8.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define KVDEMO_VERSION "0.1.0"

enum { EXIT_USAGE = 2, MAX_ARGS = 4 };

// What the command line asked for: the Options that commands and lessons
// read, the Trace's form, and the plain arguments after the command.
typedef struct {
    Options opt;
    Trace tr;
    int color;                    // --color: 0 auto, 1 always, 2 never
    int width;                    // --width N: columns of a screen (0: not given)
    int help, version;            // --help / -h, --version / -V
    const char *args[MAX_ARGS];   // "lesson 2": {"2"}
    int n_args;
} Cli;

// An option's value is written through its offset into Cli; the enums it
// fills (--format, --trace, --lang) must be int-sized for that.
_Static_assert(sizeof(TraceFormat) == sizeof(int) && sizeof(TraceLevel) == sizeof(int) &&
                   sizeof(Lang) == sizeof(int),
               "enums filled through an int");
// --prompt appends to prompts[] and counts in the int that follows it.
_Static_assert(offsetof(Options, n_prompts) == offsetof(Options, prompts) + sizeof(const char *) * MAX_PROMPTS,
               "n_prompts follows prompts");

// ----------------------------------------------------------------------------
// The commands' names, in the order of their rows in COMMANDS

typedef enum { CMD_LIST, CMD_LESSON, CMD_GENERATE, CMD_RACE, CMD_BENCH, CMD_INIT, CMD_TRAIN, CMD_EVAL,
               CMD_MEMORY, CMD_HELP, CMD_VERSION, NUM_COMMANDS } CommandId;
#define CMD_BIT(c) (1u << (c))
_Static_assert(NUM_COMMANDS <= 32, "command masks are unsigned");
#define ALL_COMMANDS ((1u << NUM_COMMANDS) - 1)

// ----------------------------------------------------------------------------
// The options

typedef enum {
    ARG_FLAG,     // no value: stores (int)min
    ARG_INT,      // a whole number from min to max, into an int
    ARG_I64,      // a whole number from min to max, into an int64_t
    ARG_U64,      // a whole number from min to max, into a uint64_t
    ARG_DOUBLE,   // a number from min to max, into a double
    ARG_STRING,   // any non-empty text, into a const char *
    ARG_CHOICE,   // one of metavar's choices ("seed|tiny"), stored as that choice's text
    ARG_ENUM,     // one of metavar's choices, stored as its index (an int)
    ARG_LOCALE,   // an ARG_ENUM that also takes a locale's name: zh_CN.UTF-8 is zh
    ARG_APPEND,   // text added to a list of up to `repeats` (the count is the int after it)
} ArgKind;

typedef struct {
    OptionId id;
    const char *name;       // "--precision"
    ArgKind kind;
    const char *metavar;    // "N", or the choices "text|json"
    size_t dest;            // where the value goes: offsetof(Cli, ...)
    int repeats;            // how many times it may be given
    unsigned commands;      // CMD_BIT(...) of the commands that accept it
    double min, max;        // range of a number (ARG_FLAG: min is the value stored)
    const char *en, *zh;    // one line of help
} OptionSpec;

#define AT(field) offsetof(Cli, field)
#define LIST CMD_BIT(CMD_LIST)
#define LESSON CMD_BIT(CMD_LESSON)
#define GENERATE CMD_BIT(CMD_GENERATE)
#define RACE CMD_BIT(CMD_RACE)
#define BENCH CMD_BIT(CMD_BENCH)
#define INIT CMD_BIT(CMD_INIT)
#define TRAIN CMD_BIT(CMD_TRAIN)
#define EVAL CMD_BIT(CMD_EVAL)
#define MEMORY CMD_BIT(CMD_MEMORY)
#define HELP CMD_BIT(CMD_HELP)

static const OptionSpec OPTIONS[] = {
    // What every lesson understands (and says so when it has no use for it).
    {OPT_CACHE, "--cache", ARG_FLAG, NULL, AT(opt.runs), 1, LESSON | GENERATE, RUN_CACHE, 0,
     "only the run with the KV cache", "只运行使用 KV 缓存的一次"},
    {OPT_NO_CACHE, "--no-cache", ARG_FLAG, NULL, AT(opt.runs), 1, LESSON | GENERATE, RUN_NOCACHE, 0,
     "only the run without it (default: both, compared)",
     "只运行不使用缓存的一次（课程默认两次都跑，再对比）"},
    {OPT_TRACE, "--trace", ARG_ENUM, "none|summary|full", AT(tr.level), 1, LESSON, 0, 0,
     "how many tensors to print (default full)", "打印多少中间张量（默认 full）"},
    {OPT_PRECISION, "--precision", ARG_INT, "N", AT(tr.precision), 1, LESSON, 0, 16,
     "decimals of printed tensors (default 4, as PyTorch)", "张量打印的小数位数（默认 4，与 PyTorch 相同）"},
    {OPT_FORMAT, "--format", ARG_ENUM, "text|json|html|md", AT(tr.format), 1, LESSON | GENERATE | MEMORY, 0, 0,
     "text for people (default), JSON Lines for scripts, an HTML page or Markdown for slides",
     "text 给人看，JSON Lines 给脚本，html 网页或 md（Markdown）用于幻灯片（默认 text）"},
    // race and bench write their panes and tables themselves: no documents
    // (the choices' order is TraceFormat's, so text and json keep their index).
    {OPT_FORMAT, "--format", ARG_ENUM, "text|json", AT(tr.format), 1, RACE | BENCH, 0, 0,
     "text for people (default), JSON Lines for scripts", "text 给人看（默认），JSON Lines 给脚本"},
    {OPT_LANG, "--lang", ARG_LOCALE, "en|zh", AT(tr.lang), 1, LIST | LESSON | GENERATE | RACE | BENCH | INIT | TRAIN | EVAL | MEMORY | HELP, 0, 0,
     "narration language (default from LANG)", "讲解的语言（默认取自 LANG）"},
    {OPT_STEP, "--step", ARG_FLAG, NULL, AT(tr.step_pause), 1, LESSON, 1, 0,
     "one screen at a time on a terminal: Enter next, b back, q quit",
     "在终端上一屏一屏地显示：回车下一屏，b 上一屏，q 退出"},
    {OPT_COLOR, "--color", ARG_ENUM, "auto|always|never", AT(color), 1, LESSON, 0, 0,
     "heat maps of scores and weights (default auto)",
     "scores 和 weights 的热力图（默认 auto）"},
    {OPT_WIDTH, "--width", ARG_INT, "N", AT(width), 1, LESSON, 20, 1000,
     "columns of a screen: lines wrapped, wide tensors elided (--step: COLUMNS or the terminal's)",
     "屏幕的列数：长行折行，过宽的张量省略中间列（--step：取 COLUMNS 或终端的宽度）"},
    {OPT_NO_RACE, "--no-race", ARG_FLAG, NULL, AT(opt.no_race), 1, LESSON, 1, 0,
     "lesson 10 on a terminal: the runs in turn, not the live race",
     "第 10 课在终端上：两次运行先后进行，而不是实时赛跑"},
    // Where they apply.
    {OPT_REPEAT, "--repeat", ARG_INT, "N", AT(opt.repeat), 1, LESSON, 1, 100000,
     "time each run N times and report the median", "每次运行计时 N 遍，报告中位数"},
    {OPT_REPEAT, "--repeat", ARG_INT, "N", AT(opt.repeat), 1, BENCH, 1, 100000,
     "time each length N times (default 3): mean ± σ, min … max; medians in --csv",
     "每个长度计时 N 遍（默认 3）：均值 ± σ、最小 … 最大；--csv 另给中位数"},
    {OPT_DATA, "--data", ARG_STRING, "FILE", AT(opt.data_path), 1, LESSON, 0, 0,
     "the example's numbers (default data/tianqi.txt)", "示例的数字（默认 data/tianqi.txt）"},
    {OPT_DATA, "--data", ARG_STRING, "FILE", AT(opt.data_path), 1, TRAIN | EVAL, 0, 0,
     "the training text (default data/tinyshakespeare.txt)", "训练用的文本（默认 data/tinyshakespeare.txt）"},
    {OPT_MODEL, "--model", ARG_STRING, "FILE", AT(opt.model_path), 1, LESSON | GENERATE | RACE | BENCH | EVAL, 0, 0,
     "a model file (default data/tinyshakespeare-gpt.bin)", "模型文件（默认 data/tinyshakespeare-gpt.bin）"},
    {OPT_TOKENIZER, "--tokenizer", ARG_STRING, "FILE", AT(opt.tokenizer_path), 1, LESSON | GENERATE | BENCH, 0, 0,
     "llama2.c's tokenizer.bin; --model is then its model",
     "llama2.c 的 tokenizer.bin；--model 则是它的模型"},
    {OPT_MODEL, "--model", ARG_STRING, "NAME|FILE", AT(opt.model_path), 1, MEMORY, 0, 0,
     "a preset (memory --list shows them) or a model file", "预设的模型名（memory --list 列出）或模型文件"},
    {OPT_INIT, "--init", ARG_CHOICE, "random", AT(opt.init), 1, LESSON | GENERATE | RACE | BENCH, 0, 0,
     "a random model, not a file (with --preset, --seed)", "用随机模型代替模型文件（配合 --preset 和 --seed）"},
    {OPT_PRESET, "--preset", ARG_CHOICE, "seed|tiny", AT(opt.preset), 1, LESSON | GENERATE | RACE | BENCH | INIT | TRAIN, 0, 0,
     "model shape: seed (the chapter's: 256, 384, 6 heads, 6 blocks) or tiny",
     "模型形状：seed（原文的：256、384、6 个头、6 个模块）或 tiny"},
    {OPT_SEED, "--seed", ARG_U64, "N", AT(opt.seed), 1, LESSON | GENERATE | RACE | BENCH | INIT | TRAIN, 0, 4294967295.0,
     "random seed, as np.random.seed(N) (default 42)", "随机种子，同 np.random.seed(N)（默认 42）"},
    {OPT_STEPS, "--steps", ARG_INT, "N", AT(opt.steps), 1, LESSON | GENERATE | RACE, 1, 100000,
     "how many tokens to generate", "生成多少个 token"},
    {OPT_STEPS, "--steps", ARG_STRING, "LIST", AT(opt.steps_list), 1, BENCH, 0, 0,
     "the lengths to time (default " BENCH_DEFAULT_LENGTHS "; the longest heads the report), e.g. 16,64,256,1024",
     "要计时的长度（默认 " BENCH_DEFAULT_LENGTHS "；最长的一个放在报告开头），例如 16,64,256,1024"},
    {OPT_PROMPT, "--prompt", ARG_APPEND, "TEXT", AT(opt.prompts), MAX_PROMPTS, LESSON | GENERATE | RACE | BENCH, 0, 0,
     "the prompt (default \"ROMEO:\"; several for lesson 3)", "提示词（默认 \"ROMEO:\"；第 3 课可给多个）"},
    {OPT_THEN, "--then", ARG_STRING, "TEXT", AT(opt.then_text), 1, GENERATE, 0, 0,
     "a second turn after the first's text (lesson 10)",
     "第二轮：接在第一轮的文字之后（第 10 课）"},
    {OPT_TEMPERATURE, "--temperature", ARG_DOUBLE, "T", AT(opt.temperature), 1, LESSON | GENERATE | RACE, 0, 100,
     "sampling temperature; 0 picks the most likely token", "采样温度；0 表示取概率最大的 token"},
    {OPT_TOP_K, "--top-k", ARG_INT, "K", AT(opt.top_k), 1, LESSON | GENERATE | RACE, 0, 1000000,
     "draw only from the K most likely tokens (0: all)", "只从概率最大的 K 个 token 中抽取（0：全部）"},
    {OPT_TOP_P, "--top-p", ARG_DOUBLE, "P", AT(opt.top_p), 1, LESSON, 0, 1,
     "nucleus sampling as LLaMA's sample_top_p", "核采样，同 LLaMA 的 sample_top_p"},
    {OPT_THREADS, "--threads", ARG_INT, "N", AT(opt.threads), 1, LESSON | GENERATE | BENCH | TRAIN | EVAL, 0, 1024,
     "threads for the arithmetic (default 0: by shape)",
     "计算用的线程数（默认 0：按模型形状取最快的）"},
    {OPT_CSV, "--csv", ARG_STRING, "FILE", AT(opt.csv_path), 1, BENCH, 0, 0,
     "also write the table as CSV", "同时把表格写成 CSV"},
    {OPT_SVG, "--svg", ARG_STRING, "FILE", AT(opt.svg_path), 1, BENCH, 0, 0,
     "also draw time per token and total time against length (a plain SVG)",
     "同时画出每个 token 的时间和总时间随长度的变化（普通的 SVG）"},
    {OPT_BENCH_TRAIN, "--train", ARG_FLAG, NULL, AT(opt.bench_train), 1, BENCH, 1, 0,
     "also time training steps of the model's shape", "同时测量同一模型形状的训练速度"},
    {OPT_OUT, "--out", ARG_STRING, "FILE", AT(opt.out_path), 1, INIT | TRAIN, 0, 0,
     "the model file to write", "要写出的模型文件"},
    {OPT_CONTEXT, "--context", ARG_INT, "T", AT(opt.context), 1, TRAIN, 1, 65536,
     "context length (positions)", "上下文长度（位置数）"},
    {OPT_EMBEDDING, "--embedding", ARG_INT, "C", AT(opt.embedding), 1, TRAIN, 1, 16384,
     "embedding size", "嵌入维度"},
    {OPT_HEADS, "--heads", ARG_INT, "H", AT(opt.heads), 1, TRAIN, 1, 1024, "attention heads", "注意力头数"},
    {OPT_BLOCKS, "--blocks", ARG_INT, "L", AT(opt.blocks), 1, TRAIN, 1, 256, "transformer blocks", "Transformer 模块数"},
    {OPT_ITERS, "--iters", ARG_INT, "N", AT(opt.iters), 1, TRAIN, 0, 100000000,
     "iterations (0 with --from: the converted model)",
     "训练迭代次数（0 只能和 --from 一起用：直接写出转换后的模型）"},
    {OPT_BATCH, "--batch", ARG_INT, "B", AT(opt.batch), 1, TRAIN, 1, 4096, "sequences per iteration", "每次迭代的序列数"},
    {OPT_BATCH, "--batch", ARG_INT, "B", AT(opt.batch), 1, MEMORY, 1, 1e9, "sequences served at once (default 1)",
     "同时服务的序列数（默认 1）"},
    {OPT_LR, "--lr", ARG_DOUBLE, "X", AT(opt.lr), 1, TRAIN, 0, 10, "peak learning rate", "最大学习率"},
    {OPT_WARMUP, "--warmup", ARG_INT, "N", AT(opt.warmup), 1, TRAIN, 0, 100000000,
     "warm-up steps, at most --iters", "学习率预热步数，不超过 --iters（默认按配方）"},
    {OPT_EVAL_EVERY, "--eval-every", ARG_INT, "N", AT(opt.eval_every), 1, TRAIN, 1, 100000000,
     "validation loss (and a checkpoint) every N iterations", "每 N 次迭代计算验证损失（并保存检查点）"},
    {OPT_ARCH, "--arch", ARG_CHOICE, "gpt|llama", AT(opt.arch), 1, TRAIN, 0, 0,
     "what to train: the char GPT (default) or the LLaMA-style model of lesson 3",
     "训练什么：字符级 GPT（默认）或第 3 课的 LLaMA 式模型"},
    {OPT_KV_HEADS, "--kv-heads", ARG_INT, "G", AT(opt.kv_heads), 1, TRAIN, 1, 1024,
     "--arch llama: key/value heads, a divisor of --heads (default: --heads, MHA)",
     "--arch llama：key/value 头数，须整除 --heads（默认等于 --heads，即 MHA）"},
    {OPT_HIDDEN, "--hidden", ARG_INT, "F", AT(opt.hidden), 1, TRAIN, 1, 131072,
     "--arch llama: SwiGLU's hidden size (default 8C/3 rounded up to 32)",
     "--arch llama：SwiGLU 的隐藏层大小（默认 8C/3 向上取整到 32 的倍数）"},
    {OPT_FROM, "--from", ARG_STRING, "FILE", AT(opt.from_path), 1, TRAIN, 0, 0,
     "--arch llama: uptrain this trained model with --kv-heads G, converted by --convert",
     "--arch llama：从这个训练好的模型出发，转换成 --kv-heads G 个头（方法见 --convert）后继续训练"},
    {OPT_CONVERT, "--convert", ARG_CHOICE, "mean|first|random", AT(opt.convert), 1, TRAIN, 0, 0,
     "with --from: each group's key/value head is the mean of the group's, its first, or random",
     "与 --from 一起用：每组的 key/value 头取组内各头的平均、组内第一个头，或随机初始化"},
    {OPT_WINDOW, "--window", ARG_INT, "W", AT(opt.window), 1, TRAIN, 1, 65536,
     "--arch llama: sliding-window attention, each position attends to the last W (the band mask)",
     "--arch llama：滑动窗口注意力，每个位置只看最近的 W 个位置（带状掩码）"},
    {OPT_ROLLING, "--window", ARG_STRING, "W", AT(opt.rolling), 1, GENERATE, 0, 0,
     "LLaMA: W rows, rolling past T (S,W: S sinks)",
     "LLaMA：W 行滚动越过上下文；S,W：含 S 个 sink"},
    {OPT_RESUME, "--resume", ARG_STRING, "CHECKPOINT", AT(opt.resume_path), 1, TRAIN, 0, 0,
     "continue from a checkpoint", "从检查点继续训练"},
    {OPT_LOG, "--log", ARG_STRING, "FILE", AT(opt.log_path), 1, TRAIN, 0, 0,
     "also write the loss curve as CSV, a row per evaluation", "另把损失曲线写成 CSV 文件，每次评估一行"},
    // The paged cache (lesson 6.1).
    {OPT_PAGED, "--paged", ARG_FLAG, NULL, AT(opt.paged), 1, GENERATE, 1, 0,
     "keep the cache in blocks through a block table (lesson 6.1)", "把缓存分块存放，经由块表访问（第 6.1 课）"},
    {OPT_BLOCK_SIZE, "--block-size", ARG_INT, "B", AT(opt.block_size), 1, GENERATE, 1, 4096,
     "positions per block of the paged cache (default 16)", "分页缓存每块的位置数（默认 16，同 vLLM）"},
    {OPT_BLOCK_SIZE, "--block-size", ARG_INT, "B", AT(opt.block_size), 1, LESSON, 1, 4096,
     "positions per block of the paged cache (generate: 16, as vLLM; lesson 6.1: 4)",
     "分页缓存每块的位置数（generate 默认 16，同 vLLM；第 6.1 课默认 4）"},
    {OPT_NUM_BLOCKS, "--num-blocks", ARG_INT, "N", AT(opt.num_blocks), 1, GENERATE, 1, 1000000,
     "blocks in the paged pool (default: as needed)", "分页缓存池中的块数（默认：够这次运行用）"},
    {OPT_SAMPLES, "--samples", ARG_INT, "N", AT(opt.samples), 1, GENERATE, 1, 64,
     "continuations sharing the prompt's blocks (--paged)", "同一提示词的多个续写，共享它的块（配合 --paged）"},
    {OPT_SAMPLES, "--samples", ARG_INT, "N", AT(opt.samples), 1, LESSON, 1, 64,
     "continuations of one prompt that share its blocks (generate: with --paged)",
     "同一提示词的多个续写，共享它的块（generate：配合 --paged）"},
    // Speculative decoding (lesson 13).
    {OPT_DRAFT, "--draft", ARG_STRING, "FILE", AT(opt.draft_path), 1, LESSON | GENERATE, 0, 0,
     "a draft model: speculative decoding (lesson 13)", "小的草稿模型：投机解码（第 13 课）"},
    {OPT_GAMMA, "--gamma", ARG_INT, "K", AT(opt.gamma), 1, LESSON | GENERATE, 1, 16,
     "tokens the draft proposes a round (default 4)", "草稿模型每轮提议的 token 数（默认 4）"},
    {OPT_DRAFT, "--draft", ARG_STRING, "FILE", AT(opt.draft_path), 1, RACE | BENCH, 0, 0,
     "a draft of the target's kind: speculative against plain cached decoding, greedy",
     "与目标模型同类的草稿模型：投机解码对比普通缓存解码，贪心"},
    {OPT_GAMMA, "--gamma", ARG_INT, "K", AT(opt.gamma), 1, RACE | BENCH, 1, 16,
     "tokens drafted a round (race: default 4; bench: each K of 1 .. 8)",
     "每轮起草的 token 数（race 默认 4；bench 默认 1 到 8 逐个测）"},
    // kvdemo memory.
    {OPT_TOKENS, "--tokens", ARG_I64, "N", AT(opt.tokens), 1, MEMORY, 1, 1e15,
     "tokens per sequence (prompt + generated)", "每个序列的 token 数（提示词加生成的）"},
    {OPT_LAYERS, "--layers", ARG_INT, "L", AT(opt.layers), 1, MEMORY, 1, 1e9, "layers of a shape given by hand",
     "手动给出的模型形状：层数"},
    {OPT_KV_HEADS, "--kv-heads", ARG_INT, "G", AT(opt.kv_heads), 1, MEMORY, 1, 1e9, "key/value heads of that shape",
     "该形状的 key/value 头数"},
    {OPT_HEAD_DIM, "--head-dim", ARG_INT, "D", AT(opt.head_dim), 1, MEMORY, 1, 1e9, "head size of that shape",
     "该形状每个头的维度"},
    {OPT_DTYPE, "--dtype", ARG_CHOICE, "fp32|fp16|bf16|fp8|int8|int4", AT(opt.dtype), 1, MEMORY, 0, 0,
     "bytes per cached value (default fp16; fp32 for kvdemo's char GPT)",
     "每个缓存值的字节数（默认 fp16；kvdemo 的字符级 GPT 为 fp32）"},
    {OPT_GPU_MEMORY, "--gpu-memory", ARG_STRING, "SIZE", AT(opt.gpu_memory), 1, MEMORY, 0, 0,
     "memory of the GPU, e.g. 80GB or 24GiB: what fits beside the weights",
     "GPU 显存，例如 80GB 或 24GiB：权重之外还能放下多少"},
    {OPT_LIST, "--list", ARG_FLAG, NULL, AT(opt.list), 1, MEMORY, 1, 0, "the presets and their published shapes",
     "列出预设模型及其公开的形状"},
    {OPT_ATTENTION, "--attention", ARG_CHOICE, "plain|flash", AT(opt.attention), 1, LESSON | GENERATE | BENCH, 0, 0,
     "the char GPT's attention: plain, or flash (tiles, online softmax; default plain)",
     "字符级 GPT 的注意力：plain，或 flash（分块、在线 softmax；默认 plain）"},
    {OPT_TILE, "--tile", ARG_INT, "N", AT(opt.tile), 1, LESSON | GENERATE | BENCH, 1, 65536,
     "keys per tile of flash attention (default 64)", "flash 注意力每块的键数（默认 64）"},
    {OPT_MAX_N, "--max-n", ARG_INT, "N", AT(opt.max_n), 1, LESSON, 1024, 16384,
     "lesson 6.3: time plain and tiled attention up to N = 4^k * 1024 (default 4096)",
     "第 6.3 课：普通与分块注意力计时到 N = 4^k * 1024（默认 4096）"},
    // Lessons 11 and 12.
    {OPT_BUG, "--bug", ARG_CHOICE, "offset|no-append|stale|mask|wrong-layout|no-scale|no-rollback|off-by-one",
     AT(opt.bug), 1,
     LESSON | GENERATE, 0, 0, "a classic cache mistake in the cached path (lesson 11; generate)",
     "在使用缓存的路径中注入一个常见错误（第 11 课；generate）"},
    {OPT_KV_DTYPE, "--kv-dtype", ARG_CHOICE, "fp32|bf16|fp16|int8|int4", AT(opt.kv_dtype), 1, GENERATE | BENCH | EVAL,
     0, 0, "how the cache keeps keys and values (default fp32; lesson 12)",
     "缓存以什么格式保存 key 和 value（默认 fp32；第 12 课）"},
    // Everywhere.
    {OPT_HELP, "--help", ARG_FLAG, NULL, AT(help), 99, ALL_COMMANDS, 1, 0,
     "this help (-h)", "显示帮助（-h）"},
    {OPT_VERSION, "--version", ARG_FLAG, NULL, AT(version), 99, ALL_COMMANDS, 1, 0,
     "the version (-V)", "显示版本（-V）"},
};
enum { NUM_OPTIONS = (int)(sizeof OPTIONS / sizeof OPTIONS[0]) };

// Options that a lesson which does not honour them refuses (exit 2) rather
// than ignores: --bug would silently run a correct lesson.
static const OptionId ONLY_WHERE_HONOURED[] = {OPT_BUG};

// Short names: -h and -V.
static const struct { const char *alias, *name; } SHORT_NAMES[] = {{"-h", "--help"}, {"-V", "--version"}};

// ----------------------------------------------------------------------------
// The commands: dispatch and help come from this one table.

static int cmd_list(Cli *c);
static int cmd_lesson(Cli *c);
static int cmd_generate(Cli *c);
static int cmd_race(Cli *c);
static int cmd_bench(Cli *c);
static int cmd_init(Cli *c);
static int cmd_train(Cli *c);
static int cmd_eval(Cli *c);
static int cmd_memory(Cli *c);
static int cmd_help(Cli *c);
static int cmd_version(Cli *c);

typedef struct {
    CommandId id;
    const char *name;
    int (*run)(Cli *c);     // NULL while not built yet
    int max_args;           // plain arguments after the name ("lesson 2": 1)
    const char *usage;      // what follows "kvdemo "
    const char *en, *zh;    // what it does, one line
    const char *doc;        // its page in docs/, or NULL
} Command;

static const Command COMMANDS[] = {
    {CMD_LIST, "list", cmd_list, 0, "list", "every lesson: id, section, title in en and zh",
     "课程列表：编号、原文章节、标题（英文、中文）", NULL},
    {CMD_LESSON, "lesson", cmd_lesson, 1, "lesson ID [options]", "run one lesson, e.g. kvdemo lesson 2 --no-cache",
     "运行一课，例如 kvdemo lesson 2 --no-cache", NULL},
    {CMD_GENERATE, "generate", cmd_generate, 0, "generate [options]", "the char GPT writes text after a prompt",
     "字符级 GPT 接着提示词写文字", "docs/lesson-10.md"},
    {CMD_RACE, "race", cmd_race, 0, "race [options]", "with and without the cache, side by side, live",
     "同一段文字，不用缓存与使用缓存，并排实时生成", "docs/lesson-10.md"},
    {CMD_BENCH, "bench", cmd_bench, 0, "bench [options]", "cache against no cache over growing lengths",
     "在不同长度上比较使用与不使用缓存", "docs/lesson-10.md"},
    {CMD_INIT, "init", cmd_init, 0, "init --out FILE", "write a random char GPT", "写出一个随机的字符级 GPT",
     "docs/model-format.md"},
    {CMD_TRAIN, "train", cmd_train, 0, "train --out FILE", "train the char GPT", "训练字符级 GPT",
     "docs/training.md"},
    {CMD_EVAL, "eval", cmd_eval, 0, "eval --model FILE", "training and validation loss", "训练损失与验证损失",
     "docs/training.md"},
    {CMD_MEMORY, "memory", cmd_memory, 0, "memory [options]", "the KV cache's size: model, batch, length",
     "KV 缓存的大小：模型、批大小、长度", "docs/memory.md"},
    {CMD_HELP, "help", cmd_help, 2, "help [COMMAND]", "this help; help lesson ID, help generate, ...",
     "本帮助；help lesson ID、help generate 等", NULL},
    {CMD_VERSION, "version", cmd_version, 0, "version", "the version", "版本", NULL},
};
_Static_assert(sizeof COMMANDS / sizeof COMMANDS[0] == NUM_COMMANDS, "one row per CommandId, in order");

// ----------------------------------------------------------------------------
// Messages

// One line on stderr in lang: "kvdemo: " and en, or "kvdemo：" and zh,
// which take the same arguments in the same order (tests/test_zh.c checks).
// Returns the exit status of a usage error.
static int usage_error(Lang lang, const char *en, const char *zh, ...) __attribute__((format(printf, 2, 4)));
static int usage_error(Lang lang, const char *en, const char *zh, ...) {
    va_list ap;
    va_start(ap, zh);
    fileio_verror(lang, NULL, en, zh, ap);
    va_end(ap);
    return EXIT_USAGE;
}

// The edit distance between a and b (insertions, deletions, substitutions,
// and two neighbours swapped, as in "lesosn"), compared without case; for
// "did you mean". Names are short, so the table is small.
static int edit_distance(const char *a, const char *b) {
    enum { MAX = 40 };
    int n = (int)strlen(a), m = (int)strlen(b);
    if (n >= MAX || m >= MAX) return MAX;
    int d[MAX + 1][MAX + 1];
    for (int i = 0; i <= n; i++) d[i][0] = i;
    for (int j = 0; j <= m; j++) d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            int ca = a[i - 1] | 0x20, cb = b[j - 1] | 0x20;   // ASCII letters without case
            int best = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == (b[j - 2] | 0x20) && (a[i - 2] | 0x20) == cb && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

// Keeps the nearest of the candidates offered to it: close enough when a
// third of the typed name's letters or fewer are wrong.
typedef struct {
    const char *typed;
    const char *best;
    int distance;
} Nearest;

static void nearest_offer(Nearest *n, const char *candidate) {
    int d = edit_distance(n->typed, candidate);
    int len = (int)strlen(n->typed);
    int limit = len <= 4 ? 1 : len / 3;
    if (d <= limit && (!n->best || d < n->distance)) n->best = candidate, n->distance = d;
}

// What separates the items of a list in a message: "1, 2, 3" or "1、2、3".
static const char *list_sep(Lang lang) { return lang == LANG_ZH ? "、" : ", "; }

// ----------------------------------------------------------------------------
// The lessons, as the parser and the help see them

static void list_lesson_ids(Lang lang, char *buf, size_t size, int built_only) {
    buf[0] = '\0';
    for (int i = 0; i < NUM_LESSONS; i++) {
        if (built_only && !LESSONS[i].run) continue;
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s", len ? list_sep(lang) : "", LESSONS[i].id);
    }
}

// The digits of an id: "6.2" and "62" are both "62".
static void id_digits(char *out, size_t size, const char *id) {
    size_t o = 0;
    for (; *id && o + 1 < size; id++)
        if (*id >= '0' && *id <= '9') out[o++] = *id;
    out[o] = '\0';
}

// The lesson a mistyped id most likely meant ("62" for 6.2), or NULL.
static const char *lesson_suggestion(const char *typed) {
    char want[32], have[32];
    id_digits(want, sizeof want, typed);
    for (int i = 0; i < NUM_LESSONS && want[0]; i++) {
        id_digits(have, sizeof have, LESSONS[i].id);
        if (!strcmp(want, have) && strcmp(typed, LESSONS[i].id)) return LESSONS[i].id;
    }
    return NULL;
}

// Where the page rel ("docs/lesson-2.md") is for the user to open: rel
// itself in the project's folder, else the installed copy
// (PREFIX/share/kvdemo/docs/..., paths.h) by its plain absolute name; NULL
// when there is none.
static const char *doc_path(const char *rel, char *buf, size_t size) {
    char found[4096];
    const char *p = paths_shipped(rel, found, sizeof found);
    if (access(p, R_OK) != 0) return NULL;
    snprintf(buf, size, "%s", p);
    // ".../bin/../share/kvdemo/docs/x.md" read as ".../share/kvdemo/docs/x.md"
    for (char *up; (up = strstr(buf, "/../"));) {
        char *dir = up;
        while (dir > buf && dir[-1] != '/') dir--;
        if (dir == buf) break;
        memmove(dir, up + 4, strlen(up + 4) + 1);
    }
    return buf;
}

// The lesson's page in docs/: docs/lesson-ID.md, or its section's page
// (docs/lesson-2.md for 2.1), as rel; NULL when there is none.
static const char *lesson_doc(const Lesson *l, char *rel, size_t size) {
    char whole[16], buf[4096];
    snprintf(whole, sizeof whole, "%s", l->id);
    const char *ids[2] = {l->id, whole};
    char *dot = strchr(whole, '.');
    if (dot) *dot = '\0';
    for (int i = 0; i < 2; i++) {
        snprintf(rel, size, "docs/lesson-%s.md", ids[i]);
        if (doc_path(rel, buf, sizeof buf)) return rel;
    }
    return NULL;
}

// ----------------------------------------------------------------------------
// Help

static const char *tx(const Cli *c, const char *en, const char *zh) { return trace_text(&c->tr, en, zh); }

enum { SCREEN_COLUMNS = 80, HELP_COLUMN = 29 };

// Prints text from terminal column `at` (the cursor is there), wrapped to
// SCREEN_COLUMNS with continuation lines starting at column indent. Lines
// break at a space, or next to a wide (Chinese) character, which needs none.
static void print_wrapped(FILE *f, const char *text, int at, int indent) {
    const char *p = text;
    while (*p) {
        int width = at;
        const char *q = p, *brk = NULL, *brk_next = NULL;
        while (*q && width <= SCREEN_COLUMNS) {
            uint32_t cp = '?';
            int len = utf8_decode(&cp, (const unsigned char *)q, strlen(q));
            if (len == 0) len = 1;
            char one[5] = {0};
            memcpy(one, q, (size_t)len);
            int w = utf8_width(one);
            if (width + w > SCREEN_COLUMNS) break;
            if (*q == ' ') brk = q, brk_next = q + 1;
            else if (w == 2 && q > p) brk = q, brk_next = q;
            width += w;
            q += len;
            if (w == 2) brk = q, brk_next = q;
        }
        if (q == p) q += strlen(p) ? 1 : 0;   // not even one character fits: print it anyway
        if (!*q || !brk) brk = brk_next = q;   // all of it fits, or no place to break
        fprintf(f, "%.*s\n", (int)(brk - p), p);
        p = brk_next;
        while (*p == ' ') p++;
        if (*p) fprintf(f, "%*s", indent, "");
        at = indent;
    }
}

// "--format text|json" padded to 26 terminal columns, then the help.
static void print_option_line(FILE *f, const Cli *c, const OptionSpec *o) {
    char left[128];   // --bug and its eight choices take 78
    snprintf(left, sizeof left, "%s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
    // A name too long for its column ("--dtype fp32|fp16|...") has its help
    // on the next line.
    if (utf8_width(left) > HELP_COLUMN - 3) fprintf(f, "  %s\n%*s", left, HELP_COLUMN, "");
    else fprintf(f, "  %-26s ", left);
    print_wrapped(f, tx(c, o->en, o->zh), HELP_COLUMN, HELP_COLUMN);
}

// Every option of this command (and, for a lesson, that the lesson honours).
static void print_options(FILE *f, const Cli *c, CommandId cmd, const Lesson *l) {
    for (int i = 0; i < NUM_OPTIONS; i++) {
        const OptionSpec *o = &OPTIONS[i];
        if (!(o->commands & CMD_BIT(cmd)) || o->id == OPT_HELP || o->id == OPT_VERSION) continue;
        if (l && !l->options[o->id]) continue;
        OptionSpec own = *o;   // a lesson's own words for --data (lesson 12: its validation text)
        if (l && o->id == OPT_DATA && !strcmp(l->id, "12")) {
            own.en = "the text the validation loss is measured on (default data/tinyshakespeare.txt, when it is there)";
            own.zh = "计算验证损失所用的文本（默认 data/tinyshakespeare.txt，若已下载）";
        }
        print_option_line(f, c, &own);
    }
}


// "more: PAGE", the page where this copy of kvdemo finds it; in Chinese
// its twin in docs/zh/ first, when there is one.
static void print_doc(FILE *f, const Cli *c, const char *rel) {
    char en[4096], zh[4096], zh_rel[128];
    if (!doc_path(rel, en, sizeof en)) return;
    snprintf(zh_rel, sizeof zh_rel, "docs/zh/%s", rel + strlen("docs/"));
    if (c->tr.lang == LANG_ZH && doc_path(zh_rel, zh, sizeof zh))
        fprintf(f, "\n详见：%s（英文版：%s）\n", zh, en);
    else
        fprintf(f, "\n%s%s\n", tx(c, "more: ", "详见："), en);
}

// The global help: one screen (under 30 lines of at most 80 columns).
static void print_help(FILE *f, const Cli *c) {
    fprintf(f, "kvdemo %s — %s\n\n", KVDEMO_VERSION,
            tx(c, "the transformer KV cache, step by step", "一步一步看懂 Transformer 的 KV Cache"));
    fprintf(f, "%s\n", tx(c, "usage:", "用法："));
    for (int i = 0; i < NUM_COMMANDS; i++) {
        const Command *k = &COMMANDS[i];
        if (!k->run || k->id == CMD_VERSION) continue;
        fprintf(f, "  kvdemo %-22s %s\n", k->usage, tx(c, k->en, k->zh));
    }
    char ids[256];
    list_lesson_ids(c->opt.lang, ids, sizeof ids, 1);
    fprintf(f, "\n%s %s\n", tx(c, "lessons:", "课程："), ids);
    // and the glossary, where this copy finds it (help lesson ID is in the usage above)
    char glossary[4096];
    if (doc_path("docs/glossary.md", glossary, sizeof glossary))
        fprintf(f, "%s%s\n", tx(c, "  kvdemo list shows them all; their words in en and zh: ", "  kvdemo list 列出全部课程；中英术语表："),
                glossary);
    else
        fprintf(f, "%s\n", tx(c, "  kvdemo list shows them all; kvdemo help lesson ID tells what one shows",
                              "  kvdemo list 列出全部课程；kvdemo help lesson ID 介绍某一课"));
    fprintf(f, "\n%s\n", tx(c, "what every lesson understands:", "每一课都理解的选项："));
    for (int i = 0; i < NUM_OPTIONS; i++)
        if (OPTIONS[i].id <= OPT_COLOR && (OPTIONS[i].commands & LESSON)) print_option_line(f, c, &OPTIONS[i]);
    fprintf(f, "\n%s\n", tx(c, "kvdemo help COMMAND, kvdemo help lesson ID: the other options. -V: the version.",
                            "kvdemo help COMMAND 与 kvdemo help lesson ID 列出其余选项；-V 显示版本。"));
}

static void print_command_help(FILE *f, const Cli *c, const Command *k) {
    fprintf(f, "kvdemo %s\n  %s\n", k->usage, tx(c, k->en, k->zh));
    int any = 0;
    for (int i = 0; i < NUM_OPTIONS && !any; i++)
        any = (OPTIONS[i].commands & CMD_BIT(k->id)) && OPTIONS[i].id != OPT_HELP && OPTIONS[i].id != OPT_VERSION;
    if (any) {
        fprintf(f, "\n%s\n", tx(c, "options:", "选项："));
        print_options(f, c, k->id, NULL);
    }
    if (k->doc) print_doc(f, c, k->doc);
}

static void print_lesson_help(FILE *f, const Cli *c, const Lesson *l) {
    // The title beside the id, or under it when the line would pass the
    // screen's width (lesson 12's).
    const char *title = tx(c, l->title_en, l->title_zh);
    char head[32];
    snprintf(head, sizeof head, "kvdemo lesson %s — ", l->id);
    if (utf8_width(head) + utf8_width(title) > SCREEN_COLUMNS) fprintf(f, "kvdemo lesson %s\n  %s\n", l->id, title);
    else fprintf(f, "%s%s\n", head, title);
    if (l->shows_en) {
        fputs("  ", f);
        print_wrapped(f, tx(c, l->shows_en, l->shows_zh), 2, 2);
    }
    // The document by the name a class knows ("KV Cache article §2"), never
    // its file id.
    char sec[64];
    if (!strncmp(l->section, "beyond", 6))
        fprintf(f, "  %s\n", tx(c, "beyond the documents", "文档之外"));
    else
        fprintf(f, "  %s%s%s\n", tx(c, "follows: ", "对应原文："), lessons_section(l, c->tr.lang, sec, sizeof sec),
                l->run ? "" : tx(c, " (not built yet)", "（尚未实现）"));
    if (l->run) {
        fprintf(f, "\n%s\n", tx(c, "options it honours:", "这一课用到的选项："));
        print_options(f, c, CMD_LESSON, l);
        fprintf(f, "%s\n", tx(c, "  (it says so when it ignores another option)", "  （给了其他选项时，它会说明已忽略）"));
    }
    char rel[64];
    if (lesson_doc(l, rel, sizeof rel)) print_doc(f, c, rel);
    fprintf(f, "\n%s\n", tx(c, "Other lessons: kvdemo list; kvdemo lesson ID --help.",
                            "其他课程：kvdemo list；kvdemo lesson ID --help。"));
}

// ----------------------------------------------------------------------------
// Parsing

static const OptionSpec *find_option(const char *name, CommandId cmd) {
    const OptionSpec *any = NULL;
    for (int i = 0; i < NUM_OPTIONS; i++) {
        if (strcmp(OPTIONS[i].name, name)) continue;
        if (OPTIONS[i].commands & CMD_BIT(cmd)) return &OPTIONS[i];
        any = &OPTIONS[i];
    }
    return any;
}

// The row of option id that command cmd reads.
static const OptionSpec *find_option_id(OptionId id, CommandId cmd) {
    for (int i = 0; i < NUM_OPTIONS; i++)
        if (OPTIONS[i].id == id && (OPTIONS[i].commands & CMD_BIT(cmd))) return &OPTIONS[i];
    return NULL;
}

// "--cache, --no-cache, ..." of the options a command accepts.
static void list_options(Lang lang, char *buf, size_t size, CommandId cmd) {
    buf[0] = '\0';
    for (int i = 0; i < NUM_OPTIONS; i++) {
        if (!(OPTIONS[i].commands & CMD_BIT(cmd)) || OPTIONS[i].id >= OPT_HELP) continue;
        if (strstr(buf, OPTIONS[i].name)) continue;   // --steps has two rows
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s", len ? list_sep(lang) : "", OPTIONS[i].name);
    }
}

static int unknown_option(Lang lang, const char *name, const char *command, CommandId cmd) {
    char valid[2048];
    list_options(lang, valid, sizeof valid, cmd);
    Nearest n = {.typed = name};
    for (int i = 0; i < NUM_OPTIONS; i++)
        if (OPTIONS[i].commands & CMD_BIT(cmd)) nearest_offer(&n, OPTIONS[i].name);
    if (n.best) return usage_error(lang, "unknown option '%s' for '%s'; did you mean %s? valid: %s",
                                   "%s 不是 %s 的选项；你是不是想输入 %s？可用的选项：%s", name, command, n.best, valid);
    return usage_error(lang, "unknown option '%s' for '%s'; valid: %s", "%s 不是 %s 的选项；可用的选项：%s", name, command,
                       valid);
}

// The index of value among the choices "a|b|c", without case; -1 if none.
// A locale's name ("zh_CN.UTF-8") counts as its language when locale is 1.
static int choice_index(const char *choices, const char *value, int locale) {
    int i = 0;
    for (const char *p = choices; *p; i++) {
        size_t n = strcspn(p, "|");
        if (!strncasecmp(p, value, n) && (value[n] == '\0' || (locale && strchr("_-.", value[n])))) return i;
        p += n + (p[n] == '|');
    }
    return -1;
}

static int parse_value(Cli *c, const OptionSpec *o, char *value) {
    char *at = (char *)c + o->dest;
    char *end;
    errno = 0;
    switch (o->kind) {
    case ARG_FLAG:
        *(int *)at = (int)o->min;
        return 0;
    case ARG_INT:
    case ARG_I64:
    case ARG_U64: {
        long long v = strtoll(value, &end, 10);
        if (end == value || *end || errno || v < o->min || v > o->max)
            return usage_error(c->opt.lang, "%s takes a whole number from %.0f to %.0f, not '%s'",
                               "%s 取 %.0f 到 %.0f 之间的整数，不能是“%s”", o->name, o->min, o->max, value);
        if (o->kind == ARG_INT) *(int *)at = (int)v;
        else if (o->kind == ARG_I64) *(int64_t *)at = (int64_t)v;
        else *(uint64_t *)at = (uint64_t)v;
        return 0;
    }
    case ARG_DOUBLE: {
        double v = strtod(value, &end);
        if (errno == ERANGE && fabs(v) < 1) errno = 0;   // a subnormal number (1e-40) is a number
        if (end == value || *end || errno || !(v >= o->min && v <= o->max))
            return usage_error(c->opt.lang, "%s takes a number from %g to %g, not '%s'", "%s 取 %g 到 %g 之间的数，不能是“%s”", o->name,
                               o->min, o->max, value);
        *(double *)at = v;
        return 0;
    }
    case ARG_CHOICE:
    case ARG_ENUM:
    case ARG_LOCALE: {
        int i = choice_index(o->metavar, value, o->kind == ARG_LOCALE);
        if (i < 0) return usage_error(c->opt.lang, "%s takes one of %s, not '%s'", "%s 取 %s 之一，不能是“%s”", o->name, o->metavar,
                                      value);
        if (o->kind == ARG_CHOICE) {
            // "TINY" is stored as "tiny": the choice's own spelling, written
            // over the argument (of the same length).
            const char *p = o->metavar;
            for (int k = 0; k < i; k++) p += strcspn(p, "|") + 1;
            memcpy(value, p, strcspn(p, "|"));
            *(const char **)at = value;
        } else {
            *(int *)at = i;
        }
        return 0;
    }
    case ARG_STRING:
    case ARG_APPEND:
        if (!*value) return usage_error(c->opt.lang, "%s needs a non-empty value", "%s 的值不能为空", o->name);
        if (o->kind == ARG_STRING) {
            *(const char **)at = value;
        } else {
            int *count = (int *)(at + sizeof(const char *) * (size_t)o->repeats);
            ((const char **)at)[(*count)++] = value;
        }
        return 0;
    }
    return 0;
}

// Does this argument take the next one as its value? (For finding the command
// among options given before it: "kvdemo --lang zh lesson 2".)
static int takes_value(const char *arg) {
    if (strncmp(arg, "--", 2) || strchr(arg, '=')) return 0;
    for (int i = 0; i < NUM_OPTIONS; i++)
        if (!strcmp(OPTIONS[i].name, arg)) return OPTIONS[i].kind != ARG_FLAG;
    return 0;
}

// More threads than cores only take turns (12 to 20 times slower): --threads
// is capped at the number of cores, said once.
static void cap_threads(Options *opt) {
    int cores = pool_cores();
    if (opt->threads <= cores) return;
    fileio_error(opt->lang, "--threads %d is more than the %d cores; using %d", "--threads %d 超过了 %d 个核心；改用 %d",
                 opt->threads, cores, cores);
    opt->threads = cores;
}

// Parses every argument but the command's name (at argv[skip]) as options
// and plain arguments of cmd. Returns 0 or an exit status.
static int parse_args(Cli *c, int argc, char **argv, int skip, const Command *k) {
    int times[NUM_OPTIONS] = {0};
    for (int a = 1; a < argc; a++) {
        if (a == skip) continue;
        char *arg = argv[a];
        if (arg[0] != '-' || !arg[1]) {
            if (c->n_args < k->max_args) {
                c->args[c->n_args++] = arg;
                continue;
            }
            char valid[2048];
            list_options(c->opt.lang, valid, sizeof valid, k->id);
            if (k->max_args == 0 && k->id == CMD_LIST) return usage_error(c->opt.lang, "'list' takes no arguments, not '%s'", "list 不带参数，多了“%s”", arg);
            return usage_error(c->opt.lang, "unexpected argument '%s' for '%s'; options: %s", "%s 多了参数“%s”；可用的选项：%s",
                               arg, k->name, valid);
        }
        char name[64];
        char *value = NULL;
        char *eq = strchr(arg, '=');
        if (!strncmp(arg, "--", 2) && eq && (size_t)(eq - arg) < sizeof name) {
            memcpy(name, arg, (size_t)(eq - arg));
            name[eq - arg] = '\0';
            value = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", arg);
        }
        for (size_t s = 0; s < sizeof SHORT_NAMES / sizeof SHORT_NAMES[0]; s++)
            if (!strcmp(name, SHORT_NAMES[s].alias)) snprintf(name, sizeof name, "%s", SHORT_NAMES[s].name);
        const OptionSpec *o = find_option(name, k->id);
        if (!o || !(o->commands & CMD_BIT(k->id))) return unknown_option(c->opt.lang, name, k->name, k->id);
        if (o->kind == ARG_FLAG) {
            if (value) return usage_error(c->opt.lang, "%s takes no value", "%s 不带值", o->name);
        } else if (!value) {
            if (a + 1 >= argc || a + 1 == skip)
                return usage_error(c->opt.lang, "%s needs a value: %s %s", "%s 需要一个值：%s %s", o->name, o->name, o->metavar);
            value = argv[++a];
        }
        int *t = &times[o - OPTIONS];
        if (*t >= o->repeats) {
            if (o->repeats == 1) return usage_error(c->opt.lang, "%s is given twice", "%s 给了两次", o->name);
            return usage_error(c->opt.lang, "%s can be given at most %d times", "%s 最多只能给 %d 次", o->name, o->repeats);
        }
        (*t)++;
        c->opt.given[o->id] = 1;
        if (parse_value(c, o, value)) return EXIT_USAGE;
    }
    if (c->opt.given[OPT_CACHE] && c->opt.given[OPT_NO_CACHE])
        return usage_error(c->opt.lang, "--cache and --no-cache exclude each other; give neither to get both runs and a comparison",
                           "--cache 和 --no-cache 不能同时给；两个都不给，就会两次都跑并对比");
    c->opt.given_seed = c->opt.given[OPT_SEED];
    cap_threads(&c->opt);
    return 0;
}

// With --help: only the plain arguments (which lesson) count, and --lang,
// which early_lang has read already; nothing is reported, the help is
// printed whatever else was given.
static void help_scan(Cli *c, int argc, char **argv, int skip, const Command *k) {
    for (int a = 1; a < argc; a++) {
        if (a == skip) continue;
        if (argv[a][0] != '-' || !argv[a][1]) {
            if (c->n_args < k->max_args) c->args[c->n_args++] = argv[a];
            continue;
        }
        if (takes_value(argv[a])) a++;
    }
}

static int want_color(int when) {
    if (when == 1) return 1;   // always
    if (when == 2) return 0;   // never
    const char *no = getenv("NO_COLOR");
    const char *term = getenv("TERM");
    return isatty(STDOUT_FILENO) && !(no && *no) && !(term && !strcmp(term, "dumb"));
}

// ----------------------------------------------------------------------------
// The commands

static int cmd_list(Cli *c) {
    (void)c;
    lessons_print_list(stdout, c->tr.lang, 0);
    return 0;
}

static int cmd_version(Cli *c) {
    (void)c;
    printf("kvdemo %s\n", KVDEMO_VERSION);
    return 0;
}

// The lesson an id names, or NULL after one line on stderr: the ids that
// would be valid, the sub-lessons of a section ("6": 6.1, 6.2, 6.3), or the
// id that was most likely meant.
static const Lesson *find_lesson(Lang lang, const char *id) {
    char ids[256];
    list_lesson_ids(lang, ids, sizeof ids, 1);
    const Lesson *l = lessons_find(id);
    if (l) return l;
    char subs[128] = "";
    size_t n = strlen(id);
    for (int i = 0; i < NUM_LESSONS; i++)
        if (!strncmp(LESSONS[i].id, id, n) && LESSONS[i].id[n] == '.') {
            size_t len = strlen(subs);
            snprintf(subs + len, sizeof subs - len, "%s%s", len ? list_sep(lang) : "", LESSONS[i].id);
        }
    if (subs[0]) {
        const char *built = NULL;
        for (int i = 0; i < NUM_LESSONS && !built; i++)
            if (!strncmp(LESSONS[i].id, id, n) && LESSONS[i].id[n] == '.' && LESSONS[i].run) built = LESSONS[i].id;
        if (built) usage_error(lang, "lesson %s has parts: %s; give one of them, e.g. kvdemo lesson %s",
                               "第 %s 课分为 %s；请选其中一课，例如 kvdemo lesson %s", id, subs, built);
        else usage_error(lang, "lesson %s has parts: %s (none built yet); built lessons: %s",
                         "第 %s 课分为 %s（都尚未实现）；已实现的课程：%s", id, subs, ids);
        return NULL;
    }
    const char *s = lesson_suggestion(id);
    if (s) usage_error(lang, "unknown lesson '%s'; valid ids: %s; did you mean %s?",
                        "没有第“%s”课；可用的课程编号：%s；你是不是想输入 %s？", id, ids, s);
    else usage_error(lang, "unknown lesson '%s'; valid ids: %s", "没有第“%s”课；可用的课程编号：%s", id, ids);
    return NULL;
}

// kvdemo help lesson 6: the parts of a section, one line each. Returns how
// many there are (0: none, nothing printed).
static int print_parts(FILE *f, const Cli *c, const char *id) {
    size_t n = strlen(id);
    int parts = 0;
    for (int i = 0; i < NUM_LESSONS; i++) {
        const Lesson *l = &LESSONS[i];
        if (strncmp(l->id, id, n) || l->id[n] != '.') continue;
        if (!parts++) fprintf(f, tx(c, "Section %s has parts:\n", "第 %s 节分为：\n"), id);
        fprintf(f, "  kvdemo lesson %-4s %s%s\n", l->id, tx(c, l->title_en, l->title_zh),
                l->run ? "" : tx(c, " (not built yet)", "（尚未实现）"));
    }
    return parts;
}

// An option that would silently run a correct lesson (--bug) is refused
// where it means nothing: the lessons and commands that take it are named.
// Returns 0, or the usage error's status.
static int lesson_refuse_unhonoured(Cli *c, const Lesson *l) {
    for (size_t s = 0; s < sizeof ONLY_WHERE_HONOURED / sizeof ONLY_WHERE_HONOURED[0]; s++) {
        const OptionSpec *o = find_option_id(ONLY_WHERE_HONOURED[s], CMD_LESSON);
        if (!c->opt.given[o->id] || l->options[o->id]) continue;
        char where[256] = "";
        for (int j = 0; j < NUM_LESSONS; j++) {
            if (!LESSONS[j].run || !LESSONS[j].options[o->id]) continue;
            size_t len = strlen(where);
            if (c->opt.lang == LANG_ZH) snprintf(where + len, sizeof where - len, "%s第 %s 课", len ? "、" : "", LESSONS[j].id);
            else snprintf(where + len, sizeof where - len, "%slesson %s", len ? ", " : "", LESSONS[j].id);
        }
        for (int k = 0; k < NUM_COMMANDS; k++) {
            if (k == CMD_LESSON || !(o->commands & CMD_BIT(k))) continue;
            size_t len = strlen(where);
            snprintf(where + len, sizeof where - len, c->opt.lang == LANG_ZH ? "和 %s 命令" : " and %s", COMMANDS[k].name);
        }
        return usage_error(c->opt.lang, "%s works with %s, not lesson %s", "%s 只用于%s，不用于第 %s 课", o->name, where, l->id);
    }
    return 0;
}

// What the lesson will not do as asked is said, once each, before it runs:
// options it has no use for, --color and --width where the format has no
// use for them.
static void lesson_say_ignored(Cli *c, const Lesson *l) {
    for (int i = 0; i < NUM_OPTIONS; i++) {
        const OptionSpec *o = &OPTIONS[i];
        if (!c->opt.given[o->id] || l->options[o->id] || !(o->commands & LESSON)) continue;
        if (o->id == OPT_COLOR)
            fileio_error(c->opt.lang, "lesson %s ignores --color: it shows no score or weight matrix, so --color changes nothing",
                         "第 %s 课忽略 --color：它不显示 scores 或 weights 矩阵，--color 不起作用", l->id);
        else
            fileio_error(c->opt.lang, "lesson %s ignores %s (kvdemo help lesson %s lists what it honours)",
                         "第 %s 课忽略 %s（kvdemo help lesson %s 列出它用到的选项）", l->id, o->name, l->id);
    }
    if (c->opt.given[OPT_COLOR] && l->options[OPT_COLOR] && (c->tr.format == FORMAT_HTML || c->tr.format == FORMAT_MD))
        fileio_error(c->opt.lang, "%s; --color ignored", "%s；忽略 --color",
                     c->tr.format == FORMAT_HTML ? tx(c, "an HTML page always colours its heat maps", "HTML 网页的热力图总是着色")
                                                 : tx(c, "Markdown has no colours", "Markdown 没有颜色"));
    if (c->width && c->tr.format != FORMAT_TEXT) {
        fileio_error(c->opt.lang, "--width fits text to a screen; the output is not text, so it is ignored",
                     "--width 让文字适应屏幕；输出不是文字，因此忽略它");
        c->width = 0;
    }
}

// Runs the lesson. --step on a terminal, or --width: the text is fitted to a
// screen (wrapped, tensors elided; with --step, pages that wait for a key).
static int lesson_run_fitted(Cli *c, const Lesson *l) {
    Screen screen;
    int pausing = c->tr.format == FORMAT_TEXT && c->tr.step_pause && l->options[OPT_STEP];
    int fitted = pausing || c->width;
    c->tr.step_pause = pausing;
    if (fitted) {
        if (screen_open(&screen, stdout, screen_default_width(c->width), pausing ? screen_default_height() : 0, pausing,
                        c->tr.lang == LANG_ZH)) {
            fileio_error(c->opt.lang, "out of memory", "内存不足");
            return 1;
        }
        c->tr.out = screen.mem;
        c->tr.screen = &screen;
    }
    // A lesson that runs a model makes its own threads from --threads (0: the
    // fastest for its shape) and frees them: nothing of them is left for the next.
    int rc = trace_begin(&c->tr) ? 1 : trace_finish(&c->tr, l->run(&c->opt, &c->tr));
    if (fitted) {
        screen_close(&screen);
        c->tr.out = stdout;
        c->tr.screen = NULL;
    }
    return rc;
}

static int cmd_lesson(Cli *c) {
    char ids[256];
    list_lesson_ids(c->opt.lang, ids, sizeof ids, 1);
    if (c->n_args < 1) {
        if (c->help) {
            print_command_help(stdout, c, &COMMANDS[CMD_LESSON]);
            return 0;
        }
        return usage_error(c->opt.lang, "'lesson' needs a lesson id: one of %s (kvdemo list shows them all)",
                           "lesson 需要一个课程编号：%s 之一（kvdemo list 列出全部课程）", ids);
    }
    if (c->help && !lessons_find(c->args[0]) && print_parts(stdout, c, c->args[0])) return 0;
    const Lesson *l = find_lesson(c->opt.lang, c->args[0]);
    if (!l) return EXIT_USAGE;
    if (c->help) {
        print_lesson_help(stdout, c, l);
        return 0;
    }
    if (!l->run) return usage_error(c->opt.lang, "lesson %s is not built yet; built lessons: %s", "第 %s 课尚未实现；已实现的课程：%s",
                                   l->id, ids);
    c->tr.lesson = l->id;
    if (c->tr.step_pause && l->options[OPT_STEP] && (c->tr.format != FORMAT_TEXT || !isatty(STDIN_FILENO))) {
        fileio_error(c->opt.lang, "--step waits for keys on a terminal; %s, so it is ignored",
                     "--step 要在终端上等待按键；%s，所以忽略它",
                     c->tr.format == FORMAT_JSON   ? tx(c, "the output is JSON", "输出是 JSON")
                     : c->tr.format == FORMAT_HTML ? tx(c, "the output is an HTML page", "输出是 HTML 网页")
                     : c->tr.format == FORMAT_MD   ? tx(c, "the output is Markdown", "输出是 Markdown")
                                                   : tx(c, "standard input is not one", "标准输入不是终端"));
        c->tr.step_pause = 0;
    }
    int refused = lesson_refuse_unhonoured(c, l);
    if (refused) return refused;
    lesson_say_ignored(c, l);
    int rc = lesson_run_fitted(c, l);
    // --color colours score and weight matrices; a lesson that can show them
    // but showed none this time (--trace none) says that it changed nothing.
    if (!rc && c->opt.given[OPT_COLOR] && l->options[OPT_COLOR] &&
        c->tr.heat_maps == 0 && c->tr.format == FORMAT_TEXT)
        fileio_error(c->opt.lang, "lesson %s shows no score or weight matrix: --color changes nothing",
                     "第 %s 课这次没有显示 scores 或 weights 矩阵：--color 不起作用", l->id);
    return rc;
}

static int cmd_generate(Cli *c) {
    if (trace_begin(&c->tr)) return 1;
    if (c->opt.tokenizer_path) return trace_finish(&c->tr, llama2ccmd_generate(&c->opt, &c->tr));   // llama2.c's model
    return trace_finish(&c->tr, gptcmd_generate(&c->opt, &c->tr));
}
static int cmd_race(Cli *c) {
    if (c->opt.draft_path || c->opt.given[OPT_GAMMA]) return specbench_race(&c->opt, &c->tr);   // speculative
    return gptcmd_race(&c->opt, &c->tr);
}
static int cmd_bench(Cli *c) {
    if (c->opt.draft_path || c->opt.given[OPT_GAMMA]) return specbench_bench(&c->opt, &c->tr);   // speculative
    if (c->opt.tokenizer_path || llamacmd_is_llama_file(c->opt.model_path))   // llama2.c's or a KVLM file
        return llama2ccmd_bench(&c->opt, &c->tr);
    return bench_command(&c->opt, &c->tr);
}
static int cmd_init(Cli *c) { return gptcmd_init(&c->opt, &c->tr); }
static int cmd_train(Cli *c) { return gptcmd_train(&c->opt, &c->tr); }
static int cmd_eval(Cli *c) { return gptcmd_eval(&c->opt, &c->tr); }
static int cmd_memory(Cli *c) {
    if (trace_begin(&c->tr)) return 1;
    return trace_finish(&c->tr, memory_cmd(&c->opt, &c->tr));
}

static const Command *find_command(const char *name);
static int unknown_command(Lang lang, const char *name);

// kvdemo help [COMMAND | lesson ID]
static int cmd_help(Cli *c) {
    if (c->n_args == 0) {
        print_help(stdout, c);
        return 0;
    }
    const Command *k = find_command(c->args[0]);
    if (!k) return unknown_command(c->opt.lang, c->args[0]);
    if (k->id == CMD_LESSON && c->n_args > 1 && !lessons_find(c->args[1]) && print_parts(stdout, c, c->args[1]))
        return 0;
    if (k->id == CMD_LESSON && c->n_args > 1) {
        const Lesson *l = find_lesson(c->opt.lang, c->args[1]);
        if (!l) return EXIT_USAGE;
        print_lesson_help(stdout, c, l);
        return 0;
    }
    if (c->n_args > 1) return usage_error(c->opt.lang, "'help %s' takes nothing more, not '%s'", "help %s 后面不再带参数，多了“%s”",
                                           k->name, c->args[1]);
    if (k->id == CMD_HELP) print_help(stdout, c);
    else print_command_help(stdout, c, k);
    return 0;
}


static const Command *find_command(const char *name) {
    for (int i = 0; i < NUM_COMMANDS; i++)
        if (!strcmp(COMMANDS[i].name, name)) return &COMMANDS[i];
    return NULL;
}

static int unknown_command(Lang lang, const char *name) {
    char names[256] = "";
    Nearest n = {.typed = name};
    for (int i = 0; i < NUM_COMMANDS; i++) {
        if (!COMMANDS[i].run) continue;
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", len ? list_sep(lang) : "", COMMANDS[i].name);
        nearest_offer(&n, COMMANDS[i].name);
    }
    if (n.best)
        return usage_error(lang, "unknown command '%s'; did you mean %s? commands: %s (kvdemo help explains them)",
                           "没有“%s”这个命令；你是不是想输入 %s？命令有：%s（kvdemo help 有说明）", name, n.best,
                           names);
    return usage_error(lang, "unknown command '%s'; commands: %s (kvdemo help explains them)",
                       "没有“%s”这个命令；命令有：%s（kvdemo help 有说明）", name, names);
}

// The language of messages, known before anything is parsed: a message about
// the command line must speak it even when the mistake comes before --lang
// ("kvdemo lesson 2 --cahce --lang zh"). A valid --lang anywhere wins (its
// value is skipped over, as the parser does); else LANG, which trace_init read.
static void early_lang(Cli *c, int argc, char **argv) {
    for (int a = 1; a < argc; a++) {
        const char *value = NULL;
        if (!strncmp(argv[a], "--lang=", 7)) value = argv[a] + 7;
        else if (!strcmp(argv[a], "--lang") && a + 1 < argc) value = argv[a + 1];
        int lang = value ? choice_index("en|zh", value, 1) : -1;
        if (lang >= 0) c->tr.lang = (Lang)lang;
        if (takes_value(argv[a])) a++;
    }
    c->opt.lang = c->tr.lang;
}

int cli_main(int argc, char **argv, Lang *lang) {
    Cli c;
    memset(&c, 0, sizeof c);
    c.opt = (Options){.runs = RUN_BOTH, .steps = -1, .seed = 42, .temperature = -1, .top_p = -1};
    trace_init(&c.tr, stdout);
    c.tr.version = KVDEMO_VERSION, c.tr.argc = argc, c.tr.argv = argv;   // a page's footer
    early_lang(&c, argc, argv);
    *lang = c.opt.lang;

    // The command is the first argument that is neither an option nor an
    // option's value: "kvdemo --lang zh lesson 2" runs lesson 2.
    int at = 1;
    for (; at < argc && argv[at][0] == '-' && argv[at][1]; at += takes_value(argv[at]) ? 2 : 1) {
        // An unknown name here would make its value look like the command.
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(argv[at], "="), argv[at]);
        int known = 0;
        for (int i = 0; i < NUM_OPTIONS && !known; i++) known = !strcmp(OPTIONS[i].name, name);
        for (size_t s = 0; s < sizeof SHORT_NAMES / sizeof SHORT_NAMES[0] && !known; s++)
            known = !strcmp(SHORT_NAMES[s].alias, name);
        if (!known) {
            Nearest n = {.typed = name};
            for (int i = 0; i < NUM_OPTIONS; i++) nearest_offer(&n, OPTIONS[i].name);
            if (n.best) return usage_error(c.opt.lang, "unknown option '%s'; did you mean %s? (kvdemo help lists the options)",
                                           "没有 %s 这个选项；你是不是想输入 %s？（kvdemo help 列出全部选项）", name,
                                           n.best);
            return usage_error(c.opt.lang, "unknown option '%s'; kvdemo help lists the options",
                               "没有 %s 这个选项；kvdemo help 列出全部选项", name);
        }
    }
    const Command *k = at < argc ? find_command(argv[at]) : &COMMANDS[CMD_HELP];
    if (!k) {
        // Before the usage error, --help and --version still answer.
        for (int a = 1; a < at; a++) {
            if (!strcmp(argv[a], "-V") || !strcmp(argv[a], "--version")) return cmd_version(&c);
        }
        return unknown_command(c.opt.lang, argv[at]);
    }
    if (!k->run) return usage_error(c.opt.lang, "'%s' is not built yet; kvdemo help lists the commands",
                                   "%s 命令尚未实现；kvdemo help 列出全部命令", k->name);
    // --help anywhere wins over mistakes in the other options: the help is
    // what the user is after ("kvdemo lesson 2 --bogus --help").
    for (int a = 1; a < argc; a++) c.help |= !strcmp(argv[a], "--help") || !strcmp(argv[a], "-h");
    if (c.help) {
        help_scan(&c, argc, argv, at < argc ? at : -1, k);
        if (k->id == CMD_LESSON) return cmd_lesson(&c);
        if (k->id == CMD_HELP || k->id == CMD_VERSION) return cmd_help(&c);
        print_command_help(stdout, &c, k);
        return 0;
    }
    int rc = parse_args(&c, argc, argv, at < argc ? at : -1, k);
    if (rc) return rc;
    *lang = c.opt.lang = c.tr.lang;
    if (c.version) return cmd_version(&c);
    c.tr.color = c.tr.format == FORMAT_TEXT && want_color(c.color);
    c.tr.lesson = k->name;
    return k->run(&c);
}

int cli_parse_options(Options *opt, Trace *tr, int argc, char **argv, const char *command) {
    Cli c;
    memset(&c, 0, sizeof c);
    c.opt = (Options){.runs = RUN_BOTH, .steps = -1, .seed = 42, .temperature = -1, .top_p = -1};
    trace_init(&c.tr, stdout);
    early_lang(&c, argc, argv);
    const Command *k = find_command(command);
    int rc = k ? parse_args(&c, argc, argv, 1, k) : unknown_command(c.opt.lang, command);
    c.opt.lang = c.tr.lang;
    *opt = c.opt;
    *tr = c.tr;
    return rc;
}
