// kernels/cuda against the test suite's own reference (tests/multiproc/reference.h: codecs and
// reductions written from weft.h's rules, sharing no code with weft): large random inputs
// (every bit pattern, NaN and inf included), odd sizes, unaligned and aliased buffers. Results
// must be the reference's exactly, as Expectation::matches reads "exact": the same value, a NaN
// for a NaN (the payload is not checked).
//
// On a GPU this runs the device code; in the CUDA-emulated build it runs the same .cu files
// compiled for the host (tests/cuda_emulator/kernels_on_cpu.cpp), so a wrong kernel fails on
// every CI run. WEFT_TEST_INJECT=1 corrupts every result before it is checked (injection.h);
// the run then fails unless every corruption was caught.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/common/dtype.h"
#include "core/common/status.h"
#include "gpu_test_util.h"
#include "injection.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/fill.h"
#include "kernels/cuda/order_key.h"
#include "kernels/cuda/reduce.h"
#include "reference.h"

namespace {

using weft::DType;
using weft::ReduceOp;
using weft::gputest::DeviceBuffer;
namespace gpu = weft::kernels::cuda;

constexpr size_t kLarge = (size_t{1} << 20) + 37;  // odd: exercises the vector tail

// weft's internal enums and weft.h's have the same values (capi passes them through).
DType internal(weft_dtype_t d) { return static_cast<DType>(d); }
ReduceOp internal(weft_op_t op) { return static_cast<ReduceOp>(op); }
static_assert(static_cast<int>(DType::u64) == WEFT_UINT64 && static_cast<int>(DType::f8e5m2) == WEFT_FP8_E5M2);
static_assert(static_cast<int>(ReduceOp::max) == WEFT_MAX);

mpt::InjectTally& tally() {
  static mpt::InjectTally t;
  return t;
}

// In an injection run: at least one result was corrupted and every one was caught.
class InjectionReport : public ::testing::Environment {
 public:
  void TearDown() override {
    std::string why;
    if (!mpt::inject_enabled() || !weft::gputest::gpu_available(&why)) return;
    EXPECT_TRUE(tally().report(false)) << "WEFT_TEST_INJECT: a corrupted result passed, or none was corrupted";
  }
};
::testing::Environment* const kInjectionReport = ::testing::AddGlobalTestEnvironment(new InjectionReport);

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t x = rng();
    for (size_t k = 0; k < 8 && i + k < n; ++k) v[i + k] = static_cast<uint8_t>(x >> (8 * k));
  }
  return v;
}

bool saturates(weft_dtype_t d) { return d == WEFT_FP8_E4M3 || d == WEFT_FP8_E5M2; }

mpt::Expectation exactly(weft_dtype_t d, uint64_t bits) {
  mpt::Expectation e;
  e.bits = bits;
  e.value = mpt::is_float(d) ? mpt::decode_float(d, bits) : 0;
  return e;
}

// Float32 bits of a value that is exactly a float (every narrow value widened).
uint64_t f32_bits_of(double v) { return mpt::encode_float(WEFT_FLOAT32, v, false); }
float f32_of(uint64_t bits) { return static_cast<float>(mpt::decode_float(WEFT_FLOAT32, bits)); }

// Checks a device result of `count` elements of d against want(i), after injection (if on).
// `op` is the reduction that made the result, for the exact rule's zero sign (MIN/MAX leave it
// open); conversions, division and fills keep the sign as a sum does.
template <class Want>
void expect_reference(std::vector<uint8_t> got, weft_dtype_t d, size_t count, Want&& want, const std::string& what,
                      weft_op_t op = WEFT_SUM) {
  ASSERT_EQ(got.size(), count * mpt::dtype_bytes(d)) << what;
  const bool injected = weft::gputest::inject(got.data(), d, count);
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    const mpt::Expectation e = want(i);
    const uint64_t g = mpt::load_bits(d, got.data(), i);
    if (e.matches(d, op, mpt::Compare::exact, 2, g)) continue;
    if (++bad <= 5 && !injected) {
      ADD_FAILURE() << what << ": element " << i << ": expected " << mpt::format_value(d, e.bits) << ", got "
                    << mpt::format_value(d, g);
    }
  }
  tally().record(mpt::dtype_name(d), injected, bad != 0);
  if (injected != (bad != 0)) {
    ADD_FAILURE() << what << (bad ? ": " + std::to_string(bad) + " elements differ from the reference"
                                  : ": the corrupted result (WEFT_TEST_INJECT) passed the check");
  }
}

const weft_dtype_t kAll[] = {WEFT_FLOAT64, WEFT_FLOAT32, WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FP8_E4M3, WEFT_FP8_E5M2,
                             WEFT_INT8,    WEFT_UINT8,   WEFT_INT32,   WEFT_UINT32,   WEFT_INT64,    WEFT_UINT64};
