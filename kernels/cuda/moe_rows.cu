// Device MoE row movements (moe_rows.h): the dispatch and the launches. What each element
// computes is kernels/cpu/moe_rows_ops.h, the CPU twin's own code compiled for the device.
#include <cstdint>

#include "kernels/cpu/moe_rows_ops.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/float_bits.cuh"
#include "kernels/cuda/moe_rows.h"

namespace weft::kernels::cuda {
namespace {

using namespace detail;
namespace ops = kernels::detail;

// Source rows are addressed through device-side indices the host never reads, so their extent is
// unknown here: the span covers none of them, which in the emulated build maps the pointer to the
// emulator's view of its allocation (the whole allocation is mapped behind it); on a GPU a span
// is its pointer.
template <class T>
Span<const T> source_rows(const void* p) {
  return Span<const T>{static_cast<const T*>(p), 0};
}

// dst unit e = unit e % units of source row index[e / units] (zero for a negative index). U is a
// raw unit of 1 to 16 bytes; the copy moves bits unchanged.
template <class U>
WEFT_KERNEL void gather_kernel(U* dst, const U* src, const int64_t* index, size_t n, size_t units) {
  const size_t stride = threads_in_grid();
  const size_t total = n * units;
  for (size_t e = thread_in_grid(); e < total; e += stride) {
    const int64_t r = index[e / units];
    U v{};
    if (r >= 0) v = src[static_cast<size_t>(r) * units + e % units];
    dst[e] = v;
  }
}

template <class C>
WEFT_KERNEL void combine_kernel(typename C::Storage* out, const typename C::Storage* rows, const int64_t* slot_row,
                                const float* weights, size_t tokens, int k, size_t hidden) {
  const size_t stride = threads_in_grid();
  const size_t total = tokens * hidden;
  for (size_t e = thread_in_grid(); e < total; e += stride) {
    out[e] = ops::moe_combine_element<C>(rows, slot_row, weights, e / hidden, k, hidden, e % hidden);
  }
}

template <class C>
WEFT_KERNEL void scale_gather_kernel(typename C::Storage* dst, const typename C::Storage* src, const int64_t* index,
                                     const float* weight, size_t n, size_t hidden) {
  const size_t stride = threads_in_grid();
  const size_t total = n * hidden;
  for (size_t e = thread_in_grid(); e < total; e += stride) {
    const size_t i = e / hidden;
    const int64_t r = index[i];
    typename C::Storage v{};  // zero bits: +0 in every row dtype, as the CPU twin's memset
    if (r >= 0) v = ops::moe_scaled<C>(weight[i], src[static_cast<size_t>(r) * hidden + e % hidden]);
    dst[e] = v;
  }
}

template <class C>
WEFT_KERNEL void dot_kernel(float* out, const typename C::Storage* a, const typename C::Storage* rows,
                            const int64_t* slot_row, size_t slots, int k, size_t hidden) {
  const size_t stride = threads_in_grid();
  for (size_t s = thread_in_grid(); s < slots; s += stride) {
    out[s] = ops::moe_dot_element<C>(a, rows, slot_row, s, k, hidden);
  }
}

// The row dtypes (check_moe_dtype lets no other by).
template <class Fn>
void with_row_codec(DType d, Fn&& fn) {
  switch (d) {
    case DType::bf16: return fn(Codec<DType::bf16>{});
    case DType::f16: return fn(Codec<DType::f16>{});
    default: return fn(Codec<DType::f32>{});
  }
}

template <class U>
void launch_gather(void* dst, const void* src, const int64_t* index, size_t n, size_t row_bytes, void* stream,
                   const char* what) {
  const size_t units = row_bytes / sizeof(U);
  const Span<U> d{static_cast<U*>(dst), n * units};
  const Span<const int64_t> idx{index, n};
  launch(&gather_kernel<U>, n * units, stream, what, d, source_rows<U>(src), idx, n, units);
}

// The widest unit (16 bytes down to 1) that divides a row and aligns both buffers.
bool unit_fits(size_t unit, const void* dst, const void* src, size_t row_bytes) {
  return row_bytes % unit == 0 && reinterpret_cast<uintptr_t>(dst) % unit == 0 &&
         reinterpret_cast<uintptr_t>(src) % unit == 0;
}

}  // namespace

void gather_rows(void* dst, const void* src, const int64_t* index, size_t n, size_t hidden, DType dtype, void* stream) {
  const char* what = "cuda::gather_rows";
  ops::check_moe_rows_gather(dst, index, nullptr, false, n, hidden, dtype, what);
  if (n == 0 || hidden == 0) return;
  const size_t row_bytes = hidden * dtype_size(dtype);
  if (unit_fits(16, dst, src, row_bytes)) return launch_gather<uint4>(dst, src, index, n, row_bytes, stream, what);
  if (unit_fits(8, dst, src, row_bytes)) return launch_gather<uint2>(dst, src, index, n, row_bytes, stream, what);
  if (unit_fits(4, dst, src, row_bytes)) return launch_gather<uint32_t>(dst, src, index, n, row_bytes, stream, what);
  if (unit_fits(2, dst, src, row_bytes)) return launch_gather<uint16_t>(dst, src, index, n, row_bytes, stream, what);
  launch_gather<uint8_t>(dst, src, index, n, row_bytes, stream, what);
}

void combine_rows(void* out, const void* rows, const int64_t* slot_row, const float* weights, size_t tokens, int k,
                  size_t hidden, DType dtype, void* stream) {
  const char* what = "cuda::combine_rows";
  ops::check_moe_rows_slots(out, tokens * hidden, slot_row, tokens, k, hidden, dtype, what);
  if (tokens == 0 || hidden == 0) return;
  const size_t slots = tokens * static_cast<size_t>(k);
  with_row_codec(dtype, [&](auto codec) {
    using C = decltype(codec);
    using S = typename C::Storage;
    const Span<S> o{static_cast<S*>(out), tokens * hidden};
    const Span<const int64_t> sr{slot_row, slots};
    const Span<const float> w{weights, weights ? slots : 0};
    launch(&combine_kernel<C>, tokens * hidden, stream, what, o, source_rows<S>(rows), sr, w, tokens, k, hidden);
  });
}

void scale_gather_rows(void* dst, const void* src, const int64_t* index, const float* weight, size_t n, size_t hidden,
                       DType dtype, void* stream) {
  const char* what = "cuda::scale_gather_rows";
  ops::check_moe_rows_gather(dst, index, weight, true, n, hidden, dtype, what);
  if (n == 0 || hidden == 0) return;
  with_row_codec(dtype, [&](auto codec) {
    using C = decltype(codec);
    using S = typename C::Storage;
    const Span<S> d{static_cast<S*>(dst), n * hidden};
    const Span<const int64_t> idx{index, n};
    const Span<const float> w{weight, n};
    launch(&scale_gather_kernel<C>, n * hidden, stream, what, d, source_rows<S>(src), idx, w, n, hidden);
  });
}

void dot_rows(float* out, const void* a, const void* rows, const int64_t* slot_row, size_t tokens, int k,
              size_t hidden, DType dtype, void* stream) {
  const char* what = "cuda::dot_rows";
  const size_t slots = tokens * static_cast<size_t>(k < 0 ? 0 : k);
  ops::check_moe_rows_slots(out, slots, slot_row, tokens, k, hidden, dtype, what);
  if (slots == 0) return;
  if (hidden != 0 && !a) fail(Status::invalid_argument, "%s: null a with %zu tokens of %zu elements", what, tokens, hidden);
  with_row_codec(dtype, [&](auto codec) {
    using C = decltype(codec);
    using S = typename C::Storage;
    const Span<float> o{out, slots};
    const Span<const S> x{static_cast<const S*>(a), hidden != 0 ? tokens * hidden : 0};
    const Span<const int64_t> sr{slot_row, slots};
    launch(&dot_kernel<C>, slots, stream, what, o, x, source_rows<S>(rows), sr, slots, k, hidden);
  });
}

}  // namespace weft::kernels::cuda
