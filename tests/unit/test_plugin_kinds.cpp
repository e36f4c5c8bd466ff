// The ROUTER, SCHEDULE and COST_MODEL extension kinds (weft/plugin.h) end to end below the C ABI:
// functions written here are registered through core/plugin/registry.h (as the plugin loader
// does) and used through kernels/cpu/moe_router.h (with the selector the C shim would pass),
// core/pipeline's generate / simulate / tune.
//
// References, independent of weft's kernels: the router's weights, counts, losses and gradient
// from the header's formulas in double (softmax over all E, w = p / sum of the chosen p; the
// gradient of sum gw * w through softmax's Jacobian); schedules against the closed forms of
// GPipe and 1F1B under constant costs ((m + p - 1)(F + B), plus 2 overheads per micro-batch
// and stage on the critical path), and tune's candidates against the same closed forms
// evaluated per m. Tolerances: float32 router arithmetic over E = 8 terms with exp within 2 ulp:
// (E + 16) * 2^-22 relative (as test_moe_router.cpp); the simulator adds the given doubles
// exactly for the integer-valued costs used here, so times compare exactly (relative 1e-12 where
// micro-batch sizes make non-integers).
//
// WEFT_TEST_INJECT=1 (ctest unit.plugin_kinds_inject) corrupts every checked value, list and
// refusal once; the run passes only when every corruption was caught.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "core/pipeline/generators.h"
#include "core/pipeline/simulator.h"
#include "core/pipeline/tune.h"
#include "core/plugin/registry.h"
#include "kernels/cpu/moe_router.h"
#include "pipeline_inject_checks.h"

namespace {

namespace wp = weft::pipeline;
namespace plug = weft::plugin;
using pipecheck::check_list;
using pipecheck::check_value;
using pipecheck::record;
using wp::Action;
using wp::Kind;

// A refusal: fn must throw weft::Error whose message holds every piece; an injection asks for a
// piece no message has.
void check_refused(const std::function<void()>& fn, std::vector<std::string> pieces, const std::string& what) {
  const bool injected = pipecheck::inject_enabled();
  if (injected) pieces.push_back("<injected: no message says this>");
  std::string msg;
  bool threw = false;
  try {
    fn();
  } catch (const weft::Error& e) {
    threw = true;
    msg = e.what();
  }
  bool pass = threw;
  for (const auto& p : pieces) pass = pass && msg.find(p) != std::string::npos;
  record(injected, pass, what + ": " + (threw ? "message '" + msg + "'" : std::string("accepted")));
}

void check_ints(std::vector<int64_t> got, const std::vector<int64_t>& want, const std::string& what) {
  const bool injected = pipecheck::inject_enabled() && !got.empty();
  if (injected) got[got.size() / 2] += 3;
  record(injected, got == want, what);
}

void check_text(std::string got, const std::string& want, const std::string& what) {
  const bool injected = pipecheck::inject_enabled();
  if (injected) got += "#";
  record(injected, got == want, what + ": got '" + got + "', expected '" + want + "'");
}

// ---------------------------------------------------------------- router plugins

int g_router_calls = 0;

// The k LOWEST selection scores (ties: lower index), a choice top-k never makes.
int32_t lowest_k(const float* scores, size_t tokens, int32_t experts, int32_t topk, int32_t* indices) {
  ++g_router_calls;
  for (size_t t = 0; t < tokens; ++t) {
    std::vector<int32_t> order(static_cast<size_t>(experts));
    for (int32_t e = 0; e < experts; ++e) order[static_cast<size_t>(e)] = e;
    const float* row = scores + t * static_cast<size_t>(experts);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] < row[b]; });
    for (int32_t j = 0; j < topk; ++j) indices[t * static_cast<size_t>(topk) + static_cast<size_t>(j)] = order[static_cast<size_t>(j)];
  }
  return 0;
}

