// kernels/cuda/moe_router.h against its CPU twin (kernels/cpu/moe_router.h, which
// tests/unit/test_moe_router.cpp checks against an independent double reference): the same
// logits on both, and every device result (indices, weights, both counts, both losses, the
// logits' gradient) must be the CPU's bit for bit. Inputs: random float32 logits (continuous, so
// every comparison path of the selection runs) and grid logits with exact ties, bfloat16
// logits, every score mode, normalisation, bias, groups, every drop mode with capacity factors
// below and above 1, k = 1..8, E not a power of two, T = 0, 1 and more than one loss block (256).
//
// On a GPU this runs the device code; in the CUDA-emulated build the same .cu compiled for the
// host (tests/cuda_emulator/kernels_on_cpu.cpp). WEFT_TEST_INJECT=1 corrupts every device result
// before it is checked (injection.h); the run then fails unless every corruption was caught.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/common/dtype.h"
#include "gpu_test_util.h"
#include "injection.h"
#include "twin_check.h"
#include "kernels/cpu/moe_router.h"
#include "kernels/cuda/moe_router.h"
#include "reference.h"

namespace {

using weft::DType;
using weft::gputest::DeviceBuffer;
namespace wk = weft::kernels;
namespace gpu = weft::kernels::cuda;

using weft::gputest::tally;
::testing::Environment* const kInjectionReport = weft::gputest::register_injection_report();

// Checks a device result of count elements of dt against the CPU twin's, bit for bit, after
// injection (if on).
void expect_same(std::vector<uint8_t> got, const void* want, weft_dtype_t dt, size_t count, const std::string& what) {
  weft::gputest::expect_twin(std::move(got), want, dt, count, what, false);
}

template <class T>
std::vector<uint8_t> bytes_of(const T* p, size_t n) {
  std::vector<uint8_t> b(n * sizeof(T));
  if (n) std::memcpy(b.data(), p, b.size());
  return b;
}

struct Case {
  const char* name;
  size_t T;
  int E, k, score;
  bool normalize;
  int groups, topk_groups;
  bool bias;
  int drop;
  double cf;
  bool bf16, grid;
};

void run_case(const Case& c, uint64_t seed) {
  SCOPED_TRACE(c.name);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_int_distribution<int> grid(-6, 6);
  const size_t T = c.T, E = static_cast<size_t>(c.E), k = static_cast<size_t>(c.k), n = T * k;
  std::vector<float> x(T * E);
  for (float& v : x) v = c.grid ? 0.5f * static_cast<float>(grid(rng)) : normal(rng);
  std::vector<uint16_t> x16(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t b;
    std::memcpy(&b, &x[i], 4);
    x16[i] = static_cast<uint16_t>(b >> 16);  // truncation: any bfloat16 values will do
  }
  const void* host_logits = c.bf16 ? static_cast<const void*>(x16.data()) : static_cast<const void*>(x.data());
  const size_t logit_bytes = x.size() * (c.bf16 ? 2 : 4);
  const DType dt = c.bf16 ? DType::bf16 : DType::f32;
  std::vector<float> bias(E);
  for (float& b : bias) b = 0.05f * normal(rng);

  wk::RouterConfig cfg;
  cfg.experts = c.E;
  cfg.topk = c.k;
  cfg.score = c.score;
  cfg.normalize = c.normalize;
  cfg.groups = c.groups;
  cfg.topk_groups = c.topk_groups;
  cfg.drop = c.drop;
  cfg.capacity_factor = c.cf;
  cfg.aux_loss_coeff = 0.01f;
  cfg.z_loss_coeff = 0.001f;

  // CPU twin.
  std::vector<int32_t> idx(n);
  std::vector<float> w(n);
  std::vector<int64_t> kept(E), selected(E);
  wk::RouterOutputs co;
  co.indices = idx.data();
  co.weights = w.data();
  co.tokens_per_expert = kept.data();
  co.selected_per_expert = selected.data();
  wk::RouterConfig ccfg = cfg;
  ccfg.bias = c.bias ? bias.data() : nullptr;
  wk::router_forward(host_logits, dt, T, ccfg, co);

  // Device.
  DeviceBuffer dl(logit_bytes), db(E * 4), di(n * 4), dw(n * 4), dk(E * 8), ds(E * 8);
  if (logit_bytes) dl.upload(host_logits);
  db.upload(bias.data());
  wk::RouterConfig dcfg = cfg;
  dcfg.bias = c.bias ? db.get<float>() : nullptr;
  wk::RouterOutputs go;
  go.indices = di.get<int32_t>();
  go.weights = dw.get<float>();
  go.tokens_per_expert = dk.get<int64_t>();
  go.selected_per_expert = ds.get<int64_t>();
  gpu::router_forward(dl.get(), dt, T, dcfg, go, nullptr);
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  expect_same(di.download(), idx.data(), WEFT_INT32, n, std::string(c.name) + " indices");
  expect_same(dw.download(), w.data(), WEFT_FLOAT32, n, std::string(c.name) + " weights");
  expect_same(dk.download(), kept.data(), WEFT_INT64, E, std::string(c.name) + " tokens_per_expert");
  expect_same(ds.download(), selected.data(), WEFT_INT64, E, std::string(c.name) + " selected_per_expert");
  const float losses_cpu[2] = {co.aux_loss, co.z_loss}, losses_gpu[2] = {go.aux_loss, go.z_loss};
  expect_same(bytes_of(losses_gpu, 2), losses_cpu, WEFT_FLOAT32, 2, std::string(c.name) + " aux and z losses");

  // Backward, from the CPU's (= device's) indices.
  std::normal_distribution<float> gn(0.0f, 1.0f);
  std::vector<float> gw(n), grad(T * E);
  for (float& g : gw) g = gn(rng);
  const float ga = 0.75f, gz = -1.25f;
  wk::router_backward(host_logits, dt, T, ccfg, idx.data(), gw.data(), ga, gz, grad.data());
  DeviceBuffer dgw(n * 4), dg(T * E * 4);
  if (n) dgw.upload(gw.data());
  gpu::router_backward(dl.get(), dt, T, dcfg, di.get<int32_t>(), dgw.get<float>(), ga, gz, dg.get<float>(), nullptr);
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  expect_same(dg.download(), grad.data(), WEFT_FLOAT32, T * E, std::string(c.name) + " grad_logits");
}

TEST(MoeRouterKernels, DeviceEqualsCpuTwin) {
  WEFT_REQUIRE_GPU();
  const Case cases[] = {
      {"softmax k2 E8", 50, 8, 2, 0, false, 0, 0, false, 0, 1.0, false, false},
      {"softmax normalized k8 E64 bias by probability", 300, 64, 8, 0, true, 0, 0, true, 1, 1.0, false, false},
      {"softmax grid ties k4 E12 by position cf 0.5", 90, 12, 4, 0, false, 0, 0, false, 2, 0.5, false, true},
      {"topk-softmax k5 E24 groups bias", 64, 24, 5, 1, false, 6, 3, true, 0, 1.0, false, false},
      {"topk-softmax grid k6 E6 by probability cf 0.75", 37, 6, 6, 1, false, 0, 0, false, 1, 0.75, false, true},
      {"sigmoid k8 E32 groups bias by probability cf 1.25", 80, 32, 8, 2, true, 8, 4, true, 1, 1.25, false, false},
      {"sigmoid k7 E9 by position", 55, 9, 7, 2, false, 0, 0, false, 2, 1.0, false, false},
      {"bf16 softmax k3 E20 groups of one bias", 48, 20, 3, 0, true, 20, 5, true, 1, 0.6, true, false},
      {"bf16 sigmoid grid k1 E5 by position", 40, 5, 1, 2, false, 0, 0, false, 2, 0.9, true, true},
      {"one token", 1, 12, 4, 0, true, 3, 2, true, 1, 0.5, false, false},
      {"no tokens", 0, 12, 4, 2, true, 0, 0, true, 2, 1.0, false, false},
  };
  uint64_t seed = 11;
  for (const Case& c : cases) run_case(c, seed++);
  for (int k = 1; k <= 8; ++k) {
    const std::string name = "k" + std::to_string(k) + " E13 by probability";
    run_case({name.c_str(), 23, 13, k, k % 3, k % 2 == 1, 0, 0, k % 2 == 0, 1, 0.8, false, k % 4 == 0}, seed++);
  }
}

}  // namespace
