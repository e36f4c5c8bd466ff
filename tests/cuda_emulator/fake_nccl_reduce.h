// The stand-in NCCL's arithmetic (fake_nccl.cpp says what is modelled): element sizes and the
// reductions, exact per step in rank order 0..n-1.
#pragma once

#pragma GCC visibility push(default)
#include <nccl.h>
#pragma GCC visibility pop

#include <cstddef>

namespace weft::fake_nccl {

size_t type_size(ncclDataType_t t);

inline bool type_valid(ncclDataType_t t) { return t >= 0 && t < ncclNumTypes; }
inline bool op_valid(ncclRedOp_t o) { return o >= 0 && o < ncclNumOps; }  // user-defined ops: not modelled
inline bool is_float(ncclDataType_t t) { return t >= ncclFloat16 && t <= ncclFloat8e5m2; }

// Element i of a half/bfloat16/fp8 buffer as float32, and back (rounded to nearest, ties to
// even; fp8 saturating). Defined in fake_nccl_floats.cpp.
float widen(ncclDataType_t t, const void* p, size_t i);
void narrow(ncclDataType_t t, void* p, size_t i, float v);

// acc[i] = acc[i] op x[i].
void reduce_into(void* acc, const void* x, size_t count, ncclDataType_t t, ncclRedOp_t op);

// ncclAvg on floats is NCCL's PreMulSum: every operand is first multiplied by 1/nranks (in the
// element type), then summed.
void premultiply(void* buf, size_t count, ncclDataType_t t, int nranks);

// ncclAvg on integers is NCCL's SumPostDiv: the sum divided by nranks (truncating).
void postdivide(void* buf, size_t count, ncclDataType_t t, int nranks);

}  // namespace weft::fake_nccl
