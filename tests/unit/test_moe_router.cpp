// weft_router_forward / _backward / _update_bias (weft/moe.h) through the C ABI on host memory,
// against moe_router_reference.h (double precision, full sorts, closed forms and finite
// differences; written from the header, not from kernels/cpu/moe_router).
//
// Exact: indices (selection, slot order, dropping), the per-expert counts, update_bias. Within a
// tolerance from float32 rounding: the router computes each token in float32 with sums over at
// most E terms and its own exp/log (within 2 ulp), so each value is within about (E + 16)
// roundings of 2^-24 of its magnitude; the checks allow (E + 16) * 2^-22 relative to the row's
// scale (4x that), and the double reference's own error is far below. The losses are summed in
// double by the router, so they get the per-token float error only.
// Inputs: logits on a grid of 1/4 in [-2, 2] (exact in bfloat16, with many exact ties between
// experts, which must go to the lower index in both), biases on integers, so that distinct
// selection scores are far apart compared with float32 rounding and the reference's selection
// is the router's; rows of all-equal logits.
//
// WEFT_TEST_INJECT=1 (ctest unit.moe_router_inject) corrupts one element of every checked result
// (or the status of every refusal) before it is checked; the run passes only when every
// corruption was caught.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "inject_tally.h"
#include "moe_router_reference.h"
#include "weft/weft.h"

namespace {

::testing::Environment* const kInjectionReport = inject::register_report();

// ---------------------------------------------------------------- checks (with injection)

using inject::record;

void check_exact(const std::string& what, std::vector<int64_t> got, const std::vector<int64_t>& want) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const bool injected = inject::enabled() && !got.empty();
  if (injected) got[got.size() / 2] += 3;
  std::string detail;
  bool bad = false;
  for (size_t i = 0; i < got.size() && !bad; ++i) {
    if (got[i] != want[i]) {
      bad = true;
      detail = "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", expected " +
               std::to_string(want[i]);
    }
  }
  record(injected, bad, what, detail);
}

void check_close(const std::string& what, std::vector<double> got, const std::vector<double>& want,
                 const std::vector<double>& tol) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const bool injected = inject::enabled() && !got.empty();
  if (injected) got[got.size() / 2] += 1.0 + 1e3 * tol[got.size() / 2];
  std::string detail;
  bool bad = false;
  for (size_t i = 0; i < got.size() && !bad; ++i) {
    if (!(std::fabs(got[i] - want[i]) <= tol[i])) {
      bad = true;
      detail = "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", expected " +
               std::to_string(want[i]) + " within " + std::to_string(tol[i]);
    }
  }
  record(injected, bad, what, detail);
}

// A call that must be refused with WEFT_ERR_INVALID_ARGUMENT naming `arg`.
void check_refused(const std::string& what, weft_status_t st, const char* arg) {
  const bool injected = inject::enabled();
  if (injected) st = WEFT_OK;
  const std::string msg = weft_last_error() ? weft_last_error() : "";
  const bool bad = st != WEFT_ERR_INVALID_ARGUMENT || msg.find(arg) == std::string::npos;
  record(injected, bad, what, "status " + std::to_string(st) + ", message \"" + msg + "\"; expected a refusal naming " + arg);
}

// ---------------------------------------------------------------- cases

struct Case {
  const char* name;
  size_t T;
  int E, k;
  weft_router_score_t score;
  int normalize = 0;
  int groups = 0, topk_groups = 0;
  bool bias = false;
  weft_router_drop_t drop = WEFT_DROP_NONE;
  double cf = 1.0;
  bool bf16 = false;
  uint64_t seed = 1;
};

struct Inputs {
  std::vector<float> x;        // the logits as float32 (exact for bf16 too)
  std::vector<uint16_t> x16;   // as bfloat16
  std::vector<float> bias;
  weft_router_config_t cfg = WEFT_ROUTER_CONFIG_INIT;
  std::vector<int64_t> shape;
  weft_tensor_t tensor{};
};

