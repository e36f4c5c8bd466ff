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
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/common/dtype.h"
#include "core/common/status.h"
#include "gpu_test_util.h"
#include "injection.h"
#include "twin_check.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/fill.h"
#include "kernels/cuda/order_key.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/strided_copy.h"
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

using weft::gputest::tally;
::testing::Environment* const kInjectionReport = weft::gputest::register_injection_report();

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
  weft::gputest::record_check(what, injected, bad, d, "reference");
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

// Strided views: a view of device memory is (byte offset into a buffer, shape, strides in
// elements), as kernels::StridedView says. The expected result is the definition itself, element
// by element: every element of dst takes the bytes of the element of src at the same index;
// every other byte of dst's buffer (between elements, around the view) keeps its old value.
struct ViewSpec {
  size_t offset = 0;  // bytes from the buffer's start to element 0
  std::vector<int64_t> shape, strides;
};

enum class Lay { contiguous, padded, transposed, broadcast };
const char* lay_name(Lay l) {
  switch (l) {
    case Lay::contiguous: return "contiguous";
    case Lay::padded: return "padded";
    case Lay::transposed: return "transposed";
    case Lay::broadcast: return "broadcast";
  }
  return "?";
}

// contiguous: row-major; padded: row-major over every extent + 1, starting one element in;
// transposed: column-major; broadcast (sources only): row-major with stride 0 on dim 0.
ViewSpec make_view(const std::vector<int64_t>& shape, size_t elem, Lay lay, size_t extra_offset = 0) {
  ViewSpec v;
  v.shape = shape;
  const size_t nd = shape.size();
  v.strides.assign(nd, 0);
  int64_t st = 1;
  if (lay == Lay::transposed) {
    for (size_t k = 0; k < nd; ++k) {
      v.strides[k] = st;
      st *= shape[k];
    }
  } else {
    for (size_t k = nd; k-- > 0;) {
      v.strides[k] = st;
      st *= shape[k] + (lay == Lay::padded ? 1 : 0);
    }
  }
  if (lay == Lay::broadcast && nd > 0) v.strides[0] = 0;
  v.offset = (lay == Lay::padded ? elem : 0) + extra_offset;
  return v;
}

// Bytes from the buffer's start to the end of the view's last element (at least 1).
size_t buffer_bytes(const ViewSpec& v, size_t elem) {
  int64_t last = 0;
  for (size_t k = 0; k < v.shape.size(); ++k) {
    if (v.shape[k] == 0) return v.offset + 1;
    last += (v.shape[k] - 1) * v.strides[k];
  }
  return v.offset + static_cast<size_t>(last + 1) * elem + 3;  // and a few bytes past it
}

weft::kernels::StridedView device_view(const DeviceBuffer& buf, const ViewSpec& v, size_t elem) {
  weft::kernels::StridedView s;
  s.base = buf.get<char>() + v.offset;
  s.elem = elem;
  s.ndim = static_cast<int>(v.shape.size());
  for (int k = 0; k < s.ndim; ++k) {
    s.shape[k] = v.shape[static_cast<size_t>(k)];
    s.strides[k] = v.strides[static_cast<size_t>(k)];
  }
  return s;
}

// Calls f(byte offset of the element in a, in b) for every index of the common shape.
void for_each_element(const ViewSpec& a, const ViewSpec& b, size_t elem,
                      const std::function<void(size_t, size_t)>& f) {
  const size_t nd = a.shape.size();
  int64_t n = 1;
  for (int64_t x : a.shape) n *= x;
  std::vector<int64_t> idx(nd, 0);
  for (int64_t c = 0; c < n; ++c) {
    int64_t oa = 0, ob = 0;
    for (size_t k = 0; k < nd; ++k) {
      oa += idx[k] * a.strides[k];
      ob += idx[k] * b.strides[k];
    }
    f(a.offset + static_cast<size_t>(oa) * elem, b.offset + static_cast<size_t>(ob) * elem);
    for (size_t k = nd; k-- > 0;) {
      if (++idx[k] < a.shape[k]) break;
      idx[k] = 0;
    }
  }
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "{";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
  return t + "}";
}

// One strided copy (src_fill: random bytes; zero: strided_zero of dst instead), checked byte by
// byte over dst's whole buffer.
void check_strided(const std::vector<int64_t>& shape, size_t elem, const ViewSpec& dv, const ViewSpec& sv,
                   const std::string& what, bool zero = false) {
  const size_t dbytes = buffer_bytes(dv, elem), sbytes = buffer_bytes(sv, elem);
  DeviceBuffer dd(dbytes), ds(sbytes);
  ASSERT_TRUE(dd.get() && ds.get()) << what;
  const auto before = random_bytes(dbytes, 500 + dbytes);
  const auto src = random_bytes(sbytes, 900 + sbytes);
  dd.upload(before.data());
  ds.upload(src.data());
  if (zero) {
    gpu::strided_zero(device_view(dd, dv, elem), nullptr);
  } else {
    gpu::strided_copy(device_view(dd, dv, elem), device_view(ds, sv, elem), nullptr);
  }
  WEFT_CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> want = before;
  for_each_element(dv, sv, elem, [&](size_t d, size_t s) {
    for (size_t b = 0; b < elem; ++b) want[d + b] = zero ? 0 : src[s + b];
  });
  expect_reference(dd.download(), WEFT_UINT8, dbytes, [&](size_t i) { return exactly(WEFT_UINT8, want[i]); },
                   what + " " + shape_text(shape) + ", " + std::to_string(elem) + "-byte elements");
  EXPECT_EQ(ds.download(), src) << what << ": the source changed";
}

