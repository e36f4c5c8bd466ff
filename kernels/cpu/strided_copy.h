// Copies between strided n-d views of host memory: packing a box of a tensor into a contiguous
// buffer, unpacking it, and copying between two tensors' boxes (weft/mesh.h accepts any
// non-contiguous local view wherever a tensor is read or written).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace weft::kernels {

constexpr int kMaxViewDims = 8;

// Element (i0..in-1) is at base + sum(i_k * strides[k]) * elem bytes. Strides are in elements.
struct StridedView {
  char* base = nullptr;
  size_t elem = 1;
  int ndim = 0;
  int64_t shape[kMaxViewDims] = {};
  int64_t strides[kMaxViewDims] = {};

  int64_t numel() const;
  // The bytes the view spans, [lo, hi) as addresses ({0, 0} when it holds no element): what
  // overlap checks and memory routing look at.
  std::pair<uintptr_t, uintptr_t> byte_span() const;
  // A contiguous row-major view of `shape` at base.
  static StridedView contiguous(void* base, size_t elem, int ndim, const int64_t* shape);
  // The part starting at index `offset` with extent `extent` (both ndim values).
  StridedView sub(const int64_t* offset, const int64_t* extent) const;
};

// dst[i] = src[i] for every index of the common shape (dst and src have equal ndim and shape and
// do not overlap). Dims of extent 1 are dropped and dims that are contiguous in both views are
// merged, so a copy whose innermost run is contiguous is a loop of memcpy calls.
void strided_copy(const StridedView& dst, const StridedView& src);

// Copies elements [first, first + n) of v, counted in row-major order, to the contiguous dst:
// a piece of v's packed form without packing the rest (shared-memory collectives copy a view
// chunk by chunk straight into their segment).
void copy_range_out(const StridedView& v, int64_t first, int64_t n, char* dst);

// True when the view's elements are one contiguous row-major run.
bool is_contiguous(const StridedView& v);

}  // namespace weft::kernels
