// The C++ plugin cpp_router_cost (plugins/cpp_router_cost/) through the C ABI on 1-4 ranks:
//  - routing: every rank routes the whole global batch (G = 24 tokens, E = 6, k = 2, SOFTMAX,
//    normalised) with weft_router_forward and config.selector = balanced_topk's id, so the
//    choice is the same for every rank count; indices are compared exactly with balanced_topk
//    implemented here from its README (double softmax; logits on a 1/4 grid keep distinct
//    scores far apart against float rounding and equal ones equal), weights with p / (sum of the
//    chosen p) within (E + 16) * 2^-22 relative (test_moe_router.cpp's bound), and every
//    expert's load is at most ceil(G k / E);
//  - dispatch / combine of this rank's slice of the batch with weft_moe (expert e multiplies a
//    row by e + 1, exact in float32 for these inputs): out[t] = sum_j w_j (e_j + 1) x[t] within
//    2^-21 of sum_j |w_j (e_j + 1) x[t]| (a float32 product and sum per slot, rounded once);
//    the same global result for every rank count;
//  - the cost model "linear" in weft_schedule_simulate (GPipe and 1F1B, p = 4, m = 8, mbs = 4:
//    F = 0.5 + 0.25 mbs = 1.5, B = 3; makespan (m + p - 1)(F + B + 2 overhead), + 0.75 with
//    REDUCE_GRAD) and weft_schedule_tune (layers 0, G = 8, p = 2: (m + 1) 3 (0.5 + 0.25 G / m));
//  - weft_router_backward with the selector: the gradient of the normalised weights through
//    softmax's Jacobian in double, same bound as the weights;
//  - refusals: device logits with the selector (WEFT_ERR_UNSUPPORTED), groups > 1 with it, naming the plugin's router; microbatch_size 0 with
//    the cost model.
// WEFT_TEST_INJECT=1 corrupts one element of every checked result; each must be caught.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "inject.h"
#include "mp_gtest.h"
#include "weft/weft.h"

using mpt::g_world;

namespace {

constexpr int kG = 24, kE = 6, kK = 2, kH = 4;
const double kRouterTol = (kE + 16) * std::ldexp(1.0, -22);

void check(bool ok, const std::string& what) {
  if (mpt::inject_enabled()) {
    EXPECT_FALSE(ok) << what << ": the injected corruption was not caught";
  } else {
    EXPECT_TRUE(ok) << what;
  }
}
template <class T>
T corrupt(T v) {
  return mpt::inject_enabled() ? v + 1 : v;
}

struct Plugin {
  weft_plugin_t handle = nullptr;
  int router = -1, cost = -1;
};
Plugin load_plugin() {
  const char* path = std::getenv("WEFT_TEST_PLUGIN");
  if (!path) mpt::die("WEFT_TEST_PLUGIN is not set (the path of libweft_cpp_router_cost.so)");
  Plugin p;
  MPT_OK(weft_plugin_load(path, &p.handle));
  weft_plugin_entry_t e = WEFT_PLUGIN_ENTRY_INIT;
  MPT_OK(weft_plugin_lookup(p.handle, "balanced_topk", &e));
  p.router = e.id;
  MPT_OK(weft_plugin_lookup(p.handle, "linear", &e));
  p.cost = e.id;
  return p;
}

std::vector<float> logits() {
  std::vector<float> x(kG * kE);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>((i * 7 + i / kE * 3) % 17) - 8) / 4.0f;
  return x;
}
float token_value(int t, int h) { return static_cast<float>((t * 5 + h * 3) % 11 - 5) / 8.0f; }

// balanced_topk from its README, over double probabilities.
std::vector<int> reference_balanced(const std::vector<std::vector<double>>& p) {
  const int cap = (kG * kK + kE - 1) / kE;
  std::vector<int> load(kE, 0), out;
  for (int t = 0; t < kG; ++t) {
    std::vector<bool> taken(kE, false);
    for (int j = 0; j < kK; ++j) {
      int best = -1, any = -1;
      for (int e = 0; e < kE; ++e) {
        if (taken[size_t(e)]) continue;
        const double v = p[size_t(t)][size_t(e)];
        if (any < 0 || v > p[size_t(t)][size_t(any)]) any = e;
        if (load[size_t(e)] < cap && (best < 0 || v > p[size_t(t)][size_t(best)])) best = e;
      }
      const int e = best >= 0 ? best : any;
      taken[size_t(e)] = true;
      ++load[size_t(e)];
      out.push_back(e);
    }
  }
  return out;
}

