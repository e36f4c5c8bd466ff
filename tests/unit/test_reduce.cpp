// Element-wise reduce() and divide_by() against plain scalar references, for every dtype and op.
//
// The references compute differently from the kernels where that is possible: integers through
// 128-bit arithmetic truncated afterwards, float32 through double (one op of two floats in
// double and then rounded to float is the correctly rounded float result), min/max through an
// explicit if-chain. Low-precision floats go through the scalar converters, which
// test_convert checks exhaustively against independent decoders.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/common/status.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/reduce.h"

namespace wk = weft::kernels;
using weft::DType;
using weft::ReduceOp;

namespace {

// ---------------------------------------------------------------- dtype tags

template <class T>
struct Native {
  using S = T;  // storage type
};

struct F16 {
  using S = uint16_t;
  static float widen(S v) { return wk::f16_to_f32(v); }
  static S narrow(float f) { return wk::f32_to_f16(f); }
};
struct Bf16 {
  using S = uint16_t;
  static float widen(S v) { return wk::bf16_to_f32(v); }
  static S narrow(float f) { return wk::f32_to_bf16(f); }
};
struct E4m3 {
  using S = uint8_t;
  static float widen(S v) { return wk::e4m3_to_f32(v); }
  static S narrow(float f) { return wk::f32_to_e4m3(f, true); }  // reductions saturate fp8
};
struct E5m2 {
  using S = uint8_t;
  static float widen(S v) { return wk::e5m2_to_f32(v); }
  static S narrow(float f) { return wk::f32_to_e5m2(f, true); }
};

template <class Tag>
constexpr bool kLowPrecision = !std::is_same_v<Tag, Native<typename Tag::S>>;

template <class Tag>
constexpr bool kFloat = kLowPrecision<Tag> || std::is_floating_point_v<typename Tag::S>;

template <class F>
void visit(DType d, F&& f) {
  switch (d) {
    case DType::f64: return f(Native<double>{});
    case DType::f32: return f(Native<float>{});
    case DType::f16: return f(F16{});
    case DType::bf16: return f(Bf16{});
    case DType::f8e4m3: return f(E4m3{});
    case DType::f8e5m2: return f(E5m2{});
    case DType::i8: return f(Native<int8_t>{});
    case DType::u8: return f(Native<uint8_t>{});
    case DType::i32: return f(Native<int32_t>{});
    case DType::u32: return f(Native<uint32_t>{});
    case DType::i64: return f(Native<int64_t>{});
    case DType::u64: return f(Native<uint64_t>{});
  }
  FAIL() << "bad dtype";
}

const DType kAllDTypes[] = {DType::f64, DType::f32, DType::f16, DType::bf16, DType::f8e4m3, DType::f8e5m2,
                            DType::i8,  DType::u8,  DType::i32, DType::u32,  DType::i64,    DType::u64};
const ReduceOp kAllOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max};

// ---------------------------------------------------------------- references

template <class T>
T ref_float_minmax(ReduceOp op, T x, T y) {
  if (std::isnan(x)) return x;
  if (std::isnan(y)) return y;
  if (x == y) {
    // Only zeros compare equal with different bits; -0 counts as smaller than +0.
    if (x == 0) {
      const bool neg = op == ReduceOp::min ? (std::signbit(x) || std::signbit(y)) : (std::signbit(x) && std::signbit(y));
      return neg ? T(-0.0) : T(0.0);
    }
    return x;
  }
  if (op == ReduceOp::min) return x < y ? x : y;
  return x > y ? x : y;
}