void make_inputs(const Case& c, Inputs& in) {
  std::mt19937_64 rng(c.seed);
  std::uniform_int_distribution<int> grid(-8, 8), ints(-1, 1);
  in.x.resize(c.T * c.E);
  for (size_t t = 0; t < c.T; ++t) {
    const bool flat = c.T > 2 && t % 7 == 3;  // every expert tied: lower indices win
    for (int e = 0; e < c.E; ++e) in.x[t * c.E + e] = flat ? 0.5f : 0.25f * static_cast<float>(grid(rng));
  }
  in.x16.resize(in.x.size());
  for (size_t i = 0; i < in.x.size(); ++i) {
    uint32_t b;
    std::memcpy(&b, &in.x[i], 4);
    in.x16[i] = static_cast<uint16_t>(b >> 16);
  }
  in.cfg.experts = c.E;
  in.cfg.topk = c.k;
  in.cfg.score = c.score;
  in.cfg.normalize = c.normalize;
  in.cfg.groups = c.groups;
  in.cfg.topk_groups = c.topk_groups;
  if (c.bias) {
    in.bias.resize(c.E);
    for (float& b : in.bias) b = static_cast<float>(ints(rng));
    in.cfg.bias = in.bias.data();
  }
  in.cfg.drop = c.drop;
  in.cfg.capacity_factor = c.cf;
  in.cfg.aux_loss_coeff = 0.01f;
  in.cfg.z_loss_coeff = 0.001f;
  in.shape = {static_cast<int64_t>(c.T), c.E};
  in.tensor.data = c.bf16 ? static_cast<void*>(in.x16.data()) : static_cast<void*>(in.x.data());
  in.tensor.device_type = WEFT_DEVICE_CPU;
  in.tensor.ndim = 2;
  in.tensor.dtype = c.bf16 ? WEFT_BFLOAT16 : WEFT_FLOAT32;
  in.tensor.shape = in.shape.data();
}

double tol_of(double scale, int E) { return (E + 16) * 0x1p-22 * scale + 0x1p-40; }

struct Forward {
  std::vector<int32_t> idx;
  std::vector<float> w;
  std::vector<int64_t> kept, selected;
  float aux = 0, z = 0;
};

Forward run_forward(const Case& c, Inputs& in, weft_router_drop_t drop) {
  Forward f;
  f.idx.assign(c.T * c.k, 7);
  f.w.assign(c.T * c.k, 7.0f);
  f.kept.assign(c.E, -5);
  f.selected.assign(c.E, -5);
  weft_router_config_t cfg = in.cfg;
  cfg.drop = drop;
  weft_router_result_t r = WEFT_ROUTER_RESULT_INIT;
  r.indices = f.idx.data();
  r.weights = f.w.data();
  r.tokens_per_expert = f.kept.data();
  r.selected_per_expert = f.selected.data();
  EXPECT_EQ(WEFT_OK, weft_router_forward(&in.tensor, &cfg, &r, nullptr)) << weft_last_error();
  f.aux = r.aux_loss;
  f.z = r.z_loss;
  return f;
}

void check_forward(const Case& c) {
  SCOPED_TRACE(c.name);
  Inputs in;
  make_inputs(c, in);
  const size_t T = c.T, k = static_cast<size_t>(c.k);
  const int E = c.E;
  // The reference, token by token.
  std::vector<int> pre(T * k);
  std::vector<double> wref(T * k);
  double aux = 0, z = 0, zscale = 0;
  std::vector<double> psum(E, 0.0);
  for (size_t t = 0; t < T; ++t) {
    const std::vector<double> x(in.x.begin() + t * E, in.x.begin() + (t + 1) * E);
    const routerref::Row r = routerref::row(x, in.cfg);
    for (size_t j = 0; j < k; ++j) {
      pre[t * k + j] = r.idx[j];
      wref[t * k + j] = r.w[j];
    }
    for (int e = 0; e < E; ++e) psum[e] += r.p[e];
    z += r.lse * r.lse;
    zscale = std::max(zscale, r.lse * r.lse);
  }
  const std::vector<double> sel = routerref::counts(pre, E);
  for (int e = 0; e < E && T > 0; ++e) aux += sel[e] / (double(T) * c.k) * psum[e] / double(T);
  aux *= double(in.cfg.aux_loss_coeff) * E;
  z = T ? z * in.cfg.z_loss_coeff / double(T) : 0.0;

  // Without dropping: the selection and weights; with: the same call's pre-drop weights decide.
  const Forward all = run_forward(c, in, WEFT_DROP_NONE);
  std::vector<int64_t> want_pre(pre.begin(), pre.end()), got_pre(all.idx.begin(), all.idx.end());
  check_exact(std::string(c.name) + " indices before dropping", got_pre, want_pre);
  std::vector<double> gw(all.w.begin(), all.w.end()), tw(T * k);
  for (size_t i = 0; i < T * k; ++i) tw[i] = tol_of(1.0, E);
  check_close(std::string(c.name) + " weights", gw, wref, tw);
  check_close(std::string(c.name) + " aux loss", {double(all.aux)}, {aux}, {tol_of(std::fabs(aux), E)});
  check_close(std::string(c.name) + " z loss", {double(all.z)}, {z},
              {tol_of(zscale * in.cfg.z_loss_coeff, E)});
  check_exact(std::string(c.name) + " selected_per_expert", all.selected, std::vector<int64_t>(sel.begin(), sel.end()));

  const Forward d = run_forward(c, in, c.drop);
  const std::vector<char> kept = routerref::keep(pre, all.w, T, in.cfg);
  std::vector<int64_t> want_idx(T * k), got_idx(d.idx.begin(), d.idx.end()), want_kept(E, 0);
  std::vector<double> want_w(T * k), got_w(d.w.begin(), d.w.end());
  for (size_t s = 0; s < T * k; ++s) {
    want_idx[s] = kept[s] ? pre[s] : WEFT_MOE_DROPPED;
    want_w[s] = kept[s] ? double(all.w[s]) : 0.0;  // a kept slot's weight is unchanged, bit for bit
    if (kept[s]) ++want_kept[pre[s]];
  }
  check_exact(std::string(c.name) + " indices after dropping", got_idx, want_idx);
  check_close(std::string(c.name) + " weights after dropping", got_w, want_w, std::vector<double>(T * k, 0.0));
  check_exact(std::string(c.name) + " tokens_per_expert", d.kept, want_kept);
  check_exact(std::string(c.name) + " selected_per_expert (dropping)", d.selected,
              std::vector<int64_t>(sel.begin(), sel.end()));
}

