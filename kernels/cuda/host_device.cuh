// Private to kernels/cuda: what lets one source be both GPU code and host code. nvcc compiles
// kernels/cuda for the GPU; the CUDA-emulated test build (tests/cuda_emulator/kernels_on_cpu.cpp)
// compiles the very same .cu files with the host compiler and runs every kernel there, one grid
// thread after another, so the tests without a GPU execute the arithmetic the GPU would.
//
// For that the kernels use only what is defined here instead of CUDA's keywords and built-in
// variables: WEFT_KERNEL for __global__, WEFT_HD (kernels/cpu/minifloat.h) for
// __host__ __device__, WEFT_UNROLL for #pragma unroll, and thread_in_grid()/threads_in_grid()
// for blockIdx/blockDim/threadIdx/gridDim. The kernels share no memory and never synchronise,
// which is what makes running their threads in turn equivalent to running them at once.
#pragma once

#include <cstddef>
#include <functional>

#include "kernels/cpu/minifloat.h"

#if defined(__CUDACC__)

#include <cuda_runtime.h>

#define WEFT_KERNEL __global__
#define WEFT_UNROLL _Pragma("unroll")

namespace weft::kernels::cuda::detail {

__device__ inline size_t thread_in_grid() { return static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline size_t threads_in_grid() { return static_cast<size_t>(gridDim.x) * blockDim.x; }

}  // namespace weft::kernels::cuda::detail

#else  // the host compiler: the emulated build

#include <cuda_runtime_api.h>

#define WEFT_KERNEL
#define WEFT_UNROLL

namespace weft::kernels::cuda::detail {

// The grid thread a host-run kernel is executing as; set by the launch before each call.
struct HostThread {
  size_t index = 0;
  size_t count = 1;
};
inline thread_local HostThread host_thread;

inline size_t thread_in_grid() { return host_thread.index; }
inline size_t threads_in_grid() { return host_thread.count; }

// Provided by the emulated build (tests/cuda_emulator/kernels_on_cpu.cpp): queue `work` on
// `stream` as a kernel launch would be, and the host-accessible address of [ptr, ptr + bytes)
// (device memory cannot be touched by the host directly, as on a GPU).
cudaError_t host_enqueue(void* stream, std::function<void()> work);
void* host_view(const void* ptr, size_t bytes);

}  // namespace weft::kernels::cuda::detail

#endif
