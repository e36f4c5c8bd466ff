// Conversions float32 <-> f16 / bf16 / fp8 E4M3 / fp8 E5M2.
//
// The references here deliberately share no code or method with kernels/cpu: values are decoded
// from sign, exponent and mantissa with double arithmetic (std::ldexp), and rounding is done by
// searching a table of every representable value for the nearest one, ties to the even code.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cfenv>
#include <limits>
#include <random>
#include <vector>

#include "core/common/status.h"
#include "kernels/cpu/convert.h"

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

namespace wk = weft::kernels;
using weft::DType;

namespace {

float from_bits(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }

// One narrow format as the test sees it: field widths from the spec plus the code under test.
struct Format {
  const char* name;
  int ebits;
  int mbits;
  bool ocp_e4m3;      // top exponent holds finite values, only S.1111.111 is NaN, no inf
  bool can_saturate;  // fp8: narrowing takes a saturate flag
  uint32_t max_code;  // largest finite magnitude code
  float (*widen)(uint32_t);
  uint32_t (*narrow)(float, bool saturate);
};

int total_bits(const Format& f) { return 1 + f.ebits + f.mbits; }
uint32_t sign_bit(const Format& f) { return uint32_t{1} << (f.ebits + f.mbits); }
uint32_t num_codes(const Format& f) { return uint32_t{1} << total_bits(f); }

// Value of a magnitude code read with the plain formula, ignoring what the top exponent means
// (so max_code + 1 yields the next power of two past the range: where overflow begins).
double raw_value(const Format& f, uint32_t mag) {
  const int bias = (1 << (f.ebits - 1)) - 1;
  const uint32_t e = mag >> f.mbits;
  const uint32_t m = mag & ((uint32_t{1} << f.mbits) - 1);
  if (e == 0) return std::ldexp(static_cast<double>(m), 1 - bias - f.mbits);
  return std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -f.mbits), static_cast<int>(e) - bias);
}

// Full decoding per the spec: NaN and inf encodings, then the formula.
double decode_ref(const Format& f, uint32_t code) {
  const bool neg = (code & sign_bit(f)) != 0;
  const uint32_t mag = code & (sign_bit(f) - 1);
  const uint32_t e = mag >> f.mbits;
  const uint32_t m = mag & ((uint32_t{1} << f.mbits) - 1);
  const uint32_t emax = (uint32_t{1} << f.ebits) - 1;
  double v;
  if (f.ocp_e4m3 && mag == (sign_bit(f) - 1)) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (!f.ocp_e4m3 && e == emax) {
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    v = raw_value(f, mag);
  }
  return neg ? -v : v;
}

bool is_nan_code(const Format& f, uint32_t code) { return std::isnan(decode_ref(f, code)); }

// Reference rounding. Returns the expected code, or kAnyNan when any NaN encoding is right.
constexpr uint32_t kAnyNan = 0xffffffffu;

struct RoundRef {
  const Format& f;
  std::vector<double> values;  // raw_value of magnitude codes 0 .. max_code + 1, ascending

  explicit RoundRef(const Format& fmt) : f(fmt) {
    for (uint32_t c = 0; c <= f.max_code + 1; ++c) values.push_back(raw_value(f, c));
  }

  uint32_t overflow_code(bool saturate) const {
    if (f.ocp_e4m3) return saturate ? f.max_code : kAnyNan;
    if (f.can_saturate && saturate) return f.max_code;
    return f.max_code + 1;  // the infinity encoding for IEEE-like formats
  }

  uint32_t operator()(float x, bool saturate) const {
    if (std::isnan(x)) return kAnyNan;
    const uint32_t sign = std::signbit(x) ? sign_bit(f) : 0;
    const double d = std::fabs(static_cast<double>(x));
    uint32_t mag;
    if (std::isinf(x)) {
      // E5M2 keeps infinity in both modes; E4M3 has none and treats it as beyond max.
      mag = f.ocp_e4m3 ? overflow_code(saturate) : f.max_code + 1;
    } else {
      // Largest index with values[i] <= d, then pick the nearer neighbour, ties to even code.
      const auto it = std::upper_bound(values.begin(), values.end(), d);
      const size_t i = static_cast<size_t>(it - values.begin()) - 1;
      if (i + 1 >= values.size()) {
        mag = f.max_code + 1;
      } else {
        const double twice = 2.0 * d, sum = values[i] + values[i + 1];  // both exact
        if (twice < sum) mag = static_cast<uint32_t>(i);
        else if (twice > sum) mag = static_cast<uint32_t>(i + 1);
        else mag = static_cast<uint32_t>((i & 1) ? i + 1 : i);
      }
      if (mag > f.max_code) mag = overflow_code(saturate);
    }
    return mag == kAnyNan ? kAnyNan : (sign | mag);
  }
};

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", v);
  return buf;
}

