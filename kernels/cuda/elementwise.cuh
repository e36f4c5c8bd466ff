// Private to kernels/cuda: the element-wise kernels (map one input, map two inputs, fill) and
// their launch. Each thread moves 16 bytes per step (the widest load) when every pointer is
// aligned for it, and one element at a time otherwise; a grid-stride loop over a grid sized to
// fill the device keeps the memory system busy at any count. What each element becomes is the
// functor's business (convert_ops.cuh, reduce_ops.cuh, order_key_ops.cuh).
//
// The kernels and the launch also compile with the host compiler (host_device.cuh): there the
// launch queues the whole grid, run thread by thread, on the emulated stream.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <tuple>

#include "core/common/status.h"
#include "kernels/cuda/host_device.cuh"

namespace weft::kernels::cuda::detail {

constexpr int kThreads = 256;

// Blocks for `items` work items: enough to cover them, at most 16 blocks per SM (the grid
// strides over the rest). The SM count is read once per device.
inline unsigned grid_for(size_t items) {
  static std::atomic<int> sms[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) dev = 0;
  int n = sms[dev & 63].load(std::memory_order_relaxed);
  if (n == 0) {
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) n = 16;
    sms[dev & 63].store(n, std::memory_order_relaxed);
  }
  size_t blocks = (items + kThreads - 1) / kThreads;
  size_t cap = static_cast<size_t>(n) * 16;
  if (blocks > cap) blocks = cap;
  return blocks == 0 ? 1u : static_cast<unsigned>(blocks);
}

template <int Bytes> struct Raw;
template <> struct Raw<1> { using type = uint8_t; };
template <> struct Raw<2> { using type = uint16_t; };
template <> struct Raw<4> { using type = uint32_t; };
template <> struct Raw<8> { using type = uint2; };
template <> struct Raw<16> { using type = uint4; };

// K elements of T loaded or stored as one machine word.
template <class T, int K>
union Pack {
  typename Raw<static_cast<int>(sizeof(T)) * K>::type raw;
  T v[K];
};

// Elements per thread and step: 16 bytes of the wider of the two types.
template <class A, class B>
constexpr int vec_width() {
  return 16 / static_cast<int>(sizeof(A) > sizeof(B) ? sizeof(A) : sizeof(B));
}

template <int K>
inline bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % K == 0;
}

// dst[i] = f(src[i]). K = 1 is the unaligned fallback.
template <int K, class Out, class In, class F>
WEFT_KERNEL void map1_kernel(Out* dst, const In* src, size_t n, F f) {
  const size_t stride = threads_in_grid();
  const size_t first = thread_in_grid();
  const size_t nvec = n / K;
  for (size_t i = first; i < nvec; i += stride) {
    Pack<In, K> x;
    x.raw = reinterpret_cast<const decltype(x.raw)*>(src)[i];
    Pack<Out, K> y;
    WEFT_UNROLL
    for (int k = 0; k < K; ++k) y.v[k] = f(x.v[k]);
    reinterpret_cast<decltype(y.raw)*>(dst)[i] = y.raw;
  }
  const size_t tail = nvec * K + first;  // fewer than K elements, one per thread
  if (first < n - nvec * K) dst[tail] = f(src[tail]);
}

// dst[i] = f(a[i], b[i]).
template <int K, class T, class F>
WEFT_KERNEL void map2_kernel(T* dst, const T* a, const T* b, size_t n, F f) {
  const size_t stride = threads_in_grid();
  const size_t first = thread_in_grid();
  const size_t nvec = n / K;
  for (size_t i = first; i < nvec; i += stride) {
    Pack<T, K> x, y, z;
    x.raw = reinterpret_cast<const decltype(x.raw)*>(a)[i];
    y.raw = reinterpret_cast<const decltype(y.raw)*>(b)[i];
    WEFT_UNROLL
    for (int k = 0; k < K; ++k) z.v[k] = f(x.v[k], y.v[k]);
    reinterpret_cast<decltype(z.raw)*>(dst)[i] = z.raw;
  }
  const size_t tail = nvec * K + first;
  if (first < n - nvec * K) dst[tail] = f(a[tail], b[tail]);
}

