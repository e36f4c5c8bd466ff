// kernels/cuda/optimizer.h against its CPU twin (kernels/cpu/optimizer.h, which
// tests/unit/test_optimizer.cpp checks against torch's formulas): the same inputs on both, and
// every device result must be the CPU's bit for bit (a NaN for a NaN: a GPU's arithmetic returns
// its canonical NaN where the CPU keeps an operand's payload). Inputs: random parameters,
// states and gradients of every supported dtype, with zeros, signed zeros, infinities and NaNs
// among the gradients; sizes 0, 1, odd, and large; gradient statistics over one tile, many, and
// past 256 tiles (a second level of partial sums), with the workspace given and allocated.
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
#include "kernels/cpu/optimizer.h"
#include "kernels/cuda/optimizer.h"
#include "reference.h"

namespace {

using weft::DType;
using weft::gputest::DeviceBuffer;
using weft::kernels::OptimizerKind;
using weft::kernels::OptimizerStep;
namespace wk = weft::kernels;
namespace gpu = weft::kernels::cuda;

using weft::gputest::tally;
::testing::Environment* const kInjectionReport = weft::gputest::register_injection_report();

weft_dtype_t abi(DType d) { return static_cast<weft_dtype_t>(d); }

// Checks a device result of count elements of dt against the CPU twin's, after injection (if on).
void expect_same(std::vector<uint8_t> got, const void* want, DType d, size_t count, const std::string& what) {
  weft::gputest::expect_twin(std::move(got), want, abi(d), count, what, true);
}

// n random values of d in (-range, range) (stored rounded by the codecs under test: the inputs
// need not be independent, only the same on both sides), with specials every `special` elements.
std::vector<uint8_t> random_grads(DType d, size_t n, float range, size_t special, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-range, range);
  std::vector<float> f(n);
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-30f};
  for (size_t i = 0; i < n; ++i) f[i] = special && i % special == special - 1 ? specials[(i / special) % 6] : u(rng);
  std::vector<uint8_t> out(n * weft::dtype_size(d));
  if (n) wk::narrow_from_f32(out.data(), d, f.data(), n);
  return out;
}

std::vector<float> random_floats(size_t n, float lo, float hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

struct Config {
  const char* name;
  OptimizerKind kind;
  float lr, momentum, beta1, beta2, wd;
};
const Config kConfigs[] = {
    {"sgd", OptimizerKind::sgd, 0.1f, 0, 0, 0, 0},
    {"sgd wd", OptimizerKind::sgd, 0.1f, 0, 0, 0, 0.01f},
    {"sgd momentum", OptimizerKind::sgd, 0.05f, 0.9f, 0, 0, 0},
    {"sgd momentum wd", OptimizerKind::sgd, 0.05f, 0.9f, 0, 0, 0.01f},
    {"adam", OptimizerKind::adam, 1e-3f, 0, 0.9f, 0.999f, 0},
    {"adam wd", OptimizerKind::adam, 1e-3f, 0, 0.9f, 0.999f, 0.01f},
    {"adam b1=0.3", OptimizerKind::adam, 1e-2f, 0, 0.3f, 0.99f, 0},
    {"adamw", OptimizerKind::adamw, 1e-3f, 0, 0.9f, 0.999f, 0.01f},
    {"adamw b1=0.3", OptimizerKind::adamw, 1e-2f, 0, 0.3f, 0.99f, 0.1f},
};
const DType kGradTypes[] = {DType::f32, DType::bf16, DType::f16};
enum class Out { none, f32, f32_in_place, bf16, f16 };

TEST(CudaOptimizer, StepMatchesCpuTwinBitForBit) {
  WEFT_REQUIRE_GPU();
  std::mt19937_64 rng(11);
  for (const Config& cfg : kConfigs) {
    for (DType gd : kGradTypes) {
      for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{4099}, size_t{100003}}) {
        for (Out out : {Out::none, Out::f32, Out::f32_in_place, Out::bf16, Out::f16}) {
          const DType pd = out == Out::bf16 ? DType::bf16 : out == Out::f16 ? DType::f16 : DType::f32;
          const bool separate = out != Out::none && out != Out::f32_in_place;
          // Host state (the CPU twin works on it) and its device copy.
          std::vector<float> master = random_floats(n, -1, 1, rng), s1 = random_floats(n, -0.1f, 0.1f, rng),
                             s2 = random_floats(n, 0, 0.01f, rng);
          std::vector<uint8_t> param_out(n * weft::dtype_size(pd));
          const size_t fb = n * sizeof(float);
          DeviceBuffer dm(fb), d1(fb), d2(fb), dout(param_out.size()), dg(n * weft::dtype_size(gd));
          ASSERT_TRUE(n == 0 || (dm.get() && d1.get() && d2.get() && dout.get() && dg.get()));
          if (n) {
            dm.upload(master.data());
            d1.upload(s1.data());
            d2.upload(s2.data());
          }
          for (int64_t t = 1; t <= 3; ++t) {
            OptimizerStep s;
            s.kind = cfg.kind;
            s.lr = cfg.lr;
            s.momentum = cfg.momentum;
            s.beta1 = cfg.beta1;
            s.beta2 = cfg.beta2;
            s.weight_decay = cfg.wd;
            s.step = t;
            s.grad_scale = 0.75f / 1024;
            const std::vector<uint8_t> grad = random_grads(gd, n, 2048, 97, rng);
            if (n) dg.upload(grad.data());
            void* host_out = out == Out::none ? nullptr
                             : separate         ? static_cast<void*>(param_out.data())
                                                : static_cast<void*>(master.data());
            void* dev_out = out == Out::none ? nullptr : separate ? dout.get() : dm.get();
            wk::optimizer_step(s, master.data(), grad.data(), gd, s1.data(), s2.data(), host_out, pd, n);
            gpu::optimizer_step(s, dm.get<float>(), dg.get(), gd, d1.get<float>(), d2.get<float>(), dev_out, pd, n,
                                nullptr);
            WEFT_CUDA_OK(cudaDeviceSynchronize());
            const std::string what = std::string(cfg.name) + " grad " + mpt::dtype_name(abi(gd)) + " out " +
                                     std::to_string(static_cast<int>(out)) + " n=" + std::to_string(n) +
                                     " t=" + std::to_string(t);
            expect_same(dm.download(), master.data(), DType::f32, n, what + " master");
            if (cfg.kind != OptimizerKind::sgd || cfg.momentum != 0) {
              expect_same(d1.download(), s1.data(), DType::f32, n, what + " state1");
            }
            if (cfg.kind != OptimizerKind::sgd) expect_same(d2.download(), s2.data(), DType::f32, n, what + " state2");
            if (separate) expect_same(dout.download(), param_out.data(), pd, n, what + " param_out");
            // The next step starts from the CPU's state on both sides (equal unless a check failed).
            if (n) {
              dm.upload(master.data());
              d1.upload(s1.data());
              d2.upload(s2.data());
            }
          }
        }
      }
    }
  }
}