const weft_op_t kOps[] = {WEFT_SUM, WEFT_PROD, WEFT_MIN, WEFT_MAX};

std::string label(weft_dtype_t d, weft_op_t op) { return std::string(mpt::dtype_name(d)) + " " + mpt::op_name(op); }

// a[i] op b[i] as the reference reduces two ranks' values.
mpt::Expectation reduced(weft_dtype_t d, weft_op_t op, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                         size_t i) {
  const uint64_t v[2] = {mpt::load_bits(d, a.data(), i), mpt::load_bits(d, b.data(), i)};
  return mpt::reduce_reference(d, op, v, 2);
}

TEST(CudaReduce, MatchesReferenceForEveryDtypeAndOp) {
  WEFT_REQUIRE_GPU();
  for (weft_dtype_t d : kAll) {
    const size_t bytes = kLarge * mpt::dtype_bytes(d);
    auto a = random_bytes(bytes, 1 + static_cast<uint64_t>(d));
    auto b = random_bytes(bytes, 100 + static_cast<uint64_t>(d));
    DeviceBuffer da(bytes), db(bytes), dc(bytes);
    ASSERT_TRUE(da.get() && db.get() && dc.get());
    da.upload(a.data());
    db.upload(b.data());
    for (weft_op_t op : kOps) {
      gpu::reduce(dc.get(), da.get(), db.get(), kLarge, internal(d), internal(op), nullptr);
      WEFT_CUDA_OK(cudaDeviceSynchronize());
      expect_reference(dc.download(), d, kLarge, [&](size_t i) { return reduced(d, op, a, b, i); }, label(d, op),
                       op);
    }
  }
}

TEST(CudaReduce, AliasedAndUnalignedBuffers) {
  WEFT_REQUIRE_GPU();
  for (weft_dtype_t d : kAll) {
    const size_t e = mpt::dtype_bytes(d), n = 4099, bytes = (n + 1) * e;
    auto a = random_bytes(bytes, 7 + static_cast<uint64_t>(d));
    auto b = random_bytes(bytes, 70 + static_cast<uint64_t>(d));
    DeviceBuffer da(bytes), db(bytes);
    ASSERT_TRUE(da.get() && db.get());
    // dst == a, one element past the allocation's alignment (the scalar path); element 0 stays.
    da.upload(a.data());
    db.upload(b.data());
    gpu::reduce(da.get<char>() + e, da.get<char>() + e, db.get<char>() + e, n, internal(d), ReduceOp::max, nullptr);
    WEFT_CUDA_OK(cudaDeviceSynchronize());
    expect_reference(da.download(), d, n + 1,
                     [&](size_t i) {
                       return i == 0 ? exactly(d, mpt::load_bits(d, a.data(), 0)) : reduced(d, WEFT_MAX, a, b, i);
                     },
                     label(d, WEFT_MAX) + " unaligned, dst == a", WEFT_MAX);
    // dst == b, aligned (the vector path).
    da.upload(a.data());
    db.upload(b.data());
    gpu::reduce(db.get(), da.get(), db.get(), n, internal(d), ReduceOp::sum, nullptr);
    WEFT_CUDA_OK(cudaDeviceSynchronize());
    expect_reference(db.download(), d, n + 1,
                     [&](size_t i) {
                       return i == n ? exactly(d, mpt::load_bits(d, b.data(), n)) : reduced(d, WEFT_SUM, a, b, i);
                     },
                     label(d, WEFT_SUM) + " dst == b");
  }
}

TEST(CudaReduce, ZeroCountAndBadArguments) {
  WEFT_REQUIRE_GPU();
  EXPECT_NO_THROW(gpu::reduce(nullptr, nullptr, nullptr, 0, DType::f32, ReduceOp::sum, nullptr));
  EXPECT_THROW(gpu::reduce(nullptr, nullptr, nullptr, 0, DType::f32, ReduceOp::avg, nullptr), weft::Error);
  EXPECT_THROW(gpu::reduce(nullptr, nullptr, nullptr, 5, DType::f32, ReduceOp::sum, nullptr), weft::Error);
  EXPECT_THROW(gpu::divide_by(nullptr, 0, DType::i32, 0, nullptr), weft::Error);
}

// x / n by weft.h's AVG rule: in float64, in float32 for the other float types (rounded once,
// fp8 saturating), truncating toward zero for integers.
mpt::Expectation divided(weft_dtype_t d, uint64_t x, int n) {
  if (d == WEFT_FLOAT64) return exactly(d, mpt::encode_float(d, mpt::decode_float(d, x) / n, false));
  if (mpt::is_float(d)) {
    const float q = static_cast<float>(mpt::decode_float(d, x)) / static_cast<float>(n);
    return exactly(d, mpt::encode_float(d, q, saturates(d)));
  }
  const int bits = mpt::int_bits(d);
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  if (!mpt::is_signed_int(d)) return exactly(d, (x & mask) / static_cast<uint64_t>(n));
  const uint64_t sign = uint64_t{1} << (bits - 1);
  const int64_t v = static_cast<int64_t>(((x & mask) ^ sign) - sign);
  return exactly(d, static_cast<uint64_t>(v / n) & mask);
}

