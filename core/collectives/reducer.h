// The element type and operator an algorithm reduces with. Algorithms see only "native"
// reductions: low-precision floats arrive widened to float32 (widen.h) and avg arrives as sum
// (the entry point divides at the end).
#pragma once

#include <cstddef>

#include "core/common/dtype.h"
#include "kernels/cpu/reduce.h"

namespace weft::coll {

struct Reducer {
  DType dtype;
  ReduceOp op;
  size_t elem;  // bytes per element

  Reducer(DType d, ReduceOp o) : dtype(d), op(o == ReduceOp::avg ? ReduceOp::sum : o), elem(dtype_size(d)) {}
  // dst = a op b, count elements; dst may alias a or b.
  void apply(void* dst, const void* a, const void* b, size_t count) const {
    if (count) kernels::reduce(dst, a, b, count, dtype, op);
  }
  size_t bytes(size_t count) const { return count * elem; }
};

inline char* at(void* base, size_t elements, size_t elem) { return static_cast<char*>(base) + elements * elem; }
inline const char* at(const void* base, size_t elements, size_t elem) {
  return static_cast<const char*>(base) + elements * elem;
}

}  // namespace weft::coll