template <class T>
T ref_native(ReduceOp op, T x, T y) {
  if constexpr (std::is_same_v<T, float>) {
    if (op == ReduceOp::sum) return static_cast<float>(static_cast<double>(x) + static_cast<double>(y));
    if (op == ReduceOp::prod) return static_cast<float>(static_cast<double>(x) * static_cast<double>(y));
    return ref_float_minmax(op, x, y);
  } else if constexpr (std::is_same_v<T, double>) {
    if (op == ReduceOp::sum) return x + y;
    if (op == ReduceOp::prod) return x * y;
    return ref_float_minmax(op, x, y);
  } else {
    // 128-bit arithmetic never overflows for two 64-bit operands; the conversion back to T is
    // the modular reduction that the kernel must reproduce.
    using Big = std::conditional_t<std::is_signed_v<T>, __int128, unsigned __int128>;
    switch (op) {
      case ReduceOp::sum: return static_cast<T>(static_cast<Big>(x) + static_cast<Big>(y));
      case ReduceOp::prod: return static_cast<T>(static_cast<Big>(x) * static_cast<Big>(y));
      case ReduceOp::min: return std::min(x, y);
      default: return std::max(x, y);
    }
  }
}

template <class Tag>
typename Tag::S ref_op(ReduceOp op, typename Tag::S x, typename Tag::S y) {
  if constexpr (kLowPrecision<Tag>) {
    return Tag::narrow(ref_native<float>(op, Tag::widen(x), Tag::widen(y)));
  } else {
    return ref_native<typename Tag::S>(op, x, y);
  }
}

template <class Tag>
bool is_nan(typename Tag::S v) {
  if constexpr (kLowPrecision<Tag>) return std::isnan(Tag::widen(v));
  else if constexpr (std::is_floating_point_v<typename Tag::S>) return std::isnan(v);
  else return false;
}

// Bit-exact, except that any NaN matches any NaN.
template <class Tag>
bool same(typename Tag::S got, typename Tag::S want) {
  if (is_nan<Tag>(got) && is_nan<Tag>(want)) return true;
  return std::memcmp(&got, &want, sizeof got) == 0;
}

template <class S>
std::string show(S v) {
  if constexpr (std::is_floating_point_v<S>) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%a", static_cast<double>(v));
    return buf;
  } else if constexpr (std::is_signed_v<S>) {
    return std::to_string(static_cast<long long>(v));
  } else {
    return std::to_string(static_cast<unsigned long long>(v));
  }
}

// ---------------------------------------------------------------- data

template <class Tag>
std::vector<typename Tag::S> random_values(size_t n, std::mt19937_64& rng) {
  using S = typename Tag::S;
  std::vector<S> v(n);
  for (auto& x : v) {
    const uint64_t r = rng();
    if constexpr (std::is_floating_point_v<S> && !kLowPrecision<Tag>) {
      // Mostly ordinary values over a wide range, so products overflow and underflow sometimes,
      // plus the special values min/max must handle.
      const unsigned pick = static_cast<unsigned>(r % 64);
      const S specials[] = {S(0.0), S(-0.0), std::numeric_limits<S>::infinity(), -std::numeric_limits<S>::infinity(),
                            std::numeric_limits<S>::quiet_NaN(), std::numeric_limits<S>::max(),
                            std::numeric_limits<S>::denorm_min()};
      if (pick < 7) {
        x = specials[pick];
      } else {
        const int e = static_cast<int>((r >> 8) % 120) - 60;
        const S mant = static_cast<S>(static_cast<double>(r >> 32) * 0x1p-32);
        x = std::ldexp(mant, e) * ((r >> 6) & 1 ? S(-1) : S(1));
      }
    } else {
      // Integers over their full range (sums and products wrap); narrow floats as raw patterns,
      // which covers every exponent, infinities and NaNs.
      std::memcpy(&x, &r, sizeof x);
    }
  }
  return v;
}

// Makes some pairs equal (and some +-0 pairs) so min/max ties are exercised.
template <class Tag>
void add_ties(std::vector<typename Tag::S>& a, std::vector<typename Tag::S>& b, std::mt19937_64& rng) {
  using S = typename Tag::S;
  for (size_t i = 0; i < a.size(); ++i) {
    const unsigned r = static_cast<unsigned>(rng() % 32);
    if (r == 0) b[i] = a[i];
    if constexpr (kFloat<Tag>) {
      if (r == 1 || r == 2) {
        // +0 and -0 in either order: zero is the all-zero pattern, -0 just the sign bit.
        S pos{}, neg{};
        if constexpr (kLowPrecision<Tag>) neg = static_cast<S>(S{1} << (8 * sizeof(S) - 1));
        else neg = S(-0.0);
        a[i] = r == 1 ? pos : neg;
        b[i] = r == 1 ? neg : pos;
      }
    }
  }
}

