// Float MIN/MAX through integer reductions. NCCL's float min/max drop NaN operands, but weft.h
// says a NaN operand yields NaN (and kernels/cpu orders -0 below +0). Mapping each float to an
// unsigned key whose integer order is that total order, reducing the keys with an unsigned
// integer MIN/MAX, and mapping back gives exactly weft's result: min/max pick an operand, so
// no rounding is involved. NaNs are first made the extreme key for the op (the smallest for
// MIN, the largest for MAX) so that they always win; the NaN that comes back is canonical.
//
// Keys are uint32 for float32 and the narrow types (which go through their float32 value) and
// uint64 for float64. Queued on `stream`; dst may equal src when the sizes match.
#pragma once

#include <cstddef>

#include "core/common/dtype.h"

namespace weft::kernels::cuda {

// Bytes per key for a float dtype: 8 for f64, else 4.
constexpr size_t order_key_size(DType dtype) { return dtype == DType::f64 ? 8 : 4; }

// dst (keys) from src (dtype, a float type); op is min or max.
void to_order_key(void* dst, const void* src, DType dtype, size_t count, ReduceOp op, void* stream);
// dst (dtype) from keys made by to_order_key.
void from_order_key(void* dst, DType dtype, const void* src, size_t count, void* stream);

}  // namespace weft::kernels::cuda
