// checkpoint — the file that lets a training run stop and resume bit for bit
// (layout byte for byte in docs/training.md). Legend: P parameters, V
// vocabulary size.
#ifndef KVDEMO_CHECKPOINT_H
#define KVDEMO_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "train.h"

// Checkpoints. A checkpoint holds the recipe, the model shape and vocabulary,
// the step, the batch generator's state, the weights and AdamW's two moment
// estimates, and a checksum; docs/training.md gives the layout.

typedef struct {
    TrainConfig cfg;          // recipe (paths are not stored; NULL on load)
    uint32_t *vocab;          // (V)
    int step;                 // steps done
    uint64_t rng;             // batch generator state after `step` steps
    uint64_t text_hash;       // FNV-1a of the training text (vocabulary, then tokens)
    int64_t text_tokens;      // length of the training text in tokens
    float *params, *m, *v;    // (P) each
    size_t num_params;        // P
} TrainCheckpoint;

// Writes atomically through path.tmp (fileio.h); refuses a path that exists
// and is not a regular file. Returns 0, or -1
// with err; on failure the file at path is left as it was.
int train_checkpoint_save(const char *path, const TrainCheckpoint *ck, Err err);
// Reads and validates (magic, version, sizes against the file length, the
// checksum, finite weights). Fills ck with fresh allocations (free with
// train_checkpoint_free). Returns 0, or -1 with err = "checkpoint PATH
// rejected: what is wrong" (or why it could not be read).
int train_checkpoint_load(const char *path, TrainCheckpoint *ck, Err err);
// Frees what train_checkpoint_load allocated (params, m and v are one block).
void train_checkpoint_free(TrainCheckpoint *ck);
// ---------------------------------------------------------------------------
// What every training run does before its first step and after its last,
// whatever the architecture (train_run): the recipe (the checkpoint's when
// resuming), the text, and the output paths claimed.

typedef struct {
    TrainConfig r;            // the recipe the run follows
    TrainCheckpoint ck;       // the checkpoint resumed from (empty if none)
    TrainText text;           // the training text
    uint64_t text_hash;       // train_text_hash(&text)
    int64_t n_train;          // tokens of its training split
    int claimed_out, claimed_ckpt;   // fileio_claim held on r.out_path, r.ckpt_path
} TrainSetup;

// Reads cfg->resume_path's checkpoint (when given; its recipe replaces
// cfg's) and the text (in the checkpoint's vocabulary), and checks that it is
// the text the checkpoint was trained on. res is reset. Returns 0, or -1
// with err; train_setup_free(su) in either case.
int train_setup(TrainSetup *su, const TrainConfig *cfg, TrainResult *res, Err err);
// Checks each split is longer than T + 1 and the recipe, sets r.ckpt_path
// (res->ckpt_path: out_path + ".ckpt" unless given) and claims both outputs.
// Returns 0, or -1 with err.
int train_setup_check(TrainSetup *su, int T, TrainResult *res, Err err);
void train_setup_free(TrainSetup *su);

// For tests: every save from now on stops after writing this many bytes of
// the temporary file and fails, as a process killed mid-write would (-1: off).
void train_checkpoint_fail_after(long bytes);

#endif