// Token 3 gets expert 0 twice; everything else is valid.
int32_t duplicates_at_3(const float* s, size_t tokens, int32_t experts, int32_t topk, int32_t* idx) {
  lowest_k(s, tokens, experts, topk, idx);
  idx[3 * static_cast<size_t>(topk)] = 0;
  idx[3 * static_cast<size_t>(topk) + 1] = 0;
  return 0;
}

// Token 5 gets expert E.
int32_t out_of_range_at_5(const float* s, size_t tokens, int32_t experts, int32_t topk, int32_t* idx) {
  lowest_k(s, tokens, experts, topk, idx);
  idx[5 * static_cast<size_t>(topk) + 1] = experts;
  return 0;
}

int32_t router_fails(const float*, size_t, int32_t, int32_t, int32_t*) { return 77; }

int add_router(const char* name, plug::RouterFn fn) {
  plug::Router r;
  r.origin = plug::Origin{name, "test_plugin_kinds", "test_plugin_kinds.cpp"};
  r.select = fn;
  return plug::add_router(r);
}

// The selector the C shim would build from a registered router (capi/src/router_api.cpp).
struct Selector {
  std::string name;
  weft::kernels::RouterSelector sel;
  explicit Selector(int id) {
    const auto r = plug::get_router(id);
    name = r->origin.describe("router");
    sel.fn = r->select;
    sel.name = name.c_str();
  }
};

constexpr int kT = 16, kE = 8, kK = 2;
const double kRouterTol = (kE + 16) * std::ldexp(1.0, -22);

// Logits on a grid of 1/4 in [-2, 2]: distinct values are far apart against float rounding, and
// equal ones tie exactly in float and double alike (both go to the lower index).
std::vector<float> grid_logits(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-8, 8);
  std::vector<float> x(static_cast<size_t>(kT * kE));
  for (float& v : x) v = static_cast<float>(d(rng)) / 4.0f;
  return x;
}

// The reference: softmax in double, the k lowest probabilities (ties: lower index).
struct RefRow {
  std::vector<double> p;
  std::vector<int> idx;
};
std::vector<RefRow> reference_rows(const std::vector<float>& x) {
  std::vector<RefRow> rows(static_cast<size_t>(kT));
  for (int t = 0; t < kT; ++t) {
    RefRow& r = rows[static_cast<size_t>(t)];
    double mx = -1e300, z = 0;
    for (int e = 0; e < kE; ++e) mx = std::max(mx, double(x[static_cast<size_t>(t * kE + e)]));
    for (int e = 0; e < kE; ++e) {
      r.p.push_back(std::exp(double(x[static_cast<size_t>(t * kE + e)]) - mx));
      z += r.p.back();
    }
    for (double& v : r.p) v /= z;
    std::vector<int> order(kE);
    for (int e = 0; e < kE; ++e) order[static_cast<size_t>(e)] = e;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return r.p[size_t(a)] < r.p[size_t(b)]; });
    r.idx.assign(order.begin(), order.begin() + kK);
  }
  return rows;
}

weft::kernels::RouterConfig router_config(const Selector& s) {
  weft::kernels::RouterConfig c;
  c.experts = kE;
  c.topk = kK;
  c.score = 0;  // SOFTMAX
  c.selector = s.sel;
  return c;
}