const Case kCases[] = {
    {"softmax k2 E8", 40, 8, 2, WEFT_ROUTER_SOFTMAX},
    {"softmax normalized k1 E6", 33, 6, 1, WEFT_ROUTER_SOFTMAX, 1},
    {"softmax normalized k3 E10 bias", 50, 10, 3, WEFT_ROUTER_SOFTMAX, 1, 0, 0, true},
    {"softmax k8 E64 by probability", 300, 64, 8, WEFT_ROUTER_SOFTMAX, 1, 0, 0, false, WEFT_DROP_BY_PROBABILITY, 1.0},
    {"softmax k4 E12 by position cf 0.5", 90, 12, 4, WEFT_ROUTER_SOFTMAX, 0, 0, 0, false, WEFT_DROP_BY_POSITION, 0.5},
    {"topk-softmax k2 E7", 45, 7, 2, WEFT_ROUTER_TOPK_SOFTMAX},
    {"topk-softmax k5 E24 bias groups", 64, 24, 5, WEFT_ROUTER_TOPK_SOFTMAX, 0, 6, 3, true},
    {"topk-softmax k6 E6 by probability cf 0.75", 37, 6, 6, WEFT_ROUTER_TOPK_SOFTMAX, 0, 0, 0, false,
     WEFT_DROP_BY_PROBABILITY, 0.75},
    {"sigmoid k8 E32 groups 8/4 bias", 70, 32, 8, WEFT_ROUTER_SIGMOID, 1, 8, 4, true},
    {"sigmoid k7 E9 by position cf 1.25", 55, 9, 7, WEFT_ROUTER_SIGMOID, 0, 0, 0, false, WEFT_DROP_BY_POSITION, 1.25},
    {"sigmoid groups of one", 20, 5, 2, WEFT_ROUTER_SIGMOID, 0, 5, 3, false},
    {"softmax groups of one by probability cf 0.3", 60, 16, 3, WEFT_ROUTER_SOFTMAX, 1, 16, 4, true,
     WEFT_DROP_BY_PROBABILITY, 0.3},
    {"bf16 softmax k2 E20 bias", 48, 20, 2, WEFT_ROUTER_SOFTMAX, 1, 0, 0, true, WEFT_DROP_NONE, 1.0, true},
    {"bf16 sigmoid k4 E16 groups by position", 48, 16, 4, WEFT_ROUTER_SIGMOID, 1, 4, 2, true, WEFT_DROP_BY_POSITION,
     0.9, true},
    {"bf16 topk-softmax k3 E5 by probability", 31, 5, 3, WEFT_ROUTER_TOPK_SOFTMAX, 0, 0, 0, false,
     WEFT_DROP_BY_PROBABILITY, 0.6, true},
    {"one token", 1, 12, 4, WEFT_ROUTER_SOFTMAX, 1, 3, 2, true, WEFT_DROP_BY_PROBABILITY, 0.5},
    {"no tokens", 0, 12, 4, WEFT_ROUTER_SIGMOID, 1, 0, 0, true, WEFT_DROP_BY_POSITION, 1.0},
    {"k = E = 1", 9, 1, 1, WEFT_ROUTER_SOFTMAX, 1, 0, 0, false, WEFT_DROP_BY_POSITION, 2.0},
};

