// The planner's cost model (core/plan/) against closed forms derived here by hand from the model
// weft/plan.h states: a layer on one rank, pure data parallelism, memory per ZeRO stage, Megatron
// tensor parallelism, expert parallelism, a 1F1B pipeline, the memory cap, an obvious best
// layout, and Amdahl's serial fraction. Expected values never come from core/plan/ itself.
// With WEFT_TEST_INJECT=1 every checked value is moved and every truth flipped once, and the run
// passes only when each was caught (ctest unit.plan_inject).
#include <gtest/gtest.h>

#include "pipeline_inject_checks.h"

#include "core/plan/plan.h"

using namespace weft;
using namespace weft::plan;
using pipecheck::check_value;

namespace {

// Equalities here are sums of a few products of exact-ish doubles: 1e-12 relative covers the
// rounding of reordered additions (a few ulps over at most ~1e3 terms).
constexpr double kRel = 1e-12;

// One host of `ranks` ranks; bandwidth 1e9 B/s, latency 1e-5 s, memory 1e12 B (no cap unless set).
Options base(int ranks, int batch) {
  Options o;
  o.cluster.hosts = 1;
  o.cluster.ranks_per_host = ranks;
  o.cluster.memory = 1e12;
  o.cluster.flops = 1e12;
  o.cluster.intra_bandwidth = 1e9;
  o.cluster.intra_latency = 1e-5;
  o.global_batch = batch;
  return o;
}

Layer dense(double fwd, double params, double act = 0, double out = 0) {
  Layer l;
  l.name = "dense";
  l.forward_seconds = fwd;
  l.params = params;
  l.activation_bytes = act;
  l.output_bytes = out;
  return l;
}

Layout fixed(int dp, int tp, int pp, int zero, int mb, pipeline::Method s = pipeline::Method::one_f_one_b) {
  Layout x;
  x.dp = dp, x.tp = tp, x.pp = pp, x.zero = zero, x.microbatches = mb, x.schedule = s;
  return x;
}

Layout predict(Options o, const Layout& x) {
  o.fixed = true;
  o.layout = x;
  const Plan p = make_plan(o);
  EXPECT_EQ(p.layouts.size(), 1u);
  return p.layouts.empty() ? Layout{} : p.layouts.front();
}

}  // namespace

TEST(Plan, OneLayerOnOneRankIsForwardPlusBackwardTimesBatch) {
  Options o = base(1, 8);
  o.layers = {dense(0.01, 1000)};
  for (int mb : {1, 2, 8}) {
    const Layout x = predict(o, fixed(1, 1, 1, 0, mb));
    const std::string m = "m " + std::to_string(mb);
    check_value(x.step, 3 * 0.01 * 8, "1 layer, 1 rank: step = (f + 2f) x batch, " + m, kRel);
    check_value(x.compute, 3 * 0.01 * 8, "compute, " + m, kRel);
    check_value(x.communication, 0, "communication, " + m);
    check_value(x.bubble, 0, "bubble, " + m);
  }
  // flops instead of a measured time: f = flops / flops_per_rank.
  o.layers = {dense(0, 1000)};
  o.layers[0].forward_flops = 5e9;
  check_value(predict(o, fixed(1, 1, 1, 0, 1)).step, 3 * 5e9 / 1e12 * 8, "f from flops", kRel);
}