TEST(PluginRouter, SelectorChoosesWeftComputesTheRest) {
  const int id = add_router("lowest_k", lowest_k);
  ASSERT_GE(id, plug::kIdBase);
  const Selector sel(id);
  const std::vector<float> x = grid_logits(7);
  const std::vector<RefRow> ref = reference_rows(x);
  weft::kernels::RouterConfig c = router_config(sel);
  c.normalize = true;
  c.drop = 2;  // BY_POSITION
  c.capacity_factor = 1.0;
  c.aux_loss_coeff = 0.01f;
  std::vector<int32_t> idx(kT * kK);
  std::vector<float> w(kT * kK);
  std::vector<int64_t> kept(kE), selected(kE);
  weft::kernels::RouterOutputs out;
  out.indices = idx.data();
  out.weights = w.data();
  out.tokens_per_expert = kept.data();
  out.selected_per_expert = selected.data();
  g_router_calls = 0;
  weft::kernels::router_forward(x.data(), weft::DType::f32, kT, c, out);
  check_value(g_router_calls, 1, "router_forward calls the selector once");
  // Reference: capacity ceil(T k / E) = 4 per expert, kept by position in token order.
  const int64_t cap = (kT * kK + kE - 1) / kE;
  std::vector<int64_t> want_idx, got_idx(idx.begin(), idx.end()), want_sel(kE, 0), want_kept(kE, 0), seen(kE, 0);
  std::vector<double> want_w;
  for (int t = 0; t < kT; ++t) {
    const RefRow& r = ref[size_t(t)];
    const double sum = r.p[size_t(r.idx[0])] + r.p[size_t(r.idx[1])];
    for (int j = 0; j < kK; ++j) {
      const int e = r.idx[size_t(j)];
      ++want_sel[size_t(e)];
      const bool keep = seen[size_t(e)]++ < cap;
      want_idx.push_back(keep ? e : -1);
      want_w.push_back(keep ? r.p[size_t(e)] / sum : 0.0);
      if (keep) ++want_kept[size_t(e)];
    }
  }
  check_ints(got_idx, want_idx, "indices: the selector's choice, dropped by position");
  check_ints(selected, want_sel, "selected_per_expert");
  check_ints(kept, want_kept, "tokens_per_expert");
  double worst = 0;
  for (size_t s = 0; s < w.size(); ++s) worst = std::max(worst, std::fabs(double(w[s]) - want_w[s]));
  check_value(worst, 0.0, "weights within float32 rounding of p / sum of the chosen p", kRouterTol);
  double aux = 0;
  for (int e = 0; e < kE; ++e) {
    double psum = 0;
    for (int t = 0; t < kT; ++t) psum += ref[size_t(t)].p[size_t(e)];
    aux += double(want_sel[size_t(e)]) / (kT * kK) * (psum / kT);
  }
  aux *= 0.01 * kE;
  check_value(out.aux_loss, aux, "aux loss from the selector's selections", kRouterTol);
}

TEST(PluginRouter, BackwardAsksAgainAndDifferentiatesTheChoice) {
  const Selector sel(add_router("lowest_k_backward", lowest_k));
  const std::vector<float> x = grid_logits(11);
  const std::vector<RefRow> ref = reference_rows(x);
  weft::kernels::RouterConfig c = router_config(sel);  // SOFTMAX, no normalisation: w = p
  std::vector<int32_t> idx(kT * kK);
  std::vector<float> w(kT * kK);
  weft::kernels::RouterOutputs out;
  out.indices = idx.data();
  out.weights = w.data();
  g_router_calls = 0;
  weft::kernels::router_forward(x.data(), weft::DType::f32, kT, c, out);
  std::vector<float> gw(kT * kK), g(kT * kE);
  for (size_t s = 0; s < gw.size(); ++s) gw[s] = static_cast<float>(int(s % 7) - 3) / 2.0f;
  weft::kernels::router_backward(x.data(), weft::DType::f32, kT, c, idx.data(), gw.data(), 0.0f, 0.0f, g.data());
  check_value(g_router_calls, 2, "forward and backward each call the selector");
  // d/dx_e = p_e (G_e - sum_f p_f G_f), G_e = the weight gradients of the slots choosing e.
  double worst = 0;
  for (int t = 0; t < kT; ++t) {
    const RefRow& r = ref[size_t(t)];
    std::vector<double> G(kE, 0.0);
    for (int j = 0; j < kK; ++j) G[size_t(r.idx[size_t(j)])] += gw[size_t(t * kK + j)];
    double pg = 0;
    for (int e = 0; e < kE; ++e) pg += r.p[size_t(e)] * G[size_t(e)];
    for (int e = 0; e < kE; ++e) {
      worst = std::max(worst, std::fabs(double(g[size_t(t * kE + e)]) - r.p[size_t(e)] * (G[size_t(e)] - pg)));
    }
  }
  check_value(worst, 0.0, "grad_logits against softmax's Jacobian", kRouterTol);
}