TEST(CudaStridedCopy, MatchesTheDefinitionForEveryLayoutPair) {
  WEFT_REQUIRE_GPU();
  const Lay lays[] = {Lay::contiguous, Lay::padded, Lay::transposed};
  // Element sizes of every dtype, and others (3 and 16 bytes: moved as bytes or wide words).
  for (size_t elem : {1u, 2u, 4u, 8u, 3u, 16u}) {
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{5, 7}, std::vector<int64_t>{3, 4, 5},
                                              std::vector<int64_t>{1, 6, 1}, std::vector<int64_t>{9}}) {
      for (Lay dl : lays) {
        for (Lay sl : lays) {
          check_strided(shape, elem, make_view(shape, elem, dl), make_view(shape, elem, sl),
                        std::string("dst ") + lay_name(dl) + ", src " + lay_name(sl));
        }
      }
      check_strided(shape, elem, make_view(shape, elem, Lay::padded), make_view(shape, elem, Lay::broadcast),
                    "dst padded, src broadcast (stride 0 on dim 0)");
    }
  }
}

TEST(CudaStridedCopy, EightDimsScalarsEmptyAndUnaligned) {
  WEFT_REQUIRE_GPU();
  const std::vector<int64_t> eight{2, 1, 3, 2, 1, 2, 3, 2};
  for (size_t elem : {2u, 4u}) {
    check_strided(eight, elem, make_view(eight, elem, Lay::padded), make_view(eight, elem, Lay::transposed),
                  "8 dims, dst padded, src transposed");
    check_strided(eight, elem, make_view(eight, elem, Lay::transposed), make_view(eight, elem, Lay::contiguous),
                  "8 dims, dst transposed, src contiguous");
  }
  const std::vector<int64_t> scalar{};
  check_strided(scalar, 8, make_view(scalar, 8, Lay::contiguous, 8), make_view(scalar, 8, Lay::contiguous),
                "scalar");
  for (const std::vector<int64_t>& empty : {std::vector<int64_t>{0}, std::vector<int64_t>{4, 0, 3}}) {
    check_strided(empty, 4, make_view(empty, 4, Lay::padded), make_view(empty, 4, Lay::transposed), "empty");
  }
  // Base addresses off every word boundary: the copy falls back to narrower words, then bytes.
  const std::vector<int64_t> rows{37, 50};
  for (size_t off : {1u, 2u, 4u, 8u}) {
    check_strided(rows, 4, make_view(rows, 4, Lay::padded, off), make_view(rows, 4, Lay::contiguous, 3 * off),
                  "offset by " + std::to_string(off) + " bytes");
  }
}

TEST(CudaStridedCopy, LargeRowsAndWholeBuffers) {
  WEFT_REQUIRE_GPU();
  // Rows of 256 floats 1040 bytes apart: 16-byte words; rows of 1029 floats: 4-byte words.
  const std::vector<int64_t> wide{513, 256}, odd{1031, 1029}, whole{kLarge};
  ViewSpec rows16 = make_view(wide, 4, Lay::contiguous);
  rows16.strides[0] = 260;
  check_strided(wide, 4, rows16, make_view(wide, 4, Lay::contiguous), "rows 1040 bytes apart");
  check_strided(wide, 4, make_view(wide, 4, Lay::contiguous), rows16, "rows 1040 bytes apart, as the source");
  check_strided(odd, 4, make_view(odd, 4, Lay::contiguous), make_view(odd, 4, Lay::padded), "padded rows");
  check_strided(odd, 2, make_view(odd, 2, Lay::transposed), make_view(odd, 2, Lay::contiguous), "transpose");
  check_strided(whole, 4, make_view(whole, 4, Lay::contiguous), make_view(whole, 4, Lay::contiguous),
                "contiguous (one cudaMemcpyAsync)");
}

TEST(CudaStridedZero, ZeroesEveryElementAndNothingElse) {
  WEFT_REQUIRE_GPU();
  for (size_t elem : {1u, 2u, 4u, 8u, 3u}) {
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{5, 7}, std::vector<int64_t>{3, 4, 5}, std::vector<int64_t>{1031, 129}}) {
      for (Lay l : {Lay::contiguous, Lay::padded, Lay::transposed}) {
        const ViewSpec v = make_view(shape, elem, l);
        check_strided(shape, elem, v, v, std::string("zero ") + lay_name(l), true);
      }
    }
  }
}

TEST(CudaStridedCopy, BadArguments) {
  WEFT_REQUIRE_GPU();
  DeviceBuffer a(64), b(64);
  ASSERT_TRUE(a.get() && b.get());
  const std::vector<int64_t> s{2, 3};
  auto va = device_view(a, make_view(s, 4, Lay::contiguous), 4);
  auto vb = device_view(b, make_view(s, 4, Lay::contiguous), 4);
  EXPECT_NO_THROW(gpu::strided_copy(va, vb, nullptr));
  auto other = vb;
  other.shape[1] = 2;
  EXPECT_THROW(gpu::strided_copy(va, other, nullptr), weft::Error);
  other = vb;
  other.elem = 8;
  EXPECT_THROW(gpu::strided_copy(va, other, nullptr), weft::Error);
  other = vb;
  other.strides[0] = -3;
  EXPECT_THROW(gpu::strided_copy(va, other, nullptr), weft::Error);
  other = vb;
  other.ndim = weft::kernels::kMaxViewDims + 1;
  EXPECT_THROW(gpu::strided_zero(other, nullptr), weft::Error);
  other = vb;
  other.base = nullptr;
  EXPECT_THROW(gpu::strided_copy(va, other, nullptr), weft::Error);
  WEFT_CUDA_OK(cudaDeviceSynchronize());
}

}  // namespace
