// The CUDA emulator's own interface, for the code built on top of it: the host-run kernels
// (kernels_on_cpu.cpp, linked into weft in an emulated build) and the stand-in NCCL
// (fake_nccl.cpp). Everything else talks to the emulator through the CUDA runtime API it
// implements (cuda_runtime_api.h, from the real toolkit).
//
// Why an emulator: this project's CI machines have no GPU, yet most of core/device is host
// logic (routing, staging pipelines, events, watchdog, NCCL setup and abort) that a GPU session
// may never get to run. libweft_cuda_emu.so stands in for the CUDA runtime (and
// libweft_fake_nccl.so for NCCL) so that this logic runs under the GPU tests on every CI run.
//
// What it models, strictly where bugs hide:
// - Device memory is not host-accessible: cudaMalloc hands out an address range mapped
//   PROT_NONE, so a host read or write of device memory is a SIGSEGV, as on a real GPU. The
//   emulator itself works on a second mapping of the same pages (host_view()).
//   WEFT_EMU_HOST_VISIBLE_DEVICE_MEMORY=1 maps it read-write instead: the stand-in for a
//   CUDA-enabled UCX (which moves device memory itself), with WEFT_TEST_UCX_CUDA=1.
// - Streams are asynchronous: every stream has a worker thread that runs its work in order,
//   after a delay (WEFT_EMU_OP_DELAY_US, default 100), so host code that reads a result
//   without waiting for the stream reads stale data. Events, cudaStreamWaitEvent and the
//   legacy default stream's implicit ordering are modelled.
// - WEFT_EMU_DEVICES devices (default 1); every process sees the same devices (same UUIDs), as
//   processes on one machine do.
// - Kernels: kernels/cuda's .cu files are compiled by the host compiler (kernels_on_cpu.cpp)
//   and each launch runs its grid, thread by thread, as one piece of work on the stream.
// What it does not model: shared memory and synchronisation inside a kernel (weft's kernels use
// neither), peer access, graphs, timing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>

namespace weft::emu {

// Runs `work` on `stream` after everything enqueued there before (stream 0, cudaStreamLegacy
// and cudaStreamPerThread are the current device's default stream). Returns cudaSuccess or the
// error for a bad stream handle.
cudaError_t enqueue(cudaStream_t stream, std::function<void()> work);

// The emulator-side address of [ptr, ptr + bytes): for device memory the host-accessible alias
// of the same pages, for any other memory ptr itself. Aborts the process with a message when
// the range starts in a device allocation but runs past its end (a kernel would fault).
void* host_view(const void* ptr, size_t bytes);

// True when ptr lies in memory from cudaMalloc/cudaMallocAsync (not managed, not pinned host).
bool is_device_memory(const void* ptr);

// The calling thread's current device (cudaSetDevice), for code that must mimic the runtime.
int current_device();

}  // namespace weft::emu
