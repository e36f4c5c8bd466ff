// kernels/cuda/moe_rows.h against its CPU twin (kernels/cpu/moe_rows.h, which
// tests/unit/test_moe_rows.cpp checks against a float32 loop and a double reference): the same
// inputs on both, and every device result must be the CPU's bit for bit (a NaN for a NaN: a GPU's
// arithmetic returns its canonical NaN where the CPU keeps an operand's payload). Inputs: random
// rows of every row dtype with zeros, signed zeros, infinities and NaNs among them (gather moves
// them unchanged), hidden 0, 1, odd and large, k = 1..8, negative (padding and dropped) indices,
// NULL weights, and gathers whose rows or buffers are aligned for each copy unit (16 bytes down
// to 2).
//
// On a GPU this runs the device code; in the CUDA-emulated build the same .cu compiled for the
// host (tests/cuda_emulator/kernels_on_cpu.cpp). WEFT_TEST_INJECT=1 corrupts every device result
// before it is checked (injection.h); the run then fails unless every corruption was caught.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/common/dtype.h"
#include "core/common/status.h"
#include "gpu_test_util.h"
#include "injection.h"
#include "twin_check.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/moe_rows.h"
#include "kernels/cuda/moe_rows.h"
#include "reference.h"

namespace {

using weft::DType;
using weft::gputest::DeviceBuffer;
namespace wk = weft::kernels;
namespace gpu = weft::kernels::cuda;

using weft::gputest::tally;
::testing::Environment* const kInjectionReport = weft::gputest::register_injection_report();

weft_dtype_t abi(DType d) { return static_cast<weft_dtype_t>(d); }

// Checks a device result of count elements of d against the CPU twin's, after injection (if on).
void expect_same(std::vector<uint8_t> got, const void* want, DType d, size_t count, const std::string& what) {
  weft::gputest::expect_twin(std::move(got), want, abi(d), count, what, true, /*exact_size=*/false);
}

// n random values of d in (-range, range) (stored through the codecs: the inputs need only be the
// same on both sides), with specials every `special` elements (0 = none).
std::vector<uint8_t> random_rows(DType d, size_t n, float range, size_t special, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-range, range);
  std::vector<float> f(n);
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-30f};
  for (size_t i = 0; i < n; ++i) f[i] = special && i % special == special - 1 ? specials[(i / special) % 6] : u(rng);
  std::vector<uint8_t> out(n * weft::dtype_size(d) + 16);  // + 16: never empty, room for offsets
  if (n) wk::narrow_from_f32(out.data(), d, f.data(), n);
  return out;
}

// slot_row [tokens*k]: rows in [0, rows) and about one in five negative; token 1 all dropped.
std::vector<int64_t> random_slots(size_t count, size_t rows, std::mt19937_64& rng, int k = 0) {
  std::uniform_int_distribution<int64_t> row(0, static_cast<int64_t>(rows) - 1);
  std::uniform_int_distribution<int> coin(0, 4);
  std::vector<int64_t> s(count + 1);
  for (auto& x : s) x = coin(rng) == 0 ? -1 - coin(rng) : row(rng);
  for (int j = 0; j < k && static_cast<size_t>(2 * k) <= count; ++j) s[static_cast<size_t>(k + j)] = -1;
  return s;
}

std::vector<float> random_weights(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> w(n + 1);
  for (auto& x : w) x = u(rng);
  return w;
}