// Checks narrow(x) against the reference; NaN results need only be NaN with the quiet bit.
::testing::AssertionResult narrows_like_ref(const Format& f, const RoundRef& ref, float x, bool saturate) {
  const uint32_t got = f.narrow(x, saturate);
  const uint32_t want = ref(x, saturate);
  if (got >= num_codes(f)) {
    return ::testing::AssertionFailure() << f.name << ": code " << hex(got) << " out of range";
  }
  if (want == kAnyNan) {
    if (!is_nan_code(f, got)) {
      return ::testing::AssertionFailure()
             << f.name << "(" << x << " = " << hex(bits_of(x)) << ", sat=" << saturate << ") = " << hex(got)
             << ", expected NaN";
    }
    return ::testing::AssertionSuccess();
  }
  if (got != want) {
    return ::testing::AssertionFailure() << f.name << "(" << x << " = " << hex(bits_of(x)) << ", sat=" << saturate
                                         << ") = " << hex(got) << ", expected " << hex(want);
  }
  return ::testing::AssertionSuccess();
}

float widen_f16(uint32_t c) { return wk::f16_to_f32(static_cast<uint16_t>(c)); }
uint32_t narrow_f16(float x, bool) { return wk::f32_to_f16(x); }
float widen_bf16(uint32_t c) { return wk::bf16_to_f32(static_cast<uint16_t>(c)); }
uint32_t narrow_bf16(float x, bool) { return wk::f32_to_bf16(x); }
float widen_e4m3(uint32_t c) { return wk::e4m3_to_f32(static_cast<uint8_t>(c)); }
uint32_t narrow_e4m3(float x, bool s) { return wk::f32_to_e4m3(x, s); }
float widen_e5m2(uint32_t c) { return wk::e5m2_to_f32(static_cast<uint8_t>(c)); }
uint32_t narrow_e5m2(float x, bool s) { return wk::f32_to_e5m2(x, s); }

const Format kF16{"f16", 5, 10, false, false, 0x7bff, widen_f16, narrow_f16};
const Format kBf16{"bf16", 8, 7, false, false, 0x7f7f, widen_bf16, narrow_bf16};
const Format kE4m3{"e4m3", 4, 3, true, true, 0x7e, widen_e4m3, narrow_e4m3};
const Format kE5m2{"e5m2", 5, 2, false, true, 0x7b, widen_e5m2, narrow_e5m2};

// Every code widens to the formula's value; NaNs widen to quiet NaNs of the same sign.
void check_decode_all(const Format& f) {
  for (uint32_t c = 0; c < num_codes(f); ++c) {
    const float got = f.widen(c);
    const double want = decode_ref(f, c);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << f.name << " " << hex(c);
      ASSERT_EQ(std::signbit(got), (c & sign_bit(f)) != 0) << f.name << " " << hex(c);
      ASSERT_TRUE(bits_of(got) & 0x00400000u) << f.name << " " << hex(c) << " widened to a signalling NaN";
    } else {
      // Every value of these formats is exactly representable in float32, so compare bits
      // (this also separates +0 from -0).
      ASSERT_EQ(bits_of(got), bits_of(static_cast<float>(want))) << f.name << " " << hex(c);
      ASSERT_EQ(static_cast<double>(got), want) << f.name << " " << hex(c);
    }
  }
}

// Narrowing a widened code gives the code back (any NaN for NaN), in both saturate modes.
void check_round_trip_all(const Format& f) {
  for (uint32_t c = 0; c < num_codes(f); ++c) {
    for (bool sat : {false, true}) {
      const uint32_t back = f.narrow(f.widen(c), sat);
      if (is_nan_code(f, c)) {
        ASSERT_TRUE(is_nan_code(f, back)) << f.name << " " << hex(c) << " -> " << hex(back);
        ASSERT_EQ(back & sign_bit(f), c & sign_bit(f)) << f.name << " NaN sign " << hex(c);
      } else {
        ASSERT_EQ(back, c) << f.name << " sat=" << sat;
      }
    }
  }
}

