// Shared by tests/unit/test_optimizer.cpp: the injection switch and tally (the proof that the
// checks can fail), the bf16/f16 formats written from their definitions (no weft code), and
// random gradients stored in a dtype together with their exact values.
#pragma once

#include <gtest/gtest.h>

#include "inject_tally.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/common/dtype.h"

namespace opttest {

using weft::DType;

// ---------------------------------------------------------------- injection (proof the checks can fail)

using inject::tally;
inline bool inject_enabled() { return inject::enabled(); }

// Flips the top exponent bit of element n/2 (far outside every tolerance: it scales a value by
// 2^+-128 (f32, bf16), 2^+-16 (f16) or 2^+-1024 (double), turns 0 into 2, inf/NaN into finite).
template <class T>
inline bool inject(std::vector<T>& v) {
  if (!inject_enabled() || v.empty()) return false;
  T& x = v[v.size() / 2];
  if constexpr (sizeof(T) == 8) {
    uint64_t b;
    std::memcpy(&b, &x, 8);
    b ^= uint64_t{1} << 62;
    std::memcpy(&x, &b, 8);
  } else if constexpr (sizeof(T) == 4) {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    b ^= 1u << 30;
    std::memcpy(&x, &b, 4);
  } else {
    x = static_cast<T>(x ^ (1u << 14));
  }
  return true;
}

// Checks every element of got with ok(i, got[i]), after an injection when that is on.
template <class T, class Ok>
inline void check_all(std::vector<T> got, const std::string& what, Ok ok) {
  const bool injected = inject(got);
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (ok(i, got[i])) continue;
    if (++bad <= 3 && !injected) ADD_FAILURE() << what << ": element " << i << " of " << got.size();
  }
  if (injected) {
    ++tally().injected;
    if (bad) ++tally().caught;
    else ADD_FAILURE() << what << ": the corrupted result (WEFT_TEST_INJECT) passed the check";
  } else if (bad) {
    ADD_FAILURE() << what << ": " << bad << " elements fail";
  }
}

// ---------------------------------------------------------------- formats (from their definitions)

// x rounded to nearest, ties to even, to `sig` significant bits, steps no finer than 2^min_q,
// +-inf beyond max_finite: binary16 (11, -24, 65504) and bfloat16 (8, -133, (2 - 2^-7) 2^127).
inline double round_format(double x, int sig, int min_q, double max_finite) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e = 0;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  const int q = std::max(e - sig, min_q);
  const double r = std::ldexp(std::nearbyint(std::ldexp(x, -q)), q);  // exact scalings; nearbyint is RNE
  if (std::fabs(r) > max_finite) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return std::copysign(std::fabs(r), x);
}
inline double round_f16(double x) { return round_format(x, 11, -24, 65504.0); }
inline double round_bf16(double x) { return round_format(x, 8, -133, std::ldexp(255.0, 120)); }

inline double decode_f16(uint16_t h) {
  const int exp = (h >> 10) & 31, mant = h & 1023;
  const double mag = exp == 31 ? (mant ? std::nan("") : std::numeric_limits<double>::infinity())
                     : exp == 0 ? std::ldexp(mant, -24)
                                : std::ldexp(1024 + mant, exp - 25);
  return (h & 0x8000) ? -mag : mag;
}
inline double decode_bf16(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
// The bits of a value that bf16 / f16 represent exactly.
inline uint16_t encode_bf16(double v) {
  const auto f = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}
inline uint16_t encode_f16(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a < 0x1p-14) return static_cast<uint16_t>(sign | static_cast<uint16_t>(a * 0x1p24));
  int e = 0;
  const double f = std::frexp(a, &e);  // a = f 2^e, f in [0.5, 1)
  return static_cast<uint16_t>(sign | ((e + 14) << 10) | static_cast<uint16_t>((f * 2 - 1) * 1024));
}

inline double decode(DType d, const std::vector<uint8_t>& buf, size_t i) {
  if (d == DType::f32) {
    float f;
    std::memcpy(&f, buf.data() + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, buf.data() + 2 * i, 2);
  return d == DType::f16 ? decode_f16(h) : decode_bf16(h);
}

// n values of dtype d, uniform in (-range, range), as stored bytes and as their exact values.
inline void random_grads(DType d, size_t n, double range, std::mt19937_64& rng, std::vector<uint8_t>& bytes,
                  std::vector<double>& values) {
  std::uniform_real_distribution<double> u(-range, range);
  bytes.assign(n * (d == DType::f32 ? 4 : 2), 0);
  values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    double v = u(rng);
    if (d == DType::f32) {
      const auto f = static_cast<float>(v);
      std::memcpy(bytes.data() + 4 * i, &f, 4);
      values[i] = f;
      continue;
    }
    v = d == DType::f16 ? round_f16(v) : round_bf16(v);
    const uint16_t h = d == DType::f16 ? encode_f16(v) : encode_bf16(v);
    std::memcpy(bytes.data() + 2 * i, &h, 2);
    values[i] = v;
  }
}

}  // namespace opttest
