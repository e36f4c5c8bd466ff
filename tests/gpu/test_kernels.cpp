// kernels/cuda against their CPU twins (kernels/cpu), which define the expected results: large
// random inputs (every bit pattern, NaN and inf included), odd sizes, unaligned and aliased
// buffers. Results must be identical bit for bit; the only exception is the payload of a NaN
// produced by float arithmetic (the GPU returns its canonical NaN), so there a NaN must meet a
// NaN. Casts and min/max do no arithmetic on NaNs and match exactly.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/common/dtype.h"
#include "core/common/status.h"
#include "gpu_test_util.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/fill.h"
#include "kernels/cuda/order_key.h"
#include "kernels/cuda/reduce.h"

namespace {

using weft::DType;
using weft::ReduceOp;
using weft::gputest::DeviceBuffer;
namespace cpu = weft::kernels;
namespace gpu = weft::kernels::cuda;

constexpr size_t kLarge = (size_t{1} << 20) + 37;  // odd: exercises the vector tail

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t x = rng();
    for (size_t k = 0; k < 8 && i + k < n; ++k) v[i + k] = static_cast<uint8_t>(x >> (8 * k));
  }
  return v;
}

bool is_nan_element(const uint8_t* p, DType d) {
  switch (d) {
    case DType::f64: {
      double x;
      std::memcpy(&x, p, 8);
      return x != x;
    }
    case DType::f32: {
      float x;
      std::memcpy(&x, p, 4);
      return x != x;
    }
    case DType::f16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return (h & 0x7fff) > 0x7c00;
    }
    case DType::bf16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return (h & 0x7fff) > 0x7f80;
    }
    case DType::f8e4m3: return (p[0] & 0x7f) == 0x7f;
    case DType::f8e5m2: return (p[0] & 0x7f) > 0x7c;
    default: return false;
  }
}