// ---------------------------------------------------------------- checks

constexpr size_t kGuard = 16;  // elements past the end that must stay untouched

template <class Tag>
void check_against_reference(ReduceOp op, const std::vector<typename Tag::S>& a,
                             const std::vector<typename Tag::S>& b, const std::vector<typename Tag::S>& got,
                             const char* what) {
  for (size_t i = 0; i < a.size(); ++i) {
    const auto want = ref_op<Tag>(op, a[i], b[i]);
    ASSERT_TRUE(same<Tag>(got[i], want)) << what << " i=" << i << ": " << show(a[i]) << " op " << show(b[i])
                                         << " gave " << show(got[i]) << ", expected " << show(want);
  }
}

template <class Tag>
void run_reference_case(DType dtype, ReduceOp op, size_t n, uint64_t seed) {
  using S = typename Tag::S;
  std::mt19937_64 rng(seed);
  auto a = random_values<Tag>(n, rng);
  auto b = random_values<Tag>(n, rng);
  add_ties<Tag>(a, b, rng);
  // dst has a guard zone filled with a pattern the kernel must not overwrite.
  std::vector<S> dst(n + kGuard);
  std::memset(dst.data(), 0x5a, dst.size() * sizeof(S));
  wk::reduce(dst.data(), a.data(), b.data(), n, dtype, op);
  for (size_t i = n; i < n + kGuard; ++i) {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(&dst[i]);
    for (size_t k = 0; k < sizeof(S); ++k) ASSERT_EQ(p[k], 0x5a) << "wrote past count at " << i;
  }
  dst.resize(n);
  check_against_reference<Tag>(op, a, b, dst, "distinct");
}

template <class Tag>
void run_aliasing_case(DType dtype, ReduceOp op, size_t n, uint64_t seed) {
  using S = typename Tag::S;
  std::mt19937_64 rng(seed);
  auto a = random_values<Tag>(n, rng);
  auto b = random_values<Tag>(n, rng);
  add_ties<Tag>(a, b, rng);
  std::vector<S> d = a;
  wk::reduce(d.data(), d.data(), b.data(), n, dtype, op);
  check_against_reference<Tag>(op, a, b, d, "dst==a");
  d = b;
  wk::reduce(d.data(), a.data(), d.data(), n, dtype, op);
  check_against_reference<Tag>(op, a, b, d, "dst==b");
  d = a;
  wk::reduce(d.data(), d.data(), d.data(), n, dtype, op);
  check_against_reference<Tag>(op, a, a, d, "dst==a==b");
  std::vector<S> out(n);
  wk::reduce(out.data(), a.data(), a.data(), n, dtype, op);
  check_against_reference<Tag>(op, a, a, out, "a==b");
}

struct DTypeOp {
  DType dtype;
  ReduceOp op;
};

std::vector<DTypeOp> all_dtype_ops() {
  std::vector<DTypeOp> v;
  for (DType d : kAllDTypes)
    for (ReduceOp o : kAllOps) v.push_back({d, o});
  return v;
}

std::string dtype_op_name(const ::testing::TestParamInfo<DTypeOp>& info) {
  return std::string(weft::dtype_name(info.param.dtype)) + "_" + weft::op_name(info.param.op);
}

uint64_t seed_of(DTypeOp p, size_t n) {
  return (static_cast<uint64_t>(p.dtype) << 40) ^ (static_cast<uint64_t>(p.op) << 32) ^ n;
}

class ReduceEach : public ::testing::TestWithParam<DTypeOp> {};

TEST_P(ReduceEach, MatchesScalarReference) {
  const DTypeOp p = GetParam();
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1000003}}) {
    SCOPED_TRACE("count " + std::to_string(n));
    visit(p.dtype, [&](auto tag) { run_reference_case<decltype(tag)>(p.dtype, p.op, n, seed_of(p, n)); });
    if (HasFatalFailure()) return;
  }
}