TEST(Plan, PureDataParallelIsComputeOverNPlusRingAllreduce) {
  const int n = 4, G = 8;
  const double f = 0.002, P = 1e6, bw = 1e9, a = 1e-5;
  Options o = base(n, G);
  o.layers = {dense(f, P)};
  const double compute = 3 * f * G / n;
  const double grads = P * 2;  // grad_bytes 2
  const double ring = 2.0 * (n - 1) / n * grads / bw + 2 * (n - 1) * a;
  const Layout z0 = predict(o, fixed(n, 1, 1, 0, 1));
  check_value(z0.step, compute + ring, "dp 4 ZeRO-0: 3fG/n + 2(n-1)/n bytes/bw + 2(n-1) latency", kRel);
  check_value(z0.communication, ring, "dp 4 ZeRO-0: exposed communication", kRel);
  check_value(z0.communication_bytes, 2.0 * (n - 1) / n * grads, "dp 4 ZeRO-0: bytes sent", kRel);
  // ZeRO-1: reduce-scatter of the gradients + all-gather of the weights (2 bytes each): the same.
  check_value(predict(o, fixed(n, 1, 1, 1, 1)).step, compute + ring, "dp 4 ZeRO-1 = ZeRO-0 in time", kRel);
  // ZeRO-3, m micro-batches: every F and every B gathers the weights, the step reduce-scatters.
  for (int m : {1, 2}) {
    const double gather = (n - 1.0) / n * P * 2 / bw + (n - 1) * a;
    const double rs = (n - 1.0) / n * grads / bw + (n - 1) * a;
    check_value(predict(o, fixed(n, 1, 1, 3, m)).step, compute + 2 * m * gather + rs,
                "dp 4 ZeRO-3, m " + std::to_string(m) + ": + 2m gathers + 1 reduce-scatter", kRel);
  }
}

TEST(Plan, MemoryPerZeroStageHasClosedForms) {
  const int n = 4, G = 8;
  const double P = 1e6, act = 1000;
  Options o = base(n, G);
  o.layers = {dense(0.001, P, act)};
  // 2 + 2 + 12 bytes per parameter; 1F1B on one pipeline rank holds one micro-batch of act bytes.
  const double mbs = 2;  // G / dp = 2 samples, m = 1
  const double want[4] = {P * 16, P * (2 + 2 + 12.0 / n), P * (2 + 14.0 / n), P * 16 / n + P * 2};
  for (int z = 0; z <= 3; ++z) {
    const Layout x = predict(o, fixed(n, 1, 1, z, 1));
    check_value(x.static_bytes, want[z], "ZeRO-" + std::to_string(z) + " static bytes", kRel);
    check_value(x.memory, want[z] + act * mbs, "ZeRO-" + std::to_string(z) + " memory per rank", kRel);
  }
}

TEST(Plan, TensorParallelIsMegatronsFourAllreducesPerLayer) {
  const int G = 4, m = 2;
  const double f = 0.004, out = 1e6, bw = 1e9, a = 1e-5;
  Options o = base(2, G);
  o.layers = {dense(f, 1e3, 0, out)};
  const double mbs = G / m;
  // One all-reduce of out x mbs over 2 ranks: 2 (1/2) bytes / bw + 2 latencies; 2 in F, 2 in B.
  const double ar = out * mbs / bw + 2 * a;
  const Layout x = predict(o, fixed(1, 2, 1, 0, m));
  check_value(x.step, 3 * f * G / 2 + m * 4 * ar, "tp 2: 3fG/2 + 4 all-reduces per micro-batch", kRel);
  check_value(x.communication_bytes, m * 4 * out * mbs, "tp 2: bytes sent", kRel);
  // A layer that is not splittable runs whole on both ranks and reduces nothing.
  o.layers[0].tensor_parallel = false;
  check_value(predict(o, fixed(1, 2, 1, 0, m)).step, 3 * f * G, "tp 2, not splittable: 3fG", kRel);
}

