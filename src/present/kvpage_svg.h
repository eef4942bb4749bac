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

// The picture's colours: a sequence's (its index modulo the count), the
// shared blocks' grey and the copy-on-write arrow. Each is at least 3:1 on
// the white it is drawn on (WCAG 2.1, 1.4.11; Okabe and Ito's amber, sky
// blue and yellow were 1.2 to 2.3:1) and each pair stays apart under
// protanopia, deuteranopia and tritanopia (tests/test_colours.c).
extern const char *const KVPAGE_SEQ_COLOURS[];
extern const int KVPAGE_NUM_SEQ_COLOURS;
#define KVPAGE_SHARED "#8c8c8c"
#define KVPAGE_COW "#a33a00"

// Appends one <svg> element to b: the pool p with the sequences seqs (n) on
// it; cow_src (p->num_blocks) the block each block was copied from in the
// step drawn, or -1 (NULL: none).
void kvpage_svg(Buf *b, const KvPool *p, const KvSeq *seqs, int n, const int *cow_src);

#endif