TEST(PluginRouter, BadChoicesAreRefusedNamingTokenAndPlugin) {
  const std::vector<float> x = grid_logits(3);
  std::vector<int32_t> idx(kT * kK);
  std::vector<float> w(kT * kK), g(kT * kE), gw(kT * kK, 1.0f);
  weft::kernels::RouterOutputs out;
  out.indices = idx.data();
  out.weights = w.data();
  const struct {
    const char* name;
    plug::RouterFn fn;
    std::vector<std::string> pieces;
  } cases[] = {
      {"dup_router", duplicates_at_3, {"dup_router", "token 3", "twice"}},
      {"range_router", out_of_range_at_5, {"range_router", "token 5", "expert 8", "[0, 8)"}},
      {"failing_router", router_fails, {"failing_router", "returned 77"}},
  };
  for (const auto& cs : cases) {
    const Selector sel(add_router(cs.name, cs.fn));
    const weft::kernels::RouterConfig c = router_config(sel);
    check_refused([&] { weft::kernels::router_forward(x.data(), weft::DType::f32, kT, c, out); }, cs.pieces,
                  std::string(cs.name) + " forward");
    std::fill(idx.begin(), idx.end(), -1);
    check_refused(
        [&] { weft::kernels::router_backward(x.data(), weft::DType::f32, kT, c, idx.data(), gw.data(), 0, 0, g.data()); },
        cs.pieces, std::string(cs.name) + " backward");
  }
  const Selector sel(add_router("grouped", lowest_k));
  weft::kernels::RouterConfig c = router_config(sel);
  c.groups = 2;
  c.topk_groups = 1;
  check_refused([&] { weft::kernels::check_router_config(c, weft::DType::f32, "config"); },
                {"groups = 2", "grouped", "<= 1"}, "groups > 1 with a selector");
}

// ---------------------------------------------------------------- schedule plugins

Action act(Kind k, int stage, int mb) { return Action{k, stage, mb}; }

// Writes lists (rank after rank) into the plugin's buffers; 9 when they do not fit.
int32_t emit(const std::vector<std::vector<Action>>& lists, void* actions, size_t capacity, size_t* counts) {
  size_t at = 0;
  for (size_t r = 0; r < lists.size(); ++r) {
    if (lists[r].size() > capacity - at) return 9;
    std::copy(lists[r].begin(), lists[r].end(), static_cast<Action*>(actions) + at);
    at += lists[r].size();
    counts[r] = lists[r].size();
  }
  return 0;
}

