// fill and copy on device memory.
#include <cstdint>
#include <cstring>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/fill.h"

namespace weft::kernels::cuda {
namespace {

using namespace detail;

template <class T>
void fill_as(void* dst, const void* value, size_t count, void* stream) {
  T v;
  std::memcpy(&v, value, sizeof(T));  // a kernel argument: taken now
  fill_n(static_cast<T*>(dst), count, v, stream, "fill");
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
  cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) {
    fail(Status::transport, "cuda::copy of %zu bytes failed: %s (%s)", bytes, cudaGetErrorName(err),
         cudaGetErrorString(err));
  }
}

}  // namespace weft::kernels::cuda