TEST(Plan, ReplicatedShareRunsWholeOnEveryTensorParallelRank) {
  const int G = 4, m = 2, tp = 4;
  const double f = 0.004, out = 1e6, bw = 1e9, a = 1e-5, r = 0.25;
  Options o = base(tp, G);
  o.layers = {dense(f, 1e3, 0, out)};
  o.layers[0].tp_replicated = r;
  const double mbs = G / m;
  // A quarter of the work on every rank whole, three quarters split 4 ways: (r + (1 - r) / 4).
  const double ar = 2.0 * (tp - 1) / tp * out * mbs / bw + 2 * (tp - 1) * a;
  check_value(predict(o, fixed(1, tp, 1, 0, m)).step, 3 * f * G * (r + (1 - r) / tp) + m * 4 * ar,
              "tp 4, a quarter replicated: 3fG (r + (1 - r)/4) + 4 all-reduces per micro-batch", kRel);
  // One all-reduce each way (an MLP block alone) instead of Megatron's two.
  o.layers[0].tp_allreduces = 1;
  check_value(predict(o, fixed(1, tp, 1, 0, m)).step, 3 * f * G * (r + (1 - r) / tp) + m * 2 * ar,
              "tp 4, tp_allreduces 1: 2 all-reduces per micro-batch", kRel);
  o.layers[0].tp_allreduces = 3;
  check_value(predict(o, fixed(1, tp, 1, 0, m)).step, 3 * f * G * (r + (1 - r) / tp) + m * 6 * ar,
              "tp 4, tp_allreduces 3: 6 all-reduces per micro-batch", kRel);
  // Everything replicated: each rank does the whole layer, and still reduces.
  o.layers[0].tp_replicated = 1;
  check_value(predict(o, fixed(1, tp, 1, 0, m)).step, 3 * f * G + m * 6 * ar, "tp 4, all replicated: 3fG + comm",
              kRel);
  // Without tp the share changes nothing.
  check_value(predict(o, fixed(tp, 1, 1, 0, 1)).compute, 3 * f * G / tp, "dp 4: 3fG/4 whatever tp_replicated",
              kRel);
  // A non-splittable layer ignores both fields.
  o.layers[0].tensor_parallel = false;
  check_value(predict(o, fixed(1, tp, 1, 0, m)).step, 3 * f * G, "tp 4, not splittable: 3fG", kRel);
  // An MoE layer's tokens split over tp the same way: r of its work whole on every rank.
  Layer moe = dense(f, 8e3, 0, 0);
  moe.experts = 4;
  moe.top_k = 1;
  moe.tp_replicated = r;
  o.layers = {moe};
  check_value(predict(o, fixed(1, tp, 1, 0, 1)).compute, 3 * f * G * (r + (1 - r) / tp),
              "MoE over tp 4, a quarter replicated: 3fG (r + (1 - r)/4)", kRel);
}

TEST(Plan, ExpertParallelIsFourAllToAllsPerMicrobatch) {
  const int n = 4, G = 8;
  const double f = 0.001, out = 4e5, bw = 1e9, a = 1e-5, P = 4e6;
  Options o = base(n, G);
  Layer moe = dense(f, P, 0, out);
  moe.experts = 8;
  moe.top_k = 2;
  o.layers = {moe};
  Layout shape = fixed(n, 1, 1, 0, 1);
  shape.ep = n;
  const Layout x = predict(o, shape);
  const double B = G / n;  // samples per rank, one micro-batch
  const double a2a = (n - 1) * a + (n - 1.0) / n * 2 * out * B / bw;  // top_k x out x B per rank
  // Each expert has one copy (dp x tp / ep = 1): no data-parallel reduction.
  check_value(x.step, 3 * f * B + 4 * a2a, "ep 4: 3fB + dispatch/combine in F and in B", kRel);
  check_value(x.static_bytes, P / n * 16, "ep 4: a quarter of the experts' state per rank", kRel);
}

TEST(Plan, WiderGradientAllreduceComesBeforeTheZeroReduction) {
  // grad_allreduce_bytes: a ring all-reduce of that many bytes per parameter over the replicas,
  // before ZeRO-0's all-reduce (or ZeRO-1's reduce-scatter + all-gather) of grad_bytes.
  const int n = 4, G = 8;
  const double f = 0.002, P = 1e6, bw = 1e9, a = 1e-5, wide = 8;
  Options o = base(n, G);
  o.layers = {dense(f, P)};
  o.grad_allreduce_bytes = wide;
  const double compute = 3 * f * G / n;
  auto ring = [&](double bytes) { return 2.0 * (n - 1) / n * bytes / bw + 2 * (n - 1) * a; };
  const Layout z0 = predict(o, fixed(n, 1, 1, 0, 1));
  check_value(z0.step, compute + ring(P * wide) + ring(P * 2), "dp 4 ZeRO-0: the wide all-reduce + grad_bytes'", kRel);
  check_value(z0.communication_bytes, 2.0 * (n - 1) / n * P * (wide + 2), "dp 4 ZeRO-0: bytes of both", kRel);
  check_value(predict(o, fixed(n, 1, 1, 1, 1)).step, compute + ring(P * wide) + ring(P * 2),
              "dp 4 ZeRO-1: the wide all-reduce + reduce-scatter + all-gather", kRel);
  // Memory is unchanged: the wide sum is a transient of the reduction.
  check_value(z0.static_bytes, P * 16, "dp 4 ZeRO-0: static bytes as without it", kRel);
  // One replica: nothing to reduce.
  Options one = base(1, G);
  one.layers = o.layers;
  one.grad_allreduce_bytes = wide;
  check_value(predict(one, fixed(1, 1, 1, 0, 1)).step, 3 * f * G, "one rank: no reduction at all", kRel);
}