TEST_P(ReduceEach, ExactAliasingOfDst) {
  const DTypeOp p = GetParam();
  // Odd sizes, and more than one block of the low-precision path.
  for (size_t n : {size_t{1}, size_t{7}, size_t{1025}, size_t{5003}}) {
    SCOPED_TRACE("count " + std::to_string(n));
    visit(p.dtype, [&](auto tag) { run_aliasing_case<decltype(tag)>(p.dtype, p.op, n, seed_of(p, n) + 1); });
    if (HasFatalFailure()) return;
  }
}

TEST_P(ReduceEach, CountZeroTouchesNothing) {
  const DTypeOp p = GetParam();
  EXPECT_NO_THROW(wk::reduce(nullptr, nullptr, nullptr, 0, p.dtype, p.op));
  uint64_t x = 0x0123456789abcdefull, y = x, z = x;
  wk::reduce(&x, &y, &z, 0, p.dtype, p.op);
  EXPECT_EQ(x, 0x0123456789abcdefull);
}

INSTANTIATE_TEST_SUITE_P(AllDTypesAndOps, ReduceEach, ::testing::ValuesIn(all_dtype_ops()), dtype_op_name);

// ---------------------------------------------------------------- named cases

// Runs one (a, b) pair through a long buffer so the vectorised body, not only the scalar
// tail, sees it, and returns the result (checking all positions agree).
template <class T>
T reduce_pair(DType dtype, ReduceOp op, T x, T y, size_t n = 37) {
  std::vector<T> a(n, x), b(n, y), d(n);
  wk::reduce(d.data(), a.data(), b.data(), n, dtype, op);
  for (size_t i = 1; i < n; ++i) EXPECT_EQ(std::memcmp(&d[i], &d[0], sizeof(T)), 0) << "position " << i;
  return d[0];
}

TEST(ReduceWrap, IntegersWrapModulo2PowBits) {
  constexpr int32_t i32max = std::numeric_limits<int32_t>::max(), i32min = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(reduce_pair<int32_t>(DType::i32, ReduceOp::sum, i32max, 1), i32min);
  EXPECT_EQ(reduce_pair<int32_t>(DType::i32, ReduceOp::sum, i32min, -1), i32max);
  EXPECT_EQ(reduce_pair<int32_t>(DType::i32, ReduceOp::prod, i32max, 2), -2);
  EXPECT_EQ(reduce_pair<int32_t>(DType::i32, ReduceOp::prod, i32min, -1), i32min);
  EXPECT_EQ(reduce_pair<int32_t>(DType::i32, ReduceOp::prod, 65536, 65536), 0);
  EXPECT_EQ(reduce_pair<uint8_t>(DType::u8, ReduceOp::sum, 255, 255), 254);
  EXPECT_EQ(reduce_pair<uint8_t>(DType::u8, ReduceOp::prod, 255, 2), 254);
  EXPECT_EQ(reduce_pair<uint8_t>(DType::u8, ReduceOp::prod, 255, 255), 1);
  EXPECT_EQ(reduce_pair<uint8_t>(DType::u8, ReduceOp::prod, 16, 16), 0);
  EXPECT_EQ(reduce_pair<int8_t>(DType::i8, ReduceOp::sum, 127, 1), -128);
  EXPECT_EQ(reduce_pair<int8_t>(DType::i8, ReduceOp::prod, -128, -1), -128);
  EXPECT_EQ(reduce_pair<int8_t>(DType::i8, ReduceOp::prod, 64, 2), -128);
  EXPECT_EQ(reduce_pair<uint32_t>(DType::u32, ReduceOp::sum, 0xffffffffu, 1u), 0u);
  EXPECT_EQ(reduce_pair<uint32_t>(DType::u32, ReduceOp::prod, 0xffffffffu, 0xffffffffu), 1u);
  constexpr int64_t i64max = std::numeric_limits<int64_t>::max(), i64min = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(reduce_pair<int64_t>(DType::i64, ReduceOp::sum, i64max, 1), i64min);
  EXPECT_EQ(reduce_pair<int64_t>(DType::i64, ReduceOp::prod, i64min, -1), i64min);
  EXPECT_EQ(reduce_pair<int64_t>(DType::i64, ReduceOp::prod, int64_t{1} << 32, int64_t{1} << 32), 0);
  EXPECT_EQ(reduce_pair<uint64_t>(DType::u64, ReduceOp::prod, ~uint64_t{0}, ~uint64_t{0}), 1u);
  EXPECT_EQ(reduce_pair<uint64_t>(DType::u64, ReduceOp::sum, ~uint64_t{0}, 2u), 1u);
  // Signed min/max compare as signed, unsigned as unsigned.
  EXPECT_EQ(reduce_pair<int8_t>(DType::i8, ReduceOp::min, -1, 1), -1);
  EXPECT_EQ(reduce_pair<uint8_t>(DType::u8, ReduceOp::min, 255, 1), 1);
  EXPECT_EQ(reduce_pair<int64_t>(DType::i64, ReduceOp::max, i64min, -1), -1);
  EXPECT_EQ(reduce_pair<uint64_t>(DType::u64, ReduceOp::max, ~uint64_t{0}, 1u), ~uint64_t{0});
}

