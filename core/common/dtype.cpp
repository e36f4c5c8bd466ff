#include "core/common/dtype.h"

#include <map>
#include <mutex>
#include <string>

#include "core/plugin/registry.h"

namespace weft {
namespace {

// A custom operator's name (weft/plugin.h), kept for the process: op_name hands out a plain
// const char* that messages may hold after weft_op_destroy, and ids are never reused, so one
// string per id ever named is all this keeps (std::map nodes do not move).
const char* custom_op_name(int id) {
  static std::mutex mu;
  static std::map<int, std::string> names;
  std::lock_guard<std::mutex> lock(mu);
  auto it = names.find(id);
  if (it != names.end()) return it->second.c_str();
  std::shared_ptr<const plugin::CustomOp> op = plugin::find_op(id);
  if (!op) return "unknown-custom-op";  // not kept: the id may be given out later
  return names.emplace(id, "'" + op->origin.name + "'").first->second.c_str();
}

}  // namespace

const char* dtype_name(DType d) {
  switch (d) {
    case DType::f64: return "float64";
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::f8e4m3: return "fp8_e4m3";
    case DType::f8e5m2: return "fp8_e5m2";
    case DType::i8: return "int8";
    case DType::u8: return "uint8";
    case DType::i32: return "int32";
    case DType::u32: return "uint32";
    case DType::i64: return "int64";
    case DType::u64: return "uint64";
  }
  return "invalid-dtype";
}

const char* op_name(ReduceOp o) {
  switch (o) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::prod: return "prod";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::avg: return "avg";
  }
  if (static_cast<int>(o) >= plugin::kIdBase) return custom_op_name(static_cast<int>(o));
  return "invalid-op";
}

}  // namespace weft