TEST(MoeRouter, ForwardMatchesReference) {
  for (const Case& c : kCases) check_forward(c);
}

TEST(MoeRouter, EveryTopkFromOneToEight) {
  for (int k = 1; k <= 8; ++k) {
    const std::string name = "softmax k" + std::to_string(k) + " E13";
    Case c{name.c_str(), 29, 13, k, WEFT_ROUTER_SOFTMAX, k % 2, 0, 0, k % 3 == 0, WEFT_DROP_BY_PROBABILITY, 0.8};
    c.seed = 100 + k;
    check_forward(c);
  }
}

// Equal logits: the lower expert index wins every tie, and slots follow index order.
TEST(MoeRouter, TiesGoToTheLowerIndex) {
  std::vector<float> x = {1, 3, 3, 1, 3, 0};
  int64_t shape[2] = {1, 6};
  weft_tensor_t t{x.data(), WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, shape, nullptr, 0};
  weft_router_config_t cfg = WEFT_ROUTER_CONFIG_INIT;
  cfg.experts = 6;
  cfg.topk = 4;
  std::vector<int32_t> idx(4);
  std::vector<float> w(4);
  weft_router_result_t r = WEFT_ROUTER_RESULT_INIT;
  r.indices = idx.data();
  r.weights = w.data();
  ASSERT_EQ(WEFT_OK, weft_router_forward(&t, &cfg, &r, nullptr)) << weft_last_error();
  check_exact("tied experts", std::vector<int64_t>(idx.begin(), idx.end()), {1, 2, 4, 0});
  // Tied assignments of equal weight: BY_PROBABILITY keeps the lower tokens.
  std::vector<float> x2 = {2, 0, 2, 0, 2, 0};
  int64_t shape2[2] = {3, 2};
  weft_tensor_t t2{x2.data(), WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, shape2, nullptr, 0};
  cfg.experts = 2;
  cfg.topk = 1;
  cfg.drop = WEFT_DROP_BY_PROBABILITY;
  cfg.capacity_factor = 1.0;  // C = ceil(3 / 2) = 2
  ASSERT_EQ(WEFT_OK, weft_router_forward(&t2, &cfg, &r, nullptr)) << weft_last_error();
  check_exact("tied weights", std::vector<int64_t>(idx.begin(), idx.begin() + 3), {0, 0, WEFT_MOE_DROPPED});
}

// ---------------------------------------------------------------- backward