template <class T>
void check_nan_minmax(DType dtype) {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (ReduceOp op : {ReduceOp::min, ReduceOp::max}) {
    EXPECT_TRUE(std::isnan(reduce_pair<T>(dtype, op, nan, T(1))));
    EXPECT_TRUE(std::isnan(reduce_pair<T>(dtype, op, T(1), nan)));
    EXPECT_TRUE(std::isnan(reduce_pair<T>(dtype, op, nan, nan)));
    EXPECT_TRUE(std::isnan(reduce_pair<T>(dtype, op, -std::numeric_limits<T>::infinity(), nan)));
    EXPECT_TRUE(std::isnan(reduce_pair<T>(dtype, op, nan, std::numeric_limits<T>::infinity())));
  }
  // Signed zeros: -0 < +0, whichever side it is on.
  EXPECT_TRUE(std::signbit(reduce_pair<T>(dtype, ReduceOp::min, T(0.0), T(-0.0))));
  EXPECT_TRUE(std::signbit(reduce_pair<T>(dtype, ReduceOp::min, T(-0.0), T(0.0))));
  EXPECT_FALSE(std::signbit(reduce_pair<T>(dtype, ReduceOp::max, T(0.0), T(-0.0))));
  EXPECT_FALSE(std::signbit(reduce_pair<T>(dtype, ReduceOp::max, T(-0.0), T(0.0))));
  EXPECT_EQ(reduce_pair<T>(dtype, ReduceOp::min, -std::numeric_limits<T>::infinity(), T(3)),
            -std::numeric_limits<T>::infinity());
  EXPECT_EQ(reduce_pair<T>(dtype, ReduceOp::max, T(-2), T(3)), T(3));
  EXPECT_TRUE(std::isnan(reduce_pair<T>(dtype, ReduceOp::sum, nan, T(1))));
  EXPECT_TRUE(std::isnan(reduce_pair<T>(dtype, ReduceOp::prod, T(0), std::numeric_limits<T>::infinity())));
}

TEST(ReduceFloat, NaNPropagatesThroughMinMaxF32) { check_nan_minmax<float>(DType::f32); }
TEST(ReduceFloat, NaNPropagatesThroughMinMaxF64) { check_nan_minmax<double>(DType::f64); }