TEST(CudaDivideBy, MatchesReferenceForEveryDtype) {
  WEFT_REQUIRE_GPU();
  for (weft_dtype_t d : kAll) {
    const size_t bytes = kLarge * mpt::dtype_bytes(d);
    auto x = random_bytes(bytes, 300 + static_cast<uint64_t>(d));
    DeviceBuffer dx(bytes);
    ASSERT_TRUE(dx.get());
    for (int n : {1, 3, 7, 300}) {
      dx.upload(x.data());
      gpu::divide_by(dx.get(), kLarge, internal(d), n, nullptr);
      WEFT_CUDA_OK(cudaDeviceSynchronize());
      expect_reference(dx.download(), d, kLarge, [&](size_t i) { return divided(d, mpt::load_bits(d, x.data(), i), n); },
                       std::string(mpt::dtype_name(d)) + " / " + std::to_string(n));
    }
  }
}

const weft_dtype_t kNarrow[] = {WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FP8_E4M3, WEFT_FP8_E5M2, WEFT_FLOAT32};

TEST(CudaConvert, WideningEveryPatternIsExact) {
  WEFT_REQUIRE_GPU();
  for (weft_dtype_t d : kNarrow) {
    const size_t e = mpt::dtype_bytes(d);
    const size_t n = e == 1 ? 256 : (e == 2 ? 65536 : kLarge);
    std::vector<uint8_t> src(n * e);
    if (e == 4) {
      src = random_bytes(n * e, 11);
    } else {
      for (size_t i = 0; i < n; ++i) mpt::store_bits(d, src.data(), i, i);  // every bit pattern
    }
    DeviceBuffer ds(n * e), dd(n * 4);
    ASSERT_TRUE(ds.get() && dd.get());
    ds.upload(src.data());
    gpu::widen_to_f32(dd.get<float>(), ds.get(), internal(d), n, nullptr);
    WEFT_CUDA_OK(cudaDeviceSynchronize());
    expect_reference(dd.download(), WEFT_FLOAT32, n,
                     [&](size_t i) {
                       return exactly(WEFT_FLOAT32, f32_bits_of(mpt::decode_float(d, mpt::load_bits(d, src.data(), i))));
                     },
                     std::string("widen ") + mpt::dtype_name(d));
  }
}

TEST(CudaConvert, NarrowingRandomFloatsIsExact) {
  WEFT_REQUIRE_GPU();
  auto src = random_bytes(kLarge * 4, 12);
  // Every boundary the rounding cares about, around each format's range.
  const float specials[] = {0.0f, -0.0f, 1.0f, 448.0f, 464.0f, 480.0f, 57344.0f, 61440.0f, 65504.0f, 65520.0f,
                            1e-8f, 5.96e-8f, 2.98e-8f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN};
  std::memcpy(src.data(), specials, sizeof(specials));
  DeviceBuffer ds(src.size());
  ASSERT_TRUE(ds.get());
  ds.upload(src.data());
  for (weft_dtype_t d : kNarrow) {
    const size_t e = mpt::dtype_bytes(d);
    DeviceBuffer dd(kLarge * e);
    ASSERT_TRUE(dd.get());
    gpu::narrow_from_f32(dd.get(), internal(d), ds.get<float>(), kLarge, nullptr);
    WEFT_CUDA_OK(cudaDeviceSynchronize());
    expect_reference(dd.download(), d, kLarge,
                     [&](size_t i) {
                       const double x = mpt::decode_float(WEFT_FLOAT32, mpt::load_bits(WEFT_FLOAT32, src.data(), i));
                       return exactly(d, mpt::encode_float(d, x, saturates(d)));
                     },
                     std::string("narrow ") + mpt::dtype_name(d));
  }
}

