// The C shims of generation, simulation, tuning and timelines (capi/src/simulate_api.cpp,
// timeline_api.cpp), through the ABI only: the NULL-array defaults of weft_pipeline_costs_t,
// struct_size, views and the errors. Expected values are closed forms and hand-worked lists
// (the header of test_pipeline_simulator.cpp states them). WEFT_TEST_INJECT=1
// (ctest unit.pipeline_simulate_api_inject) corrupts every checked result.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "pipeline_inject_checks.h"
#include "weft/weft.h"

using pipecheck::check_value;

namespace {

weft_schedule_t gen(weft_schedule_kind_t kind, int p, int m, int v = 0) {
  weft_schedule_config_t c = WEFT_SCHEDULE_CONFIG_INIT;
  c.ranks = p;
  c.microbatches = m;
  c.stages_per_rank = v;
  weft_schedule_t s = nullptr;
  EXPECT_EQ(weft_schedule_generate(kind, &c, &s), WEFT_OK) << weft_last_error();
  return s;
}

int stages_of(weft_schedule_t s) {
  weft_schedule_info_t info = WEFT_SCHEDULE_INFO_INIT;
  EXPECT_EQ(weft_schedule_info(s, &info), WEFT_OK) << weft_last_error();
  return info.stages;
}

double makespan(weft_timeline_t t) {
  weft_timeline_info_t info = WEFT_TIMELINE_INFO_INIT;
  EXPECT_EQ(weft_timeline_info(t, &info), WEFT_OK) << weft_last_error();
  return info.makespan;
}

TEST(PipelineSimulateApi, ClosedFormsPerGenerator) {
  // p = 4, m = 8, every stage F = 1 and B = 2 (I = W = 1 by default).
  const struct {
    weft_schedule_kind_t kind;
    int v;
    double makespan;
  } cases[] = {{WEFT_SCHEDULE_GPIPE, 0, 33},           {WEFT_SCHEDULE_ONE_F_ONE_B, 0, 33},
               {WEFT_SCHEDULE_INTERLEAVED_1F1B, 2, 57}, {WEFT_SCHEDULE_ZB_H1, 0, 27},
               {WEFT_SCHEDULE_ZB_H2, 0, 27},            {WEFT_SCHEDULE_ZB_V, 0, 51},
               {WEFT_SCHEDULE_DUALPIPE_V, 0, 51}};
  for (const auto& cs : cases) {
    weft_schedule_t s = gen(cs.kind, 4, 8, cs.v);
    const int S = stages_of(s);
    std::vector<double> f(S, 1.0), b(S, 2.0);
    weft_pipeline_costs_t c = WEFT_PIPELINE_COSTS_INIT;
    c.nstages = S;
    c.forward = f.data();
    c.backward = b.data();
    weft_timeline_t t = nullptr;
    ASSERT_EQ(weft_schedule_simulate(s, &c, &t), WEFT_OK) << weft_last_error();
    const std::string what = "kind " + std::to_string(cs.kind);
    check_value(makespan(t), cs.makespan, what + " makespan");
    // One start and end per action; busy = 3 m v (F + B) per rank, idle the rest.
    const weft_action_t* actions = nullptr;
    size_t nactions = 0;
    ASSERT_EQ(weft_schedule_actions(s, 0, &actions, &nactions), WEFT_OK);
    const double *start = nullptr, *end = nullptr;
    size_t count = 0;
    weft_rank_stats_t st = WEFT_RANK_STATS_INIT;
    ASSERT_EQ(weft_timeline_rank(t, 0, &start, &end, &count, &st), WEFT_OK) << weft_last_error();
    check_value(static_cast<double>(count), static_cast<double>(nactions), what + " times per action");
    check_value(st.busy, 3.0 * 8 * (S / 4), what + " rank 0 busy");
    check_value(st.idle, cs.makespan - 3.0 * 8 * (S / 4), what + " rank 0 idle");
    EXPECT_EQ(weft_timeline_destroy(t), WEFT_OK);
    EXPECT_EQ(weft_schedule_destroy(s), WEFT_OK);
  }
}

TEST(PipelineSimulateApi, CostDefaults) {
  weft_schedule_t s = gen(WEFT_SCHEDULE_ZB_H1, 2, 2);
  const double f[] = {1, 1}, b[] = {2, 2}, half[] = {1, 1}, act[] = {10, 10}, wgrad[] = {4, 4};
  weft_pipeline_costs_t c = WEFT_PIPELINE_COSTS_INIT;
  c.nstages = 2;
  c.forward = f;
  // backward NULL: B = I + W; ZB-H1 uses I and W only: (3m + p - 1) = 7.
  c.backward_input = half;
  c.backward_weight = half;
  c.activation_bytes = act;
  weft_timeline_t t = nullptr;
  ASSERT_EQ(weft_schedule_simulate(s, &c, &t), WEFT_OK) << weft_last_error();
  check_value(makespan(t), 7, "ZB-H1 p=2 m=2 from I and W");
  // Rank 1 runs F0 I0 F1 I1 W0 W1: weight_grad_bytes NULL keeps all 10 bytes until W: peak 20.
  const double *start, *end;
  size_t count;
  weft_rank_stats_t st = WEFT_RANK_STATS_INIT;
  ASSERT_EQ(weft_timeline_rank(t, 1, &start, &end, &count, &st), WEFT_OK);
  check_value(st.peak_activation_bytes, 20, "rank 1 peak bytes, weight_grad_bytes NULL");
  check_value(st.peak_activations, 2, "rank 1 peak activations");
  weft_timeline_destroy(t);
  // 4 of 10 bytes kept after I: 10, 4, 14.
  c.weight_grad_bytes = wgrad;
  ASSERT_EQ(weft_schedule_simulate(s, &c, &t), WEFT_OK) << weft_last_error();
  ASSERT_EQ(weft_timeline_rank(t, 1, &start, &end, &count, &st), WEFT_OK);
  check_value(st.peak_activation_bytes, 14, "rank 1 peak bytes, 4 kept for W");
  weft_timeline_destroy(t);
  // backward given, halves NULL: I = W = B / 2.
  c.backward = b;
  c.backward_input = c.backward_weight = nullptr;
  ASSERT_EQ(weft_schedule_simulate(s, &c, &t), WEFT_OK) << weft_last_error();
  check_value(makespan(t), 7, "ZB-H1 p=2 m=2 from B halves");
  weft_timeline_destroy(t);
  weft_schedule_destroy(s);

  // Messages: one micro-batch through 3 ranks, 4 hops of 0.25 + 50 / 100.
  s = gen(WEFT_SCHEDULE_ONE_F_ONE_B, 3, 1);
  const double f3[] = {1, 1, 1}, b3[] = {2, 2, 2}, bytes[] = {50, 50, 50};
  weft_pipeline_costs_t m = WEFT_PIPELINE_COSTS_INIT;
  m.nstages = 3;
  m.forward = f3;
  m.backward = b3;
  m.boundary_bytes = bytes;
  m.latency = 0.25;
  m.bandwidth = 100;
  ASSERT_EQ(weft_schedule_simulate(s, &m, &t), WEFT_OK) << weft_last_error();
  check_value(makespan(t), 9 + 4 * 0.75, "1F1B p=3 m=1 with messages");
  weft_timeline_destroy(t);
  weft_schedule_destroy(s);
}

TEST(PipelineSimulateApi, Tune) {
  std::vector<double> lf(8, 1.0), lb(8, 2.0);
  weft_tune_config_t c = WEFT_TUNE_CONFIG_INIT;
  c.ranks = 4;
  c.layers = 8;
  c.layer_forward = lf.data();
  c.layer_backward = lb.data();
  c.global_batch = 64;
  c.microbatch_overhead = 4;
  const weft_schedule_kind_t kinds[] = {WEFT_SCHEDULE_ONE_F_ONE_B};
  c.kinds = kinds;
  c.nkinds = 1;
  size_t count = 0;
  int best = -2;
  ASSERT_EQ(weft_schedule_tune(&c, nullptr, 0, &count, &best), WEFT_OK) << weft_last_error();
  check_value(static_cast<double>(count), 7, "1F1B candidates (divisors of 64)");
  std::vector<weft_tune_candidate_t> cand(count);
  ASSERT_EQ(weft_schedule_tune(&c, cand.data(), cand.size(), &count, &best), WEFT_OK) << weft_last_error();
  ASSERT_EQ(best, 0);
  // (m + 3)(384 / m + 8): 608 at m = 16, micro-batches of 4.
  check_value(cand[0].microbatches, 16, "best m");
  check_value(cand[0].microbatch_size, 4, "best micro-batch size");
  check_value(cand[0].step_time, 608, "best step time");
  check_value(cand[0].fits, 1, "best fits");
  // A smaller array gets the first entries only.
  weft_tune_candidate_t two[2];
  ASSERT_EQ(weft_schedule_tune(&c, two, 2, &count, &best), WEFT_OK);
  check_value(two[1].step_time, cand[1].step_time, "second candidate through a 2-entry array");
}

TEST(PipelineSimulateApi, TimelineWrite) {
  weft_schedule_t s = gen(WEFT_SCHEDULE_ZB_V, 2, 4);
  const double f[] = {1, 1, 1, 1}, b[] = {2, 2, 2, 2};
  weft_pipeline_costs_t c = WEFT_PIPELINE_COSTS_INIT;
  c.nstages = 4;
  c.forward = f;
  c.backward = b;
  weft_timeline_t t = nullptr;
  ASSERT_EQ(weft_schedule_simulate(s, &c, &t), WEFT_OK) << weft_last_error();
  char dir[] = "/tmp/weft_simulate_api_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string svg = std::string(dir) + "/t.svg", json = std::string(dir) + "/t.json";
  ASSERT_EQ(weft_timeline_write(t, WEFT_TIMELINE_SVG, svg.c_str()), WEFT_OK) << weft_last_error();
  ASSERT_EQ(weft_timeline_write(t, WEFT_TIMELINE_CHROME_TRACE, json.c_str()), WEFT_OK) << weft_last_error();
  for (const std::string& path : {svg, json}) {
    FILE* file = std::fopen(path.c_str(), "rb");
    ASSERT_NE(file, nullptr) << path;
    std::fseek(file, 0, SEEK_END);
    check_value(std::ftell(file) > 0, 1, path + " is not empty");
    std::fclose(file);
    std::remove(path.c_str());
  }
  rmdir(dir);
  EXPECT_EQ(weft_timeline_write(t, static_cast<weft_timeline_format_t>(7), svg.c_str()), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(weft_timeline_write(t, WEFT_TIMELINE_SVG, nullptr), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(weft_timeline_write(t, WEFT_TIMELINE_SVG, "/nonexistent-dir/x.svg"), WEFT_ERR_INVALID_ARGUMENT);
  weft_timeline_destroy(t);
  weft_schedule_destroy(s);
}

void expect_error(weft_status_t st, const std::string& text) {
  EXPECT_EQ(st, WEFT_ERR_INVALID_ARGUMENT) << text;
  const std::string msg = weft_last_error();
  EXPECT_NE(msg.find(text), std::string::npos) << msg << "\n  expected to contain: " << text;
}

TEST(PipelineSimulateApi, Errors) {
  weft_schedule_t s = nullptr;
  weft_schedule_config_t cfg = WEFT_SCHEDULE_CONFIG_INIT;
  cfg.ranks = 4;
  cfg.microbatches = 6;
  cfg.stages_per_rank = 2;
  expect_error(weft_schedule_generate(WEFT_SCHEDULE_INTERLEAVED_1F1B, &cfg, &s),
               "INTERLEAVED_1F1B needs m to be a multiple of p or m <= p (m = 6, p = 4)");
  EXPECT_EQ(s, nullptr);
  expect_error(weft_schedule_generate(WEFT_SCHEDULE_CUSTOM, &cfg, &s), "kind = -1; expected a generator");
  cfg.struct_size = 0;
  expect_error(weft_schedule_generate(WEFT_SCHEDULE_GPIPE, &cfg, &s), "WEFT_SCHEDULE_CONFIG_INIT");
  expect_error(weft_schedule_generate(WEFT_SCHEDULE_GPIPE, nullptr, nullptr), "schedule");

  s = gen(WEFT_SCHEDULE_ONE_F_ONE_B, 2, 2);
  const double f[] = {1, 1}, b[] = {2, 2};
  weft_pipeline_costs_t c = WEFT_PIPELINE_COSTS_INIT;
  weft_timeline_t t = nullptr;
  expect_error(weft_schedule_simulate(s, nullptr, &t), "costs is NULL");
  c.nstages = 3;
  c.forward = f;
  c.backward = b;
  expect_error(weft_schedule_simulate(s, &c, &t), "costs->nstages = 3; the schedule has 2 stages");
  c.nstages = 2;
  c.backward = nullptr;
  expect_error(weft_schedule_simulate(s, &c, &t), "costs->backward is NULL");
  c.backward = b;
  c.forward = nullptr;
  expect_error(weft_schedule_simulate(s, &c, &t), "costs->forward is NULL");
  c.forward = f;
  ASSERT_EQ(weft_schedule_simulate(s, &c, &t), WEFT_OK);
  const double *start, *end;
  size_t count;
  expect_error(weft_timeline_rank(t, 2, &start, &end, &count, nullptr), "rank");
  weft_timeline_info_t info = WEFT_TIMELINE_INFO_INIT;
  info.struct_size = 1;
  expect_error(weft_timeline_info(t, &info), "WEFT_TIMELINE_INFO_INIT");
  EXPECT_EQ(weft_timeline_destroy(t), WEFT_OK);
  EXPECT_EQ(weft_timeline_info(t, &info), WEFT_ERR_INVALID_ARGUMENT);  // destroyed
  EXPECT_EQ(weft_timeline_destroy(nullptr), WEFT_OK);
  weft_schedule_destroy(s);

  weft_tune_config_t tc = WEFT_TUNE_CONFIG_INIT;
  size_t n;
  int best;
  expect_error(weft_schedule_tune(&tc, nullptr, 0, &n, &best), "config->layers = 0");
  const double l[] = {1};
  tc.layers = 1;
  tc.layer_forward = tc.layer_backward = l;
  const weft_schedule_kind_t bad[] = {static_cast<weft_schedule_kind_t>(12)};
  tc.kinds = bad;
  tc.nkinds = 1;
  expect_error(weft_schedule_tune(&tc, nullptr, 0, &n, &best), "config->kinds[0] = 12");
  expect_error(weft_schedule_tune(nullptr, nullptr, 0, &n, &best), "config is NULL");
}

}  // namespace