// dst[i] = value. Stores only (no load of the old contents).
template <int K, class T>
WEFT_KERNEL void fill_kernel(T* dst, size_t n, T value) {
  const size_t stride = threads_in_grid();
  const size_t first = thread_in_grid();
  const size_t nvec = n / K;
  Pack<T, K> p;
  WEFT_UNROLL
  for (int k = 0; k < K; ++k) p.v[k] = value;
  for (size_t i = first; i < nvec; i += stride) reinterpret_cast<decltype(p.raw)*>(dst)[i] = p.raw;
  if (first < n - nvec * K) dst[nvec * K + first] = value;
}

// A kernel's pointer argument and the elements it covers: on the GPU the pointer itself, on
// the host the emulator's view of the same memory (same offset within the page, so the
// alignment the launch chose for the device address holds for the view too).
template <class T>
struct Span {
  T* ptr;
  size_t count;
};

template <class A>
A kernel_arg(A a) {
  return a;
}

#if defined(__CUDACC__)

inline cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

template <class T>
T* kernel_arg(Span<T> s) {
  return s.ptr;
}

// Throws weft::Error naming `what` when the last launch (or any earlier work) failed.
inline void check_launch(const char* what) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    fail(err == cudaErrorMemoryAllocation ? Status::out_of_memory : Status::transport,
         "%s: CUDA kernel launch failed: %s (%s)", what, cudaGetErrorName(err), cudaGetErrorString(err));
  }
}

#else

template <class T>
T* kernel_arg(Span<T> s) {
  return static_cast<T*>(host_view(s.ptr, s.count * sizeof(T)));
}

#endif

// kernel<<<grid_for(items), kThreads, 0, stream>>>(args...), Span arguments passed as pointers.
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), size_t items, void* stream, const char* what, Args... args) {
  const unsigned grid = grid_for(items);
#if defined(__CUDACC__)
  kernel<<<grid, kThreads, 0, as_stream(stream)>>>(kernel_arg(args)...);
  check_launch(what);
#else
  const size_t threads = static_cast<size_t>(grid) * kThreads;
  cudaError_t err = host_enqueue(stream, [=] {
    const auto resolved = std::make_tuple(kernel_arg(args)...);
    for (size_t t = 0; t < threads; ++t) {
      host_thread = {t, threads};
      std::apply(kernel, resolved);
    }
  });
  if (err != cudaSuccess) {
    fail(Status::transport, "%s: CUDA kernel launch failed: %s (%s)", what, cudaGetErrorName(err),
         cudaGetErrorString(err));
  }
#endif
}

template <class Out, class In, class F>
void map1(Out* dst, const In* src, size_t n, F f, void* stream, const char* what) {
  if (n == 0) return;
  constexpr int K = vec_width<Out, In>();
  const Span<Out> d{dst, n};
  const Span<const In> s{src, n};
  if (aligned<sizeof(Out) * K>(dst) && aligned<sizeof(In) * K>(src)) {
    launch(&map1_kernel<K, Out, In, F>, n / K + 1, stream, what, d, s, n, f);
  } else {
    launch(&map1_kernel<1, Out, In, F>, n, stream, what, d, s, n, f);
  }
}

template <class T, class F>
void map2(T* dst, const T* a, const T* b, size_t n, F f, void* stream, const char* what) {
  if (n == 0) return;
  constexpr int K = vec_width<T, T>();
  const Span<T> d{dst, n};
  const Span<const T> x{a, n}, y{b, n};
  if (aligned<sizeof(T) * K>(dst) && aligned<sizeof(T) * K>(a) && aligned<sizeof(T) * K>(b)) {
    launch(&map2_kernel<K, T, F>, n / K + 1, stream, what, d, x, y, n, f);
  } else {
    launch(&map2_kernel<1, T, F>, n, stream, what, d, x, y, n, f);
  }
}

template <class T>
void fill_n(T* dst, size_t n, T value, void* stream, const char* what) {
  if (n == 0) return;
  constexpr int K = vec_width<T, T>();
  const Span<T> d{dst, n};
  if (aligned<sizeof(T) * K>(dst)) {
    launch(&fill_kernel<K, T>, n / K + 1, stream, what, d, n, value);
  } else {
    launch(&fill_kernel<1, T>, n, stream, what, d, n, value);
  }
}

}  // namespace weft::kernels::cuda::detail