TEST(PluginCppRouterCost, BalancedRoutingDispatchCombine) {
  const Plugin plug = load_plugin();
  const std::vector<float> x = logits();
  std::vector<std::vector<double>> prob(kG, std::vector<double>(kE));
  for (int t = 0; t < kG; ++t) {
    double mx = -1e300, z = 0;
    for (int e = 0; e < kE; ++e) mx = std::max(mx, double(x[size_t(t * kE + e)]));
    for (int e = 0; e < kE; ++e) z += prob[size_t(t)][size_t(e)] = std::exp(double(x[size_t(t * kE + e)]) - mx);
    for (double& v : prob[size_t(t)]) v /= z;
  }
  weft_router_config_t rc = WEFT_ROUTER_CONFIG_INIT;
  rc.experts = kE;
  rc.topk = kK;
  rc.normalize = 1;
  rc.selector = plug.router;
  int64_t shape[2] = {kG, kE};
  weft_tensor_t lt = {const_cast<float*>(x.data()), WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, shape, nullptr, 0};
  std::vector<int32_t> idx(kG * kK);
  std::vector<float> w(kG * kK);
  std::vector<int64_t> load(kE);
  weft_router_result_t res = WEFT_ROUTER_RESULT_INIT;
  res.indices = idx.data();
  res.weights = w.data();
  res.tokens_per_expert = load.data();
  ASSERT_WEFT_OK(weft_router_forward(&lt, &rc, &res, nullptr));
  const std::vector<int> want = reference_balanced(prob);
  std::vector<int> got(idx.begin(), idx.end());
  if (mpt::inject_enabled()) got[got.size() / 2] = (got[got.size() / 2] + 1) % kE;
  check(got == std::vector<int>(want), "indices against balanced_topk written here");
  double worst = 0;
  for (int t = 0; t < kG; ++t) {
    const double sum = prob[size_t(t)][size_t(want[size_t(t * kK)])] + prob[size_t(t)][size_t(want[size_t(t * kK + 1)])];
    for (int j = 0; j < kK; ++j) {
      worst = std::max(worst, std::fabs(w[size_t(t * kK + j)] - prob[size_t(t)][size_t(want[size_t(t * kK + j)])] / sum));
    }
  }
  check(corrupt(worst) <= kRouterTol, "weights: p / sum of the chosen p");
  check(corrupt(*std::max_element(load.begin(), load.end())) <= (kG * kK + kE - 1) / kE, "no expert over its room");

  // Backward asks the selector again and differentiates its choice: with w_j = p_j / S (S the
  // chosen p's sum) and D = sum_l gw_l w_l, dL/dp of slot j is (gw_j - D) / S, then softmax's
  // Jacobian g_e = p_e (G_e - sum_f p_f G_f); same bound as the weights.
  std::vector<float> gw(kG * kK), grad(kG * kE, 0.0f);
  for (size_t i = 0; i < gw.size(); ++i) gw[i] = static_cast<float>(int(i % 5) - 2) / 2.0f;
  weft_tensor_t gt = {grad.data(), WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, shape, nullptr, 0};
  ASSERT_WEFT_OK(weft_router_backward(&lt, &rc, idx.data(), gw.data(), 0.0f, 0.0f, &gt, nullptr));
  double gworst = 0;
  for (int t = 0; t < kG; ++t) {
    const std::vector<double>& pr = prob[size_t(t)];
    const double S = pr[size_t(want[size_t(t * kK)])] + pr[size_t(want[size_t(t * kK + 1)])];
    double D = 0;
    for (int j = 0; j < kK; ++j) D += gw[size_t(t * kK + j)] * pr[size_t(want[size_t(t * kK + j)])] / S;
    std::vector<double> G(kE, 0.0);
    for (int j = 0; j < kK; ++j) G[size_t(want[size_t(t * kK + j)])] += (gw[size_t(t * kK + j)] - D) / S;
    double pg = 0;
    for (int e = 0; e < kE; ++e) pg += pr[size_t(e)] * G[size_t(e)];
    for (int e = 0; e < kE; ++e) {
      gworst = std::max(gworst, std::fabs(grad[size_t(t * kE + e)] - pr[size_t(e)] * (G[size_t(e)] - pg)));
    }
  }
  check(corrupt(gworst) <= kRouterTol, "grad_logits through the selector's choice");
  // Device logits with a selector: WEFT_ERR_UNSUPPORTED before the memory is touched.
  weft_tensor_t dev = lt;
  dev.device_type = WEFT_DEVICE_CUDA;
  const weft_status_t dst = weft_router_forward(&dev, &rc, &res, nullptr);
  check(corrupt(int(dst)) == int(WEFT_ERR_UNSUPPORTED), "device logits with a selector: " + mpt::last_error());

  // groups > 1 with a selector: refused naming the plugin's router.
  weft_router_config_t grouped = rc;
  grouped.groups = 2;
  grouped.topk_groups = 1;
  const weft_status_t st = weft_router_forward(&lt, &grouped, &res, nullptr);
  check(st == WEFT_ERR_INVALID_ARGUMENT &&
            mpt::last_error().find(mpt::inject_enabled() ? "<injected>" : "balanced_topk") != std::string::npos,
        "groups with a selector: " + mpt::last_error());

  // This rank's slice through dispatch, the experts (row * (e + 1)) and combine.
  const int n = g_world.size, r = g_world.rank;
  const int t0 = kG * r / n, T = kG * (r + 1) / n - t0;
  std::vector<float> xs(size_t(T) * kH);
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < kH; ++h) xs[size_t(t * kH + h)] = token_value(t0 + t, h);
  }
  weft_moe_config_t mc = WEFT_MOE_CONFIG_INIT;
  mc.experts = kE;
  mc.hidden = kH;
  weft_moe_t moe = nullptr;
  ASSERT_WEFT_OK(weft_moe_create(g_world.comm, &mc, &moe));
  int64_t xshape[2] = {T, kH};
  weft_tensor_t xt = {xs.data(), WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, xshape, nullptr, 0};
  weft_moe_handle_t h = nullptr;
  ASSERT_WEFT_OK(weft_moe_dispatch(moe, &xt, idx.data() + t0 * kK, w.data() + t0 * kK, size_t(T), kK, nullptr, &h));
  weft_moe_received_t recv = WEFT_MOE_RECEIVED_INIT;
  ASSERT_WEFT_OK(weft_moe_handle_received(h, &recv));
  const float* rx = static_cast<const float*>(recv.tokens.data);
  std::vector<float> y(recv.rows * kH, 0.0f);
  for (size_t i = 0; i < recv.rows; ++i) {
    if (recv.row_expert[i] < 0) continue;
    for (int c = 0; c < kH; ++c) y[i * kH + size_t(c)] = rx[i * kH + size_t(c)] * float(recv.row_expert[i] + 1);
  }
  int64_t yshape[2] = {int64_t(recv.rows), kH}, oshape[2] = {T, kH};
  std::vector<float> out(size_t(T) * kH, -1.0f);
  weft_tensor_t yt = {y.data(), WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, yshape, nullptr, 0};
  weft_tensor_t ot = {out.data(), WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, oshape, nullptr, 0};
  ASSERT_WEFT_OK(weft_moe_combine(moe, h, &yt, 1, &ot, nullptr));
  bool ok = true;
  if (mpt::inject_enabled() && !out.empty()) out[out.size() / 2] += 1.0f;
  for (int t = 0; t < T; ++t) {
    for (int c = 0; c < kH; ++c) {
      double want_v = 0, mag = 0;
      for (int j = 0; j < kK; ++j) {
        const int g = t0 + t;
        const double term = double(w[size_t(g * kK + j)]) * (want[size_t(g * kK + j)] + 1) * token_value(g, c);
        want_v += term;
        mag += std::fabs(term);
      }
      ok = ok && std::fabs(out[size_t(t * kH + c)] - want_v) <= std::ldexp(mag, -21);
    }
  }
  check(ok, "combined output of rank " + std::to_string(r) + "'s tokens");
  EXPECT_WEFT_OK(weft_moe_handle_destroy(h));
  EXPECT_WEFT_OK(weft_moe_destroy(moe));
}