TEST(CudaOptimizer, ZeroCountAndBadArguments) {
  WEFT_REQUIRE_GPU();
  OptimizerStep s;
  EXPECT_NO_THROW(gpu::optimizer_step(s, nullptr, nullptr, DType::f32, nullptr, nullptr, nullptr, DType::f32, 0,
                                      nullptr));
  EXPECT_THROW(gpu::optimizer_step(s, nullptr, nullptr, DType::f32, nullptr, nullptr, nullptr, DType::f32, 5, nullptr),
               weft::Error);
  s.step = 0;
  EXPECT_THROW(gpu::optimizer_step(s, nullptr, nullptr, DType::f32, nullptr, nullptr, nullptr, DType::f32, 0, nullptr),
               weft::Error);
  EXPECT_THROW(gpu::grad_stats(nullptr, DType::i32, 0, 1.0f, nullptr, nullptr, nullptr), weft::Error);
  EXPECT_EQ(0u, gpu::grad_stats_workspace_bytes(0));
}

// The sum (bit for bit) and the flag, device against CPU.
void check_stats(const std::vector<uint8_t>& grad, DType d, size_t n, float scale, bool own_workspace,
                 const std::string& what) {
  const wk::GradStats want = wk::grad_stats(grad.data(), d, n, scale);
  DeviceBuffer dg(grad.size()), dsum(sizeof(double)), dflag(sizeof(int));
  DeviceBuffer work(own_workspace ? gpu::grad_stats_workspace_bytes(n) : 0);
  ASSERT_TRUE(dsum.get() && dflag.get() && (n == 0 || dg.get()));
  if (n) dg.upload(grad.data());
  const int poison = 7;
  dflag.upload(&poison);
  gpu::grad_stats(dg.get(), d, n, scale, dsum.get<double>(), dflag.get<int>(), nullptr, work.get());
  WEFT_CUDA_OK(cudaDeviceSynchronize());
  expect_same(dsum.download(), &want.sum_squares, DType::f64, 1, what + " sum");
  const int want_flag = want.nonfinite ? 1 : 0;
  expect_same(dflag.download(), &want_flag, DType::i32, 1, what + " nonfinite");
}

TEST(CudaGradStats, MatchesCpuTwinBitForBit) {
  WEFT_REQUIRE_GPU();
  std::mt19937_64 rng(5);
  const size_t kTile = 65536;
  for (DType d : kGradTypes) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{4099}, kTile, kTile + 1, 3 * kTile + 5, 257 * kTile + 3}) {
      if (n > 4 * kTile && d != DType::bf16) continue;  // past 256 tiles (a second level) once
      const std::vector<uint8_t> grad = random_grads(d, n, 1000, 0, rng);
      for (float scale : {1.0f, 1.0f / 1024}) {
        for (bool own : {false, true}) {
          check_stats(grad, d, n, scale, own,
                      std::string("grad_stats ") + mpt::dtype_name(abi(d)) + " n=" + std::to_string(n) + " scale " +
                          std::to_string(scale) + (own ? " (workspace given)" : ""));
        }
      }
    }
  }
}

TEST(CudaGradStats, ReportsInfAndNaNAsTheCpuDoes) {
  WEFT_REQUIRE_GPU();
  std::mt19937_64 rng(6);
  for (DType d : kGradTypes) {
    for (size_t n : {size_t{1}, size_t{4099}, size_t{2 * 65536 + 3}}) {
      const std::vector<uint8_t> clean = random_grads(d, n, 10, 0, rng);
      for (size_t at : {size_t{0}, n / 2, n - 1}) {
        for (float bad : {INFINITY, -INFINITY, NAN}) {
          std::vector<uint8_t> grad = clean;
          wk::narrow_from_f32(grad.data() + at * weft::dtype_size(d), d, &bad, 1);
          check_stats(grad, d, n, 0.5f, false,
                      std::string("nonfinite ") + mpt::dtype_name(abi(d)) + " n=" + std::to_string(n) + " at " +
                          std::to_string(at) + " value " + std::to_string(bad));
        }
      }
    }
  }
}

}  // namespace