TEST(ReduceFloat, NaNPropagatesThroughMinMaxLowPrecision) {
  // Quiet NaN and the signed-zero pair in each format's own encoding.
  struct Case {
    DType d;
    uint16_t nan, one, neg_zero;
  };
  for (Case c : {Case{DType::f16, 0x7e00, 0x3c00, 0x8000}, Case{DType::bf16, 0x7fc0, 0x3f80, 0x8000},
                 Case{DType::f8e4m3, 0x7f, 0x38, 0x80}, Case{DType::f8e5m2, 0x7e, 0x3c, 0x80}}) {
    SCOPED_TRACE(weft::dtype_name(c.d));
    auto run = [&](ReduceOp op, uint16_t x, uint16_t y) -> float {
      if (weft::dtype_size(c.d) == 2) {
        const uint16_t r = reduce_pair<uint16_t>(c.d, op, x, y);
        return c.d == DType::f16 ? wk::f16_to_f32(r) : wk::bf16_to_f32(r);
      }
      const uint8_t r = reduce_pair<uint8_t>(c.d, op, static_cast<uint8_t>(x), static_cast<uint8_t>(y));
      return c.d == DType::f8e4m3 ? wk::e4m3_to_f32(r) : wk::e5m2_to_f32(r);
    };
    for (ReduceOp op : {ReduceOp::min, ReduceOp::max, ReduceOp::sum, ReduceOp::prod}) {
      EXPECT_TRUE(std::isnan(run(op, c.nan, c.one)));
      EXPECT_TRUE(std::isnan(run(op, c.one, c.nan)));
    }
    EXPECT_TRUE(std::signbit(run(ReduceOp::min, 0, c.neg_zero)));
    EXPECT_TRUE(std::signbit(run(ReduceOp::min, c.neg_zero, 0)));
    EXPECT_FALSE(std::signbit(run(ReduceOp::max, c.neg_zero, 0)));
  }
}

TEST(ReduceFloat, Fp8SaturatesF16DoesNot) {
  EXPECT_EQ(reduce_pair<uint8_t>(DType::f8e4m3, ReduceOp::sum, 0x7e, 0x7e), 0x7e);    // 448 + 448
  EXPECT_EQ(reduce_pair<uint8_t>(DType::f8e4m3, ReduceOp::sum, 0xfe, 0xfe), 0xfe);    // -448 - 448
  EXPECT_EQ(reduce_pair<uint8_t>(DType::f8e4m3, ReduceOp::prod, 0x7e, 0x7e), 0x7e);   // 448 * 448
  EXPECT_EQ(reduce_pair<uint8_t>(DType::f8e5m2, ReduceOp::sum, 0x7b, 0x7b), 0x7b);    // 57344 * 2
  EXPECT_EQ(reduce_pair<uint8_t>(DType::f8e5m2, ReduceOp::prod, 0xfb, 0x7b), 0xfb);
  EXPECT_EQ(reduce_pair<uint8_t>(DType::f8e5m2, ReduceOp::sum, 0x7c, 0x3c), 0x7c);    // inf + 1 stays inf
  EXPECT_EQ(reduce_pair<uint8_t>(DType::f8e5m2, ReduceOp::max, 0xfc, 0x3c), 0x3c);
  EXPECT_TRUE(std::isnan(wk::e5m2_to_f32(reduce_pair<uint8_t>(DType::f8e5m2, ReduceOp::sum, 0x7c, 0xfc))));
  EXPECT_EQ(reduce_pair<uint16_t>(DType::f16, ReduceOp::sum, 0x7bff, 0x7bff), 0x7c00);   // 65504*2 -> inf
  EXPECT_EQ(reduce_pair<uint16_t>(DType::bf16, ReduceOp::sum, 0x7f7f, 0x7f7f), 0x7f80);  // max*2 -> inf
  // Computed in f32 and rounded once: 1 + 2^-11 is exact in f32, then a tie in f16 -> 1.
  EXPECT_EQ(reduce_pair<uint16_t>(DType::f16, ReduceOp::sum, 0x3c00, 0x1000), 0x3c00);
  // 1 + 3*2^-11 rounds up (tie to even) to 1 + 2^-9.
  EXPECT_EQ(reduce_pair<uint16_t>(DType::f16, ReduceOp::sum, 0x3c01, 0x1000), 0x3c02);
}

