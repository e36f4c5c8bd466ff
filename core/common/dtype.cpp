#include "core/common/dtype.h"

namespace weft {

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
  return "invalid-op";
}

}  // namespace weft
