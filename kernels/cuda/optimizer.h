// The optimizer step and gradient statistics on device memory: the CUDA twins of
// kernels/cpu/optimizer.h (same arguments, same results bit for bit: the per-element arithmetic
// and the summation order are kernels/cpu/optimizer_ops.h, compiled for both). Work is queued
// on `stream` (a cudaStream_t; NULL is the legacy default stream) and the calls return without
// waiting. Buffers must be device (or managed) memory on the current device.
#pragma once

#include <cstddef>

#include "kernels/cpu/optimizer.h"

namespace weft::kernels::cuda {

// kernels::optimizer_step on device buffers: same contract, same checks (weft::Error,
// invalid_argument), and the same float32 results as the CPU twin, bit for bit (NaN payloads
// aside: the GPU's arithmetic returns its canonical NaN where the CPU keeps an operand's).
// One kernel, one pass over the buffers. Throws (transport) when the launch fails.
void optimizer_step(const OptimizerStep& s, float* master, const void* grad, DType grad_dtype, float* state1,
                    float* state2, void* param_out, DType param_dtype, size_t n, void* stream);

// Bytes of device workspace grad_stats uses for n elements (0 for n == 0): one double per 256
// elements and a little more (optimizer_ops.h's partial sums).
size_t grad_stats_workspace_bytes(size_t n);

// kernels::grad_stats on a device buffer: *out_sum (device) receives the sum of squares and
// *out_nonfinite (device) 1 when it is inf or NaN, else 0. The sum is the CPU twin's bit for bit
// (the same fixed blocked order; no atomics, so also the same from run to run).
// workspace: grad_stats_workspace_bytes(n) bytes of device memory the call may use until its
// work on `stream` is done (8-byte aligned), or NULL: then the call allocates and frees them in
// stream order (cudaMallocAsync / cudaFreeAsync on the device's default pool).
// Kernels: one thread per (tile, lane) partial sum, then one per group at each level above, then
// one thread for the last group. Throws weft::Error (invalid_argument) for an unsupported dtype
// or a null buffer, (out_of_memory) when the workspace cannot be allocated, (transport) when a
// launch fails.
void grad_stats(const void* grad, DType dtype, size_t n, float scale, double* out_sum, int* out_nonfinite,
                void* stream, void* workspace = nullptr);

}  // namespace weft::kernels::cuda
