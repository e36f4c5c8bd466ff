// The row movements of MoE dispatch and combine (weft/moe.h) on host memory: gathering rows into
// expert-major order, the weighted float32 sum of a token's k slot rows in slot order, the
// weighted scatter of combine's backward and the dot products that give the weights' gradient.
// kernels/cuda/moe_rows.h has the device twins; these define their results bit for bit.
// Rows are `hidden` elements of `dtype` (FLOAT32, BFLOAT16 or FLOAT16), contiguous.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/common/dtype.h"

namespace weft::kernels {

// dst row i = src row index[i] for i in [0, n); index[i] < 0 writes a zero row (padding).
void gather_rows(void* dst, const void* src, const int64_t* index, size_t n, size_t hidden, DType dtype);

// out row t (t in [0, tokens)) = the sum over slots j = 0..k-1 with slot_row[t*k+j] >= 0 of
// w * rows[slot_row[t*k+j]], w = weights[t*k+j] (weights NULL: w = 1), each element accumulated
// in float32 in slot order (acc = acc + w * x, no FMA contraction) from 0, rounded once to dtype
// (round to nearest even); a token with no slot gets zeros.
void combine_rows(void* out, const void* rows, const int64_t* slot_row, const float* weights, size_t tokens, int k,
                  size_t hidden, DType dtype);

// dst row i = round(weight[i] * src row index[i]) (float32 product, rounded once to dtype);
// index[i] < 0 writes a zero row. The backward of a weighted combine on the expert side.
void scale_gather_rows(void* dst, const void* src, const int64_t* index, const float* weight, size_t n, size_t hidden,
                       DType dtype);

// out[t*k+j] = sum over h in order of float(a row t)[h] * float(rows row slot_row[t*k+j])[h] in
// float32 (no FMA contraction), or 0 where slot_row < 0. The weights' gradient of combine.
void dot_rows(float* out, const void* a, const void* rows, const int64_t* slot_row, size_t tokens, int k,
              size_t hidden, DType dtype);

}  // namespace weft::kernels
