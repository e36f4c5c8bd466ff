// Element-wise reductions on device memory: the CUDA twins of kernels/cpu/reduce.h, with the
// same rules and results (bit for bit, NaN payloads aside: the GPU's arithmetic returns its
// canonical NaN where the CPU keeps an operand's payload). Work is queued on `stream` (a
// cudaStream_t; NULL is the legacy default stream) and the call returns without waiting.
// Buffers must be device (or managed) memory on the current device.
#pragma once

#include <cstddef>

#include "core/common/dtype.h"

namespace weft::kernels::cuda {

// dst[i] = a[i] op b[i] for i < count. dst may alias a or b exactly (no partial overlap).
// op must not be avg. Integer sum/prod wrap; float min/max propagate NaN; f16/bf16/fp8 are
// computed in float32 per element and rounded once (fp8 saturates), as on the CPU.
void reduce(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op, void* stream);

// buf[i] = buf[i] / n: float division for float types (low precision through float32),
// truncating division for integers. n >= 1.
void divide_by(void* buf, size_t count, DType dtype, int n, void* stream);

}  // namespace weft::kernels::cuda
