// The MoE row movements on device memory: the CUDA twins of kernels/cpu/moe_rows.h (same
// arguments plus a stream, same results bit for bit: the per-element arithmetic is
// kernels/cpu/moe_rows_ops.h, compiled for both). Every pointer is device (or managed) memory on
// the current device, index/slot_row and weights included; work is queued on `stream` (a
// cudaStream_t; NULL is the legacy default stream) and the calls return without waiting.
//
// The argument checks are the CPU twin's where the host can make them (dtype, k, NULL buffers);
// the row indices live on the device, so an index beyond the source rows is the caller's to
// avoid (as it is for the CPU twin). NaN payloads aside (the GPU's arithmetic returns its
// canonical NaN where the CPU keeps an operand's), results equal the CPU twin's bit for bit;
// gather_rows moves bits unchanged on both. Throws weft::Error (invalid_argument) for bad
// arguments, (transport) when a launch fails.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/common/dtype.h"

namespace weft::kernels::cuda {

// kernels::gather_rows. One kernel: each thread copies 16, 8, 4 or 2 bytes of a row per step
// (the widest unit dividing the row's bytes and both buffers' alignment).
void gather_rows(void* dst, const void* src, const int64_t* index, size_t n, size_t hidden, DType dtype, void* stream);

// kernels::combine_rows. One kernel, one thread per output element (its k slots in order).
void combine_rows(void* out, const void* rows, const int64_t* slot_row, const float* weights, size_t tokens, int k,
                  size_t hidden, DType dtype, void* stream);

// kernels::scale_gather_rows. One kernel, one thread per output element.
void scale_gather_rows(void* dst, const void* src, const int64_t* index, const float* weight, size_t n, size_t hidden,
                       DType dtype, void* stream);

// kernels::dot_rows. One kernel, one thread per slot: its sum runs over the row in element order,
// one dependent chain, as the result is defined bit for bit.
void dot_rows(float* out, const void* a, const void* rows, const int64_t* slot_row, size_t tokens, int k,
              size_t hidden, DType dtype, void* stream);

}  // namespace weft::kernels::cuda
