#include "kernels/cpu/strided_copy.h"

#include <algorithm>
#include <cstring>

namespace weft::kernels {
namespace {

// The view pair after dropping extent-1 dims and merging dims that are contiguous in both.
struct Pair {
  int ndim = 0;
  int64_t shape[kMaxViewDims];
  int64_t ds[kMaxViewDims];
  int64_t ss[kMaxViewDims];
};

Pair simplify(const StridedView& dst, const StridedView& src) {
  Pair p;
  for (int k = 0; k < dst.ndim; ++k) {
    if (dst.shape[k] == 1) continue;
    if (p.ndim > 0) {
      const int last = p.ndim - 1;
      // The previous (outer) dim steps exactly over this one in both views: one dim of both.
      if (p.ds[last] == dst.strides[k] * dst.shape[k] && p.ss[last] == src.strides[k] * dst.shape[k]) {
        p.shape[last] *= dst.shape[k];
        p.ds[last] = dst.strides[k];
        p.ss[last] = src.strides[k];
        continue;
      }
    }
    p.shape[p.ndim] = dst.shape[k];
    p.ds[p.ndim] = dst.strides[k];
    p.ss[p.ndim] = src.strides[k];
    ++p.ndim;
  }
  return p;
}

template <typename T>
void copy_elements(char* d, int64_t ds, const char* s, int64_t ss, int64_t n) {
  T* dp = reinterpret_cast<T*>(d);
  const T* sp = reinterpret_cast<const T*>(s);
  for (int64_t i = 0; i < n; ++i) std::memcpy(dp + i * ds, sp + i * ss, sizeof(T));
}

// The innermost dim: one memcpy when both are contiguous along it, else element by element.
void copy_row(char* d, int64_t ds, const char* s, int64_t ss, int64_t n, size_t elem) {
  if (ds == 1 && ss == 1) {
    std::memcpy(d, s, static_cast<size_t>(n) * elem);
    return;
  }
  switch (elem) {
    case 1: copy_elements<uint8_t>(d, ds, s, ss, n); return;
    case 2: copy_elements<uint16_t>(d, ds, s, ss, n); return;
    case 4: copy_elements<uint32_t>(d, ds, s, ss, n); return;
    case 8: copy_elements<uint64_t>(d, ds, s, ss, n); return;
    default:
      for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * ds * elem, s + i * ss * elem, elem);
  }
}

}  // namespace

int64_t StridedView::numel() const {
  int64_t n = 1;
  for (int k = 0; k < ndim; ++k) n *= shape[k];
  return n;
}

std::pair<uintptr_t, uintptr_t> StridedView::byte_span() const {
  if (numel() == 0 || !base) return {0, 0};
  int64_t last = 0;
  for (int k = 0; k < ndim; ++k) last += (shape[k] - 1) * strides[k];
  const auto lo = reinterpret_cast<uintptr_t>(base);
  return {lo, lo + static_cast<uintptr_t>(last + 1) * elem};
}

StridedView StridedView::contiguous(void* base, size_t elem, int ndim, const int64_t* shape) {
  StridedView v;
  v.base = static_cast<char*>(base);
  v.elem = elem;
  v.ndim = ndim;
  int64_t stride = 1;
  for (int k = ndim - 1; k >= 0; --k) {
    v.shape[k] = shape[k];
    v.strides[k] = stride;
    stride *= shape[k];
  }
  return v;
}

StridedView StridedView::sub(const int64_t* offset, const int64_t* extent) const {
  StridedView v = *this;
  int64_t start = 0;
  for (int k = 0; k < ndim; ++k) {
    start += offset[k] * strides[k];
    v.shape[k] = extent[k];
  }
  if (v.numel() > 0) v.base += start * static_cast<int64_t>(elem);
  return v;
}

void copy_range_out(const StridedView& v, int64_t first, int64_t n, char* dst) {
  if (n <= 0) return;
  const size_t elem = v.elem;
  if (v.ndim == 0) {
    std::memcpy(dst, v.base, elem);
    return;
  }
  // The index of element `first`, then runs along the innermost dim.
  int64_t idx[kMaxViewDims] = {};
  int64_t rest = first;
  for (int k = v.ndim - 1; k >= 0; --k) {
    idx[k] = rest % v.shape[k];
    rest /= v.shape[k];
  }
  const int inner = v.ndim - 1;
  while (n > 0) {
    int64_t at = 0;
    for (int k = 0; k < v.ndim; ++k) at += idx[k] * v.strides[k];
    const int64_t run = std::min(n, v.shape[inner] - idx[inner]);
    copy_row(dst, 1, v.base + at * static_cast<int64_t>(elem), v.strides[inner], run, elem);
    dst += run * static_cast<int64_t>(elem);
    n -= run;
    idx[inner] += run;
    for (int k = inner; k > 0 && idx[k] == v.shape[k]; --k) {
      idx[k] = 0;
      ++idx[k - 1];
    }
  }
}

bool is_contiguous(const StridedView& v) {
  int64_t expect = 1;
  for (int k = v.ndim - 1; k >= 0; --k) {
    if (v.shape[k] != 1 && v.strides[k] != expect) return false;
    expect *= v.shape[k];
  }
  return true;
}

void strided_copy(const StridedView& dst, const StridedView& src) {
  if (dst.numel() == 0) return;
  const Pair p = simplify(dst, src);
  const size_t elem = dst.elem;
  if (p.ndim == 0) {
    std::memcpy(dst.base, src.base, elem);
    return;
  }
  // Odometer over the outer dims; the innermost dim is one copy_row.
  const int inner = p.ndim - 1;
  int64_t idx[kMaxViewDims] = {};
  char* d = dst.base;
  const char* s = src.base;
  const auto e = static_cast<int64_t>(elem);
  for (;;) {
    copy_row(d, p.ds[inner], s, p.ss[inner], p.shape[inner], elem);
    int k = inner - 1;
    for (; k >= 0; --k) {
      d += p.ds[k] * e;
      s += p.ss[k] * e;
      if (++idx[k] < p.shape[k]) break;
      d -= p.ds[k] * p.shape[k] * e;
      s -= p.ss[k] * p.shape[k] * e;
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

}  // namespace weft::kernels
