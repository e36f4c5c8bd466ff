// kernels/cuda in a CUDA-emulated build: the product's .cu files themselves, compiled by the
// host compiler (kernels/cuda/host_device.cuh says how one source serves both), so the entry
// points, their argument checks and dtype dispatch, and every kernel with its per-element
// functors run here exactly as written for the GPU. Each launch queues the whole grid on the
// emulated stream, where it runs one grid thread after another over the emulator's view of
// device memory. Nothing here computes a result of its own, and kernels/cpu (the CPU twins) is
// not called: a wrong device kernel gives a wrong device result in the emulated tests.
//
// What only a GPU can check: the conversion instructions float_bits.cuh uses in device code
// (host-compiled, the software codecs run instead), and timing (scripts/gpu-check).
#include <functional>
#include <utility>

#include "tests/cuda_emulator/emulator.h"

// One translation unit for the eight: their file-local helpers have distinct names.
#include "kernels/cuda/convert.cu"
#include "kernels/cuda/fill.cu"
#include "kernels/cuda/moe_router.cu"
#include "kernels/cuda/moe_rows.cu"
#include "kernels/cuda/optimizer.cu"
#include "kernels/cuda/order_key.cu"
#include "kernels/cuda/reduce.cu"
#include "kernels/cuda/strided_copy.cu"

namespace weft::kernels::cuda::detail {

cudaError_t host_enqueue(void* stream, std::function<void()> work) {
  return emu::enqueue(static_cast<cudaStream_t>(stream), std::move(work));
}

void* host_view(const void* ptr, size_t bytes) { return emu::host_view(ptr, bytes); }

}  // namespace weft::kernels::cuda::detail
