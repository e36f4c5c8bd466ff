// The stand-in NCCL's half/bfloat16/fp8 codecs (fake_nccl_reduce.h). Low-precision floats are
// computed in float32 and rounded back at every step, as NCCL's kernels do for their arithmetic
// (fp8 saturating); NCCL's order of steps (ring/tree) and fused operations may round
// differently, so results can differ from real NCCL in the last bit.
//
// Written from the formats' definitions and nothing else: the stand-in must not share the
// arithmetic of the library whose results it helps to check (weft's codecs are kernels/cpu's).
// Decoding is ldexp of the fields; encoding searches the ordered codes for the nearest value.
// (weft itself hands NCCL only float32, float64, integers and order keys for reductions: it
// widens the narrow types first, core/device/nccl_collectives.cpp.)
#include <cmath>
#include <cstdint>
#include <limits>

#include "tests/cuda_emulator/fake_nccl_reduce.h"

namespace weft::fake_nccl {
namespace {

// A binary format of 1 + ebits + mbits bits. IEEE-like formats spend the all-ones exponent on
// inf and NaN; E4M3 only its all-ones code (per sign) on NaN, the rest are finite.
struct Format {
  int ebits;
  int mbits;
  bool ieee;
  uint32_t sign_bit() const { return uint32_t{1} << (ebits + mbits); }
  uint32_t inf_code() const { return ((uint32_t{1} << ebits) - 1) << mbits; }
  // The largest finite magnitude code.
  uint32_t max_code() const { return ieee ? inf_code() - 1 : sign_bit() - 2; }
  uint32_t nan_code() const { return ieee ? inf_code() | (uint32_t{1} << (mbits - 1)) : sign_bit() - 1; }
};

Format format_of(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16: return {5, 10, true};
    case ncclBfloat16: return {8, 7, true};
    case ncclFloat8e4m3: return {4, 3, false};
    default: return {5, 2, true};  // ncclFloat8e5m2
  }
}

// Value of a finite magnitude code: subnormals scale the mantissa alone.
double magnitude(const Format& f, uint32_t code) {
  const int bias = (1 << (f.ebits - 1)) - 1;
  const uint32_t exp = code >> f.mbits, mant = code & ((uint32_t{1} << f.mbits) - 1);
  if (exp == 0) return std::ldexp(static_cast<double>(mant), 1 - bias - f.mbits);
  return std::ldexp(static_cast<double>(mant | (uint32_t{1} << f.mbits)), static_cast<int>(exp) - bias - f.mbits);
}

double decode(const Format& f, uint32_t code) {
  const bool negative = (code & f.sign_bit()) != 0;
  const uint32_t mag = code & (f.sign_bit() - 1);
  double v;
  if (f.ieee ? mag > f.inf_code() : mag > f.max_code()) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (f.ieee && mag == f.inf_code()) {
    v = std::numeric_limits<double>::infinity();
  } else {
    v = magnitude(f, mag);
  }
  return negative ? -v : v;
}

// Nearest code to x, ties to the even code. Beyond the largest finite value: a value at least
// half an ulp above it (the would-be next code) rounds up, to inf, or to NaN for E4M3, unless
// saturating (then +-max); infinite inputs stay infinite where the format has them.
uint32_t encode(const Format& f, double x, bool saturate) {
  if (std::isnan(x)) return f.nan_code();
  const uint32_t sign = std::signbit(x) ? f.sign_bit() : 0;
  const double a = std::fabs(x);
  const uint32_t top = f.max_code();
  if (std::isinf(a) && f.ieee) return sign | f.inf_code();
  const double max = magnitude(f, top), beyond = max + (max - magnitude(f, top - 1));
  if (a >= max) {
    const bool overflow = a > (max + beyond) / 2 || (a == (max + beyond) / 2 && (top & 1u));
    if (!overflow) return sign | top;
    if (saturate) return sign | top;
    return sign | (f.ieee ? f.inf_code() : f.nan_code());
  }
  // The largest code whose value is <= a (codes of one sign are ordered by value).
  uint32_t lo = 0, hi = top;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo + 1) / 2;
    if (magnitude(f, mid) <= a) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const double below = magnitude(f, lo), above = magnitude(f, lo + 1);
  const bool up = a - below > above - a || (a - below == above - a && (lo & 1u));
  return sign | (up ? lo + 1 : lo);
}

uint32_t load(ncclDataType_t t, const void* p, size_t i) {
  if (type_size(t) == 2) return static_cast<const uint16_t*>(p)[i];
  return static_cast<const uint8_t*>(p)[i];
}

}  // namespace

float widen(ncclDataType_t t, const void* p, size_t i) {
  return static_cast<float>(decode(format_of(t), load(t, p, i)));
}

void narrow(ncclDataType_t t, void* p, size_t i, float v) {
  const bool fp8 = t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
  const uint32_t code = encode(format_of(t), static_cast<double>(v), fp8);
  if (type_size(t) == 2) {
    static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(code);
  } else {
    static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(code);
  }
}

}  // namespace weft::fake_nccl
