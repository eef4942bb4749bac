// tensor — a float32 tensor (shape and data) and PyTorch-style printing.
//
// A Tensor is a row-major block of floats with up to four dimensions. It is
// deliberately plain: the arithmetic lives in ops.c on bare float arrays, and
// a Tensor is what the lessons hand to the trace so that a student sees the
// same shape and the same digits the documents' code prints.
#ifndef KVDEMO_TENSOR_H
#define KVDEMO_TENSOR_H

#include <stddef.h>

#define TENSOR_MAX_DIMS 4

typedef struct {
    int ndim;                      // 0 .. TENSOR_MAX_DIMS
    int shape[TENSOR_MAX_DIMS];    // sizes, outermost first
    float *data;                   // (shape[0], ..., shape[ndim-1]) row-major
    int owns;                      // 1 when tensor_free must free data
} Tensor;

// A zero-filled (rows, cols) tensor; data is NULL when memory ran out.
// A zero-filled tensor of any shape; data is NULL when memory ran out.
Tensor tensor_new(int ndim, const int *shape);
// A tensor that looks at memory owned by someone else.
Tensor tensor_view(float *data, int ndim, const int *shape);
Tensor tensor_view2(float *data, int rows, int cols);
void tensor_free(Tensor *t);

size_t tensor_numel(const Tensor *t);
int tensor_rows(const Tensor *t);   // shape[0], or 1 for a scalar

// How print(t) looks in PyTorch with torch.set_printoptions(precision=...):
// "tensor([[ 0.1400, -0.0100]])", the same width for every element, -inf as
// -inf, scientific notation and integer mode chosen by PyTorch's rules, lines
// wrapped at 80 columns and tensors over 1000 elements summarised with "...".
// When heat is not NULL it is called for every printed element and returns an
// ANSI colour prefix (or "") that is put before the element and reset after
// it. Returns a malloc'd string, or NULL when memory ran out.
typedef const char *(*TensorHeat)(float value, float lo, float hi);
char *tensor_format(const Tensor *t, int precision, TensorHeat heat);
// The same for a screen max_width columns wide (--step, --width): every row
// on one line that fits, its middle columns elided as "  ..." when it would
// not ("tensor([[ 0.1400, -0.0100,  ...,  0.0300]])"). 0: tensor_format.
char *tensor_format_width(const Tensor *t, int precision, TensorHeat heat, int max_width);

#endif
