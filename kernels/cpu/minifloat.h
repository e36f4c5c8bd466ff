// Private to kernels/cpu: the rounding and decoding shared by every float32 <-> narrow float
// conversion. The narrow formats differ only in field widths and in how they spend the top
// exponent (inf/NaN), so the arithmetic lives here once and convert*.cpp add the special cases.
// Rounding decisions are made on the bits or with float operations whose results are exact,
// never by the FPU's rounding, so results do not depend on its rounding mode (test_convert
// runs them under every mode and under flush-to-zero).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace weft::kernels::detail {

constexpr uint32_t kF32AbsMask = 0x7fffffffu;
constexpr uint32_t kF32InfBits = 0x7f800000u;
constexpr uint32_t kF32QuietBit = 0x00400000u;

constexpr uint32_t f32_bits(float x) { return std::bit_cast<uint32_t>(x); }
constexpr float f32_from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// Drops the low `shift` bits of `sig` rounding to nearest, ties to even (1 <= shift <= 31):
// adding just under half, plus the kept lsb, carries exactly when rounding up is due. Pure
// arithmetic (no comparisons folded into bools) so that the vectoriser accepts it. Wraps
// harmlessly for garbage inputs of lanes whose result is discarded.
constexpr uint32_t shift_right_rne(uint32_t sig, int shift) {
  const uint32_t lsb = (sig >> shift) & 1u;
  return (sig + ((uint32_t{1} << (shift - 1)) - 1u) + lsb) >> shift;
}

// Rounds a non-negative float32 (given as bits) to the magnitude code (exponent << M | mantissa)
// of a format with E exponent bits, M mantissa bits, bias 2^(E-1)-1 and subnormals. The
// exponent range is treated as unbounded above: a code at or beyond the format's largest finite
// one means "overflowed after rounding" (infinity input included), which the caller resolves
// (inf, NaN or saturation), so ties at the top of the range round exactly as IEEE 754 says.
// NaN inputs give an unspecified code; callers select their NaN encoding instead.
//
// Branch-free so that bulk loops vectorise. The subnormal case needs a per-element shift, which
// SSE2 lacks, so it uses float arithmetic instead, but only operations whose results are exact
// (scaling by a power of two, truncation, subtracting the integer part); exact results are the
// same in every rounding mode, and flush-to-zero only touches inputs that round to 0 anyway.
template <int E, int M>
inline uint32_t round_magnitude(uint32_t a) {
  static_assert(E >= 2 && E <= 5 && M >= 1 && M <= 10, "the subnormal scaling below must stay in range");
  constexpr int kBias = (1 << (E - 1)) - 1;
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(127 - kBias + 1) << 23;  // as float32 bits
  // Scale that makes the target's smallest subnormal 1.0.
  constexpr float kSubnormalScale = f32_from_bits(static_cast<uint32_t>(127 + kBias + M - 1) << 23);
  // Normal results: re-biasing is one subtraction on the whole pattern, and a rounding carry out
  // of the mantissa then increments the exponent field, which is exactly the right result.
  const uint32_t normal = shift_right_rne(a - (static_cast<uint32_t>(127 - kBias) << 23), 23 - M);
  // Subnormal results: the scaled value is below 2^M, so its integer part is the code.
  // (Masking by AND, not a select: GCC will not if-convert a select that feeds a float multiply.)
  // (a < 2^31, so the comparisons are done signed: SSE2 has no unsigned compare.)
  const bool is_small = static_cast<int32_t>(a) < static_cast<int32_t>(kMinNormal);
  const uint32_t small_only = 0u - static_cast<uint32_t>(is_small);
  const float scaled = f32_from_bits(a & small_only) * kSubnormalScale;
  const int32_t whole = static_cast<int32_t>(scaled);
  const float frac = scaled - static_cast<float>(whole);
  const uint32_t q = static_cast<uint32_t>(whole);
  // A carry to 2^M yields the smallest normal's code, again correct as is.
  const uint32_t up = frac > 0.5f ? 1u : (frac == 0.5f ? (q & 1u) : 0u);
  const uint32_t subnormal = q + up;
  return is_small ? subnormal : normal;
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
