// Conversions between float32 and the low-precision float types.
// f16: IEEE 754 binary16, round-to-nearest-even, overflow -> inf, subnormals exact.
// bf16: upper half of binary32, round-to-nearest-even, NaN stays (quiet) NaN.
// fp8: OCP 8-bit floating point spec v1.0. E4M3 has no inf (0x7f/0xff are NaN), max 448;
//      E5M2 is IEEE-like (inf, NaN), max finite 57344. With saturate=true a finite value
//      beyond max becomes +-max (and for E5M2 an infinite input stays infinite); with
//      saturate=false it becomes NaN (E4M3) or inf (E5M2).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/common/dtype.h"

namespace weft::kernels {

uint16_t f32_to_f16(float x);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float x);
float bf16_to_f32(uint16_t b);
uint8_t f32_to_e4m3(float x, bool saturate);
float e4m3_to_f32(uint8_t v);
uint8_t f32_to_e5m2(float x, bool saturate);
float e5m2_to_f32(uint8_t v);

// Widen `count` elements of a low-precision type (f16, bf16, f8e4m3, f8e5m2) or f32 to f32.
void widen_to_f32(float* dst, const void* src, DType src_type, size_t count);
// Round `count` float32 values to dst_type (f16, bf16, f8e4m3, f8e5m2 or f32); fp8 saturates.
void narrow_from_f32(void* dst, DType dst_type, const float* src, size_t count);

}  // namespace weft::kernels