void check_backward(const Case& c, float ga, float gz) {
  SCOPED_TRACE(c.name);
  Inputs in;
  make_inputs(c, in);
  const size_t T = c.T, k = static_cast<size_t>(c.k);
  const int E = c.E;
  const Forward d = run_forward(c, in, c.drop);
  const Forward all = run_forward(c, in, WEFT_DROP_NONE);
  std::mt19937_64 rng(c.seed + 7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> gw(T * k);
  routerref::Grads g;
  g.gw.resize(T * k);
  for (size_t s = 0; s < T * k; ++s) {
    gw[s] = u(rng);
    g.gw[s] = d.idx[s] < 0 ? 0.0 : gw[s];
  }
  g.ga = ga;
  g.gz = gz;
  std::vector<float> grad(T * E, 123.0f);
  int64_t shape[2] = {static_cast<int64_t>(T), E};
  weft_tensor_t gt{grad.data(), WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, shape, nullptr, 0};
  ASSERT_EQ(WEFT_OK, weft_router_backward(&in.tensor, &in.cfg, d.idx.data(), gw.data(), ga, gz, &gt, nullptr))
      << weft_last_error();
  const std::vector<int> pre(all.idx.begin(), all.idx.end());
  const std::vector<double> X(in.x.begin(), in.x.end());
  const std::vector<double> closed = routerref::closed_form(X, T, in.cfg, pre, g);
  const std::vector<double> fd = routerref::finite_differences(X, T, in.cfg, pre, g, 1e-5);
  // The closed forms against finite differences (double: truncation h^2 and cancellation).
  double scale = 0;
  for (double v : closed) scale = std::max(scale, std::fabs(v));
  check_close(std::string(c.name) + " closed form vs finite differences", fd, closed,
              std::vector<double>(closed.size(), 1e-7 * (1 + scale)));
  // The router against the closed forms: float32 rounding relative to the largest term of the row.
  std::vector<double> tol(T * E);
  for (size_t t = 0; t < T; ++t) {
    double row = 0;
    for (size_t j = 0; j < k; ++j) row += std::fabs(gw[t * k + j]);
    for (int e = 0; e < E; ++e) row = std::max(row, std::fabs(closed[t * E + e]));
    row += std::fabs(ga * in.cfg.aux_loss_coeff) * E + std::fabs(gz * in.cfg.z_loss_coeff) * 8;
    for (int e = 0; e < E; ++e) tol[t * E + e] = tol_of(row, E);
  }
  check_close(std::string(c.name) + " grad_logits", std::vector<double>(grad.begin(), grad.end()), closed, tol);
}

TEST(MoeRouter, BackwardMatchesClosedFormsAndFiniteDifferences) {
  const Case cases[] = {
      {"bw softmax", 12, 8, 2, WEFT_ROUTER_SOFTMAX},
      {"bw softmax normalized by probability", 16, 6, 3, WEFT_ROUTER_SOFTMAX, 1, 0, 0, true, WEFT_DROP_BY_PROBABILITY,
       0.5},
      {"bw topk-softmax groups", 10, 12, 3, WEFT_ROUTER_TOPK_SOFTMAX, 0, 4, 2, true},
      {"bw topk-softmax by position", 14, 5, 2, WEFT_ROUTER_TOPK_SOFTMAX, 0, 0, 0, false, WEFT_DROP_BY_POSITION, 0.6},
      {"bw sigmoid", 11, 9, 4, WEFT_ROUTER_SIGMOID, 1, 3, 2, true},
      {"bw sigmoid by probability", 15, 7, 2, WEFT_ROUTER_SIGMOID, 0, 0, 0, false, WEFT_DROP_BY_PROBABILITY, 0.7},
      {"bw bf16 softmax k1", 9, 10, 1, WEFT_ROUTER_SOFTMAX, 0, 0, 0, false, WEFT_DROP_NONE, 1.0, true},
      {"bw one token", 1, 6, 6, WEFT_ROUTER_SOFTMAX, 1},
  };
  for (const Case& c : cases) {
    check_backward(c, 0.0f, 0.0f);
    check_backward(c, 1.5f, 0.0f);
    check_backward(c, 0.0f, -2.0f);
    check_backward(c, 0.7f, 0.9f);
  }
}

// ---------------------------------------------------------------- update_bias and refusals

TEST(MoeRouter, UpdateBiasFollowsTheSignOfMeanMinusLoad) {
  // loads 1, 5, 3, 3: mean 3 -> signs +, -, 0, 0.
  std::vector<float> bias = {0.5f, 0.5f, -1.0f, 2.0f};
  const int64_t load[4] = {1, 5, 3, 3};
  ASSERT_EQ(WEFT_OK, weft_router_update_bias(bias.data(), load, 4, 0.25f)) << weft_last_error();
  check_close("update_bias", std::vector<double>(bias.begin(), bias.end()), {0.75, 0.25, -1.0, 2.0},
              std::vector<double>(4, 0.0));
  // A fractional mean (7/3): loads 2, 2, 3 -> +, +, -.
  std::vector<float> b2 = {0, 0, 0};
  const int64_t load2[3] = {2, 2, 3};
  ASSERT_EQ(WEFT_OK, weft_router_update_bias(b2.data(), load2, 3, 1.0f)) << weft_last_error();
  check_close("update_bias fractional mean", std::vector<double>(b2.begin(), b2.end()), {1, 1, -1},
              std::vector<double>(3, 0.0));
}

TEST(MoeRouter, BadArgumentsAreRefusedByName) {
  Case c{"refusals", 4, 8, 2, WEFT_ROUTER_SOFTMAX};
  Inputs in;
  make_inputs(c, in);
  std::vector<int32_t> idx(8);
  std::vector<float> w(8), grad(32);
  weft_router_result_t r = WEFT_ROUTER_RESULT_INIT;
  r.indices = idx.data();
  r.weights = w.data();
  auto forward_with = [&](auto edit) {
    weft_router_config_t cfg = in.cfg;
    edit(cfg);
    return weft_router_forward(&in.tensor, &cfg, &r, nullptr);
  };
  check_refused("k > E", forward_with([](weft_router_config_t& x) { x.topk = 9; }), "topk");
  check_refused("k = 0", forward_with([](weft_router_config_t& x) { x.topk = 0; }), "topk");
  check_refused("groups not dividing E", forward_with([](weft_router_config_t& x) { x.groups = 3; x.topk_groups = 1; }),
                "groups");
  check_refused("too few experts in the kept groups",
                forward_with([](weft_router_config_t& x) { x.groups = 8; x.topk_groups = 1; }), "topk_groups");
  check_refused("topk_groups > groups", forward_with([](weft_router_config_t& x) { x.groups = 4; x.topk_groups = 5; }),
                "topk_groups");
  check_refused("capacity factor 0",
                forward_with([](weft_router_config_t& x) { x.drop = WEFT_DROP_BY_POSITION; x.capacity_factor = 0; }),
                "capacity_factor");
  check_refused("unknown score", forward_with([](weft_router_config_t& x) {
                  const int bad = 7;
                  std::memcpy(&x.score, &bad, sizeof bad);
                }),
                "score");
  check_refused("unknown drop", forward_with([](weft_router_config_t& x) {
                  const int bad = -1;
                  std::memcpy(&x.drop, &bad, sizeof bad);
                }),
                "drop");
  check_refused("experts not the logits' width", forward_with([](weft_router_config_t& x) { x.experts = 7; }),
                "logits.shape");
  check_refused("struct_size", forward_with([](weft_router_config_t& x) { x.struct_size = 3; }), "struct_size");
  check_refused("config NULL", weft_router_forward(&in.tensor, nullptr, &r, nullptr), "config");
  weft_tensor_t t16 = in.tensor;
  t16.dtype = WEFT_FLOAT16;
  check_refused("float16 logits", weft_router_forward(&t16, &in.cfg, &r, nullptr), "FLOAT32 or BFLOAT16");
  weft_tensor_t t1 = in.tensor;
  t1.ndim = 1;
  check_refused("one-dimensional logits", weft_router_forward(&t1, &in.cfg, &r, nullptr), "logits.ndim");
  const int64_t strides[2] = {1, 4};
  weft_tensor_t ts = in.tensor;
  ts.strides = strides;
  check_refused("transposed logits", weft_router_forward(&ts, &in.cfg, &r, nullptr), "not contiguous");
  weft_router_result_t r0 = r;
  r0.indices = nullptr;
  check_refused("indices NULL", weft_router_forward(&in.tensor, &in.cfg, &r0, nullptr), "result->indices");
  int host_stream = 0;
  check_refused("stream with host logits", weft_router_forward(&in.tensor, &in.cfg, &r, &host_stream), "stream");

  ASSERT_EQ(WEFT_OK, weft_router_forward(&in.tensor, &in.cfg, &r, nullptr)) << weft_last_error();
  int64_t shape[2] = {4, 8};
  weft_tensor_t gt{grad.data(), WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, shape, nullptr, 0};
  std::vector<int32_t> wrong = idx;
  wrong[3] = (wrong[3] + 1) % 8;
  check_refused("indices not the forward's",
                weft_router_backward(&in.tensor, &in.cfg, wrong.data(), w.data(), 0, 0, &gt, nullptr), "indices[3]");
  wrong[3] = 8;
  check_refused("index out of range",
                weft_router_backward(&in.tensor, &in.cfg, wrong.data(), w.data(), 0, 0, &gt, nullptr), "indices[3]");
  check_refused("grad_weights NULL",
                weft_router_backward(&in.tensor, &in.cfg, idx.data(), nullptr, 0, 0, &gt, nullptr), "grad_weights");
  weft_tensor_t g16 = gt;
  g16.dtype = WEFT_BFLOAT16;
  check_refused("bf16 grad_logits", weft_router_backward(&in.tensor, &in.cfg, idx.data(), w.data(), 0, 0, &g16, nullptr),
                "grad_logits.dtype");
  int64_t shape3[2] = {3, 8};
  weft_tensor_t g3 = gt;
  g3.shape = shape3;
  check_refused("grad_logits rows", weft_router_backward(&in.tensor, &in.cfg, idx.data(), w.data(), 0, 0, &g3, nullptr),
                "grad_logits");
  const int64_t load[2] = {1, -1};
  float bias[2] = {0, 0};
  check_refused("negative load", weft_router_update_bias(bias, load, 2, 0.1f), "tokens_per_expert[1]");
  check_refused("no experts", weft_router_update_bias(bias, load, 0, 0.1f), "experts");
  check_refused("NULL bias", weft_router_update_bias(nullptr, load, 2, 0.1f), "bias");
}

}  // namespace
