// Element-wise reduction kernels on host memory.
#pragma once

#include <cstddef>

#include "core/common/dtype.h"

namespace weft::kernels {

// dst[i] = a[i] op b[i] for i < count. dst may alias a or b exactly (no partial overlap).
// op must not be avg: avg is sum followed by divide_by(). Integer sum/prod wrap modulo 2^bits.
// Float min/max propagate NaN. Low-precision floats (f16, bf16, fp8) are computed per element
// in float32 and rounded once per call (collectives instead widen whole buffers to f32 first,
// see weft.h's reduction rules; this path serves references and small local reductions).
void reduce(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op);

// buf[i] = buf[i] / n: float division for float types, truncating division for integers.
void divide_by(void* buf, size_t count, DType dtype, int n);

}  // namespace weft::kernels
