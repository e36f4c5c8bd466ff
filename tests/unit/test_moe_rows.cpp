// kernels/cpu/moe_rows.h (MoE dispatch/combine row movements) against two references written
// here, for every row dtype (FLOAT32, BFLOAT16, FLOAT16), hidden 0, 1, odd and large (past the
// kernel's 512-element accumulation block), k = 1..8, negative (padding/dropped) indices and
// NULL weights:
//   - a plain float32 loop in the same order, rounded once with convert.h's scalar codecs: the
//     kernels must equal it bit for bit (the contract defines the result exactly);
//   - the same sums in double (products of two floats are exact in double), with the float32
//     rounding bound stated at kFloatRound below: the kernels must lie within it. This one
//     would still hold for a kernel that summed in another order, so it checks the arithmetic
//     itself and not just agreement with a loop that could share its mistake.
// gather_rows is a copy: its rows must equal the source's bytes (NaN and inf included).
//
// WEFT_TEST_INJECT=1 (ctest unit.moe_rows_inject) corrupts one element of every checked result
// (its top exponent bit) before the check: the run passes only when every corruption is caught.
//
// fp-contract=off: the float32 reference loop below must round a*b and then +, as the kernels do.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "inject_tally.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/moe_rows.h"

namespace {

using weft::DType;
namespace wk = weft::kernels;

::testing::Environment* const kInjectionReport = inject::register_report();

const DType kTypes[] = {DType::f32, DType::bf16, DType::f16};
const size_t kHiddens[] = {0, 1, 7, 33, 1000, 4099};

// ---------------------------------------------------------------- rows of any row dtype
// Values are held as element bit patterns (uint32_t, the low 16 bits for the 2-byte types), so
// that checks compare bits and an injected corruption flips one bit whatever the dtype.

size_t elem_size(DType d) { return d == DType::f32 ? 4 : 2; }

float widen(DType d, uint32_t bits) {
  if (d == DType::bf16) return wk::bf16_to_f32(static_cast<uint16_t>(bits));
  if (d == DType::f16) return wk::f16_to_f32(static_cast<uint16_t>(bits));
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint32_t narrow(DType d, float x) {
  if (d == DType::bf16) return wk::f32_to_bf16(x);
  if (d == DType::f16) return wk::f32_to_f16(x);
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// The buffer the kernels read and write: elements in dtype's storage.
struct Buffer {
  DType dtype;
  std::vector<unsigned char> bytes;
  Buffer(DType d, size_t n) : dtype(d), bytes(n * elem_size(d) + 1) {}  // +1: never empty
  void* data() { return bytes.data(); }
  const void* data() const { return bytes.data(); }
  uint32_t at(size_t i) const {
    uint32_t u = 0;
    std::memcpy(&u, bytes.data() + i * elem_size(dtype), elem_size(dtype));
    return u;
  }
  void set(size_t i, uint32_t u) { std::memcpy(bytes.data() + i * elem_size(dtype), &u, elem_size(dtype)); }
  std::vector<uint32_t> all(size_t n) const {
    std::vector<uint32_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = at(i);
    return v;
  }
};

// n elements of dtype, uniform in [-scale, scale) before rounding to the dtype.
Buffer random_rows(DType d, size_t n, double scale, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-scale, scale);
  Buffer b(d, n);
  for (size_t i = 0; i < n; ++i) b.set(i, narrow(d, static_cast<float>(u(rng))));
  return b;
}

// ---------------------------------------------------------------- checks (injection-aware)

uint32_t top_exponent_bit(DType d) { return d == DType::f32 ? 0x40000000u : 0x4000u; }

// ok(i, got[i]) for every element; with injection, one element is corrupted first and the
// check must then fail.
template <class Ok>
void check_all(std::vector<uint32_t> got, uint32_t flip, const std::string& what, Ok ok) {
  const bool injected = inject::enabled() && !got.empty();
  if (injected) {
    got[got.size() / 2] ^= flip;
    ++inject::tally().injected;
  }
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (ok(i, got[i])) continue;
    if (!injected && bad < 3) ADD_FAILURE() << what << ": element " << i << " is wrong (bits 0x" << std::hex << got[i] << ")";
    ++bad;
  }
  if (injected) {
    if (bad > 0) ++inject::tally().caught;
  } else {
    EXPECT_EQ(bad, 0u) << what;
  }
}

// float32 rounding (unit roundoff) and the row dtype's, and the dtype's absolute rounding step
// near zero (half its smallest subnormal; float32's and bfloat16's are far below any value here).
constexpr double kFloatRound = 0x1p-24;
double dtype_round(DType d) { return d == DType::f32 ? 0x1p-24 : d == DType::bf16 ? 0x1p-8 : 0x1p-11; }
double dtype_tiny(DType d) { return d == DType::f16 ? 0x1p-25 : 0x1p-149; }

// A float32 sum of m terms, each a rounded product, computed left to right: every term passes
// through at most m + 1 roundings (its product and up to m additions), so
// |float32 result - exact| <= gamma(m + 1) * sum |terms|, gamma(n) = n*u / (1 - n*u). The
// double reference's own error (far below 2^-40 relative here) is covered by the 1.001 factor.
double sum_bound(size_t m, double abs_sum) {
  const double nu = static_cast<double>(m + 1) * kFloatRound;
  return 1.001 * nu / (1 - nu) * abs_sum;
}

// ---------------------------------------------------------------- slots

// slot_row [tokens * k]: mostly rows in [0, rows), some negative (dropped: -1 or other negative
// values); token 1 (when there is one) has every slot dropped.
std::vector<int64_t> random_slots(size_t tokens, int k, size_t rows, std::mt19937_64& rng) {
  std::vector<int64_t> s(tokens * static_cast<size_t>(k));
  std::uniform_int_distribution<int64_t> row(0, static_cast<int64_t>(rows) - 1);
  std::uniform_int_distribution<int> coin(0, 4);
  for (size_t i = 0; i < s.size(); ++i) {
    const int c = coin(rng);
    s[i] = c == 0 ? -1 : c == 1 && i % 3 == 0 ? -static_cast<int64_t>(i) - 2 : row(rng);
  }
  for (int j = 0; j < k && tokens > 1; ++j) s[static_cast<size_t>(k) + static_cast<size_t>(j)] = -1;
  return s;
}

std::vector<float> random_weights(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> w(n + 1);  // +1: never empty
  for (auto& x : w) x = u(rng);
  return w;
}

std::string describe(const char* kernel, DType d, size_t hidden, int k, const char* extra = "") {
  return std::string(kernel).append(" ").append(weft::dtype_name(d)).append(" hidden=").append(std::to_string(hidden))
      .append(" k=").append(std::to_string(k)).append(extra);
}

// ---------------------------------------------------------------- gather_rows

TEST(MoeRows, GatherCopiesRowsAndZeroesPadding) {
  std::mt19937_64 rng(1);
  for (DType d : kTypes) {
    for (size_t hidden : kHiddens) {
      const size_t src_rows = 9, n = 14;
      Buffer src = random_rows(d, src_rows * hidden, 3.0, rng);
      if (hidden > 0) {  // special values move unchanged: NaN with a payload, inf, -0
        src.set(0, d == DType::f32 ? 0x7fa00001u : 0x7d01u);
        src.set(src_rows * hidden - 1, d == DType::f32 ? 0xff800000u : 0x8000u);
      }
      std::vector<int64_t> index(n);
      for (size_t i = 0; i < n; ++i) index[i] = i % 4 == 3 ? -1 - static_cast<int64_t>(i) : static_cast<int64_t>((i * 5) % src_rows);
      Buffer dst(d, n * hidden);
      for (size_t i = 0; i < n * hidden; ++i) dst.set(i, 0x3c00u);  // stale contents must be overwritten
      wk::gather_rows(dst.data(), src.data(), index.data(), n, hidden, d);
      check_all(dst.all(n * hidden), top_exponent_bit(d), describe("gather_rows", d, hidden, 1), [&](size_t e, uint32_t got) {
        const int64_t r = index[e / hidden];
        return got == (r < 0 ? 0u : src.at(static_cast<size_t>(r) * hidden + e % hidden));
      });
    }
  }
}

// ---------------------------------------------------------------- combine_rows

void check_combine(DType d, size_t hidden, int k, bool weighted, double scale, std::mt19937_64& rng) {
  const size_t tokens = 5, rows = 11;
  const Buffer src = random_rows(d, rows * hidden, scale, rng);
  const std::vector<int64_t> slot = random_slots(tokens, k, rows, rng);
  const std::vector<float> w = random_weights(tokens * static_cast<size_t>(k), rng);
  Buffer out(d, tokens * hidden);
  for (size_t i = 0; i < tokens * hidden; ++i) out.set(i, 0x3c00u);
  wk::combine_rows(out.data(), src.data(), slot.data(), weighted ? w.data() : nullptr, tokens, k, hidden, d);

  // The float32 loop in slot order, and the double sums with the absolute sums of their terms.
  std::vector<uint32_t> exact32(tokens * hidden);
  std::vector<double> sum(tokens * hidden), abs_sum(tokens * hidden);
  for (size_t t = 0; t < tokens; ++t) {
    for (size_t h = 0; h < hidden; ++h) {
      float acc = 0.0f;
      double s = 0, a = 0;
      for (int j = 0; j < k; ++j) {
        const int64_t r = slot[t * static_cast<size_t>(k) + static_cast<size_t>(j)];
        if (r < 0) continue;
        const float wj = weighted ? w[t * static_cast<size_t>(k) + static_cast<size_t>(j)] : 1.0f;
        const float x = widen(d, src.at(static_cast<size_t>(r) * hidden + h));
        acc = acc + wj * x;
        s += static_cast<double>(wj) * x;
        a += std::fabs(static_cast<double>(wj) * x);
      }
      exact32[t * hidden + h] = narrow(d, acc);
      sum[t * hidden + h] = s;
      abs_sum[t * hidden + h] = a;
    }
  }
  const std::string what = describe("combine_rows", d, hidden, k, weighted ? " weighted" : " unweighted");
  const std::vector<uint32_t> got = out.all(tokens * hidden);
  check_all(got, top_exponent_bit(d), what + " (float32 loop, bitwise)",
            [&](size_t e, uint32_t g) { return g == exact32[e]; });
  check_all(got, top_exponent_bit(d), what + " (double reference, float32 bound)", [&](size_t e, uint32_t g) {
    const double acc_err = sum_bound(static_cast<size_t>(k), abs_sum[e]);
    const double bound = acc_err + dtype_round(d) * (std::fabs(sum[e]) + acc_err) + dtype_tiny(d);
    return std::fabs(static_cast<double>(widen(d, g)) - sum[e]) <= bound;
  });
  // A token with every slot dropped gets +0 (bits 0), not the stale contents.
  if (tokens > 1 && hidden > 0) {
    EXPECT_EQ(out.at(hidden), 0u) << what;
  }
}

TEST(MoeRows, CombineIsTheFloat32SumInSlotOrderRoundedOnce) {
  std::mt19937_64 rng(2);
  for (DType d : kTypes) {
    for (size_t hidden : kHiddens) {
      for (int k = 1; k <= 8; ++k) {
        check_combine(d, hidden, k, true, 4.0, rng);
        check_combine(d, hidden, k, false, 4.0, rng);
      }
    }
  }
}

// Small values: float16 results in its subnormal range, where its rounding step is absolute.
TEST(MoeRows, CombineRoundsTinyResults) {
  std::mt19937_64 rng(3);
  for (DType d : kTypes) {
    for (int k : {1, 3, 8}) check_combine(d, 33, k, true, 0x1p-13, rng);
  }
}

// ---------------------------------------------------------------- scale_gather_rows

TEST(MoeRows, ScaleGatherIsTheFloat32ProductRoundedOnce) {
  std::mt19937_64 rng(4);
  for (DType d : kTypes) {
    for (size_t hidden : kHiddens) {
      for (double scale : {4.0, 0x1p-13}) {
        const size_t src_rows = 6, n = 13;
        const Buffer src = random_rows(d, src_rows * hidden, scale, rng);
        std::vector<int64_t> index(n);
        for (size_t i = 0; i < n; ++i) index[i] = i % 5 == 2 ? -3 : static_cast<int64_t>((i * 7) % src_rows);
        std::vector<float> w = random_weights(n, rng);
        w[0] = -2.5f;
        Buffer dst(d, n * hidden);
        for (size_t i = 0; i < n * hidden; ++i) dst.set(i, 0x3c00u);
        wk::scale_gather_rows(dst.data(), src.data(), index.data(), w.data(), n, hidden, d);
        const std::string what = describe("scale_gather_rows", d, hidden, 1, scale < 1 ? " tiny" : "");
        const std::vector<uint32_t> got = dst.all(n * hidden);
        auto source = [&](size_t e) { return widen(d, src.at(static_cast<size_t>(index[e / hidden]) * hidden + e % hidden)); };
        check_all(got, top_exponent_bit(d), what + " (float32 loop, bitwise)", [&](size_t e, uint32_t g) {
          return g == (index[e / hidden] < 0 ? 0u : narrow(d, w[e / hidden] * source(e)));
        });
        // The float32 product (one rounding), then the dtype's (a second, of the rounded value).
        check_all(got, top_exponent_bit(d), what + " (double reference, float32 bound)", [&](size_t e, uint32_t g) {
          if (index[e / hidden] < 0) return g == 0u;
          const double p = static_cast<double>(w[e / hidden]) * source(e);
          const double bound = kFloatRound * std::fabs(p) + dtype_round(d) * std::fabs(p) * (1 + kFloatRound) + dtype_tiny(d);
          return std::fabs(static_cast<double>(widen(d, g)) - p) <= bound;
        });
      }
    }
  }
}

// ---------------------------------------------------------------- dot_rows

TEST(MoeRows, DotIsTheFloat32SumInElementOrder) {
  std::mt19937_64 rng(5);
  for (DType d : kTypes) {
    for (size_t hidden : kHiddens) {
      for (int k = 1; k <= 8; ++k) {
        const size_t tokens = 4, rows = 10;
        const Buffer a = random_rows(d, tokens * hidden, 2.0, rng);
        const Buffer src = random_rows(d, rows * hidden, 2.0, rng);
        const std::vector<int64_t> slot = random_slots(tokens, k, rows, rng);
        const size_t slots = tokens * static_cast<size_t>(k);
        std::vector<float> out(slots + 1, 7.0f);
        wk::dot_rows(out.data(), a.data(), src.data(), slot.data(), tokens, k, hidden, d);
        std::vector<uint32_t> got(slots), exact32(slots);
        std::vector<double> sum(slots), abs_sum(slots);
        for (size_t s = 0; s < slots; ++s) {
          std::memcpy(&got[s], &out[s], 4);
          float acc = 0.0f;
          double x = 0, ax = 0;
          if (slot[s] >= 0) {
            for (size_t h = 0; h < hidden; ++h) {
              const float p = widen(d, a.at(s / static_cast<size_t>(k) * hidden + h));
              const float q = widen(d, src.at(static_cast<size_t>(slot[s]) * hidden + h));
              acc = acc + p * q;
              x += static_cast<double>(p) * q;
              ax += std::fabs(static_cast<double>(p) * q);
            }
          }
          exact32[s] = narrow(DType::f32, acc);
          sum[s] = x;
          abs_sum[s] = ax;
        }
        const std::string what = describe("dot_rows", d, hidden, k);
        check_all(got, top_exponent_bit(DType::f32), what + " (float32 loop, bitwise)",
                  [&](size_t s, uint32_t g) { return g == exact32[s]; });
        check_all(got, top_exponent_bit(DType::f32), what + " (double reference, float32 bound)", [&](size_t s, uint32_t g) {
          float f;
          std::memcpy(&f, &g, 4);
          return std::fabs(static_cast<double>(f) - sum[s]) <= sum_bound(hidden, abs_sum[s]) + 0x1p-149;
        });
      }
    }
  }
}

// ---------------------------------------------------------------- refusals

void expect_invalid(const std::function<void()>& call, const char* needle) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one mentioning \"" << needle << "\"";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.status(), weft::Status::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(MoeRows, RefusesBadArguments) {
  float buf[16] = {};
  const int64_t idx[2] = {0, 1};
  const float w[2] = {1, 1};
  float out[4] = {};
  expect_invalid([&] { wk::gather_rows(buf, buf, idx, 2, 2, DType::f64); }, "is not FLOAT32, BFLOAT16 or FLOAT16");
  expect_invalid([&] { wk::gather_rows(buf, buf, idx, 2, 2, DType::f8e4m3); }, "gather_rows");
  expect_invalid([&] { wk::gather_rows(nullptr, buf, idx, 2, 2, DType::f32); }, "null dst");
  expect_invalid([&] { wk::gather_rows(buf, buf, nullptr, 2, 2, DType::f32); }, "null index");
  expect_invalid([&] { wk::gather_rows(buf, nullptr, idx, 2, 2, DType::f32); }, "src is NULL but entry 0");
  expect_invalid([&] { wk::scale_gather_rows(buf, buf, idx, nullptr, 2, 2, DType::bf16); }, "null weight");
  expect_invalid([&] { wk::combine_rows(buf, buf, idx, w, 1, -1, 2, DType::f32); }, "k = -1");
  expect_invalid([&] { wk::combine_rows(buf, buf, nullptr, w, 1, 2, 2, DType::f32); }, "null slot_row");
  expect_invalid([&] { wk::combine_rows(nullptr, buf, idx, w, 1, 2, 2, DType::f16); }, "null output");
  expect_invalid([&] { wk::combine_rows(buf, nullptr, idx, w, 1, 2, 2, DType::f16); }, "rows is NULL but entry 0");
  expect_invalid([&] { wk::combine_rows(buf, buf, idx, w, 1, 2, 2, DType::i32); }, "combine_rows");
  expect_invalid([&] { wk::dot_rows(out, nullptr, buf, idx, 1, 2, 2, DType::f32); }, "null a");
  expect_invalid([&] { wk::dot_rows(nullptr, buf, buf, idx, 1, 2, 2, DType::f32); }, "null output");
  expect_invalid([&] { wk::dot_rows(out, buf, buf, idx, 1, 2, 2, DType::u8); }, "dot_rows");
  expect_invalid([&] { wk::gather_rows(buf, buf, idx, SIZE_MAX / 2, 4, DType::f32); }, "overflows");
}

// What needs no buffer is allowed without one: nothing to do, or only padding to write.
TEST(MoeRows, AcceptsEmptyWorkAndAllPaddingWithoutSource) {
  EXPECT_NO_THROW(wk::gather_rows(nullptr, nullptr, nullptr, 0, 8, DType::f32));
  EXPECT_NO_THROW(wk::gather_rows(nullptr, nullptr, nullptr, 8, 0, DType::bf16));
  EXPECT_NO_THROW(wk::combine_rows(nullptr, nullptr, nullptr, nullptr, 0, 3, 8, DType::f16));
  EXPECT_NO_THROW(wk::dot_rows(nullptr, nullptr, nullptr, nullptr, 4, 0, 8, DType::f32));
  uint16_t dst[6];
  std::memset(dst, 0xff, sizeof dst);
  const int64_t none[2] = {-1, -5};
  const float w[2] = {2, 2};
  wk::scale_gather_rows(dst, nullptr, none, w, 2, 3, DType::bf16);
  std::vector<uint32_t> got(dst, dst + 6);
  check_all(got, 0x4000u, "scale_gather_rows of padding only", [](size_t, uint32_t g) { return g == 0u; });
  std::memset(dst, 0xff, sizeof dst);
  wk::combine_rows(dst, nullptr, none, w, 1, 2, 3, DType::f16);
  got.assign(dst, dst + 3);
  check_all(got, 0x4000u, "combine_rows of dropped slots only", [](size_t, uint32_t g) { return g == 0u; });
  float out[2] = {5, 5};
  wk::dot_rows(out, dst, nullptr, none, 1, 2, 3, DType::f16);
  got = {0, 0};
  std::memcpy(got.data(), out, 8);
  check_all(got, 0x40000000u, "dot_rows of dropped slots only", [](size_t, uint32_t g) { return g == 0u; });
}

}  // namespace
