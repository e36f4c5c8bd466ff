// float32 <-> OCP FP8 (spec v1.0): E4M3 (bias 7, no inf, S.1111.111 is the only NaN, max 448)
// and E5M2 (bias 15, IEEE-like inf and NaNs, max 57344).
//
// Saturation (convert.h): a finite value that overflows after rounding becomes +-max. E4M3 has
// no infinity, so with saturate=true an infinite input is treated like any other value beyond
// max (+-448): in reductions an f32 inf can only come from overflowing finite fp8 inputs, and
// weft.h says such results saturate. E5M2 keeps infinite inputs infinite in both modes.
#include <array>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/minifloat.h"

namespace weft::kernels {

using namespace detail;

namespace {

constexpr uint8_t kE4m3Nan = 0x7f;
constexpr uint8_t kE4m3Max = 0x7e;  // 448
constexpr uint8_t kE5m2Inf = 0x7c;
constexpr uint8_t kE5m2Max = 0x7b;  // 57344
constexpr uint8_t kE5m2QuietBit = 0x02;

constexpr uint32_t e4m3_bits(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t mag = v & 0x7fu;
  if (mag == kE4m3Nan) return sign | kF32InfBits | kF32QuietBit;
  return sign | widen_magnitude<4, 3>(mag);
}

constexpr uint32_t e5m2_bits(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t mag = v & 0x7fu;
  if (mag == kE5m2Inf) return sign | kF32InfBits;
  if (mag > kE5m2Inf) return sign | kF32InfBits | kF32QuietBit | ((mag & 3u) << 21);
  return sign | widen_magnitude<5, 2>(mag);
}

// 256 entries each: a lookup beats re-deriving the bits, and the tables are built at compile
// time from the same functions the scalar API uses, so they cannot drift apart.
template <uint32_t (*Decode)(uint8_t)>
constexpr std::array<float, 256> make_table() {
  std::array<float, 256> t{};
  for (unsigned v = 0; v < 256; ++v) t[v] = f32_from_bits(Decode(static_cast<uint8_t>(v)));
  return t;
}
constexpr std::array<float, 256> kE4m3Table = make_table<e4m3_bits>();
constexpr std::array<float, 256> kE5m2Table = make_table<e5m2_bits>();

// Selects rather than early returns, so that the bulk loops vectorise.
inline uint8_t to_e4m3(float x, bool saturate) {
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

inline uint8_t to_e5m2(float x, bool saturate) {
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

}  // namespace

uint8_t f32_to_e4m3(float x, bool saturate) { return to_e4m3(x, saturate); }
float e4m3_to_f32(uint8_t v) { return kE4m3Table[v]; }
uint8_t f32_to_e5m2(float x, bool saturate) { return to_e5m2(x, saturate); }
float e5m2_to_f32(uint8_t v) { return kE5m2Table[v]; }

namespace detail {

void widen_e4m3(float* dst, const uint8_t* src, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = kE4m3Table[src[i]];
}
void widen_e5m2(float* dst, const uint8_t* src, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = kE5m2Table[src[i]];
}
void narrow_e4m3_saturate(uint8_t* dst, const float* src, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = to_e4m3(src[i], true);
}
void narrow_e5m2_saturate(uint8_t* dst, const float* src, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = to_e5m2(src[i], true);
}

}  // namespace detail
}  // namespace weft::kernels