// Device room for a host array (at least one byte, so that an empty one still has an address),
// and the copy there.
template <class T>
size_t room(const std::vector<T>& v) {
  return v.size() * sizeof(T) + 1;
}
template <class T>
void put(const DeviceBuffer& b, const std::vector<T>& v) {
  if (b.get()) cudaMemcpy(b.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
}

std::string name(const char* kernel, DType d, size_t hidden, int k, const std::string& extra = "") {
  return std::string(kernel).append(" ").append(mpt::dtype_name(abi(d))).append(" hidden=")
      .append(std::to_string(hidden)).append(" k=").append(std::to_string(k)).append(extra);
}

const DType kTypes[] = {DType::f32, DType::bf16, DType::f16};
const size_t kHiddens[] = {0, 1, 4, 7, 8, 33, 1000, 4099};

TEST(CudaMoeRows, GatherMatchesCpuTwinBitForBit) {
  WEFT_REQUIRE_GPU();
  std::mt19937_64 rng(21);
  for (DType d : kTypes) {
    const size_t es = weft::dtype_size(d);
    for (size_t hidden : kHiddens) {
      // Offsets (in elements) of src and dst in their allocations: 0 keeps 16-byte alignment;
      // the others force the narrower copy units.
      for (size_t offset : {size_t{0}, size_t{1}, size_t{2}}) {
        const size_t src_rows = 9, n = 23;
        const std::vector<uint8_t> src = random_rows(d, src_rows * hidden + offset, 100, 13, rng);
        const std::vector<int64_t> index = random_slots(n, src_rows, rng);
        std::vector<uint8_t> want(n * hidden * es + 1);
        wk::gather_rows(want.data(), src.data() + offset * es, index.data(), n, hidden, d);
        DeviceBuffer dsrc(room(src)), didx(room(index)), ddst(n * hidden * es + offset * es + 1);
        put(dsrc, src);
        put(didx, index);
        ASSERT_TRUE(dsrc.get() && didx.get() && ddst.get());
        gpu::gather_rows(ddst.get<uint8_t>() + offset * es, dsrc.get<uint8_t>() + offset * es, didx.get<int64_t>(), n,
                         hidden, d, nullptr);
        WEFT_CUDA_OK(cudaDeviceSynchronize());
        std::vector<uint8_t> got = ddst.download();
        got.erase(got.begin(), got.begin() + static_cast<ptrdiff_t>(offset * es));
        expect_same(got, want.data(), d, n * hidden, name("gather_rows", d, hidden, 1, " offset " + std::to_string(offset)));
      }
    }
  }
}

TEST(CudaMoeRows, CombineMatchesCpuTwinBitForBit) {
  WEFT_REQUIRE_GPU();
  std::mt19937_64 rng(22);
  for (DType d : kTypes) {
    const size_t es = weft::dtype_size(d);
    for (size_t hidden : kHiddens) {
      for (int k = 1; k <= 8; ++k) {
        for (bool weighted : {true, false}) {
          if (hidden > 1000 && k % 3 != 0) continue;  // large rows at k = 3, 6 (the emulator runs every thread)
          const size_t tokens = 6, rows = 13, slots = tokens * static_cast<size_t>(k);
          const std::vector<uint8_t> src = random_rows(d, rows * hidden, 4, 0, rng);
          const std::vector<int64_t> slot = random_slots(slots, rows, rng, k);
          const std::vector<float> w = random_weights(slots, rng);
          std::vector<uint8_t> want(tokens * hidden * es + 1);
          wk::combine_rows(want.data(), src.data(), slot.data(), weighted ? w.data() : nullptr, tokens, k, hidden, d);
          DeviceBuffer dsrc(room(src)), dslot(room(slot)), dw(room(w)), dout(tokens * hidden * es + 1);
          put(dsrc, src);
          put(dslot, slot);
          put(dw, w);
          ASSERT_TRUE(dsrc.get() && dslot.get() && dw.get() && dout.get());
          gpu::combine_rows(dout.get(), dsrc.get(), dslot.get<int64_t>(), weighted ? dw.get<float>() : nullptr, tokens,
                            k, hidden, d, nullptr);
          WEFT_CUDA_OK(cudaDeviceSynchronize());
          expect_same(dout.download(), want.data(), d, tokens * hidden,
                      name("combine_rows", d, hidden, k, weighted ? " weighted" : " unweighted"));
        }
      }
    }
  }
}

TEST(CudaMoeRows, ScaleGatherMatchesCpuTwinBitForBit) {
  WEFT_REQUIRE_GPU();
  std::mt19937_64 rng(23);
  for (DType d : kTypes) {
    const size_t es = weft::dtype_size(d);
    for (size_t hidden : kHiddens) {
      const size_t src_rows = 7, n = 19;
      const std::vector<uint8_t> src = random_rows(d, src_rows * hidden, 60000, 0, rng);  // f16 overflows to inf
      const std::vector<int64_t> index = random_slots(n, src_rows, rng);
      std::vector<float> w = random_weights(n, rng);
      w[1] = 2.0f;
      std::vector<uint8_t> want(n * hidden * es + 1);
      wk::scale_gather_rows(want.data(), src.data(), index.data(), w.data(), n, hidden, d);
      DeviceBuffer dsrc(room(src)), didx(room(index)), dw(room(w)), ddst(n * hidden * es + 1);
      put(dsrc, src);
      put(didx, index);
      put(dw, w);
      ASSERT_TRUE(dsrc.get() && didx.get() && dw.get() && ddst.get());
      gpu::scale_gather_rows(ddst.get(), dsrc.get(), didx.get<int64_t>(), dw.get<float>(), n, hidden, d, nullptr);
      WEFT_CUDA_OK(cudaDeviceSynchronize());
      expect_same(ddst.download(), want.data(), d, n * hidden, name("scale_gather_rows", d, hidden, 1));
    }
  }
}

TEST(CudaMoeRows, DotMatchesCpuTwinBitForBit) {
  WEFT_REQUIRE_GPU();
  std::mt19937_64 rng(24);
  for (DType d : kTypes) {
    for (size_t hidden : kHiddens) {
      for (int k = 1; k <= 8; ++k) {
        const size_t tokens = 5, rows = 11, slots = tokens * static_cast<size_t>(k);
        const std::vector<uint8_t> a = random_rows(d, tokens * hidden, 3, 0, rng);
        const std::vector<uint8_t> src = random_rows(d, rows * hidden, 3, 0, rng);
        const std::vector<int64_t> slot = random_slots(slots, rows, rng, k);
        std::vector<float> want(slots + 1);
        wk::dot_rows(want.data(), a.data(), src.data(), slot.data(), tokens, k, hidden, d);
        DeviceBuffer da(room(a)), dsrc(room(src)), dslot(room(slot)), dout(slots * sizeof(float));
        put(da, a);
        put(dsrc, src);
        put(dslot, slot);
        ASSERT_TRUE(da.get() && dsrc.get() && dslot.get() && dout.get());
        gpu::dot_rows(dout.get<float>(), da.get(), dsrc.get(), dslot.get<int64_t>(), tokens, k, hidden, d, nullptr);
        WEFT_CUDA_OK(cudaDeviceSynchronize());
        expect_same(dout.download(), want.data(), DType::f32, slots, name("dot_rows", d, hidden, k));
      }
    }
  }
}

// Only padding to write: no source rows needed on either twin; and the refusals are the CPU's.
TEST(CudaMoeRows, PaddingOnlyAndBadArguments) {
  WEFT_REQUIRE_GPU();
  const std::vector<int64_t> none = {-1, -2, -1};
  const std::vector<float> w = {1, 2, 3};
  DeviceBuffer didx(room(none)), dw(room(w)), ddst(3 * 5 * 2);
  put(didx, none);
  put(dw, w);
  ASSERT_TRUE(didx.get() && dw.get() && ddst.get());
  const std::vector<uint8_t> stale(3 * 5 * 2, 0xff), zeros(3 * 5 * 2, 0);
  ddst.upload(stale.data());
  gpu::scale_gather_rows(ddst.get(), nullptr, didx.get<int64_t>(), dw.get<float>(), 3, 5, DType::bf16, nullptr);
  WEFT_CUDA_OK(cudaDeviceSynchronize());
  expect_same(ddst.download(), zeros.data(), DType::bf16, 15, "scale_gather_rows of padding only");
  ddst.upload(stale.data());
  gpu::gather_rows(ddst.get(), nullptr, didx.get<int64_t>(), 3, 5, DType::f16, nullptr);
  WEFT_CUDA_OK(cudaDeviceSynchronize());
  expect_same(ddst.download(), zeros.data(), DType::f16, 15, "gather_rows of padding only");
  ddst.upload(stale.data());
  gpu::combine_rows(ddst.get(), nullptr, didx.get<int64_t>(), dw.get<float>(), 1, 3, 5, DType::f16, nullptr);
  WEFT_CUDA_OK(cudaDeviceSynchronize());
  expect_same(ddst.download(), zeros.data(), DType::f16, 5, "combine_rows of dropped slots only");

  EXPECT_NO_THROW(gpu::gather_rows(nullptr, nullptr, nullptr, 0, 4, DType::f32, nullptr));
  EXPECT_NO_THROW(gpu::dot_rows(nullptr, nullptr, nullptr, nullptr, 3, 0, 4, DType::f32, nullptr));
  EXPECT_THROW(gpu::gather_rows(ddst.get(), nullptr, didx.get<int64_t>(), 3, 5, DType::f64, nullptr), weft::Error);
  EXPECT_THROW(gpu::combine_rows(ddst.get(), nullptr, nullptr, nullptr, 1, 3, 5, DType::f32, nullptr), weft::Error);
  EXPECT_THROW(gpu::combine_rows(ddst.get(), nullptr, didx.get<int64_t>(), nullptr, 1, -3, 5, DType::f32, nullptr),
               weft::Error);
  EXPECT_THROW(gpu::scale_gather_rows(ddst.get(), nullptr, didx.get<int64_t>(), nullptr, 3, 5, DType::f32, nullptr),
               weft::Error);
  EXPECT_THROW(gpu::dot_rows(nullptr, ddst.get(), nullptr, didx.get<int64_t>(), 1, 3, 5, DType::f32, nullptr),
               weft::Error);
}

}  // namespace
