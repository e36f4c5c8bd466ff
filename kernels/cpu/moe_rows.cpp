// The MoE row movements on host memory (moe_rows.h). The per-element arithmetic is
// moe_rows_ops.h, which the device twins (kernels/cuda/moe_rows.cu) compile too; here it runs in
// loops over contiguous elements that GCC vectorises at -O3 (combine accumulates a block of a
// token's elements at a time, slot by slot, which is the same float32 sum per element in the same
// order as the device's one-element-per-thread loop over slots).
//
// fp-contract=off, for this file only: a*b+c stays two rounded operations on every target and
// with any -march (GCC fuses them into an FMA wherever the target has one), as nvcc --fmad=false
// keeps them on the GPU: the twins must agree bit for bit.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "kernels/cpu/moe_rows.h"

#include <cstring>
#include <type_traits>

#include "core/common/status.h"
#include "kernels/cpu/codecs.h"
#include "kernels/cpu/float_codecs.h"
#include "kernels/cpu/moe_rows_ops.h"

namespace weft::kernels {

using namespace detail;

namespace detail {

void check_moe_dtype(DType dtype, const char* what) {
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16) {
    fail(Status::invalid_argument, "%s: row dtype %s (%d) is not FLOAT32, BFLOAT16 or FLOAT16", what,
         dtype_valid(static_cast<int>(dtype)) ? dtype_name(dtype) : "invalid", static_cast<int>(dtype));
  }
}

namespace {

// rows * hidden elements of `dtype` must be addressable in bytes.
void check_extent(size_t rows, size_t hidden, DType dtype, const char* what, const char* name) {
  const size_t size = dtype_size(dtype);
  if (hidden != 0 && rows > SIZE_MAX / hidden / size) {
    fail(Status::invalid_argument, "%s: %s of %zu rows of %zu elements overflows the address space", what, name, rows,
         hidden);
  }
}

}  // namespace

void check_moe_rows_gather(const void* dst, const int64_t* index, const float* weight, bool needs_weight, size_t n,
                           size_t hidden, DType dtype, const char* what) {
  check_moe_dtype(dtype, what);
  if (n == 0 || hidden == 0) return;
  check_extent(n, hidden, dtype, what, "dst");
  if (!dst) fail(Status::invalid_argument, "%s: null dst with %zu rows of %zu elements", what, n, hidden);
  if (!index) fail(Status::invalid_argument, "%s: null index with %zu rows", what, n);
  if (needs_weight && !weight) fail(Status::invalid_argument, "%s: null weight with %zu rows", what, n);
}

void check_moe_rows_slots(const void* out, size_t out_elements, const int64_t* slot_row, size_t tokens, int k,
                          size_t hidden, DType dtype, const char* what) {
  check_moe_dtype(dtype, what);
  if (k < 0) fail(Status::invalid_argument, "%s: k = %d slots per token, expected k >= 0", what, k);
  check_extent(tokens, static_cast<size_t>(k), DType::i64, what, "slot_row");
  check_extent(tokens, hidden, dtype, what, "the token rows");
  if (out_elements != 0 && !out) fail(Status::invalid_argument, "%s: null output with %zu elements", what, out_elements);
  if (tokens != 0 && k != 0 && !slot_row) {
    fail(Status::invalid_argument, "%s: null slot_row with %zu tokens of %d slots", what, tokens, k);
  }
}

}  // namespace detail

