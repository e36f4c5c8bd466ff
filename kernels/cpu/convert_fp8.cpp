// float32 <-> OCP FP8 (spec v1.0) E4M3 and E5M2: the scalar API and the bulk loops. The codecs
// themselves, with the saturation rules, are in codecs.h (shared with kernels/cuda).
#include <array>

#include "kernels/cpu/codecs.h"
#include "kernels/cpu/convert.h"

namespace weft::kernels {

using namespace detail;

namespace {

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