TEST(Plan, SharedMoeParametersAreSummedOverTheTensorParallelRanks) {
  // shared_params of an MoE layer: whole on every rank (so not divided by ep in memory),
  // all-reduced over the tp group once a step (its tokens are split over tp), then reduced
  // over dp as dense parameters.
  const int n = 4, G = 8;
  const double f = 0.001, out = 4e5, bw = 1e9, a = 1e-5, P = 4e6, S = 1e5;
  Options o = base(n, G);
  Layer moe = dense(f, P, 0, out);
  moe.experts = 8;
  moe.top_k = 2;
  moe.shared_params = S;
  o.layers = {moe};
  Layout shape = fixed(n, 1, 1, 0, 1);
  shape.ep = n;
  const Layout x = predict(o, shape);
  const double B = G / n;
  const double a2a = (n - 1) * a + (n - 1.0) / n * 2 * out * B / bw;
  const double shared_ar = 2.0 * (n - 1) / n * S * 2 / bw + 2 * (n - 1) * a;  // grad_bytes 2
  // dp 4 (ep over the dp ranks), tp 1: no tp sum; the shared part is reduced over dp 4 as
  // dense parameters, the experts have one replica each.
  check_value(x.step, 3 * f * B + 4 * a2a + shared_ar, "dp 4, ep 4: + the shared gradients' dp all-reduce", kRel);
  check_value(x.static_bytes, ((P - S) / n + S) * 16, "ep 4: the experts' quarter + the shared whole", kRel);
  // dp 2 x tp 2 with ep 2 (ep within a tp group): the shared sum over tp = 2, then the dense
  // ZeRO-0 all-reduce of the shared part over dp = 2, and the experts' over dp x tp / ep = 2.
  Layout hybrid = fixed(2, 2, 1, 0, 1);
  hybrid.ep = 2;
  const Layout h = predict(o, hybrid);
  auto ring2 = [&](double bytes) { return 2.0 * 1 / 2 * bytes / bw + 2 * 1 * a; };
  const double mbs = G / 2.0;
  const double gather = (1 * a + 0.5 * out * mbs / bw), a2a2 = 1 * a + 0.5 * 2 * out * mbs / 2 / bw;
  check_value(h.step, 3 * f * mbs / 2 + 2 * gather + 4 * a2a2 + ring2(S * 2) + ring2(S * 2) + ring2((P - S) / 2 * 2),
              "dp 2 x tp 2, ep 2: tp gather/scatter + 4 all-to-alls + tp sum + dp sums", kRel);
  // shared 0: the whole layer is experts, with one replica each at dp 4 x ep 4.
  o.layers[0].shared_params = 0;
  check_value(predict(o, shape).step, 3 * f * B + 4 * a2a, "shared 0: as before", kRel);
}