// Element-wise equality; with nan_any, a NaN matches any NaN of the same type.
void expect_same(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got, DType d, bool nan_any,
                 const std::string& what) {
  ASSERT_EQ(want.size(), got.size());
  const size_t e = weft::dtype_size(d);
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); i += e) {
    if (std::memcmp(&want[i], &got[i], e) == 0) continue;
    if (nan_any && is_nan_element(&want[i], d) && is_nan_element(&got[i], d)) continue;
    if (++bad <= 5) {
      uint64_t w = 0, g = 0;
      std::memcpy(&w, &want[i], e);
      std::memcpy(&g, &got[i], e);
      ADD_FAILURE() << what << ": element " << i / e << ": cpu 0x" << std::hex << w << ", gpu 0x" << g;
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

const DType kAll[] = {DType::f64, DType::f32, DType::f16, DType::bf16, DType::f8e4m3, DType::f8e5m2,
                      DType::i8,  DType::u8,  DType::i32, DType::u32,  DType::i64,    DType::u64};
const ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max};

std::string label(DType d, ReduceOp op) { return std::string(weft::dtype_name(d)) + " " + weft::op_name(op); }

TEST(CudaReduce, MatchesCpuForEveryDtypeAndOp) {
  WEFT_REQUIRE_GPU();
  for (DType d : kAll) {
    const size_t bytes = kLarge * weft::dtype_size(d);
    auto a = random_bytes(bytes, 1 + static_cast<uint64_t>(d));
    auto b = random_bytes(bytes, 100 + static_cast<uint64_t>(d));
    DeviceBuffer da(bytes), db(bytes), dc(bytes);
    ASSERT_TRUE(da.get() && db.get() && dc.get());
    da.upload(a.data());
    db.upload(b.data());
    for (ReduceOp op : kOps) {
      std::vector<uint8_t> want(bytes);
      cpu::reduce(want.data(), a.data(), b.data(), kLarge, d, op);
      gpu::reduce(dc.get(), da.get(), db.get(), kLarge, d, op, nullptr);
      WEFT_CUDA_OK(cudaDeviceSynchronize());
      // Arithmetic ops may return another NaN payload; min/max select an operand.
      expect_same(want, dc.download(), d, op == ReduceOp::sum || op == ReduceOp::prod, label(d, op));
    }
  }
}

TEST(CudaReduce, AliasedAndUnalignedBuffers) {
  WEFT_REQUIRE_GPU();
  for (DType d : kAll) {
    const size_t e = weft::dtype_size(d), n = 4099, bytes = (n + 1) * e;
    auto a = random_bytes(bytes, 7 + static_cast<uint64_t>(d));
    auto b = random_bytes(bytes, 70 + static_cast<uint64_t>(d));
    DeviceBuffer da(bytes), db(bytes);
    ASSERT_TRUE(da.get() && db.get());
    // dst == a, one element past the allocation's alignment (the scalar path).
    da.upload(a.data());
    db.upload(b.data());
    std::vector<uint8_t> want(a);
    cpu::reduce(want.data() + e, a.data() + e, b.data() + e, n, d, ReduceOp::max);
    gpu::reduce(da.get<char>() + e, da.get<char>() + e, db.get<char>() + e, n, d, ReduceOp::max, nullptr);
    WEFT_CUDA_OK(cudaDeviceSynchronize());
    expect_same(want, da.download(), d, false, label(d, ReduceOp::max) + " unaligned, dst == a");
    // dst == b, aligned (the vector path).
    da.upload(a.data());
    db.upload(b.data());
    want = b;
    cpu::reduce(want.data(), a.data(), b.data(), n, d, ReduceOp::sum);
    gpu::reduce(db.get(), da.get(), db.get(), n, d, ReduceOp::sum, nullptr);
    WEFT_CUDA_OK(cudaDeviceSynchronize());
    expect_same(want, db.download(), d, true, label(d, ReduceOp::sum) + " dst == b");
  }
}

TEST(CudaReduce, ZeroCountAndBadArguments) {
  WEFT_REQUIRE_GPU();
  EXPECT_NO_THROW(gpu::reduce(nullptr, nullptr, nullptr, 0, DType::f32, ReduceOp::sum, nullptr));
  EXPECT_THROW(gpu::reduce(nullptr, nullptr, nullptr, 0, DType::f32, ReduceOp::avg, nullptr), weft::Error);
  EXPECT_THROW(gpu::reduce(nullptr, nullptr, nullptr, 5, DType::f32, ReduceOp::sum, nullptr), weft::Error);
  EXPECT_THROW(gpu::divide_by(nullptr, 0, DType::i32, 0, nullptr), weft::Error);
}

TEST(CudaDivideBy, MatchesCpuForEveryDtype) {
  WEFT_REQUIRE_GPU();
  for (DType d : kAll) {
    const size_t bytes = kLarge * weft::dtype_size(d);
    auto x = random_bytes(bytes, 300 + static_cast<uint64_t>(d));
    DeviceBuffer dx(bytes);
    ASSERT_TRUE(dx.get());
    for (int n : {1, 3, 7, 300}) {
      std::vector<uint8_t> want(x);
      cpu::divide_by(want.data(), kLarge, d, n);
      dx.upload(x.data());
      gpu::divide_by(dx.get(), kLarge, d, n, nullptr);
      WEFT_CUDA_OK(cudaDeviceSynchronize());
      expect_same(want, dx.download(), d, true, std::string(weft::dtype_name(d)) + " / " + std::to_string(n));
    }
  }
}

const DType kNarrow[] = {DType::f16, DType::bf16, DType::f8e4m3, DType::f8e5m2, DType::f32};

TEST(CudaConvert, WideningEveryPatternIsExact) {
  WEFT_REQUIRE_GPU();
  for (DType d : kNarrow) {
    const size_t e = weft::dtype_size(d);
    const size_t n = e == 1 ? 256 : (e == 2 ? 65536 : kLarge);
    std::vector<uint8_t> src(n * e);
    if (e == 4) {
      src = random_bytes(n * e, 11);
    } else {
      for (size_t i = 0; i < n; ++i) std::memcpy(&src[i * e], &i, e);  // every bit pattern
    }
    std::vector<uint8_t> want(n * 4);
    cpu::widen_to_f32(reinterpret_cast<float*>(want.data()), src.data(), d, n);
    DeviceBuffer ds(n * e), dd(n * 4);
    ASSERT_TRUE(ds.get() && dd.get());
    ds.upload(src.data());
    gpu::widen_to_f32(dd.get<float>(), ds.get(), d, n, nullptr);
    WEFT_CUDA_OK(cudaDeviceSynchronize());
    expect_same(want, dd.download(), DType::f32, false, std::string("widen ") + weft::dtype_name(d));
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
  const float* host = reinterpret_cast<const float*>(src.data());
  for (DType d : kNarrow) {
    const size_t e = weft::dtype_size(d);
    std::vector<uint8_t> want(kLarge * e);
    cpu::narrow_from_f32(want.data(), d, host, kLarge);
    DeviceBuffer dd(kLarge * e);
    ASSERT_TRUE(dd.get());
    gpu::narrow_from_f32(dd.get(), d, ds.get<float>(), kLarge, nullptr);
    WEFT_CUDA_OK(cudaDeviceSynchronize());
    expect_same(want, dd.download(), d, false, std::string("narrow ") + weft::dtype_name(d));
  }
}

TEST(CudaConvert, ScaleMultipliesInFloat32) {
  WEFT_REQUIRE_GPU();
  const float scale = 0.375f;
  auto src = random_bytes(kLarge * 4, 13);
  std::vector<float> scaled(kLarge);
  std::memcpy(scaled.data(), src.data(), src.size());
  for (float& x : scaled) x = x * scale;
  DeviceBuffer ds(src.size());
  ASSERT_TRUE(ds.get());
  ds.upload(src.data());
  for (DType d : {DType::f16, DType::bf16, DType::f8e4m3, DType::f8e5m2}) {
    const size_t e = weft::dtype_size(d);
    std::vector<uint8_t> want(kLarge * e);
    cpu::narrow_from_f32(want.data(), d, scaled.data(), kLarge);
    DeviceBuffer dd(kLarge * e), dw(kLarge * 4);
    ASSERT_TRUE(dd.get() && dw.get());
    gpu::narrow_from_f32(dd.get(), d, ds.get<float>(), kLarge, nullptr, scale);
    WEFT_CUDA_OK(cudaDeviceSynchronize());
    auto narrow = dd.download();
    expect_same(want, narrow, d, true, std::string("scaled narrow ") + weft::dtype_name(d));
    // Widening back with the inverse scale: decode(x) * (1 / scale), as on the host.
    std::vector<float> back(kLarge);
    cpu::widen_to_f32(back.data(), want.data(), d, kLarge);
    for (float& x : back) x = x * (1.0f / scale);
    std::vector<uint8_t> want_back(kLarge * 4);
    std::memcpy(want_back.data(), back.data(), want_back.size());
    gpu::widen_to_f32(dw.get<float>(), dd.get(), d, kLarge, nullptr, 1.0f / scale);
    WEFT_CUDA_OK(cudaDeviceSynchronize());
    expect_same(want_back, dw.download(), DType::f32, true, std::string("scaled widen ") + weft::dtype_name(d));
  }
}

// Reducing order keys as unsigned integers and mapping back equals weft's float min/max.
TEST(CudaOrderKey, IntegerMinMaxOfKeysIsFloatMinMax) {
  WEFT_REQUIRE_GPU();
  for (DType d : kNarrow) {
    for (DType dd : {d, DType::f64}) {
      if (dd == DType::f64 && d != DType::f32) continue;
      const size_t e = weft::dtype_size(dd), ks = gpu::order_key_size(dd);
      auto a = random_bytes(kLarge * e, 21 + static_cast<uint64_t>(dd));
      auto b = random_bytes(kLarge * e, 42 + static_cast<uint64_t>(dd));
      // Equal values of opposite sign (zeros) and NaNs on either side.
      if (e >= 2) {
        std::memset(&a[0], 0, e);
        std::memset(&b[0], 0, e);
        b[e - 1] = 0x80;
      }
      DeviceBuffer da(a.size()), db(b.size()), ka(kLarge * ks), kb(kLarge * ks), out(a.size());
      ASSERT_TRUE(da.get() && db.get() && ka.get() && kb.get() && out.get());
      da.upload(a.data());
      db.upload(b.data());
      for (ReduceOp op : {ReduceOp::min, ReduceOp::max}) {
        gpu::to_order_key(ka.get(), da.get(), dd, kLarge, op, nullptr);
        gpu::to_order_key(kb.get(), db.get(), dd, kLarge, op, nullptr);
        // The integer reduction NCCL would do: min/max of unsigned keys.
        gpu::reduce(ka.get(), ka.get(), kb.get(), kLarge, ks == 8 ? DType::u64 : DType::u32, op, nullptr);
        gpu::from_order_key(out.get(), dd, ka.get(), kLarge, nullptr);
        WEFT_CUDA_OK(cudaDeviceSynchronize());
        std::vector<uint8_t> want(a.size());
        cpu::reduce(want.data(), a.data(), b.data(), kLarge, dd, op);
        expect_same(want, out.download(), dd, true, label(dd, op) + " via order keys");
      }
    }
  }
}

TEST(CudaFill, FillsEveryElementSizeAndCopies) {
  WEFT_REQUIRE_GPU();
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
    auto got = c.download();
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(0, std::memcmp(&got[e + i * e], &pattern, e)) << "element size " << e << ", element " << i;
    }
  }
}

}  // namespace