namespace {

// A host-side index the host can check: a row to read from a NULL source.
void check_rows_present(const void* src, const int64_t* index, size_t n, const char* what, const char* name) {
  if (src) return;
  for (size_t i = 0; i < n; ++i) {
    if (index[i] >= 0) {
      fail(Status::invalid_argument, "%s: %s is NULL but entry %zu selects its row %lld", what, name, i,
           static_cast<long long>(index[i]));
    }
  }
}

// Elements of a token combine accumulates at a time (a float32 buffer on the stack).
constexpr size_t kBlock = 512;

// The loops below take distinct buffers, which __restrict tells the vectoriser; not inlined, so
// that GCC keeps the __restrict (inlined into the callers it versions the loops instead).
template <class C>
__attribute__((noinline)) void accumulate_block(float* __restrict acc, const typename C::Storage* __restrict x, float w,
                                                size_t count) {
  for (size_t h = 0; h < count; ++h) acc[h] = moe_weighted_add(acc[h], w, C::widen(x[h]));
}

template <class C>
__attribute__((noinline)) void narrow_block(typename C::Storage* __restrict out, const float* __restrict acc,
                                            size_t count) {
  for (size_t h = 0; h < count; ++h) out[h] = C::narrow(acc[h]);
}

template <class C>
__attribute__((noinline)) void scale_row(typename C::Storage* __restrict dst, const typename C::Storage* __restrict src,
                                         float w, size_t hidden) {
  for (size_t h = 0; h < hidden; ++h) dst[h] = moe_scaled<C>(w, src[h]);
}

// dot_rows' sums, kChains slots at a time: each slot's sum is its own dependent chain in element
// order (moe_dot_add, exactly as moe_dot_element), but independent chains interleaved keep the
// FPU busy where one chain would wait on each addition's latency. x[c] and y[c] are the rows of
// chain c; unused chains repeat chain 0 and their sums are dropped. Narrow rows are widened a
// block at a time first (a vectorised loop; widening is exact, so the sums are unchanged).
constexpr int kChains = 8;
constexpr size_t kDotBlock = 256;

template <class C>
__attribute__((noinline)) void widen_block(float* __restrict dst, const typename C::Storage* __restrict src,
                                           size_t count) {
  for (size_t h = 0; h < count; ++h) dst[h] = C::widen(src[h]);
}

template <class C>
void dot_chains(float* res, const typename C::Storage* const* x, const typename C::Storage* const* y, size_t hidden) {
  float acc[kChains] = {};
  if constexpr (std::is_same_v<typename C::Storage, float>) {
    for (size_t h = 0; h < hidden; ++h) {
      for (int c = 0; c < kChains; ++c) acc[c] = moe_dot_add(acc[c], x[c][h], y[c][h]);
    }
  } else {
    float xb[kChains][kDotBlock], yb[kChains][kDotBlock];
    for (size_t h0 = 0; h0 < hidden; h0 += kDotBlock) {
      const size_t count = hidden - h0 < kDotBlock ? hidden - h0 : kDotBlock;
      for (int c = 0; c < kChains; ++c) {
        widen_block<C>(xb[c], x[c] + h0, count);
        widen_block<C>(yb[c], y[c] + h0, count);
      }
      for (size_t h = 0; h < count; ++h) {
        for (int c = 0; c < kChains; ++c) acc[c] = moe_dot_add(acc[c], xb[c][h], yb[c][h]);
      }
    }
  }
  for (int c = 0; c < kChains; ++c) res[c] = acc[c];
}

template <class C>
void dot_all(float* out, const typename C::Storage* a, const typename C::Storage* rows, const int64_t* slot_row,
             size_t slots, int k, size_t hidden) {
  const typename C::Storage* x[kChains];
  const typename C::Storage* y[kChains];
  size_t at[kChains];
  float res[kChains];
  int m = 0;
  auto flush = [&] {
    for (int c = m; c < kChains; ++c) {
      x[c] = x[0];
      y[c] = y[0];
    }
    dot_chains<C>(res, x, y, hidden);
    for (int c = 0; c < m; ++c) out[at[c]] = res[c];
    m = 0;
  };
  for (size_t s = 0; s < slots; ++s) {
    const int64_t r = slot_row[s];
    if (r < 0) {
      out[s] = 0.0f;
      continue;
    }
    x[m] = a + s / static_cast<size_t>(k) * hidden;
    y[m] = rows + static_cast<size_t>(r) * hidden;
    at[m] = s;
    if (++m == kChains) flush();
  }
  if (m > 0) flush();
}

template <class C>
void combine_token(typename C::Storage* out, const typename C::Storage* rows, const int64_t* slot_row,
                   const float* weights, size_t t, int k, size_t hidden) {
  const size_t first = t * static_cast<size_t>(k);
  typename C::Storage* o = out + t * hidden;
  float acc[kBlock];
  for (size_t h0 = 0; h0 < hidden; h0 += kBlock) {
    const size_t count = hidden - h0 < kBlock ? hidden - h0 : kBlock;
    std::memset(acc, 0, count * sizeof(float));  // +0.0f
    for (int j = 0; j < k; ++j) {
      const int64_t r = slot_row[first + static_cast<size_t>(j)];
      if (r < 0) continue;
      const float w = weights ? weights[first + static_cast<size_t>(j)] : 1.0f;
      accumulate_block<C>(acc, rows + static_cast<size_t>(r) * hidden + h0, w, count);
    }
    narrow_block<C>(o + h0, acc, count);
  }
}

}  // namespace