double simulate(weft_schedule_kind_t kind, int p, int m, int reduce_grad, int cost, double overhead) {
  weft_schedule_config_t sc = WEFT_SCHEDULE_CONFIG_INIT;
  sc.ranks = p;
  sc.microbatches = m;
  sc.reduce_grad = reduce_grad;
  weft_schedule_t s = nullptr;
  EXPECT_WEFT_OK(weft_schedule_generate(kind, &sc, &s));
  weft_pipeline_costs_t c = WEFT_PIPELINE_COSTS_INIT;
  c.nstages = p;
  c.cost_model = cost;
  c.microbatch_size = 4;
  c.overhead = overhead;
  weft_timeline_t t = nullptr;
  EXPECT_WEFT_OK(weft_schedule_simulate(s, &c, &t));
  weft_timeline_info_t info = WEFT_TIMELINE_INFO_INIT;
  EXPECT_WEFT_OK(weft_timeline_info(t, &info));
  EXPECT_WEFT_OK(weft_timeline_destroy(t));
  EXPECT_WEFT_OK(weft_schedule_destroy(s));
  return info.makespan;
}

TEST(PluginCppRouterCost, LinearCostModelClosedForms) {
  const Plugin plug = load_plugin();
  const int p = 4, m = 8;
  const double F = 0.5 + 0.25 * 4, steps = m + p - 1;
  for (weft_schedule_kind_t kind : {WEFT_SCHEDULE_GPIPE, WEFT_SCHEDULE_ONE_F_ONE_B}) {
    const std::string what = "kind " + std::to_string(int(kind));
    check(corrupt(simulate(kind, p, m, 0, plug.cost, 0)) == steps * 3 * F, what + ": (m + p - 1)(F + B)");
    check(corrupt(simulate(kind, p, m, 0, plug.cost, 0.25)) == steps * (3 * F + 0.5), what + ": + 2 overheads");
    check(corrupt(simulate(kind, p, m, 1, plug.cost, 0)) == steps * 3 * F + 0.75, what + ": + REDUCE_GRAD");
  }
  weft_tune_config_t tc = WEFT_TUNE_CONFIG_INIT;
  tc.ranks = 2;
  tc.layers = 0;
  tc.global_batch = 8;
  const weft_schedule_kind_t kinds[] = {WEFT_SCHEDULE_GPIPE};
  tc.kinds = kinds;
  tc.nkinds = 1;
  tc.cost_model = plug.cost;
  size_t count = 0;
  int best = -1;
  weft_tune_candidate_t cands[8];
  ASSERT_WEFT_OK(weft_schedule_tune(&tc, cands, 8, &count, &best));
  check(corrupt(count) == 4, "tune: m = 1, 2, 4, 8");
  for (size_t i = 0; i < count && i < 8; ++i) {
    const int mm = cands[i].microbatches;
    const double want = (mm + 1) * 3 * (0.5 + 0.25 * (8.0 / mm));
    check(std::fabs(corrupt(cands[i].step_time) - want) <= 1e-12 * want, "tune m=" + std::to_string(mm));
  }
  // microbatch_size 0 is refused before the model is asked (the model would give NaN for it).
  weft_schedule_config_t sc = WEFT_SCHEDULE_CONFIG_INIT;
  sc.ranks = 2;
  sc.microbatches = 2;
  weft_schedule_t s = nullptr;
  ASSERT_WEFT_OK(weft_schedule_generate(WEFT_SCHEDULE_GPIPE, &sc, &s));
  weft_pipeline_costs_t c = WEFT_PIPELINE_COSTS_INIT;
  c.nstages = 2;
  c.cost_model = plug.cost;
  c.microbatch_size = 0;
  weft_timeline_t t = nullptr;
  const weft_status_t st = weft_schedule_simulate(s, &c, &t);
  check(st == WEFT_ERR_INVALID_ARGUMENT &&
            mpt::last_error().find(mpt::inject_enabled() ? "<injected>" : "microbatch_size") != std::string::npos,
        "microbatch_size 0 refused: " + mpt::last_error());
  EXPECT_WEFT_OK(weft_schedule_destroy(s));
}

}  // namespace
