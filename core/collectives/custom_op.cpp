#include "core/collectives/custom_op.h"

#include "core/common/status.h"

namespace weft::coll {

std::string takes_list(const plugin::CustomOp& op) {
  std::string s;
  for (int d = 0; d < kNumDTypes; ++d) {
    if (!op.takes(static_cast<DType>(d))) continue;
    if (!s.empty()) s += ", ";
    s += dtype_name(static_cast<DType>(d));
  }
  return s.empty() ? "nothing" : s;
}

std::shared_ptr<const plugin::CustomOp> custom_op_for(ReduceOp op, DType dtype) {
  std::shared_ptr<const plugin::CustomOp> custom = plugin::get_op(static_cast<int>(op));
  const DType native = dtype_reduces_in_f32(dtype) ? DType::f32 : dtype;
  if (!custom->takes(native)) {
    fail(Status::invalid_argument, "%s does not take %s%s; it takes %s%s",
         custom->origin.describe("reduction operator").c_str(), dtype_name(dtype),
         native != dtype ? " (reduced as float32)" : "", takes_list(*custom).c_str(),
         custom->takes(DType::f32) ? " (and float16, bfloat16 and fp8, reduced as float32)" : "");
  }
  return custom;
}

void refuse_custom_op(ReduceOp op, const char* where) {
  if (!is_custom_op(op)) return;
  std::shared_ptr<const plugin::CustomOp> custom = plugin::find_op(static_cast<int>(op));
  const std::string what = custom ? custom->origin.describe("reduction operator")
                                  : format("reduction operator %d", static_cast<int>(op));
  fail(Status::unsupported, "%s cannot be used here: %s", what.c_str(), where);
}

}  // namespace weft::coll
