// The comparison rules of the multi-rank tests' reference (reference.h) and the injection
// corruption (inject.h): tolerances are the stated rounding bounds, not looser; NaN, infinity
// and the sign of zero are compared as README.md says; and the corruption WEFT_TEST_INJECT
// applies leaves every tolerance, whatever the float format, op and rank count.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "inject.h"
#include "inputs.h"
#include "reference.h"

namespace {

using mpt::Compare;
using mpt::Expectation;

Expectation expect(weft_dtype_t dt, double v, double abs_sum) {
  Expectation e;
  e.bits = mpt::encode_float(dt, v, false);
  e.value = mpt::decode_float(dt, e.bits);
  e.wide = e.value;
  e.abs_sum = abs_sum;
  return e;
}

uint64_t bits_of(weft_dtype_t dt, double v) { return mpt::encode_float(dt, v, false); }

TEST(Reference, SumToleranceIsTheRoundingBound) {
  // f32, 2 ranks, sum|x| = 2: 2 * gamma_1 * 2 = 4u (u = 2^-24), about 2.4e-7.
  const Expectation e = expect(WEFT_FLOAT32, 1.0, 2.0);
  const double ulp = std::ldexp(1.0, -23);
  EXPECT_TRUE(e.matches(WEFT_FLOAT32, WEFT_SUM, Compare::tolerance, 2, bits_of(WEFT_FLOAT32, 1.0 + ulp)));
  EXPECT_TRUE(e.matches(WEFT_FLOAT32, WEFT_SUM, Compare::tolerance, 2, bits_of(WEFT_FLOAT32, 1.0 - ulp)));
  EXPECT_FALSE(e.matches(WEFT_FLOAT32, WEFT_SUM, Compare::tolerance, 2, bits_of(WEFT_FLOAT32, 1.0 + 3 * ulp)));
  // The old rule (1e-5 * n * sum|x|) accepted 4e-5 here: 300 ulps.
  EXPECT_FALSE(e.matches(WEFT_FLOAT32, WEFT_SUM, Compare::tolerance, 2, bits_of(WEFT_FLOAT32, 1.0 + 3e-5)));
  // f64 the same with u = 2^-53.
  const Expectation d = expect(WEFT_FLOAT64, 1.0, 2.0);
  EXPECT_TRUE(d.matches(WEFT_FLOAT64, WEFT_SUM, Compare::tolerance, 2, bits_of(WEFT_FLOAT64, 1.0 + std::ldexp(1.0, -52))));
  EXPECT_FALSE(d.matches(WEFT_FLOAT64, WEFT_SUM, Compare::tolerance, 2, bits_of(WEFT_FLOAT64, 1.0 + std::ldexp(1.0, -50))));
  // One rank: no addition, no rounding, no tolerance.
  EXPECT_FALSE(e.matches(WEFT_FLOAT32, WEFT_SUM, Compare::tolerance, 1, bits_of(WEFT_FLOAT32, 1.0 + ulp)));
  // The bound scales with the cancelled magnitude: sum|x| = 8 around a result of 0.001.
  const Expectation c = expect(WEFT_FLOAT32, 0.001, 8.0);
  const double b = c.bound(WEFT_FLOAT32, WEFT_SUM, 8, c.bits);
  EXPECT_NEAR(b, 2 * 7 * std::ldexp(1.0, -24) * 8, 1e-5 * b);
}

TEST(Reference, LowPrecisionAllowsOneRoundingStepNotTwo) {
  // bf16 1.0 with no cancellation: the neighbours (one spacing away) pass, two spacings fail.
  const Expectation e = expect(WEFT_BFLOAT16, 1.0, 1.0);
  const uint64_t one = e.bits;
  EXPECT_TRUE(e.matches(WEFT_BFLOAT16, WEFT_SUM, Compare::tolerance, 4, one + 1));
  EXPECT_FALSE(e.matches(WEFT_BFLOAT16, WEFT_SUM, Compare::tolerance, 4, one + 2));
  EXPECT_TRUE(e.matches(WEFT_BFLOAT16, WEFT_PROD, Compare::tolerance, 4, one + 1));
  EXPECT_FALSE(e.matches(WEFT_BFLOAT16, WEFT_PROD, Compare::tolerance, 4, one + 2));
}

TEST(Reference, NanInfinityAndZeroSign) {
  for (Compare cmp : {Compare::exact, Compare::tolerance}) {
    const Expectation nan = expect(WEFT_FLOAT32, NAN, 0);
    // Any NaN matches a NaN (weft.h promises NaN-ness only), nothing else does.
    EXPECT_TRUE(nan.matches(WEFT_FLOAT32, WEFT_SUM, cmp, 4, 0xffc00000u));
    EXPECT_TRUE(nan.matches(WEFT_FLOAT32, WEFT_SUM, cmp, 4, 0x7f800001u));
    EXPECT_FALSE(nan.matches(WEFT_FLOAT32, WEFT_SUM, cmp, 4, bits_of(WEFT_FLOAT32, 1.0)));
    EXPECT_FALSE(nan.matches(WEFT_FLOAT32, WEFT_SUM, cmp, 4, bits_of(WEFT_FLOAT32, INFINITY)));
    const Expectation one = expect(WEFT_FLOAT32, 1.0, 4.0);
    EXPECT_FALSE(one.matches(WEFT_FLOAT32, WEFT_SUM, cmp, 4, 0x7fc00000u));
    // An infinity matches only itself.
    const Expectation inf = expect(WEFT_FLOAT32, INFINITY, INFINITY);
    EXPECT_TRUE(inf.matches(WEFT_FLOAT32, WEFT_SUM, cmp, 4, bits_of(WEFT_FLOAT32, INFINITY)));
    EXPECT_FALSE(inf.matches(WEFT_FLOAT32, WEFT_SUM, cmp, 4, bits_of(WEFT_FLOAT32, -INFINITY)));
    EXPECT_FALSE(inf.matches(WEFT_FLOAT32, WEFT_SUM, cmp, 4, bits_of(WEFT_FLOAT32, 3e38)));
  }
  // The sign of a zero is compared for sum/avg/prod in exact mode, not for min/max.
  const Expectation neg0 = expect(WEFT_FLOAT32, -0.0, 0);
  const uint64_t pos0 = 0;
  for (weft_op_t op : {WEFT_SUM, WEFT_AVG, WEFT_PROD})
    EXPECT_FALSE(neg0.matches(WEFT_FLOAT32, op, Compare::exact, 4, pos0)) << mpt::op_name(op);
  for (weft_op_t op : {WEFT_MIN, WEFT_MAX}) EXPECT_TRUE(neg0.matches(WEFT_FLOAT32, op, Compare::exact, 4, pos0));
  const Expectation e4 = expect(WEFT_FP8_E4M3, -0.0, 0);
  EXPECT_FALSE(e4.matches(WEFT_FP8_E4M3, WEFT_SUM, Compare::exact, 4, 0x00));
  EXPECT_TRUE(e4.matches(WEFT_FP8_E4M3, WEFT_SUM, Compare::exact, 4, 0x80));
}

TEST(Reference, ZeroSignOfTheReference) {
  // IEEE 754 round-to-nearest: -0 + -0 = -0, -0 + +0 = +0, (-0) * (+0) = -0.
  const uint64_t m = bits_of(WEFT_FLOAT16, -0.0), p = bits_of(WEFT_FLOAT16, 0.0);
  uint64_t all_neg[3] = {m, m, m}, one_neg[3] = {p, m, p};
  EXPECT_EQ(mpt::reduce_reference(WEFT_FLOAT16, WEFT_SUM, all_neg, 3).bits, m);
  EXPECT_EQ(mpt::reduce_reference(WEFT_FLOAT16, WEFT_AVG, all_neg, 3).bits, m);
  EXPECT_EQ(mpt::reduce_reference(WEFT_FLOAT16, WEFT_PROD, all_neg, 3).bits, m);
  EXPECT_EQ(mpt::reduce_reference(WEFT_FLOAT16, WEFT_PROD, all_neg, 2).bits, p);
  EXPECT_EQ(mpt::reduce_reference(WEFT_FLOAT16, WEFT_SUM, one_neg, 3).bits, p);
  EXPECT_EQ(mpt::reduce_reference(WEFT_FLOAT16, WEFT_PROD, one_neg, 3).bits, m);
}

// Every result that passes its tolerance fails it once corrupted, for the largest tolerance the
// random inputs can give (sum|x| = n for sum/avg with |x| < 1; products in [2^-n, 2^n]). The 8-
// and 16-bit formats are walked over every finite expected value; f32/f64 over samples. For
// each expected value the accepted results checked are the value itself, its neighbours out to
// the edge of the tolerance (up to 64 steps each way) and the values at the edges.
TEST(Reference, InjectedCorruptionLeavesEveryTolerance) {
  const weft_dtype_t dts[] = {WEFT_FLOAT64, WEFT_FLOAT32, WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FP8_E4M3, WEFT_FP8_E5M2};
  long checked = 0;
  for (weft_dtype_t dt : dts) {
    const int w = static_cast<int>(mpt::dtype_bytes(dt) * 8);
    std::vector<uint64_t> expected;
    if (w <= 16) {
      for (uint64_t b = 0; b < (uint64_t{1} << w); ++b) expected.push_back(b);
    } else {
      for (uint64_t k = 0; k < 6000; ++k) {
        const uint64_t h = mpt::mix64(k + 17);
        // Magnitudes log-uniform over [2^-40, 2^9), either sign, and exact zeros.
        double v = k < 2 ? 0.0 : std::ldexp(1.0 + (h & 0xffff) / 65536.0, static_cast<int>((h >> 16) % 49) - 40);
        if ((h >> 32) & 1) v = -v;
        expected.push_back(mpt::encode_float(dt, v, false));
      }
    }
    for (int n : {2, 3, 8}) {
      for (weft_op_t op : {WEFT_SUM, WEFT_AVG, WEFT_PROD}) {
        for (uint64_t eb : expected) {
          Expectation e;
          e.bits = eb;
          e.value = mpt::decode_float(dt, eb);
          e.wide = e.value;
          if (!std::isfinite(e.value)) continue;
          const double a = std::fabs(e.value);
          if (op == WEFT_PROD) {
            if (a < std::ldexp(1.0, -n) || a > std::ldexp(1.0, n)) continue;
          } else {
            e.abs_sum = n;
            if (a > (op == WEFT_AVG ? 1.0 : static_cast<double>(n))) continue;
          }
          auto ok = [&](uint64_t g) { return e.matches(dt, op, Compare::tolerance, n, g); };
          std::vector<uint64_t> got = {eb};
          // Walk the neighbours by position on the number line (ordinal), both ways.
          for (int dir : {-1, 1}) {
            int64_t o = mpt::ordinal(dt, eb);
            for (int step = 0; step < 64; ++step) {
              o += dir;
              const uint64_t sign = uint64_t{1} << (w - 1);
              const uint64_t g = o < 0 ? (sign | static_cast<uint64_t>(-o)) : static_cast<uint64_t>(o);
              if (!ok(g)) break;
              got.push_back(g);
            }
          }
          const double b = e.bound(dt, op, n, eb);
          for (double edge : {e.value + b, e.value - b}) {
            const uint64_t g = mpt::encode_float(dt, edge, false);
            if (ok(g)) got.push_back(g);
          }
          for (uint64_t g : got) {
            ASSERT_TRUE(ok(g));
            const uint64_t bad = mpt::injected_bits(dt, g);
            ASSERT_FALSE(ok(bad)) << mpt::dtype_name(dt) << " " << mpt::op_name(op) << " n=" << n << ": expected "
                                  << mpt::format_value(dt, eb) << ", accepted " << mpt::format_value(dt, g)
                                  << ", corrupted " << mpt::format_value(dt, bad) << " also accepted";
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 100000);
}

}  // namespace
