// Private to kernels/: the scalar float32 <-> f16 / bf16 / fp8 codecs, shared by the host
// loops (convert.cpp, convert_fp8.cpp) and the device kernels (kernels/cuda), which therefore
// round bit for bit alike. Written as selects rather than early returns so that the host bulk
// loops, which inline them, vectorise.
//
// Every conversion returns quiet NaNs, so a NaN never turns into a signalling one on the way
// through a collective (a signalling NaN could trap in code that enables FP exceptions).
//
// fp8 is OCP 8-bit floating point v1.0: E4M3 (bias 7, no inf, S.1111.111 is the only NaN, max
// 448) and E5M2 (bias 15, IEEE-like inf and NaNs, max 57344). Saturation (convert.h): a finite
// value that overflows after rounding becomes +-max. E4M3 has no infinity, so with saturate=true
// an infinite input is treated like any other value beyond max (+-448): in reductions an f32
// inf can only come from overflowing finite fp8 inputs, and weft.h says such results saturate.
// E5M2 keeps infinite inputs infinite in both modes.
#pragma once

#include <cstdint>

#include "kernels/cpu/minifloat.h"

namespace weft::kernels::detail {

constexpr uint16_t kF16InfBits = 0x7c00;
constexpr uint16_t kF16QuietBit = 0x0200;
constexpr uint16_t kBf16QuietBit = 0x0040;

constexpr uint8_t kE4m3Nan = 0x7f;
constexpr uint8_t kE4m3Max = 0x7e;  // 448
constexpr uint8_t kE5m2Inf = 0x7c;
constexpr uint8_t kE5m2Max = 0x7b;  // 57344
constexpr uint8_t kE5m2QuietBit = 0x02;

WEFT_HD inline float f16_to_f32_inline(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t mag = h & 0x7fffu;
  const uint32_t normal = (mag << 13) + (static_cast<uint32_t>(127 - 15) << 23);
  // Subnormal: mantissa times 2^-24, exact in float (and never a float subnormal).
  const uint32_t subnormal = f32_bits(static_cast<float>(static_cast<int32_t>(mag)) * 0x1p-24f);
  // Inf/NaN: the f16 payload lands in the top of the f32 mantissa, as hardware converters do.
  const uint32_t special = (mag << 13) | kF32InfBits | (mag > kF16InfBits ? kF32QuietBit : 0u);
  const uint32_t other = mag >= kF16InfBits ? special : normal;
  // AND/OR rather than a select: GCC sinks the multiply into a select's arm and then refuses
  // to if-convert it, which would leave the bulk loop scalar.
  const uint32_t is_subnormal = 0u - static_cast<uint32_t>(mag < 0x0400u);
  const uint32_t bits = (subnormal & is_subnormal) | (other & ~is_subnormal);
  return f32_from_bits(sign | bits);
}

WEFT_HD inline uint16_t f32_to_f16_inline(float x) {
  const uint32_t bits = f32_bits(x);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t a = bits & kF32AbsMask;
  // Infinity rounds past the top as well, so one clamp covers inf and overflow.
  // Codes and |x| stay below 2^31, so signed compares (cheaper in SSE2) give the same answers.
  int32_t code = static_cast<int32_t>(round_magnitude<5, 10>(a));
  code = code >= kF16InfBits ? kF16InfBits : code;
  // Keep the NaN payload's top bits so distinct NaNs stay distinguishable where they fit.
  const int32_t nan = static_cast<int32_t>(kF16InfBits | kF16QuietBit | ((a >> 13) & 0x3ffu));
  code = static_cast<int32_t>(a) > static_cast<int32_t>(kF32InfBits) ? nan : code;
  return static_cast<uint16_t>(sign | static_cast<uint32_t>(code));
}

WEFT_HD inline float bf16_to_f32_inline(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  if ((bits & kF32AbsMask) > kF32InfBits) bits |= kF32QuietBit;
  return f32_from_bits(bits);
}

WEFT_HD inline uint16_t f32_to_bf16_inline(float x) {
  const uint32_t bits = f32_bits(x);
  if ((bits & kF32AbsMask) > kF32InfBits) {
    // Truncation keeps the NaN's exponent; the quiet bit keeps it from becoming inf.
    return static_cast<uint16_t>((bits >> 16) | kBf16QuietBit);
  }
  // bfloat16 shares float32's exponent, so RNE on the low half is the whole conversion; a
  // carry into the exponent (including up to inf) is the correctly rounded result.
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

WEFT_HD constexpr uint32_t e4m3_bits(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t mag = v & 0x7fu;
  if (mag == kE4m3Nan) return sign | kF32InfBits | kF32QuietBit;
  return sign | widen_magnitude<4, 3>(mag);
}

WEFT_HD constexpr uint32_t e5m2_bits(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t mag = v & 0x7fu;
  if (mag == kE5m2Inf) return sign | kF32InfBits;
  if (mag > kE5m2Inf) return sign | kF32InfBits | kF32QuietBit | ((mag & 3u) << 21);
  return sign | widen_magnitude<5, 2>(mag);
}

WEFT_HD inline uint8_t to_e4m3(float x, bool saturate) {
  const uint32_t bits = f32_bits(x);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t a = bits & kF32AbsMask;
  // 0x7f would be 480 were it not NaN: anything rounding there or beyond has overflowed, and
  // infinity rounds far beyond, so it needs no case of its own.
  const uint32_t overflow = saturate ? kE4m3Max : kE4m3Nan;
  uint32_t code = round_magnitude<4, 3>(a);
  code = code > kE4m3Max ? overflow : code;
  code = a > kF32InfBits ? kE4m3Nan : code;
  return static_cast<uint8_t>(sign | code);
}

WEFT_HD inline uint8_t to_e5m2(float x, bool saturate) {
  const uint32_t bits = f32_bits(x);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t a = bits & kF32AbsMask;
  const uint32_t overflow = saturate ? kE5m2Max : kE5m2Inf;
  uint32_t code = round_magnitude<5, 2>(a);
  code = code >= kE5m2Inf ? overflow : code;
  code = a == kF32InfBits ? kE5m2Inf : code;
  const uint32_t nan = kE5m2Inf | kE5m2QuietBit | ((a >> 21) & 1u);
  code = a > kF32InfBits ? nan : code;
  return static_cast<uint8_t>(sign | code);
}

}  // namespace weft::kernels::detail
