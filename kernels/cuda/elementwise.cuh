// Private to kernels/cuda: element-wise map kernels and their launch. Each thread moves 16
// bytes per step (the widest load) when every pointer is aligned for it, and one element at a
// time otherwise; a grid-stride loop over a grid sized to fill the device keeps the memory
// system busy at any count.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/common/status.h"

namespace weft::kernels::cuda::detail {

inline cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

// Throws weft::Error naming `what` when the last launch (or any earlier work) failed.
inline void check_launch(const char* what) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    fail(err == cudaErrorMemoryAllocation ? Status::out_of_memory : Status::transport,
         "%s: CUDA kernel launch failed: %s (%s)", what, cudaGetErrorName(err), cudaGetErrorString(err));
  }
}

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
__global__ void map1_kernel(Out* dst, const In* src, size_t n, F f) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t nvec = n / K;
  for (size_t i = first; i < nvec; i += stride) {
    Pack<In, K> x;
    x.raw = reinterpret_cast<const decltype(x.raw)*>(src)[i];
    Pack<Out, K> y;
#pragma unroll
    for (int k = 0; k < K; ++k) y.v[k] = f(x.v[k]);
    reinterpret_cast<decltype(y.raw)*>(dst)[i] = y.raw;
  }
  const size_t tail = nvec * K + first;  // fewer than K elements, one per thread
  if (first < n - nvec * K) dst[tail] = f(src[tail]);
}

// dst[i] = f(a[i], b[i]).
template <int K, class T, class F>
__global__ void map2_kernel(T* dst, const T* a, const T* b, size_t n, F f) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t nvec = n / K;
  for (size_t i = first; i < nvec; i += stride) {
    Pack<T, K> x, y, z;
    x.raw = reinterpret_cast<const decltype(x.raw)*>(a)[i];
    y.raw = reinterpret_cast<const decltype(y.raw)*>(b)[i];
#pragma unroll
    for (int k = 0; k < K; ++k) z.v[k] = f(x.v[k], y.v[k]);
    reinterpret_cast<decltype(z.raw)*>(dst)[i] = z.raw;
  }
  const size_t tail = nvec * K + first;
  if (first < n - nvec * K) dst[tail] = f(a[tail], b[tail]);
}

template <class Out, class In, class F>
void map1(Out* dst, const In* src, size_t n, F f, void* stream, const char* what) {
  if (n == 0) return;
  constexpr int K = vec_width<Out, In>();
  if (aligned<sizeof(Out) * K>(dst) && aligned<sizeof(In) * K>(src)) {
    map1_kernel<K><<<grid_for(n / K + 1), kThreads, 0, as_stream(stream)>>>(dst, src, n, f);
  } else {
    map1_kernel<1><<<grid_for(n), kThreads, 0, as_stream(stream)>>>(dst, src, n, f);
  }
  check_launch(what);
}

template <class T, class F>
void map2(T* dst, const T* a, const T* b, size_t n, F f, void* stream, const char* what) {
  if (n == 0) return;
  constexpr int K = vec_width<T, T>();
  if (aligned<sizeof(T) * K>(dst) && aligned<sizeof(T) * K>(a) && aligned<sizeof(T) * K>(b)) {
    map2_kernel<K><<<grid_for(n / K + 1), kThreads, 0, as_stream(stream)>>>(dst, a, b, n, f);
  } else {
    map2_kernel<1><<<grid_for(n), kThreads, 0, as_stream(stream)>>>(dst, a, b, n, f);
  }
  check_launch(what);
}

}  // namespace weft::kernels::cuda::detail