TEST(Plan, MeasuredCollectivesSetTheirLatencyTerm) {
  // weft/plan.h: a measured entry replaces a host collective's latency term: the entry for the
  // group's size, else the per-step cost of the nearest smaller size, else of the nearest larger
  // (per step: seconds / 2 (n - 1) for an all-reduce, / (n - 1) for an all-to-all).
  const int G = 4, m = 2;
  const double f = 0.004, out = 1e6, bw = 1e9, a = 1e-5;
  Options o = base(2, G);
  o.layers = {dense(f, 1e3, 0, out)};
  const double mbs = G / m, bytes = out * mbs / bw;
  o.cluster.intra_collectives = {{Collective::alltoall, 2, 5e-4}, {Collective::allreduce, 2, 7e-5}};
  check_value(predict(o, fixed(1, 2, 1, 0, m)).step, 3 * f * G / 2 + m * 4 * (bytes + 7e-5),
              "tp 2, all-reduce of 2 measured at 70 us", kRel);
  o.cluster.intra_collectives = {{Collective::alltoall, 2, 5e-4}};
  check_value(predict(o, fixed(1, 2, 1, 0, m)).step, 3 * f * G / 2 + m * 4 * (bytes + 2 * a),
              "tp 2, only all-to-alls measured: the link's 2 latencies", kRel);

  const int n = 4, B = 2;  // ep 4 on 4 of 8 ranks, 8 samples: 2 per rank, one micro-batch
  const double P = 4e6;
  Options e = base(8, 8);
  e.ranks = n;
  Layer moe = dense(0.001, P, 0, 4e5);
  moe.experts = 8;
  moe.top_k = 2;
  e.layers = {moe};
  Layout shape = fixed(n, 1, 1, 0, 1);
  shape.ep = n;
  const double moved = (n - 1.0) / n * 2 * 4e5 * B / bw;
  e.cluster.intra_collectives = {{Collective::alltoall, 2, 3e-5}, {Collective::alltoall, 8, 7e-4},
                                 {Collective::allreduce, 4, 1.0}};
  check_value(predict(e, shape).step, 3 * 0.001 * B + 4 * (3 * 3e-5 + moved), "ep 4: per step of the 2-rank entry", kRel);
  e.cluster.intra_collectives = {{Collective::alltoall, 8, 7e-4}};
  check_value(predict(e, shape).step, 3 * 0.001 * B + 4 * (3 * 1e-4 + moved), "ep 4: per step of the 8-rank entry", kRel);
  e.cluster.intra_collectives = {{Collective::alltoall, 4, 2e-4}, {Collective::alltoall, 2, 1.0}};
  check_value(predict(e, shape).step, 3 * 0.001 * B + 4 * (2e-4 + moved), "ep 4: the 4-rank entry itself", kRel);
}

TEST(Plan, OneFOneBPipelineMatchesItsClosedForm) {
  const int G = 8;
  const double f = 0.003;
  Options o = base(2, G);
  o.cluster.intra_latency = 0;
  o.layers = {dense(f, 10)};
  o.layers[0].count = 2;  // one layer per stage, no boundary bytes
  for (int m : {2, 4, 8}) {
    const Layout x = predict(o, fixed(1, 1, 2, 0, m));
    const double t = 3 * f * G / m;  // F + B of one micro-batch on one stage
    check_value(x.step, (m + 1) * t, "pp 2 1F1B, m " + std::to_string(m) + ": (m + p - 1)(F + B)", kRel);
    check_value(x.bubble, 1.0 / (m + 1), "pp 2 1F1B, m " + std::to_string(m) + ": bubble (p-1)/(m+p-1)", kRel);
  }
}

TEST(Plan, StagesAreCutWhereTheWorkIsEven) {
  // embedding (no work), 4 blocks of f, a head of 2f: by count, 6 copies split 3 | 3 would give
  // stages of 2f and 4f; the even cut is embedding + 3 blocks | block + head = 3f | 3f, and a
  // 1F1B pipeline of two equal stages takes (m + 1)(F + B) = (m + 1) x 3 x 3f x mbs.
  const int G = 8;
  const double f = 0.002;
  Options o = base(2, G);
  o.cluster.intra_latency = 0;
  Layer block = dense(f, 10), head = dense(2 * f, 10), embed = dense(0, 10);
  block.count = 4;
  embed.forward_flops = 0;
  o.layers = {embed, block, head};
  for (int m : {2, 4}) {
    const Layout x = predict(o, fixed(1, 1, 2, 0, m));
    check_value(x.step, (m + 1) * 9 * f * G / m, "pp 2, m " + std::to_string(m) + ": two stages of 3f each", kRel);
  }
}