// GPipe as weft/pipeline.h states it, v = 1 only (else declined with 5).
std::vector<std::vector<Action>> gpipe_lists(int p, int m) {
  std::vector<std::vector<Action>> l(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) {
    for (int i = 0; i < m; ++i) l[size_t(r)].push_back(act(Kind::F, r, i));
    for (int i = 0; i < m; ++i) l[size_t(r)].push_back(act(Kind::B, r, i));
  }
  return l;
}
int32_t gpipe_plugin(int32_t p, int32_t m, int32_t v, void* actions, size_t capacity, size_t* counts, int32_t* sr) {
  if (v != 1) return 5;
  for (int s = 0; s < p; ++s) sr[s] = s;
  return emit(gpipe_lists(p, m), actions, capacity, counts);
}
// The same for even m only: the tuner must skip the odd ones.
int32_t gpipe_even(int32_t p, int32_t m, int32_t v, void* a, size_t cap, size_t* counts, int32_t* sr) {
  return m % 2 ? 3 : gpipe_plugin(p, m, v, a, cap, counts, sr);
}
// GPipe over a loop of v = 2 stages per rank (stage c p + r on rank r): several stages per rank,
// so weft must order the messages globally (gen_comm.cpp).
int32_t looped_gpipe(int32_t p, int32_t m, int32_t v, void* actions, size_t capacity, size_t* counts, int32_t* sr) {
  std::vector<std::vector<Action>> l(static_cast<size_t>(p));
  for (int s = 0; s < p * v; ++s) sr[s] = s % p;
  for (int r = 0; r < p; ++r) {
    for (int c = 0; c < v; ++c) {
      for (int i = 0; i < m; ++i) l[size_t(r)].push_back(act(Kind::F, c * p + r, i));
    }
    for (int c = v - 1; c >= 0; --c) {
      for (int i = 0; i < m; ++i) l[size_t(r)].push_back(act(Kind::B, c * p + r, i));
    }
  }
  return emit(l, actions, capacity, counts);
}
// Broken ones, each valid but for one thing.
int32_t emits_send(int32_t p, int32_t m, int32_t v, void* a, size_t cap, size_t* counts, int32_t* sr) {
  const int32_t rc = gpipe_plugin(p, m, v, a, cap, counts, sr);
  static_cast<Action*>(a)[1] = act(Kind::SEND_F, 0, 0);
  return rc;
}
int32_t stage_out_of_range(int32_t p, int32_t m, int32_t v, void* a, size_t cap, size_t* counts, int32_t* sr) {
  const int32_t rc = gpipe_plugin(p, m, v, a, cap, counts, sr);
  static_cast<Action*>(a)[0].stage = p;
  return rc;
}
int32_t counts_overflow(int32_t p, int32_t m, int32_t v, void* a, size_t cap, size_t* counts, int32_t* sr) {
  const int32_t rc = gpipe_plugin(p, m, v, a, cap, counts, sr);
  counts[p - 1] = cap;
  return rc;
}
int32_t crowded_placement(int32_t p, int32_t m, int32_t v, void* a, size_t cap, size_t* counts, int32_t* sr) {
  const int32_t rc = gpipe_plugin(p, m, v, a, cap, counts, sr);
  sr[1] = 0;
  return rc;
}
int32_t missing_backward(int32_t p, int32_t m, int32_t, void* a, size_t cap, size_t* counts, int32_t* sr) {
  for (int s = 0; s < p; ++s) sr[s] = s;
  std::vector<std::vector<Action>> l = gpipe_lists(p, m);
  l[0].pop_back();  // rank 0 loses its last B
  return emit(l, a, cap, counts);
}

int add_schedule(const char* name, plug::ScheduleFn fn) {
  plug::ScheduleGenerator g;
  g.origin = plug::Origin{name, "test_plugin_kinds", "test_plugin_kinds.cpp"};
  g.generate = fn;
  return plug::add_schedule(g);
}

wp::Schedule generate(int id, int p, int m, int v = 0, bool reduce_grad = false) {
  wp::GenerateOptions o;
  o.ranks = p;
  o.microbatches = m;
  o.stages_per_rank = v;
  o.reduce_grad = reduce_grad;
  return wp::generate(static_cast<wp::Method>(id), o);
}

TEST(PluginSchedule, BuiltLikeTheBuiltIns) {
  const int id = add_schedule("gpipe_plugin", gpipe_plugin);
  for (bool rg : {false, true}) {
    const wp::Schedule s = generate(id, 4, 6, 0, rg);
    const wp::Schedule ref = generate(static_cast<int>(wp::Method::gpipe), 4, 6, 0, rg);
    check_value(static_cast<int>(s.method), id, "the schedule's kind is the plugin's id");
    for (size_t r = 0; r < 4; ++r) {
      // The plugin's compute order is GPipe's, so weft's SEND/RECV (and REDUCE_GRAD) must be too.
      check_list(s.actions[r], ref.actions[r], "plugin GPipe, rank " + std::to_string(r) + (rg ? " + REDUCE_GRAD" : ""));
    }
  }
  check_text(wp::method_name(static_cast<wp::Method>(id)), "gpipe_plugin", "method_name of the plugin's kind");
  // A saved schedule keeps the numeric kind (schedule_file.cpp), and loads back with it.
  const std::vector<uint8_t> bytes = wp::serialize(generate(id, 2, 3));
  const wp::Schedule back = wp::deserialize(bytes.data(), bytes.size());
  check_value(static_cast<int>(back.method), id, "the plugin's kind after serialize / deserialize");
  // v = 2 in a loop: weft orders the messages globally; the result validates and keeps the
  // plugin's compute order and placement.
  const int looped = add_schedule("looped_gpipe", looped_gpipe);
  const wp::Schedule s = generate(looped, 3, 4, 2);
  check_value(s.stages, 6, "looped: S = p v");
  for (size_t r = 0; r < 3; ++r) {
    std::vector<Action> want;
    for (int c = 0; c < 2; ++c) {
      for (int i = 0; i < 4; ++i) want.push_back(act(Kind::F, c * 3 + int(r), i));
    }
    for (int c = 1; c >= 0; --c) {
      for (int i = 0; i < 4; ++i) want.push_back(act(Kind::B, c * 3 + int(r), i));
    }
    check_list(pipecheck::compute_only(s.actions[r]), want, "looped compute order, rank " + std::to_string(r));
  }
  bool valid = true;
  try {
    wp::validate(s);
  } catch (const weft::Error&) {
    valid = false;
  }
  check_value(valid ? 1 : 0, 1, "the looped schedule validates");
}

