// Strided copies and zero fills on device memory (strided_copy.h): the views are turned into
// one geometry in bytes, simplified, and moved in the widest word it allows.
#include <cstdint>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/fill.h"
#include "kernels/cuda/strided_copy.h"

namespace weft::kernels::cuda {
namespace {

using namespace detail;

// A view's dims plus one: the bytes of an element become the innermost dim.
constexpr int kStridedDims = kMaxViewDims + 1;

// A copy as the host plans it and the kernel runs it: `ndim` dims, outermost first, with their
// extents and the two views' strides (in bytes while planning, in words for the kernel).
struct StridedGeom {
  int ndim = 0;
  int64_t shape[kStridedDims] = {};
  int64_t ds[kStridedDims] = {};
  int64_t ss[kStridedDims] = {};
};

// dst[offset(i)] = src[offset(i)] (or zero) for the n words of the geometry, in a grid-stride
// loop; the innermost dim varies fastest, so neighbouring threads touch neighbouring words of
// a contiguous run. The index loop is unrolled over the fixed maximum so that the geometry's
// arrays are indexed by constants (kept in registers, not local memory).
template <class W, class Index, bool Zero>
WEFT_KERNEL void strided_kernel(W* dst, const W* src, StridedGeom g, Index n) {
  const auto stride = static_cast<Index>(threads_in_grid());
  for (auto i = static_cast<Index>(thread_in_grid()); i < n; i += stride) {
    Index rest = i;
    int64_t d = 0, s = 0;
    WEFT_UNROLL
    for (int k = kStridedDims - 1; k > 0; --k) {
      if (k >= g.ndim) continue;
      const auto ext = static_cast<Index>(g.shape[k]);
      const Index at = rest % ext;
      rest /= ext;
      d += static_cast<int64_t>(at) * g.ds[k];
      s += static_cast<int64_t>(at) * g.ss[k];
    }
    d += static_cast<int64_t>(rest) * g.ds[0];
    if constexpr (Zero) {
      dst[d] = W{};
    } else {
      s += static_cast<int64_t>(rest) * g.ss[0];
      dst[d] = src[s];
    }
  }
}

void check_strided_view(const StridedView& v, const char* what, const char* name) {
  if (v.ndim < 0 || v.ndim > kMaxViewDims) {
    fail(Status::invalid_argument, "%s: %s has %d dims (0..%d)", what, name, v.ndim, kMaxViewDims);
  }
  if (v.elem == 0) fail(Status::invalid_argument, "%s: %s has elements of 0 bytes", what, name);
  for (int k = 0; k < v.ndim; ++k) {
    if (v.shape[k] < 0) {
      fail(Status::invalid_argument, "%s: %s->shape[%d] is %lld", what, name, k, static_cast<long long>(v.shape[k]));
    }
    if (v.shape[k] > 1 && v.strides[k] < 0) {
      fail(Status::invalid_argument, "%s: %s->strides[%d] is %lld; strides are >= 0", what, name, k,
           static_cast<long long>(v.strides[k]));
    }
  }
}

// The pair in bytes: dims of extent 1 dropped, the element's bytes appended as the innermost
// dim (strides 1), dims that step exactly over their inner neighbour in both views merged
// (as kernels/cpu's strided_copy simplifies, one level finer).
StridedGeom byte_geometry(const StridedView& dst, const StridedView& src) {
  StridedGeom g;
  auto push = [&g](int64_t n, int64_t ds, int64_t ss) {
    if (g.ndim > 0) {
      const int last = g.ndim - 1;
      if (g.ds[last] == ds * n && g.ss[last] == ss * n) {
        g.shape[last] *= n;
        g.ds[last] = ds;
        g.ss[last] = ss;
        return;
      }
    }
    g.shape[g.ndim] = n;
    g.ds[g.ndim] = ds;
    g.ss[g.ndim] = ss;
    ++g.ndim;
  };
  const auto e = static_cast<int64_t>(dst.elem);
  for (int k = 0; k < dst.ndim; ++k) {
    if (dst.shape[k] != 1) push(dst.shape[k], dst.strides[k] * e, src.strides[k] * e);
  }
  push(e, 1, 1);
  return g;
}

// The widest word (16, 8, 4, 2, 1 bytes) that divides the innermost run (contiguous in both
// views: strides 1), every outer stride and both base addresses.
size_t word_for(const StridedGeom& g, const char* dst, const char* src) {
  const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  for (size_t w = 16; w > 1; w /= 2) {
    const auto wi = static_cast<int64_t>(w);
    bool ok = d % w == 0 && s % w == 0 && g.shape[g.ndim - 1] % wi == 0;
    for (int k = 0; ok && k + 1 < g.ndim; ++k) ok = g.ds[k] % wi == 0 && g.ss[k] % wi == 0;
    if (ok) return w;
  }
  return 1;
}

// The byte geometry in words of w bytes; an innermost dim of one word is dropped.
StridedGeom in_words(StridedGeom g, size_t w) {
  const auto wi = static_cast<int64_t>(w);
  const int last = g.ndim - 1;
  g.shape[last] /= wi;
  for (int k = 0; k < last; ++k) {
    g.ds[k] /= wi;
    g.ss[k] /= wi;
  }
  if (g.shape[last] == 1 && g.ndim > 1) {
    g.ds[last] = g.ss[last] = 0;
    g.shape[last] = 0;
    --g.ndim;
  }
  return g;
}

// Launches the copy (src != NULL) or the zero fill of a word geometry. The spans (from each
// base to the end of its view's last word) are what the emulated build checks and maps.
template <class W>
void strided_launch(const StridedGeom& g, char* dst, const char* src, void* stream, const char* what) {
  size_t n = 1;
  int64_t dspan = 1, sspan = 1;
  for (int k = 0; k < g.ndim; ++k) {
    n *= static_cast<size_t>(g.shape[k]);
    dspan += (g.shape[k] - 1) * g.ds[k];
    sspan += (g.shape[k] - 1) * g.ss[k];
  }
  const Span<W> d{reinterpret_cast<W*>(dst), static_cast<size_t>(dspan)};
  // 32-bit index arithmetic (the kernel's divisions) while i + the grid's stride cannot wrap.
  const bool narrow = n < (size_t{1} << 31);
  if (src) {
    const Span<const W> s{reinterpret_cast<const W*>(src), static_cast<size_t>(sspan)};
    if (narrow) return launch(&strided_kernel<W, uint32_t, false>, n, stream, what, d, s, g, static_cast<uint32_t>(n));
    return launch(&strided_kernel<W, uint64_t, false>, n, stream, what, d, s, g, static_cast<uint64_t>(n));
  }
  const W* none = nullptr;
  if (narrow) return launch(&strided_kernel<W, uint32_t, true>, n, stream, what, d, none, g, static_cast<uint32_t>(n));
  launch(&strided_kernel<W, uint64_t, true>, n, stream, what, d, none, g, static_cast<uint64_t>(n));
}

void strided_run(const StridedGeom& bytes, char* dst, const char* src, void* stream, const char* what) {
  const size_t w = word_for(bytes, dst, src ? src : dst);
  const StridedGeom g = in_words(bytes, w);
  switch (w) {
    case 16: return strided_launch<uint4>(g, dst, src, stream, what);
    case 8: return strided_launch<uint64_t>(g, dst, src, stream, what);
    case 4: return strided_launch<uint32_t>(g, dst, src, stream, what);
    case 2: return strided_launch<uint16_t>(g, dst, src, stream, what);
    default: return strided_launch<uint8_t>(g, dst, src, stream, what);
  }
}

}  // namespace

void strided_copy(const StridedView& dst, const StridedView& src, void* stream) {
  const char* what = "cuda::strided_copy";
  check_strided_view(dst, what, "dst");
  check_strided_view(src, what, "src");
  if (dst.ndim != src.ndim || dst.elem != src.elem) {
    fail(Status::invalid_argument, "%s: dst has %d dims of %zu-byte elements but src has %d of %zu bytes", what,
         dst.ndim, dst.elem, src.ndim, src.elem);
  }
  for (int k = 0; k < dst.ndim; ++k) {
    if (dst.shape[k] != src.shape[k]) {
      fail(Status::invalid_argument, "%s: dst->shape[%d] is %lld but src->shape[%d] is %lld", what, k,
           static_cast<long long>(dst.shape[k]), k, static_cast<long long>(src.shape[k]));
    }
  }
  if (dst.numel() == 0) return;
  if (!dst.base || !src.base) fail(Status::invalid_argument, "%s: null view base with %lld elements", what,
                                   static_cast<long long>(dst.numel()));
  const StridedGeom g = byte_geometry(dst, src);
  // Both views one contiguous run (g.ds[0] == g.ss[0] == 1 after merging): the copy engine.
  if (g.ndim == 1) return copy(dst.base, src.base, static_cast<size_t>(g.shape[0]), stream);
  strided_run(g, dst.base, src.base, stream, what);
}

void strided_zero(const StridedView& dst, void* stream) {
  const char* what = "cuda::strided_zero";
  check_strided_view(dst, what, "dst");
  if (dst.numel() == 0) return;
  if (!dst.base) fail(Status::invalid_argument, "%s: null view base with %lld elements", what,
                      static_cast<long long>(dst.numel()));
  const StridedGeom g = byte_geometry(dst, dst);
  if (g.ndim == 1) {
    const cudaError_t err =
        cudaMemsetAsync(dst.base, 0, static_cast<size_t>(g.shape[0]), static_cast<cudaStream_t>(stream));
    if (err != cudaSuccess) {
      fail(Status::transport, "%s of %lld bytes failed: %s (%s)", what, static_cast<long long>(g.shape[0]),
           cudaGetErrorName(err), cudaGetErrorString(err));
    }
    return;
  }
  strided_run(g, dst.base, nullptr, stream, what);
}

}  // namespace weft::kernels::cuda