TEST(CudaConvert, ScaleMultipliesInFloat32) {
  WEFT_REQUIRE_GPU();
  const float scale = 0.375f;
  auto src = random_bytes(kLarge * 4, 13);
  DeviceBuffer ds(src.size());
  ASSERT_TRUE(ds.get());
  ds.upload(src.data());
  for (weft_dtype_t d : {WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FP8_E4M3, WEFT_FP8_E5M2}) {
    const size_t e = mpt::dtype_bytes(d);
    DeviceBuffer dd(kLarge * e), dw(kLarge * 4);
    ASSERT_TRUE(dd.get() && dw.get());
    gpu::narrow_from_f32(dd.get(), internal(d), ds.get<float>(), kLarge, nullptr, scale);
    WEFT_CUDA_OK(cudaDeviceSynchronize());
    const std::vector<uint8_t> narrow = dd.download();
    // round(x * scale), the product taken in float32.
    expect_reference(narrow, d, kLarge,
                     [&](size_t i) {
                       const float x = f32_of(mpt::load_bits(WEFT_FLOAT32, src.data(), i)) * scale;
                       return exactly(d, mpt::encode_float(d, x, saturates(d)));
                     },
                     std::string("scaled narrow ") + mpt::dtype_name(d));
    // Widening the device's narrow values back: decode(v) * (1 / scale) in float32.
    gpu::widen_to_f32(dw.get<float>(), dd.get(), internal(d), kLarge, nullptr, 1.0f / scale);
    WEFT_CUDA_OK(cudaDeviceSynchronize());
    expect_reference(dw.download(), WEFT_FLOAT32, kLarge,
                     [&](size_t i) {
                       const float v = static_cast<float>(mpt::decode_float(d, mpt::load_bits(d, narrow.data(), i)));
                       return exactly(WEFT_FLOAT32, f32_bits_of(v * (1.0f / scale)));
                     },
                     std::string("scaled widen ") + mpt::dtype_name(d));
  }
}

// Reducing order keys as unsigned integers and mapping back equals weft's float min/max.
TEST(CudaOrderKey, IntegerMinMaxOfKeysIsFloatMinMax) {
  WEFT_REQUIRE_GPU();
  for (weft_dtype_t d : {WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FP8_E4M3, WEFT_FP8_E5M2, WEFT_FLOAT32, WEFT_FLOAT64}) {
    const size_t e = mpt::dtype_bytes(d), ks = gpu::order_key_size(internal(d));
    auto a = random_bytes(kLarge * e, 21 + static_cast<uint64_t>(d));
    auto b = random_bytes(kLarge * e, 42 + static_cast<uint64_t>(d));
    // Equal values of opposite sign (zeros).
    mpt::store_bits(d, a.data(), 0, 0);
    mpt::store_bits(d, b.data(), 0, uint64_t{1} << (8 * e - 1));
    DeviceBuffer da(a.size()), db(b.size()), ka(kLarge * ks), kb(kLarge * ks), out(a.size());
    ASSERT_TRUE(da.get() && db.get() && ka.get() && kb.get() && out.get());
    da.upload(a.data());
    db.upload(b.data());
    for (weft_op_t op : {WEFT_MIN, WEFT_MAX}) {
      gpu::to_order_key(ka.get(), da.get(), internal(d), kLarge, internal(op), nullptr);
      gpu::to_order_key(kb.get(), db.get(), internal(d), kLarge, internal(op), nullptr);
      // The integer reduction NCCL would do: min/max of unsigned keys.
      gpu::reduce(ka.get(), ka.get(), kb.get(), kLarge, ks == 8 ? DType::u64 : DType::u32, internal(op), nullptr);
      gpu::from_order_key(out.get(), internal(d), ka.get(), kLarge, nullptr);
      WEFT_CUDA_OK(cudaDeviceSynchronize());
      expect_reference(out.download(), d, kLarge, [&](size_t i) { return reduced(d, op, a, b, i); },
                       label(d, op) + " via order keys", op);
    }
  }
}

TEST(CudaFill, FillsEveryElementSizeAndCopies) {
  WEFT_REQUIRE_GPU();
  // An integer type of each element size (the fill moves bit patterns; 2 bytes: the f16 code
  // 0xcdef, a plain number).
  const weft_dtype_t of_size[9] = {WEFT_UINT8, WEFT_UINT8, WEFT_FLOAT16, WEFT_UINT8, WEFT_UINT32,
                                   WEFT_UINT8, WEFT_UINT8, WEFT_UINT8,   WEFT_UINT64};
  for (size_t e : {1u, 2u, 4u, 8u}) {
    const size_t n = 100003;
    DeviceBuffer d(n * e + e);
    ASSERT_TRUE(d.get());
    const uint64_t pattern = 0x0123456789abcdefull;
    gpu::fill(d.get<char>() + e, e, &pattern, n, nullptr);  // unaligned start for e > 1
    DeviceBuffer c(n * e + e);
    ASSERT_TRUE(c.get());
    gpu::copy(c.get(), d.get(), n * e + e, nullptr);
    WEFT_CUDA_OK(cudaDeviceSynchronize());
    std::vector<uint8_t> got = c.download();
    got.erase(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(e));  // the element before the fill
    const weft_dtype_t t = of_size[e];
    const uint64_t want = e == 8 ? pattern : pattern & ((uint64_t{1} << (8 * e)) - 1);
    expect_reference(std::move(got), t, n, [&](size_t) { return exactly(t, want); },
                     "fill and copy, element size " + std::to_string(e));
  }
}

}  // namespace
