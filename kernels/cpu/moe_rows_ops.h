// Private to kernels/: the per-element arithmetic of the MoE row kernels (moe_rows.h), shared by
// the host loops (moe_rows.cpp) and the device kernels (kernels/cuda/moe_rows.cu, compiled as
// __host__ __device__ through WEFT_HD), so that the two twins agree bit for bit. Both compile it
// without contraction of a*b+c into a fused multiply-add (nvcc --fmad=false; moe_rows.cpp says
// how on the host): every product and every sum below is its own float32 rounding.
//
// A codec C is a struct with a Storage type and static widen (Storage -> float32, exact) and
// narrow (float32 -> Storage, round to nearest even): the host's in moe_rows.cpp, the device's
// Codec<D> in kernels/cuda/float_bits.cuh; both are kernels/cpu/codecs.h, so they round alike.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/common/dtype.h"
#include "kernels/cpu/minifloat.h"

namespace weft::kernels::detail {

// One slot's term of combine's float32 sum: acc + (w * x), two roundings.
WEFT_HD inline float moe_weighted_add(float acc, float w, float x) { return acc + w * x; }

// One step of dot_rows' float32 sum: acc + (a * b), two roundings.
WEFT_HD inline float moe_dot_add(float acc, float a, float b) { return acc + a * b; }

// One element of scale_gather_rows: the float32 product, rounded once to the row dtype.
template <class C>
WEFT_HD inline typename C::Storage moe_scaled(float w, typename C::Storage x) {
  return C::narrow(w * C::widen(x));
}

// Element h of combine's output row t: the slots' terms in slot order from +0, rounded once.
// The host computes the same sums a block of elements at a time (moe_rows.cpp), in this order.
template <class C>
WEFT_HD inline typename C::Storage moe_combine_element(const typename C::Storage* rows, const int64_t* slot_row,
                                                       const float* weights, size_t t, int k, size_t hidden,
                                                       size_t h) {
  float acc = 0.0f;
  const size_t first = t * static_cast<size_t>(k);
  for (int j = 0; j < k; ++j) {
    const int64_t r = slot_row[first + static_cast<size_t>(j)];
    if (r < 0) continue;
    const float w = weights ? weights[first + static_cast<size_t>(j)] : 1.0f;
    acc = moe_weighted_add(acc, w, C::widen(rows[static_cast<size_t>(r) * hidden + h]));
  }
  return C::narrow(acc);
}

// dot_rows' output for slot s = t*k + j: the products in element order from +0 (0 for a slot
// with no row).
template <class C>
WEFT_HD inline float moe_dot_element(const typename C::Storage* a, const typename C::Storage* rows,
                                     const int64_t* slot_row, size_t s, int k, size_t hidden) {
  const int64_t r = slot_row[s];
  if (r < 0) return 0.0f;
  const typename C::Storage* x = a + (s / static_cast<size_t>(k)) * hidden;
  const typename C::Storage* y = rows + static_cast<size_t>(r) * hidden;
  float acc = 0.0f;
  for (size_t h = 0; h < hidden; ++h) acc = moe_dot_add(acc, C::widen(x[h]), C::widen(y[h]));
  return acc;
}

// Host only (moe_rows.cpp): the argument checks both twins make, throwing weft::Error
// (invalid_argument) with `what` (the entry point) in the message. A check looks only at what
// the host can see: the dtype, k, and whether a pointer the call would read or write is NULL
// (device arrays' contents, such as out-of-range row indices, are the caller's business).
void check_moe_dtype(DType dtype, const char* what);
// gather_rows and scale_gather_rows (needs_weight for the latter). src is not checked: it may be
// NULL when every index is negative (a rank that received no rows).
void check_moe_rows_gather(const void* dst, const int64_t* index, const float* weight, bool needs_weight, size_t n,
                           size_t hidden, DType dtype, const char* what);
// combine_rows and dot_rows: out has out_elements elements to write (tokens*hidden for combine,
// tokens*k for dot_rows). rows is not checked, for the same reason as src above.
void check_moe_rows_slots(const void* out, size_t out_elements, const int64_t* slot_row, size_t tokens, int k,
                          size_t hidden, DType dtype, const char* what);

}  // namespace weft::kernels::detail
