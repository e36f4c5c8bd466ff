// The element type and operator an algorithm reduces with. Algorithms see only "native"
// reductions: low-precision floats arrive widened to float32 (widen.h) and avg arrives as sum
// (the entry point divides at the end). A custom operator (weft/plugin.h: op >= 64) is looked
// up once, when the collective makes its Reducer, and held for the collective's duration (a
// weft_op_destroy meanwhile cannot free it); apply() then calls it once per chunk. Built-in
// operators pay one predictable branch per chunk: no lookup, no allocation.
#pragma once

#include <cstddef>
#include <memory>

#include "core/collectives/custom_op.h"
#include "core/common/dtype.h"
#include "kernels/cpu/reduce.h"

namespace weft::coll {

struct Reducer {
  DType dtype;
  ReduceOp op;
  size_t elem;  // bytes per element
  std::shared_ptr<const plugin::CustomOp> custom;  // set when op is a custom operator

  Reducer(DType d, ReduceOp o) : dtype(d), op(o == ReduceOp::avg ? ReduceOp::sum : o), elem(dtype_size(d)) {
    if (is_custom_op(o)) [[unlikely]] custom = custom_op_for(o, d);
  }
  // dst = a op b, count elements; dst may alias a or b.
  void apply(void* dst, const void* a, const void* b, size_t count) const {
    if (!count) return;
    if (custom) [[unlikely]] {
      custom->apply(dst, a, b, count, dtype);
      return;
    }
    kernels::reduce(dst, a, b, count, dtype, op);
  }
  size_t bytes(size_t count) const { return count * elem; }
};

inline char* at(void* base, size_t elements, size_t elem) { return static_cast<char*>(base) + elements * elem; }
inline const char* at(const void* base, size_t elements, size_t elem) {
  return static_cast<const char*>(base) + elements * elem;
}

}  // namespace weft::coll
