// Reduction operators from plugins and weft_op_create (weft/plugin.h) as the collectives see
// them: a weft_op_t of kIdBase or more names a plugin::CustomOp. Built-in operators never come
// here (the callers test is_custom_op first), so their path has no lookup.
#pragma once

#include <memory>
#include <string>

#include "core/common/dtype.h"
#include "core/plugin/registry.h"

namespace weft::coll {

constexpr bool is_custom_op(ReduceOp op) { return static_cast<int>(op) >= plugin::kIdBase; }

// The operator for op, checked to take dtype (the caller's element type: low-precision floats
// are reduced in float32, so they need FLOAT32). Throws INVALID_ARGUMENT for an unknown or
// destroyed id (the registry's message) and for a dtype the operator does not take (naming the
// operator, the dtype and the types it takes).
std::shared_ptr<const plugin::CustomOp> custom_op_for(ReduceOp op, DType dtype);

// "float32, float64, int32" (the types op takes).
std::string takes_list(const plugin::CustomOp& op);

// Refuses a custom operator where only the built-in ones work (`where` names the place and
// why, e.g. "NCCL reduces on the GPU with its own operators"): UNSUPPORTED naming the operator.
void refuse_custom_op(ReduceOp op, const char* where);

}  // namespace weft::coll