TEST(PluginSchedule, InvalidOutputIsRefusedNamingPluginAndRule) {
  const struct {
    const char* name;
    plug::ScheduleFn fn;
    std::vector<std::string> pieces;
  } cases[] = {
      {"emits_send", emits_send, {"emits_send", "rank 0, action 1", "compute kind"}},
      {"stage_out_of_range", stage_out_of_range, {"stage_out_of_range", "stage 3", "[0, 3)"}},
      {"counts_overflow", counts_overflow, {"counts_overflow", "counts[2]", "buffer"}},
      {"crowded_placement", crowded_placement, {"crowded_placement", "stage_rank places 2 stages on rank 0"}},
      {"missing_backward", missing_backward, {"missing_backward", "invalid", "rule 'complete'"}},
      {"gpipe_v1_only", gpipe_plugin, {"gpipe_v1_only", "returned 5", "v = 2"}},
  };
  for (const auto& cs : cases) {
    const int id = add_schedule(cs.name, cs.fn);
    const int v = std::string(cs.name) == "gpipe_v1_only" ? 2 : 0;
    check_refused([&] { generate(id, 3, 4, v); }, cs.pieces, cs.name);
  }
  check_refused([&] { generate(plug::kIdBase + 500, 2, 2); }, {std::to_string(plug::kIdBase + 500)},
                "an id no plugin has");
}

// ---------------------------------------------------------------- cost models

// F = 1, B = 2, I = W = 1, REDUCE_GRAD = 0.5, whatever the stage, micro-batch and size.
double constant_cost(int32_t kind, int32_t, int32_t, int32_t, int32_t) {
  switch (static_cast<Kind>(kind)) {
    case Kind::F: return 1;
    case Kind::B: return 2;
    case Kind::REDUCE_GRAD: return 0.5;
    default: return 1;
  }
}
// F = 1 + mbs / 2, B = 2 F (I = W = F).
double linear_cost(int32_t kind, int32_t, int32_t, int32_t, int32_t mbs) {
  const double f = 1.0 + 0.5 * mbs;
  return static_cast<Kind>(kind) == Kind::B ? 2 * f : f;
}
double negative_at_stage_2(int32_t kind, int32_t stage, int32_t n, int32_t mb, int32_t mbs) {
  return stage == 2 ? -1.0 : constant_cost(kind, stage, n, mb, mbs);
}
double nan_cost(int32_t, int32_t, int32_t, int32_t, int32_t) { return std::nan(""); }

int add_cost(const char* name, plug::CostFn fn) {
  plug::CostModel c;
  c.origin = plug::Origin{name, "test_plugin_kinds", "test_plugin_kinds.cpp"};
  c.cost = fn;
  return plug::add_cost_model(c);
}