TEST(ReduceErrors, AvgAndInvalidValuesRejected) {
  float a[3] = {1, 2, 3}, b[3] = {1, 2, 3}, d[3];
  auto expect_invalid = [&](DType dt, ReduceOp op, size_t n) {
    try {
      wk::reduce(d, a, b, n, dt, op);
      ADD_FAILURE() << "accepted dtype " << static_cast<int>(dt) << " op " << static_cast<int>(op) << " n " << n;
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.status(), weft::Status::invalid_argument) << e.what();
    }
  };
  for (DType dt : kAllDTypes) {
    expect_invalid(dt, ReduceOp::avg, 3);
    expect_invalid(dt, ReduceOp::avg, 0);
  }
  expect_invalid(DType::f32, static_cast<ReduceOp>(5), 3);
  expect_invalid(DType::f32, static_cast<ReduceOp>(-1), 3);
  expect_invalid(static_cast<DType>(12), ReduceOp::sum, 3);
  expect_invalid(static_cast<DType>(-1), ReduceOp::sum, 3);
  expect_invalid(static_cast<DType>(99), ReduceOp::sum, 0);
  EXPECT_THROW(wk::reduce(nullptr, a, b, 3, DType::f32, ReduceOp::sum), weft::Error);
  EXPECT_THROW(wk::reduce(d, nullptr, b, 3, DType::f32, ReduceOp::sum), weft::Error);
  EXPECT_THROW(wk::reduce(d, a, nullptr, 3, DType::f32, ReduceOp::sum), weft::Error);
}

// ---------------------------------------------------------------- divide_by

// Integer reference: truncation toward zero computed in double (exact for these magnitudes).
template <class T>
T ref_int_div(T x, int n) {
  return static_cast<T>(std::trunc(static_cast<double>(x) / static_cast<double>(n)));
}

TEST(DivideBy, SmallIntegersExhaustive) {
  for (int n : {1, 2, 3, 7, 127, 128, 255, 256, 1000}) {
    std::vector<int8_t> s(256);
    std::vector<uint8_t> u(256);
    for (int i = 0; i < 256; ++i) {
      s[static_cast<size_t>(i)] = static_cast<int8_t>(i - 128);
      u[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
    }
    wk::divide_by(s.data(), s.size(), DType::i8, n);
    wk::divide_by(u.data(), u.size(), DType::u8, n);
    for (int i = 0; i < 256; ++i) {
      ASSERT_EQ(s[static_cast<size_t>(i)], ref_int_div<int8_t>(static_cast<int8_t>(i - 128), n)) << i << "/" << n;
      ASSERT_EQ(u[static_cast<size_t>(i)], ref_int_div<uint8_t>(static_cast<uint8_t>(i), n)) << i << "/" << n;
    }
  }
}

TEST(DivideBy, NamedIntegerCases) {
  std::vector<int32_t> v = {7, -7, 1, -1, 6, -6, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  wk::divide_by(v.data(), v.size(), DType::i32, 2);
  EXPECT_EQ(v, (std::vector<int32_t>{3, -3, 0, 0, 3, -3, -1073741824, 1073741823}));
  std::vector<int64_t> w = {std::numeric_limits<int64_t>::min(), -15, 15, std::numeric_limits<int64_t>::max()};
  wk::divide_by(w.data(), w.size(), DType::i64, 4);
  EXPECT_EQ(w, (std::vector<int64_t>{std::numeric_limits<int64_t>::min() / 4, -3, 3, std::numeric_limits<int64_t>::max() / 4}));
  std::vector<uint64_t> x = {~uint64_t{0}, 9};
  wk::divide_by(x.data(), x.size(), DType::u64, 2);
  EXPECT_EQ(x, (std::vector<uint64_t>{~uint64_t{0} >> 1, 4}));
  std::vector<uint32_t> y = {0xffffffffu, 5};
  wk::divide_by(y.data(), y.size(), DType::u32, 1);
  EXPECT_EQ(y, (std::vector<uint32_t>{0xffffffffu, 5}));
}

// Random buffers for every dtype against a per-element reference.
template <class Tag>
void check_divide_random(DType dtype, int n, size_t count, uint64_t seed) {
  using S = typename Tag::S;
  std::mt19937_64 rng(seed);
  const auto src = random_values<Tag>(count, rng);
  auto buf = src;
  wk::divide_by(buf.data(), count, dtype, n);
  for (size_t i = 0; i < count; ++i) {
    S want;
    if constexpr (kLowPrecision<Tag>) {
      // In float32, then rounded once (and saturated for fp8, not that division can overflow).
      want = Tag::narrow(static_cast<float>(static_cast<double>(Tag::widen(src[i])) / n));
    } else if constexpr (std::is_same_v<S, float>) {
      want = static_cast<float>(static_cast<double>(src[i]) / n);
    } else if constexpr (std::is_same_v<S, double>) {
      want = src[i] / static_cast<double>(n);
    } else if constexpr (sizeof(S) <= 4) {
      want = ref_int_div<S>(src[i], n);
    } else {
      // 64-bit: check the defining property instead: x = q*n + r, |r| < n, r has x's sign.
      const S q = buf[i];
      const __int128 r = static_cast<__int128>(src[i]) - static_cast<__int128>(q) * n;
      const bool ok = (r == 0) || ((r > 0) == (src[i] > 0) && (r < 0 ? -r : r) < n);
      ASSERT_TRUE(ok) << show(src[i]) << " / " << n << " = " << show(q);
      continue;
    }
    ASSERT_TRUE(same<Tag>(buf[i], want)) << show(src[i]) << " / " << n << " gave " << show(buf[i]) << ", expected "
                                         << show(want) << " at " << i;
  }
}

class DivideEach : public ::testing::TestWithParam<DType> {};

TEST_P(DivideEach, MatchesScalarReference) {
  const DType d = GetParam();
  for (int n : {1, 3, 8, 1000}) {
    for (size_t count : {size_t{1}, size_t{7}, size_t{100003}}) {
      SCOPED_TRACE("n " + std::to_string(n) + " count " + std::to_string(count));
      visit(d, [&](auto tag) { check_divide_random<decltype(tag)>(d, n, count, static_cast<uint64_t>(n) * 7919 + count); });
      if (HasFatalFailure()) return;
    }
  }
}

TEST_P(DivideEach, RejectsNonPositiveDivisorAndAcceptsEmpty) {
  const DType d = GetParam();
  uint64_t buf[2] = {8, 8};
  for (int n : {0, -1, -3}) {
    try {
      wk::divide_by(buf, 2, d, n);
      ADD_FAILURE() << "accepted divisor " << n;
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.status(), weft::Status::invalid_argument);
    }
  }
  EXPECT_NO_THROW(wk::divide_by(nullptr, 0, d, 4));
  EXPECT_THROW(wk::divide_by(nullptr, 2, d, 4), weft::Error);
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, DivideEach, ::testing::ValuesIn(kAllDTypes),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(weft::dtype_name(info.param)); });