void gather_rows(void* dst, const void* src, const int64_t* index, size_t n, size_t hidden, DType dtype) {
  const char* what = "gather_rows";
  check_moe_rows_gather(dst, index, nullptr, false, n, hidden, dtype, what);
  if (n == 0 || hidden == 0) return;
  check_rows_present(src, index, n, what, "src");
  // A pure copy: the bits move unchanged (NaN payloads included), no widening needed.
  const size_t row_bytes = hidden * dtype_size(dtype);
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < n; ++i) {
    if (index[i] < 0) {
      std::memset(d + i * row_bytes, 0, row_bytes);
    } else {
      std::memcpy(d + i * row_bytes, s + static_cast<size_t>(index[i]) * row_bytes, row_bytes);
    }
  }
}

void combine_rows(void* out, const void* rows, const int64_t* slot_row, const float* weights, size_t tokens, int k,
                  size_t hidden, DType dtype) {
  const char* what = "combine_rows";
  check_moe_rows_slots(out, tokens * hidden, slot_row, tokens, k, hidden, dtype, what);
  if (tokens == 0 || hidden == 0) return;
  check_rows_present(rows, slot_row, tokens * static_cast<size_t>(k), what, "rows");
  with_float_codec(dtype, [&](auto codec) {
    using C = decltype(codec);
    auto* o = static_cast<typename C::Storage*>(out);
    const auto* r = static_cast<const typename C::Storage*>(rows);
    for (size_t t = 0; t < tokens; ++t) combine_token<C>(o, r, slot_row, weights, t, k, hidden);
  });
}

void scale_gather_rows(void* dst, const void* src, const int64_t* index, const float* weight, size_t n, size_t hidden,
                       DType dtype) {
  const char* what = "scale_gather_rows";
  check_moe_rows_gather(dst, index, weight, true, n, hidden, dtype, what);
  if (n == 0 || hidden == 0) return;
  check_rows_present(src, index, n, what, "src");
  with_float_codec(dtype, [&](auto codec) {
    using C = decltype(codec);
    auto* d = static_cast<typename C::Storage*>(dst);
    const auto* s = static_cast<const typename C::Storage*>(src);
    for (size_t i = 0; i < n; ++i) {
      if (index[i] < 0) {
        std::memset(d + i * hidden, 0, hidden * sizeof(typename C::Storage));
      } else {
        scale_row<C>(d + i * hidden, s + static_cast<size_t>(index[i]) * hidden, weight[i], hidden);
      }
    }
  });
}

void dot_rows(float* out, const void* a, const void* rows, const int64_t* slot_row, size_t tokens, int k,
              size_t hidden, DType dtype) {
  const char* what = "dot_rows";
  const size_t slots = tokens * static_cast<size_t>(k < 0 ? 0 : k);
  check_moe_rows_slots(out, slots, slot_row, tokens, k, hidden, dtype, what);
  if (slots == 0) return;
  if (hidden != 0) {
    if (!a) fail(Status::invalid_argument, "%s: null a with %zu tokens of %zu elements", what, tokens, hidden);
    check_rows_present(rows, slot_row, slots, what, "rows");
  }
  // One float32 sum in element order per slot: a dependent chain, which no reordering may
  // shorten (the result is defined bit for bit); dot_all runs several chains side by side.
  with_float_codec(dtype, [&](auto codec) {
    using C = decltype(codec);
    dot_all<C>(out, static_cast<const typename C::Storage*>(a), static_cast<const typename C::Storage*>(rows),
               slot_row, slots, k, hidden);
  });
}

}  // namespace weft::kernels