// Costs for a cost model: no time arrays, no bytes.
wp::Costs model_costs(int id, int stages, int mbs, double overhead = 0) {
  wp::Costs c;
  c.model = plug::get_cost_model(id);
  c.microbatch_size = mbs;
  c.overhead = overhead;
  c.activation_bytes.assign(size_t(stages), 0);
  c.weight_grad_bytes.assign(size_t(stages), 0);
  c.boundary_bytes.assign(size_t(stages), 0);
  return c;
}

double makespan(const wp::Schedule& s, const wp::Costs& c) {
  return wp::simulate(std::make_shared<const wp::Schedule>(s), c).makespan();
}

TEST(PluginCostModel, ClosedForms) {
  const int constant = add_cost("constant", constant_cost), linear = add_cost("linear", linear_cost);
  const int gpipe = add_schedule("gpipe_for_costs", gpipe_plugin);
  for (int p : {1, 2, 4}) {
    for (int m : {1, 3, 8}) {
      const std::string at = " p=" + std::to_string(p) + " m=" + std::to_string(m);
      const double steps = m + p - 1;
      for (int kind : {0, 1, gpipe}) {  // GPIPE, ONE_F_ONE_B, the plugin's GPipe
        const wp::Schedule s = generate(kind, p, m);
        const std::string what = std::string(wp::method_name(s.method)) + at;
        check_value(makespan(s, model_costs(constant, p, 1)), steps * 3, what + ": (m+p-1)(F+B)");
        check_value(makespan(s, model_costs(constant, p, 1, 0.25)), steps * 3.5, what + ": + 2 overheads per step");
        check_value(makespan(s, model_costs(linear, p, 4)), steps * 9, what + ": F = 1 + 4/2, B = 2F");
      }
      // REDUCE_GRAD after rank 0's last B, which ends the step.
      check_value(makespan(generate(1, p, m, 0, true), model_costs(constant, p, 1)), steps * 3 + 0.5,
                  "1F1B + REDUCE_GRAD" + at);
    }
  }
}

TEST(PluginCostModel, BadTimesAreRefusedNamingPluginAndAction) {
  const wp::Schedule s = generate(0, 4, 2);
  check_refused([&] { makespan(s, model_costs(add_cost("negative_at_2", negative_at_stage_2), 4, 1)); },
                {"negative_at_2", "rank 2", "2F0", "-1"}, "a negative time");
  check_refused([&] { makespan(s, model_costs(add_cost("nan_cost", nan_cost), 4, 1)); },
                {"nan_cost", "rank 0", "0F0", "nan"}, "a NaN time");
}

TEST(PluginCostModel, TuneWithModelAndPluginKinds) {
  const int linear = add_cost("linear_tune", linear_cost);
  const int even = add_schedule("gpipe_even", gpipe_even);
  wp::TuneConfig c;
  c.ranks = 2;
  c.global_batch = 8;
  c.microbatch_overhead = 0.125;
  c.kinds = {wp::Method::gpipe, static_cast<wp::Method>(even)};
  c.model = plug::get_cost_model(linear);
  const wp::TuneResult r = wp::tune(c);
  // GPipe for m = 1, 2, 4, 8 and the plugin's for the even ones: (m + 1)(3 (1 + (8/m)/2) + 2 o).
  check_value(double(r.candidates.size()), 7.0, "candidates: 4 GPipe + 3 even-m plugin");
  double best = 1e300;
  for (const wp::TuneCandidate& cand : r.candidates) {
    const int m = cand.microbatches;
    const double want = (m + 1) * (3 * (1 + 0.5 * (8.0 / m)) + 2 * 0.125);
    best = std::min(best, want);
    const std::string what = std::string(wp::method_name(cand.kind)) + " m=" + std::to_string(m);
    check_value(cand.step_time, want, what + " step time", 1e-12);
    check_value(cand.microbatch_size, 8 / m, what + " micro-batch size");
    if (static_cast<int>(cand.kind) == even) check_value(m % 2, 0, what + ": only the m the plugin makes");
  }
  check_value(r.candidates.at(0).step_time, best, "the best is the closed forms' minimum", 1e-12);
}

}  // namespace