TEST(DivideBy, FloatCases) {
  std::vector<float> f = {1.0f, -3.0f, 0.0f, -0.0f, INFINITY, NAN};
  wk::divide_by(f.data(), f.size(), DType::f32, 3);
  EXPECT_EQ(f[0], 1.0f / 3.0f);
  EXPECT_EQ(f[1], -1.0f);
  EXPECT_FALSE(std::signbit(f[2]));
  EXPECT_TRUE(std::signbit(f[3]));
  EXPECT_EQ(f[4], INFINITY);
  EXPECT_TRUE(std::isnan(f[5]));
  std::vector<double> g = {1.0, -7.0};
  wk::divide_by(g.data(), g.size(), DType::f64, 2);
  EXPECT_EQ(g, (std::vector<double>{0.5, -3.5}));
  uint16_t h[2] = {0x4200, 0xc000};  // f16 3, -2
  wk::divide_by(h, 2, DType::f16, 2);
  EXPECT_EQ(h[0], 0x3e00);  // 1.5
  EXPECT_EQ(h[1], 0xbc00);  // -1
  uint8_t e[1] = {0x01};  // e4m3 smallest subnormal 2^-9, halved: tie to even -> 0
  wk::divide_by(e, 1, DType::f8e4m3, 2);
  EXPECT_EQ(e[0], 0x00);
  EXPECT_THROW(wk::divide_by(f.data(), 1, static_cast<DType>(12), 2), weft::Error);
}

}  // namespace