TEST(Plan, MemoryCapRefusesWhatDoesNotFit) {
  Options o = base(4, 8);
  const double P = 1e6;
  o.layers = {dense(0.001, P)};
  o.cluster.memory = P * 16 - 1;  // ZeRO-0 and pure DP need P x 16 bytes
  const Layout x = predict(o, fixed(4, 1, 1, 0, 1));
  inject::check(!x.fits, "dp 4 ZeRO-0 needs 16 B/param: over the cap, fits = 0");
  const Plan p = make_plan(o);
  bool any_zero0_dp4 = false, all_fit = true;
  for (const Layout& l : p.layouts) {
    any_zero0_dp4 = any_zero0_dp4 || (l.dp == 4 && l.zero == 0);
    all_fit = all_fit && l.fits && l.memory <= o.cluster.memory;
  }
  inject::check(!any_zero0_dp4 && all_fit && !p.layouts.empty(), "the search keeps only layouts under the cap");
  o.cluster.memory = 1000;  // nothing fits
  inject::check(make_plan(o).layouts.empty(), "nothing fits: no layout kept");
  o.include_infeasible = true;
  const Plan all = make_plan(o);
  bool none_fit = !all.layouts.empty();
  for (const Layout& l : all.layouts) none_fit = none_fit && !l.fits;
  inject::check(none_fit, "include_infeasible lists them with fits = 0");
}

TEST(Plan, ObviousBestLayoutIsFound) {
  // Compute-bound, (almost) free bandwidth, 1 us per message, plenty of memory: pure data
  // parallelism pays 2(n-1) latencies once per step, tensor parallelism 4 all-reduces per layer
  // and micro-batch, a pipeline its bubble; so dp = 4 must win, with ZeRO-2 (ZeRO 0-2 take the
  // same time, ZeRO-2 the least memory; ZeRO-3 adds gathers).
  Options o = base(4, 16);
  o.cluster.intra_latency = 1e-6;
  o.cluster.intra_bandwidth = 1e18;
  o.layers = {dense(0.01, 1e6, 1e3, 1e3)};
  o.layers[0].count = 8;
  const Plan p = make_plan(o);
  const Layout& b = p.layouts.front();
  inject::check(b.dp == 4 && b.tp == 1 && b.pp == 1 && b.zero == 2,
                "best of 4 ranks, compute-bound: dp 4 ZeRO-2 (got dp " + std::to_string(b.dp) + " tp " +
                    std::to_string(b.tp) + " pp " + std::to_string(b.pp) + " zero " + std::to_string(b.zero) + ")");
  check_value(b.step, 3 * 0.01 * 8 * 16 / 4 + 6e-6, "its step: 3 f L G / 4 + 2 (n - 1) latencies", 1e-9);
}

TEST(Plan, AmdahlSerialFractionFromTheBestLayout) {
  const int n = 4, G = 8;
  const double f = 0.002, P = 1e6, bw = 1e9, a = 1e-5;
  Options o = base(n, G);
  o.layers = {dense(f, P)};
  o.fixed = true;
  o.layout = fixed(n, 1, 1, 0, 1);
  const Plan p = make_plan(o);
  const Scaling s = scaling(p);
  const double one = 3 * f * G;  // one rank: no communication at all
  const double step = 3 * f * G / n + 2.0 * (n - 1) / n * P * 2 / bw + 2 * (n - 1) * a;
  const double S = one / step, sf = (1 / S - 1.0 / n) / (1 - 1.0 / n);
  check_value(s.one_rank, one, "one-rank step 3fG", kRel);
  check_value(s.speedup, S, "speedup", kRel);
  check_value(s.serial_fraction, sf, "serial fraction (1/S - 1/N)/(1 - 1/N)", 1e-9);
  check_value(s.gustafson, n - sf * (n - 1), "Gustafson N - s(N - 1)", 1e-9);
  inject::check(s.points.size() == 3 && s.points[0].ranks == 1 && s.points[2].ranks == 4, "points at 1, 2, 4 ranks");
  check_value(s.points[1].amdahl, 1 / (sf + (1 - sf) / 2), "Amdahl at 2 ranks", 1e-9);
}

