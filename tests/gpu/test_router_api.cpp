// weft_router_forward / _backward (weft/moe.h) with device logits, through the C ABI: the device
// path (capi/src/router_api.cpp -> core/device/moe_router_device.cpp -> kernels/cuda) must give
// what the same calls give on host memory (the CPU twin, which tests/unit/test_moe_router.cpp
// checks against an independent reference), bit for bit; arrays outside the logits' memory are
// refused by name. WEFT_TEST_INJECT=1 corrupts every device result before it is checked and the
// run passes only when every corruption was caught.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "weft/weft.h"

namespace {

using weft::gputest::DeviceBuffer;

bool inject_on() {
  const char* e = std::getenv("WEFT_TEST_INJECT");
  return e && std::strcmp(e, "1") == 0;
}
long injected = 0, caught = 0;

class Report : public ::testing::Environment {
 public:
  void TearDown() override {
    std::string why;
    if (!inject_on() || !weft::gputest::gpu_available(&why)) return;
    std::printf("injection: %ld cases, %ld caught\n", injected, caught);
    EXPECT_TRUE(injected > 0 && caught == injected) << "WEFT_TEST_INJECT: a corrupted result passed its check";
  }
};
::testing::Environment* const kReport = ::testing::AddGlobalTestEnvironment(new Report);

// Device bytes `got` against host bytes `want`, bit for bit (one byte flipped when injecting).
void expect_same_bytes(std::vector<uint8_t> got, const void* want, size_t bytes, const std::string& what) {
  ASSERT_EQ(got.size(), bytes) << what;
  const bool inj = inject_on() && bytes > 0;
  if (inj) got[bytes / 2] ^= 0x40;
  const bool bad = bytes > 0 && std::memcmp(got.data(), want, bytes) != 0;
  if (inj) {
    ++injected;
    if (bad) ++caught;
  } else if (bad) {
    ADD_FAILURE() << what << ": the device result differs from the host one";
  }
}

TEST(RouterApi, DeviceLogitsGiveTheHostResult) {
  WEFT_REQUIRE_GPU();
  const int T = 70, E = 24, k = 4;
  std::mt19937_64 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  std::vector<float> x(T * E), bias(E), gw(T * k);
  for (float& v : x) v = nd(rng);
  for (float& v : bias) v = 0.1f * nd(rng);
  for (float& v : gw) v = nd(rng);
  const int64_t shape[2] = {T, E};
  weft_router_config_t cfg = WEFT_ROUTER_CONFIG_INIT;
  cfg.experts = E;
  cfg.topk = k;
  cfg.score = WEFT_ROUTER_SIGMOID;
  cfg.groups = 6;
  cfg.topk_groups = 3;
  cfg.drop = WEFT_DROP_BY_PROBABILITY;
  cfg.capacity_factor = 0.8;
  cfg.aux_loss_coeff = 0.02f;
  cfg.z_loss_coeff = 0.003f;

  // Host.
  std::vector<int32_t> idx(T * k);
  std::vector<float> w(T * k), grad(T * E);
  std::vector<int64_t> kept(E), sel(E);
  weft_tensor_t hx{x.data(), WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, shape, nullptr, 0};
  weft_router_config_t hcfg = cfg;
  hcfg.bias = bias.data();
  weft_router_result_t hr = WEFT_ROUTER_RESULT_INIT;
  hr.indices = idx.data();
  hr.weights = w.data();
  hr.tokens_per_expert = kept.data();
  hr.selected_per_expert = sel.data();
  ASSERT_EQ(WEFT_OK, weft_router_forward(&hx, &hcfg, &hr, nullptr)) << weft_last_error();
  weft_tensor_t hg{grad.data(), WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, shape, nullptr, 0};
  ASSERT_EQ(WEFT_OK, weft_router_backward(&hx, &hcfg, idx.data(), gw.data(), 0.5f, 2.0f, &hg, nullptr))
      << weft_last_error();

  // Device.
  DeviceBuffer dx(x.size() * 4), db(E * 4), di(T * k * 4), dw(T * k * 4), dk(E * 8), ds(E * 8), dgw(T * k * 4),
      dg(T * E * 4);
  dx.upload(x.data());
  db.upload(bias.data());
  dgw.upload(gw.data());
  weft_tensor_t gx{dx.get(), WEFT_DEVICE_CUDA, 0, 2, WEFT_FLOAT32, shape, nullptr, 0};
  weft_router_config_t dcfg = cfg;
  dcfg.bias = db.get<float>();
  weft_router_result_t dr = WEFT_ROUTER_RESULT_INIT;
  dr.indices = di.get<int32_t>();
  dr.weights = dw.get<float>();
  dr.tokens_per_expert = dk.get<int64_t>();
  dr.selected_per_expert = ds.get<int64_t>();
  ASSERT_EQ(WEFT_OK, weft_router_forward(&gx, &dcfg, &dr, nullptr)) << weft_last_error();
  weft_tensor_t gg{dg.get(), WEFT_DEVICE_CUDA, 0, 2, WEFT_FLOAT32, shape, nullptr, 0};
  ASSERT_EQ(WEFT_OK, weft_router_backward(&gx, &dcfg, di.get<int32_t>(), dgw.get<float>(), 0.5f, 2.0f, &gg, nullptr))
      << weft_last_error();
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  expect_same_bytes(di.download(), idx.data(), idx.size() * 4, "indices");
  expect_same_bytes(dw.download(), w.data(), w.size() * 4, "weights");
  expect_same_bytes(dk.download(), kept.data(), kept.size() * 8, "tokens_per_expert");
  expect_same_bytes(ds.download(), sel.data(), sel.size() * 8, "selected_per_expert");
  const float hl[2] = {hr.aux_loss, hr.z_loss}, dl[2] = {dr.aux_loss, dr.z_loss};
  expect_same_bytes(std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(dl), reinterpret_cast<const uint8_t*>(dl) + 8),
                    hl, 8, "losses");
  expect_same_bytes(dg.download(), grad.data(), grad.size() * 4, "grad_logits");

  // Host arrays with device logits are refused, naming the array.
  dr.weights = w.data();
  EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT, weft_router_forward(&gx, &dcfg, &dr, nullptr));
  EXPECT_NE(std::string(weft_last_error()).find("result->weights"), std::string::npos) << weft_last_error();
  dr.weights = dw.get<float>();
  dcfg.bias = bias.data();
  EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT, weft_router_forward(&gx, &dcfg, &dr, nullptr));
  EXPECT_NE(std::string(weft_last_error()).find("config->bias"), std::string::npos) << weft_last_error();
}

}  // namespace
