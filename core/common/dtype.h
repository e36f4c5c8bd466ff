// Element types and reduction operators as core/ and kernels/ see them. Values equal
// weft_dtype_t / weft_op_t (capi/ static_asserts this).
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft {

enum class DType : int {
  f64 = 0, f32 = 1, f16 = 2, bf16 = 3, f8e4m3 = 4, f8e5m2 = 5,
  i8 = 6, u8 = 7, i32 = 8, u32 = 9, i64 = 10, u64 = 11,
};
constexpr int kNumDTypes = 12;

enum class ReduceOp : int { sum = 0, prod = 1, min = 2, max = 3, avg = 4 };
constexpr int kNumReduceOps = 5;

constexpr bool dtype_valid(int d) { return d >= 0 && d < kNumDTypes; }
constexpr bool op_valid(int o) { return o >= 0 && o < kNumReduceOps; }

constexpr size_t dtype_size(DType d) {
  switch (d) {
    case DType::f64: case DType::i64: case DType::u64: return 8;
    case DType::f32: case DType::i32: case DType::u32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::f8e4m3: case DType::f8e5m2: case DType::i8: case DType::u8: return 1;
  }
  return 0;
}

// Low-precision floats are reduced in float32 (see weft.h "Reduction rules").
constexpr bool dtype_reduces_in_f32(DType d) {
  return d == DType::f16 || d == DType::bf16 || d == DType::f8e4m3 || d == DType::f8e5m2;
}
constexpr bool dtype_is_float(DType d) {
  return d == DType::f64 || d == DType::f32 || dtype_reduces_in_f32(d);
}

const char* dtype_name(DType d);
const char* op_name(ReduceOp o);

}  // namespace weft