TEST(Plan, BadDescriptionsAreRefusedNamingTheField) {
  auto refused = [](Options o, const std::string& needle, const std::string& what) {
    try {
      make_plan(o);
      inject::check(false, what + ": accepted");
    } catch (const Error& e) {
      inject::check(e.status() == Status::invalid_argument && e.message().find(needle) != std::string::npos,
                    what + ": message '" + e.message() + "' should name '" + needle + "'");
    }
  };
  Options o = base(4, 8);
  o.layers = {dense(0.001, 1e6)};
  Options bad = o;
  bad.layers[0].params = -1;
  refused(bad, "layers[0].params", "negative params");
  bad = o;
  bad.layers[0].tp_replicated = 1.5;
  refused(bad, "layers[0].tp_replicated", "a replicated share above 1");
  bad.layers[0].tp_replicated = -0.1;
  refused(bad, "layers[0].tp_replicated", "a negative replicated share");
  bad = o;
  bad.layers[0].tp_allreduces = -1;
  refused(bad, "layers[0].tp_allreduces", "negative all-reduces");
  bad.layers[0].tp_allreduces = 65;
  refused(bad, "layers[0].tp_allreduces", "65 all-reduces");
  bad = o;
  bad.layers[0].shared_params = 10;  // layer 0 is dense
  refused(bad, "layers[0].shared_params", "shared parameters of a dense layer");
  bad.layers[0].experts = 2;
  bad.layers[0].top_k = 1;
  bad.layers[0].shared_params = bad.layers[0].params * 2;
  refused(bad, "layers[0].shared_params", "more shared parameters than parameters");
  bad = o;
  bad.grad_allreduce_bytes = -1;
  refused(bad, "grad_allreduce_bytes", "negative wide all-reduce bytes");
  bad = o;
  bad.cluster.memory = 0;
  refused(bad, "memory_per_rank", "no memory");
  bad = o;
  bad.global_batch = 0;
  refused(bad, "global_batch", "batch 0");
  bad = o;
  bad.fixed = true;
  bad.layout = fixed(3, 1, 1, 0, 1);
  refused(bad, "expected the 4 ranks", "dp 3 on 4 ranks");
  bad.layout = fixed(4, 1, 1, 5, 1);
  refused(bad, "zero_stage", "ZeRO 5");
  bad.layout = fixed(2, 1, 2, 0, 1);
  refused(bad, "pp 2 exceeds", "pp 2 with one layer");
  bad = o;
  bad.cluster.intra_collectives = {{Collective::allreduce, 1, 1e-6}};
  refused(bad, "intra_collectives[0].ranks", "a measured collective of 1 rank");
  bad.cluster.intra_collectives = {{Collective::allreduce, 8, 1e-6}};
  refused(bad, "intra_collectives[0].ranks", "a measured collective larger than a host");
  bad.cluster.intra_collectives = {{Collective::alltoall, 2, 1e-6}, {Collective::alltoall, 2, 2e-6}};
  refused(bad, "intra_collectives[1].ranks", "a size measured twice");
  bad.cluster.intra_collectives = {{Collective::alltoall, 2, 1e-6}, {Collective::allreduce, 2, 1e-6},
                                   {Collective::alltoall, 4, 1e-6}, {Collective::alltoall, 2, 2e-6}};
  refused(bad, "intra_collectives[3].ranks: kind 1 over 2 ranks again (entry 0 has it)",
          "a size measured twice, apart, named with its first entry");
  bad.cluster.intra_collectives = {{Collective::alltoall, 2, -1e-6}};
  refused(bad, "intra_collectives[0].seconds", "negative seconds");
  bad.cluster.intra_collectives = {{static_cast<Collective>(7), 2, 1e-6}};
  refused(bad, "intra_collectives[0].kind", "an unknown kind");
}
