// fill and copy on device memory.
#include <cstdint>
#include <cstring>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/fill.h"

namespace weft::kernels::cuda {
namespace {

using namespace detail;

// Stores only (no load of the old contents): 16 bytes per thread and step where aligned.
template <int K, class T>
__global__ void fill_kernel(T* dst, size_t n, T value) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t nvec = n / K;
  Pack<T, K> p;
#pragma unroll
  for (int k = 0; k < K; ++k) p.v[k] = value;
  for (size_t i = first; i < nvec; i += stride) reinterpret_cast<decltype(p.raw)*>(dst)[i] = p.raw;
  if (first < n - nvec * K) dst[nvec * K + first] = value;
}

template <class T>
void fill_as(void* dst, const void* value, size_t count, void* stream) {
  T v;
  std::memcpy(&v, value, sizeof(T));
  constexpr int K = vec_width<T, T>();
  T* d = static_cast<T*>(dst);
  if (aligned<sizeof(T) * K>(dst)) {
    fill_kernel<K><<<grid_for(count / K + 1), kThreads, 0, as_stream(stream)>>>(d, count, v);
  } else {
    fill_kernel<1><<<grid_for(count), kThreads, 0, as_stream(stream)>>>(d, count, v);
  }
  check_launch("fill");
}

}  // namespace

void fill(void* dst, size_t elem_bytes, const void* value, size_t count, void* stream) {
  if (count == 0) return;
  if (!dst || !value) fail(Status::invalid_argument, "cuda::fill: null buffer or value with count %zu", count);
  switch (elem_bytes) {
    case 1: return fill_as<uint8_t>(dst, value, count, stream);
    case 2: return fill_as<uint16_t>(dst, value, count, stream);
    case 4: return fill_as<uint32_t>(dst, value, count, stream);
    case 8: return fill_as<uint64_t>(dst, value, count, stream);
    default: break;
  }
  fail(Status::invalid_argument, "cuda::fill: element size %zu is not 1, 2, 4 or 8", elem_bytes);
}

void copy(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0 || dst == src) return;
  if (!dst || !src) fail(Status::invalid_argument, "cuda::copy: null buffer with %zu bytes", bytes);
  cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(stream));
  if (err != cudaSuccess) {
    fail(Status::transport, "cuda::copy of %zu bytes failed: %s (%s)", bytes, cudaGetErrorName(err),
         cudaGetErrorString(err));
  }
}

}  // namespace weft::kernels::cuda
