// Low-precision floats (f16, bf16, fp8) reduce in float32 with one final rounding (weft.h
// "Reduction rules"): the entry points widen the input into scratch slot 0, run the float32
// algorithm there, and narrow the result once.
#pragma once

#include <cstddef>

#include "core/comm/comm.h"
#include "core/common/dtype.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/reduce.h"

namespace weft::coll {

inline float* widened_copy(Comm& comm, const void* src, size_t count, DType dtype) {
  float* work = static_cast<float*>(comm.scratch().get(0, count * sizeof(float)));
  kernels::widen_to_f32(work, src, dtype, count);
  return work;
}

// Divides for avg (in float32 for widened types) and rounds into dst.
inline void finish_widened(void* dst, float* work, size_t count, DType dtype, ReduceOp op, int nranks) {
  if (op == ReduceOp::avg) kernels::divide_by(work, count, DType::f32, nranks);
  kernels::narrow_from_f32(dst, dtype, work, count);
}

}  // namespace weft::coll