// For every pair of neighbouring magnitudes (including max and the first overflowing value):
// the exact midpoint goes to the even code, one float32 ulp either side goes to the near code.
void check_midpoints(const Format& f) {
  const RoundRef ref(f);
  for (uint32_t c = 0; c <= f.max_code; ++c) {
    const double lo = raw_value(f, c), hi = raw_value(f, c + 1);
    const float mid = static_cast<float>((lo + hi) / 2);
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2) << f.name << ": midpoint not exact in f32";
    const float below = std::nextafter(mid, 0.0f), above = std::nextafter(mid, INFINITY);
    for (bool sat : {false, true}) {
      for (float s : {1.0f, -1.0f}) {
        ASSERT_TRUE(narrows_like_ref(f, ref, s * mid, sat));
        ASSERT_TRUE(narrows_like_ref(f, ref, s * below, sat));
        ASSERT_TRUE(narrows_like_ref(f, ref, s * above, sat));
      }
      // And spelled out without the reference for the in-range pairs.
      if (c + 1 <= f.max_code) {
        const uint32_t even = (c & 1) ? c + 1 : c;
        ASSERT_EQ(f.narrow(mid, sat), even) << f.name << " mid of " << hex(c);
        ASSERT_EQ(f.narrow(below, sat), c) << f.name << " below mid of " << hex(c);
        ASSERT_EQ(f.narrow(above, sat), c + 1) << f.name << " above mid of " << hex(c);
        ASSERT_EQ(f.narrow(-mid, sat), sign_bit(f) | even) << f.name << " -mid of " << hex(c);
      }
    }
  }
}

// Random floats against the nearest-value search: raw bit patterns (every exponent, NaNs,
// infinities, float32 subnormals) and values concentrated on the format's own range.
void check_random(const Format& f, uint64_t seed) {
  const RoundRef ref(f);
  std::mt19937_64 rng(seed);
  const int bias = (1 << (f.ebits - 1)) - 1;
  const int lo_exp = 1 - bias - f.mbits - 2;                       // below the smallest subnormal
  const int hi_exp = (1 << f.ebits) - 1 - bias + 1;                // past overflow
  std::uniform_int_distribution<int> exp_dist(std::max(lo_exp, -149), std::min(hi_exp, 127));
  for (int i = 0; i < 400000; ++i) {
    const uint64_t r = rng();
    const float raw = from_bits(static_cast<uint32_t>(r));
    const float ranged =
        std::ldexp(1.0f + static_cast<float>((r >> 32) & 0x7fffff) * 0x1p-23f, exp_dist(rng)) * ((r >> 63) ? -1 : 1);
    for (bool sat : {false, true}) {
      ASSERT_TRUE(narrows_like_ref(f, ref, raw, sat));
      ASSERT_TRUE(narrows_like_ref(f, ref, ranged, sat));
    }
  }
}

}  // namespace

// ------------------------------------------------------------------------------------ f16

TEST(F16, DecodeAllPatternsMatchesFormula) { check_decode_all(kF16); }
TEST(F16, RoundTripAllPatterns) { check_round_trip_all(kF16); }
TEST(F16, MidpointsOfEveryAdjacentPair) { check_midpoints(kF16); }
TEST(F16, RandomFloatsMatchNearestSearch) { check_random(kF16, 1); }

