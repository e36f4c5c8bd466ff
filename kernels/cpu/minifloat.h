// Private to kernels/cpu: the rounding and decoding shared by every float32 <-> narrow float
// conversion. The narrow formats differ only in field widths and in how they spend the top
// exponent (inf/NaN), so the arithmetic lives here once and convert*.cpp add the special cases.
// Everything is integer bit manipulation, so results never depend on the FPU's rounding mode or
// its flush-to-zero settings.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace weft::kernels::detail {

constexpr uint32_t kF32SignMask = 0x80000000u;
constexpr uint32_t kF32AbsMask = 0x7fffffffu;
constexpr uint32_t kF32InfBits = 0x7f800000u;
constexpr uint32_t kF32QuietBit = 0x00400000u;
constexpr uint32_t kF32MantMask = 0x007fffffu;

constexpr uint32_t f32_bits(float x) { return std::bit_cast<uint32_t>(x); }
constexpr float f32_from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// Drops the low `shift` bits of `sig` rounding to nearest, ties to even (1 <= shift <= 31).
constexpr uint32_t shift_right_rne(uint32_t sig, int shift) {
  const uint32_t q = sig >> shift;
  const uint32_t rem = sig & ((uint32_t{1} << shift) - 1u);
  const uint32_t half = uint32_t{1} << (shift - 1);
  return q + static_cast<uint32_t>((rem > half) | ((rem == half) & (q & 1u)));
}

// Rounds a finite non-negative float32 (given as bits) to the magnitude code
// (exponent << M | mantissa) of a format with E exponent bits, M mantissa bits, bias 2^(E-1)-1
// and subnormals. The exponent range is treated as unbounded above: a code at or beyond the
// format's largest finite one means "overflowed after rounding", which the caller resolves
// (inf, NaN or saturation), so ties at the top of the range round exactly like IEEE 754 says.
template <int E, int M>
constexpr uint32_t round_magnitude(uint32_t a) {
  static_assert(E >= 2 && E <= 8 && M >= 1 && M <= 22);
  constexpr int kBias = (1 << (E - 1)) - 1;
  constexpr int kDrop = 23 - M;  // float32 mantissa bits the target has no room for
  const int e32 = static_cast<int>(a >> 23);
  // A float32 subnormal has the same scale as exponent field 1, just without the implicit bit.
  const int et = (e32 == 0 ? 1 : e32) - 127 + kBias;  // target exponent field if normal
  if (et >= 1) {
    // Re-biasing is one subtraction on the whole pattern; a rounding carry out of the mantissa
    // then increments the exponent field, which is exactly the right result.
    const uint32_t rebiased = a - (static_cast<uint32_t>(127 - kBias) << 23);
    return shift_right_rne(rebiased, kDrop);
  }
  // Target subnormal: express the significand in units of the target's smallest subnormal.
  const uint32_t sig = (a & kF32MantMask) | (e32 != 0 ? 0x00800000u : 0u);
  const int shift = kDrop + 1 - et;
  if (shift >= 25) return 0;  // sig < 2^24 <= half an ulp: rounds to zero, never a tie
  // A carry into bit M here yields the smallest normal's code, again correct as is.
  return shift_right_rne(sig, shift);
}

// Float32 bits of a finite magnitude code of the same family of formats (exponent field less
// than all-ones, or any field for formats like E4M3 that use it for finite values).
template <int E, int M>
constexpr uint32_t widen_magnitude(uint32_t code) {
  constexpr int kBias = (1 << (E - 1)) - 1;
  const uint32_t exp = code >> M;
  const uint32_t mant = code & ((uint32_t{1} << M) - 1u);
  if (exp != 0) {
    return ((exp + static_cast<uint32_t>(127 - kBias)) << 23) | (mant << (23 - M));
  }
  if (mant == 0) return 0;
  // Subnormal in the narrow format, always normal in float32: renormalise so the leading one
  // becomes the implicit bit.
  const int top = std::bit_width(mant) - 1;  // position of the leading one, < M
  const uint32_t e32 = static_cast<uint32_t>(127 - kBias + 1 - M + top);
  return (e32 << 23) | ((mant ^ (uint32_t{1} << top)) << (23 - top));
}

// Bulk fp8 loops, defined in convert_fp8.cpp next to the scalar codecs they inline.
void widen_e4m3(float* dst, const uint8_t* src, size_t count);
void widen_e5m2(float* dst, const uint8_t* src, size_t count);
void narrow_e4m3_saturate(uint8_t* dst, const float* src, size_t count);
void narrow_e5m2_saturate(uint8_t* dst, const float* src, size_t count);

}  // namespace weft::kernels::detail
