// kvpage_svg — the paged cache (kvpage.h) as a picture for the lesson page
// (--format html, lesson 6.1): the pool's physical blocks in a grid, each
// block's B slots filled in the colour of the sequence that holds it (grey
// when several share it), its id, the logical block it is to its holder and
// its reference count; a block copied on write gets an arrow from the block
// it was copied from. Labels in both languages (elements of class en, zh).
#ifndef KVDEMO_KVPAGE_SVG_H
#define KVDEMO_KVPAGE_SVG_H

#include "buf.h"
#include "kvpage.h"

// Appends one <svg> element to b: the pool p with the sequences seqs (n) on
// it; cow_src (p->num_blocks) the block each block was copied from in the
// step drawn, or -1 (NULL: none). Colours are the Okabe–Ito palette, told
// apart with the common colour-vision deficiencies.
void kvpage_svg(Buf *b, const KvPool *p, const KvSeq *seqs, int n, const int *cow_src);

#endif