TEST(F16, NamedCases) {
  EXPECT_EQ(wk::f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(wk::f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(bits_of(wk::f16_to_f32(0x8000)), 0x80000000u);
  EXPECT_EQ(wk::f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(wk::f32_to_f16(-2.0f), 0xc000);
  // Ties around 1: the ulp is 2^-10; halfway cases go to the even mantissa.
  EXPECT_EQ(wk::f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(wk::f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(wk::f32_to_f16(std::nextafter(1.0f + 0x1p-11f, 2.0f)), 0x3c01);
  EXPECT_EQ(wk::f32_to_f16(2048.0f + 1.0f), 0x6800);  // 2049 is a tie between 2048 and 2050
  EXPECT_EQ(wk::f32_to_f16(2048.0f + 3.0f), 0x6802);
  // Top of the range: 65504 is max, 65520 is the tie with 2^16 and goes to inf.
  EXPECT_EQ(wk::f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(wk::f32_to_f16(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(wk::f32_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(wk::f32_to_f16(-65520.0f), 0xfc00);
  EXPECT_EQ(wk::f32_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(wk::f32_to_f16(INFINITY), 0x7c00);
  EXPECT_EQ(wk::f32_to_f16(-INFINITY), 0xfc00);
  EXPECT_EQ(wk::f16_to_f32(0x7c00), INFINITY);
  EXPECT_EQ(wk::f16_to_f32(0xfc00), -INFINITY);
  // Subnormals: smallest is 2^-24; half of it is a tie with zero (even), more than half is 1.
  EXPECT_EQ(wk::f32_to_f16(0x1p-24f), 0x0001);
  EXPECT_EQ(wk::f16_to_f32(0x0001), 0x1p-24f);
  EXPECT_EQ(wk::f32_to_f16(0x1p-25f), 0x0000);
  EXPECT_EQ(wk::f32_to_f16(-0x1p-25f), 0x8000);
  EXPECT_EQ(wk::f32_to_f16(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(wk::f32_to_f16(3 * 0x1p-25f), 0x0002);  // tie between 1 and 2 -> 2
  EXPECT_EQ(wk::f32_to_f16(5 * 0x1p-25f), 0x0002);  // tie between 2 and 3 -> 2
  EXPECT_EQ(wk::f32_to_f16(1e-30f), 0x0000);
  EXPECT_EQ(wk::f32_to_f16(from_bits(0x00000001)), 0x0000);  // f32 subnormal
  EXPECT_EQ(wk::f16_to_f32(0x03ff), 1023 * 0x1p-24f);        // largest subnormal
  EXPECT_EQ(wk::f32_to_f16(0x1p-14f), 0x0400);               // smallest normal
  EXPECT_EQ(wk::f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400);    // tie between 0x3ff and 0x400
  EXPECT_EQ(wk::f32_to_f16(0x1p-14f - 3 * 0x1p-25f), 0x03fe);  // tie between 0x3fe and 0x3ff
}

TEST(F16, NaNStaysQuietNaN) {
  for (uint32_t payload : {0x00000001u, 0x00001fffu, 0x00002000u, 0x00400000u, 0x007fffffu}) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const uint16_t h = wk::f32_to_f16(from_bits(sign | 0x7f800000u | payload));
      EXPECT_EQ(h & 0x7c00, 0x7c00) << hex(payload);
      EXPECT_NE(h & 0x0200, 0) << "quiet bit, payload " << hex(payload);
      EXPECT_EQ(h & 0x8000u, sign >> 16);
    }
  }
  // Signalling f16 NaN widens to a quiet float NaN.
  const float w = wk::f16_to_f32(0x7c01);
  EXPECT_TRUE(std::isnan(w));
  EXPECT_NE(bits_of(w) & 0x00400000u, 0u);
}

#if defined(__FLT16_MAX__)
// The compiler's own _Float16 conversions (libgcc soft-fp or F16C) as a second opinion.
TEST(F16, MatchesCompilerFloat16) {
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i) {
    const float x = from_bits(static_cast<uint32_t>(rng()));
    if (std::isnan(x)) continue;
    const _Float16 h = static_cast<_Float16>(x);
    ASSERT_EQ(wk::f32_to_f16(x), std::bit_cast<uint16_t>(h)) << x;
  }
  for (uint32_t c = 0; c < 0x10000; ++c) {
    const float want = static_cast<float>(std::bit_cast<_Float16>(static_cast<uint16_t>(c)));
    if (std::isnan(want)) continue;
    ASSERT_EQ(bits_of(wk::f16_to_f32(static_cast<uint16_t>(c))), bits_of(want)) << hex(c);
  }
}
#endif

// ------------------------------------------------------------------------------------ bf16

TEST(Bf16, DecodeAllPatternsMatchesFormula) { check_decode_all(kBf16); }
TEST(Bf16, RoundTripAllPatterns) { check_round_trip_all(kBf16); }
TEST(Bf16, MidpointsOfEveryAdjacentPair) { check_midpoints(kBf16); }
TEST(Bf16, RandomFloatsMatchNearestSearch) { check_random(kBf16, 2); }

TEST(Bf16, NamedCases) {
  EXPECT_EQ(wk::f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(wk::f32_to_bf16(-0.0f), 0x8000);
  // Ties: ulp of 1 is 2^-7.
  EXPECT_EQ(wk::f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(wk::f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(wk::f32_to_bf16(std::nextafter(1.0f + 0x1p-8f, 2.0f)), 0x3f81);
  EXPECT_EQ(wk::f32_to_bf16(std::nextafter(1.0f + 0x1p-8f, 0.0f)), 0x3f80);
  // Overflow: the largest float rounds past the largest bf16 (0x7f7f) to inf.
  EXPECT_EQ(wk::f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(wk::f32_to_bf16(from_bits(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(wk::f32_to_bf16(from_bits(0x7f7f8000u)), 0x7f80);  // tie, 0x7f7f is odd
  EXPECT_EQ(wk::f32_to_bf16(-INFINITY), 0xff80);
  // float32 subnormals round within bf16's subnormals.
  EXPECT_EQ(wk::f32_to_bf16(from_bits(0x00008000u)), 0x0000);  // tie to even (0)
  EXPECT_EQ(wk::f32_to_bf16(from_bits(0x00018000u)), 0x0002);  // tie to even (2)
  EXPECT_EQ(wk::f32_to_bf16(from_bits(0x00008001u)), 0x0001);
  EXPECT_EQ(wk::f32_to_bf16(from_bits(0x007fffffu)), 0x0080);  // rounds up into the normals
}

TEST(Bf16, NaNStaysNaN) {
  // Payloads only in the low half would truncate to inf; the quiet bit must keep them NaN.
  for (uint32_t bits : {0x7f800001u, 0xff800001u, 0x7f80ffffu, 0x7fc00000u, 0x7fffffffu, 0xffc12345u}) {
    const uint16_t b = wk::f32_to_bf16(from_bits(bits));
    EXPECT_EQ(b & 0x7f80, 0x7f80) << hex(bits);
    EXPECT_NE(b & 0x0040, 0) << hex(bits);
    EXPECT_EQ(b & 0x8000u, bits >> 31 << 15) << hex(bits);
    EXPECT_TRUE(std::isnan(wk::bf16_to_f32(b)));
  }
}

// ------------------------------------------------------------------------------------ fp8

TEST(E4m3, DecodeAll256MatchFormula) { check_decode_all(kE4m3); }
TEST(E4m3, RoundTripAll256) { check_round_trip_all(kE4m3); }
TEST(E4m3, MidpointsOfEveryAdjacentPair) { check_midpoints(kE4m3); }
TEST(E4m3, RandomFloatsMatchNearestSearch) { check_random(kE4m3, 3); }

TEST(E4m3, NamedCases) {
  EXPECT_EQ(wk::e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(wk::e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(wk::e4m3_to_f32(0x78), 256.0f);  // exponent 1111 is a finite binade here
  EXPECT_EQ(wk::e4m3_to_f32(0x01), 0x1p-9f);  // smallest subnormal
  EXPECT_EQ(wk::e4m3_to_f32(0x07), 7 * 0x1p-9f);
  EXPECT_EQ(wk::e4m3_to_f32(0x08), 0x1p-6f);  // smallest normal
  EXPECT_EQ(wk::e4m3_to_f32(0x38), 1.0f);
  EXPECT_TRUE(std::isnan(wk::e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(wk::e4m3_to_f32(0xff)));
  EXPECT_EQ(bits_of(wk::e4m3_to_f32(0x80)), 0x80000000u);
  EXPECT_EQ(wk::f32_to_e4m3(-0.0f, false), 0x80);
  // Saturation.
  EXPECT_EQ(wk::f32_to_e4m3(1000.0f, true), 0x7e);
  EXPECT_EQ(wk::f32_to_e4m3(-1000.0f, true), 0xfe);
  EXPECT_EQ(wk::f32_to_e4m3(1000.0f, false) & 0x7f, 0x7f);
  EXPECT_EQ(wk::f32_to_e4m3(-1000.0f, false) & 0x7f, 0x7f);
  EXPECT_EQ(wk::f32_to_e4m3(448.0f, false), 0x7e);
  EXPECT_EQ(wk::f32_to_e4m3(464.0f, false), 0x7e);  // tie between 448 (even) and 480
  EXPECT_EQ(wk::f32_to_e4m3(std::nextafter(464.0f, 1000.0f), false) & 0x7f, 0x7f);
  EXPECT_EQ(wk::f32_to_e4m3(std::nextafter(464.0f, 1000.0f), true), 0x7e);
  EXPECT_EQ(wk::f32_to_e4m3(INFINITY, true), 0x7e);
  EXPECT_EQ(wk::f32_to_e4m3(-INFINITY, true), 0xfe);
  EXPECT_EQ(wk::f32_to_e4m3(INFINITY, false) & 0x7f, 0x7f);
  EXPECT_EQ(wk::f32_to_e4m3(NAN, true) & 0x7f, 0x7f);
  EXPECT_EQ(wk::f32_to_e4m3(NAN, false) & 0x7f, 0x7f);
  // Midpoints: 1 + 1/16 is halfway between 1 (0x38) and 1.125 (0x39).
  EXPECT_EQ(wk::f32_to_e4m3(1.0625f, false), 0x38);
  EXPECT_EQ(wk::f32_to_e4m3(1.1875f, false), 0x3a);
  EXPECT_EQ(wk::f32_to_e4m3(0x1p-10f, false), 0x00);      // half the smallest subnormal -> 0
  EXPECT_EQ(wk::f32_to_e4m3(3 * 0x1p-10f, false), 0x02);  // 1.5 subnormal ulps -> 2
}

TEST(E5m2, DecodeAll256MatchFormula) { check_decode_all(kE5m2); }
TEST(E5m2, RoundTripAll256) { check_round_trip_all(kE5m2); }
TEST(E5m2, MidpointsOfEveryAdjacentPair) { check_midpoints(kE5m2); }
TEST(E5m2, RandomFloatsMatchNearestSearch) { check_random(kE5m2, 4); }

TEST(E5m2, NamedCases) {
  EXPECT_EQ(wk::e5m2_to_f32(0x7b), 57344.0f);
  EXPECT_EQ(wk::e5m2_to_f32(0x7c), INFINITY);
  EXPECT_EQ(wk::e5m2_to_f32(0xfc), -INFINITY);
  EXPECT_TRUE(std::isnan(wk::e5m2_to_f32(0x7d)));
  EXPECT_TRUE(std::isnan(wk::e5m2_to_f32(0xfe)));
  EXPECT_EQ(wk::e5m2_to_f32(0x01), 0x1p-16f);
  EXPECT_EQ(wk::e5m2_to_f32(0x3c), 1.0f);
  // Saturation: finite overflow saturates or becomes inf; inf stays inf in both modes.
  EXPECT_EQ(wk::f32_to_e5m2(1e6f, true), 0x7b);
  EXPECT_EQ(wk::f32_to_e5m2(-1e6f, true), 0xfb);
  EXPECT_EQ(wk::f32_to_e5m2(1e6f, false), 0x7c);
  EXPECT_EQ(wk::f32_to_e5m2(-1e6f, false), 0xfc);
  EXPECT_EQ(wk::f32_to_e5m2(INFINITY, true), 0x7c);
  EXPECT_EQ(wk::f32_to_e5m2(-INFINITY, true), 0xfc);
  EXPECT_EQ(wk::f32_to_e5m2(INFINITY, false), 0x7c);
  EXPECT_EQ(wk::f32_to_e5m2(61440.0f, false), 0x7c);  // tie between 57344 (odd) and 2^16
  EXPECT_EQ(wk::f32_to_e5m2(61440.0f, true), 0x7b);
  EXPECT_EQ(wk::f32_to_e5m2(std::nextafter(61440.0f, 0.0f), false), 0x7b);
  const uint8_t n = wk::f32_to_e5m2(NAN, true);
  EXPECT_TRUE((n & 0x7c) == 0x7c && (n & 0x03) != 0);
  EXPECT_NE(n & 0x02, 0) << "quiet bit";
  // 1 + 1/8 is halfway between 1 (0x3c) and 1.25 (0x3d).
  EXPECT_EQ(wk::f32_to_e5m2(1.125f, false), 0x3c);
  EXPECT_EQ(wk::f32_to_e5m2(1.375f, false), 0x3e);
}

// ------------------------------------------------------------------------------------ bulk

namespace {

std::vector<float> interesting_floats(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> v;
  for (float x : {0.0f, -0.0f, 1.0f, -1.0f, 448.0f, 464.0f, 465.0f, 1000.0f, -1000.0f, 57344.0f, 61440.0f, 65504.0f,
                  65520.0f, 1e6f, INFINITY, -INFINITY, NAN, -NAN, 0x1p-24f, 0x1p-9f, 0x1p-16f}) {
    v.push_back(x);
  }
  std::uniform_int_distribution<int> e(-30, 20);
  while (v.size() < n) {
    const uint64_t r = rng();
    v.push_back((r & 1) ? from_bits(static_cast<uint32_t>(r >> 32))
                        : std::ldexp(static_cast<float>(r >> 40) * 0x1p-24f, e(rng)) * ((r & 2) ? -1.0f : 1.0f));
  }
  return v;
}

}  // namespace

TEST(Bulk, WidenMatchesScalar) {
  const size_t n = 100003;
  std::mt19937 rng(11);
  std::vector<uint16_t> h(n);
  std::vector<uint8_t> b(n);
  for (auto& x : h) x = static_cast<uint16_t>(rng());
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  std::vector<float> out(n);
  auto same = [](float x, float y) { return bits_of(x) == bits_of(y); };
  wk::widen_to_f32(out.data(), h.data(), DType::f16, n);
  for (size_t i = 0; i < n; ++i) ASSERT_TRUE(same(out[i], wk::f16_to_f32(h[i]))) << i;
  wk::widen_to_f32(out.data(), h.data(), DType::bf16, n);
  for (size_t i = 0; i < n; ++i) ASSERT_TRUE(same(out[i], wk::bf16_to_f32(h[i]))) << i;
  wk::widen_to_f32(out.data(), b.data(), DType::f8e4m3, n);
  for (size_t i = 0; i < n; ++i) ASSERT_TRUE(same(out[i], wk::e4m3_to_f32(b[i]))) << i;
  wk::widen_to_f32(out.data(), b.data(), DType::f8e5m2, n);
  for (size_t i = 0; i < n; ++i) ASSERT_TRUE(same(out[i], wk::e5m2_to_f32(b[i]))) << i;
  const std::vector<float> src = interesting_floats(n, 12);
  wk::widen_to_f32(out.data(), src.data(), DType::f32, n);
  ASSERT_EQ(std::memcmp(out.data(), src.data(), n * sizeof(float)), 0);
}

TEST(Bulk, NarrowMatchesScalarAndSaturatesFp8) {
  const std::vector<float> src = interesting_floats(100003, 13);
  const size_t n = src.size();
  std::vector<uint16_t> h(n);
  std::vector<uint8_t> b(n);
  wk::narrow_from_f32(h.data(), DType::f16, src.data(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(h[i], wk::f32_to_f16(src[i])) << i;
  wk::narrow_from_f32(h.data(), DType::bf16, src.data(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(h[i], wk::f32_to_bf16(src[i])) << i;
  wk::narrow_from_f32(b.data(), DType::f8e4m3, src.data(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(b[i], wk::f32_to_e4m3(src[i], true)) << i;
  wk::narrow_from_f32(b.data(), DType::f8e5m2, src.data(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(b[i], wk::f32_to_e5m2(src[i], true)) << i;
  std::vector<float> copy(n);
  wk::narrow_from_f32(copy.data(), DType::f32, src.data(), n);
  ASSERT_EQ(std::memcmp(copy.data(), src.data(), n * sizeof(float)), 0);
  // The saturating cases spelled out, since they are the reason the bulk path exists.
  const float big[] = {1000.0f, -1e30f, 61440.0f, INFINITY};
  uint8_t e4[4], e5[4];
  wk::narrow_from_f32(e4, DType::f8e4m3, big, 4);
  wk::narrow_from_f32(e5, DType::f8e5m2, big, 4);
  EXPECT_EQ(e4[0], 0x7e);
  EXPECT_EQ(e4[1], 0xfe);
  EXPECT_EQ(e4[2], 0x7e);
  EXPECT_EQ(e4[3], 0x7e);
  EXPECT_EQ(e5[0], 0x64);  // 1000 rounds to 1024 = 2^10, exponent field 25
  EXPECT_EQ(e5[1], 0xfb);
  EXPECT_EQ(e5[2], 0x7b);
  EXPECT_EQ(e5[3], 0x7c);
}

TEST(Bulk, EmptyAndInvalid) {
  EXPECT_NO_THROW(wk::widen_to_f32(nullptr, nullptr, DType::f16, 0));
  EXPECT_NO_THROW(wk::narrow_from_f32(nullptr, DType::f8e4m3, nullptr, 0));
  float f[2] = {1.0f, 2.0f};
  uint16_t h[2] = {0, 0};
  for (DType bad : {DType::f64, DType::i8, DType::u8, DType::i32, DType::u32, DType::i64, DType::u64,
                    static_cast<DType>(12), static_cast<DType>(-1)}) {
    try {
      wk::widen_to_f32(f, h, bad, 2);
      ADD_FAILURE() << "widen accepted dtype " << static_cast<int>(bad);
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.status(), weft::Status::invalid_argument);
    }
    try {
      wk::narrow_from_f32(h, bad, f, 2);
      ADD_FAILURE() << "narrow accepted dtype " << static_cast<int>(bad);
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.status(), weft::Status::invalid_argument);
    }
  }
  EXPECT_THROW(wk::widen_to_f32(f, nullptr, DType::f16, 2), weft::Error);
  EXPECT_THROW(wk::narrow_from_f32(nullptr, DType::f16, f, 2), weft::Error);
}

// The kernels must not depend on the FPU's state: every rounding mode, and flush-to-zero /
// denormals-are-zero on x86, must give the same bytes as the default state.
TEST(Bulk, IndependentOfRoundingModeAndFlushToZero) {
  std::vector<float> src = interesting_floats(20000, 14);
  // Every f16 value and its neighbours in float32: the subnormal range in particular.
  for (uint32_t c = 0; c < 0x10000; ++c) {
    const float v = wk::f16_to_f32(static_cast<uint16_t>(c));
    src.push_back(v);
    src.push_back(std::nextafter(v, INFINITY));
    src.push_back(std::nextafter(v, -INFINITY));
  }
  for (uint32_t c = 0; c < 256; ++c) {
    for (float v : {wk::e4m3_to_f32(static_cast<uint8_t>(c)), wk::e5m2_to_f32(static_cast<uint8_t>(c))}) {
      src.push_back(v);
      src.push_back(std::nextafter(v, INFINITY));
      src.push_back(std::nextafter(v, -INFINITY));
    }
  }
  const size_t n = src.size();
  std::vector<uint16_t> codes16(0x10000);
  std::vector<uint8_t> codes8(256);
  for (uint32_t c = 0; c < 0x10000; ++c) codes16[c] = static_cast<uint16_t>(c);
  for (uint32_t c = 0; c < 256; ++c) codes8[c] = static_cast<uint8_t>(c);

  // All outputs concatenated as bytes.
  auto run_all = [&]() {
    std::vector<unsigned char> out;
    auto append = [&out](const void* p, size_t bytes) {
      const auto* b = static_cast<const unsigned char*>(p);
      out.insert(out.end(), b, b + bytes);
    };
    std::vector<uint16_t> h(n);
    std::vector<uint8_t> b(n);
    std::vector<float> w(0x10000);
    for (DType t : {DType::f16, DType::bf16}) {
      wk::narrow_from_f32(h.data(), t, src.data(), n);
      append(h.data(), n * 2);
      wk::widen_to_f32(w.data(), codes16.data(), t, codes16.size());
      append(w.data(), codes16.size() * 4);
    }
    for (DType t : {DType::f8e4m3, DType::f8e5m2}) {
      wk::narrow_from_f32(b.data(), t, src.data(), n);
      append(b.data(), n);
      wk::widen_to_f32(w.data(), codes8.data(), t, codes8.size());
      append(w.data(), codes8.size() * 4);
    }
    for (size_t i = 0; i < n; ++i) {
      const uint8_t scalar[4] = {wk::f32_to_e4m3(src[i], false), wk::f32_to_e5m2(src[i], false),
                                 static_cast<uint8_t>(wk::f32_to_f16(src[i])), static_cast<uint8_t>(wk::f32_to_f16(src[i]) >> 8)};
      append(scalar, sizeof scalar);
    }
    return out;
  };

  const std::vector<unsigned char> reference = run_all();
  const int saved_round = std::fegetround();
  for (int mode : {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO}) {
    ASSERT_EQ(std::fesetround(mode), 0);
    const std::vector<unsigned char> got = run_all();
    std::fesetround(saved_round);
    ASSERT_TRUE(got == reference) << "results change with rounding mode " << mode;
  }
#if defined(__SSE2__)
  const unsigned saved_csr = _mm_getcsr();
  _mm_setcsr(saved_csr | 0x8040u);  // FTZ | DAZ
  const std::vector<unsigned char> got = run_all();
  _mm_setcsr(saved_csr);
  ASSERT_TRUE(got == reference) << "results change with flush-to-zero / denormals-are-zero";
#endif
}
