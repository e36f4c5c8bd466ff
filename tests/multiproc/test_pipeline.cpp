// The pipeline executor (weft_pipeline_*, weft/pipeline.h) against single-process training of
// pipeline_model's 8-layer MLP (forward and backward written out by hand, the optimizer
// mlp_reference's RefOptimizer, independent of weft):
//  - parity: every generator, 10 SGD steps of m micro-batches, this rank's layers <= 1e-5
//    relative (max |diff| / max |ref| per tensor) to the reference; REDUCE_GRAD once per stage
//    and step, after all of the stage's backwards;
//  - the recorded timeline: one time per action, start <= end, causality across ranks (one
//    host's clock), and the peak of held forward inputs that weft/pipeline.h states for GPipe
//    (m), 1F1B and ZB-H1 (min(p - r, m));
//  - a failing callback: every rank returns an error, none hangs;
//  - bad arguments to weft_pipeline_create, each refusal naming what is wrong, and ranks that
//    disagree (boundaries, schedule, record) all refused with WEFT_ERR_MISMATCH.
// WEFT_TEST_INJECT=1 corrupts one parameter before each parity comparison; it must be caught.
//
// Tolerance: the reference sums the m micro-batch gradients of a weight in order 0..m-1, the
// pipeline in the order its schedule runs that stage's backwards. A different order of m float32
// additions changes a sum by at most (m - 1) * 2^-24 * sum|terms| (~5e-7 relative for m = 8,
// the more where terms cancel); ten SGD steps at lr 0.05 carry such differences into the weights
// scaled by lr * (1 + momentum + ...) < 0.5 per step, far below 1e-5 of the largest weight (the
// schedules here run each stage's backwards in micro-batch order, so the sums agree to the bit).
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "inject.h"
#include "mp_gtest.h"
#include "pipeline_model.h"
#include "reference.h"
#include "weft/pipeline.h"

using mpt::g_world;
namespace mlp = mpt::mlp;
namespace pm = mpt::pipe;

namespace {

constexpr int kSteps = 10;

struct Gen {
  weft_schedule_kind_t kind;
  const char* name;
  int v;  // stages per rank
};
const Gen kGenerators[] = {
    {WEFT_SCHEDULE_GPIPE, "GPipe", 1},         {WEFT_SCHEDULE_ONE_F_ONE_B, "1F1B", 1},
    {WEFT_SCHEDULE_INTERLEAVED_1F1B, "interleaved v=2", 2}, {WEFT_SCHEDULE_ZB_H1, "ZB-H1", 1},
    {WEFT_SCHEDULE_ZB_H2, "ZB-H2", 1},         {WEFT_SCHEDULE_ZB_V, "ZB-V", 2},
    {WEFT_SCHEDULE_DUALPIPE_V, "DualPipeV", 2},
};

// m = 2p: a multiple of p (interleaved) and >= 2p (DualPipeV).
int microbatches() { return 2 * g_world.size; }

weft_schedule_t generate(const Gen& g, int m, int reduce_grad = 0) {
  weft_schedule_config_t sc = WEFT_SCHEDULE_CONFIG_INIT;
  sc.reduce_grad = reduce_grad;
  sc.ranks = g_world.size;
  sc.microbatches = m;
  sc.stages_per_rank = g.kind == WEFT_SCHEDULE_INTERLEAVED_1F1B ? g.v : 0;
  weft_schedule_t s = nullptr;
  EXPECT_WEFT_OK(weft_schedule_generate(g.kind, &sc, &s));
  return s;
}

weft_pipeline_config_t config_for(pm::StageWorker& w, const std::vector<weft_tensor_t>& b, int record) {
  weft_pipeline_config_t c = WEFT_PIPELINE_CONFIG_INIT;
  c.forward = c.backward = c.backward_input = c.backward_weight = c.reduce_grad = &pm::StageWorker::callback;
  c.user_data = &w;
  c.boundaries = b.data();
  c.nboundaries = b.size();
  c.record = record;
  return c;
}

void expect_parity(const std::string& what, const pm::StageWorker& w, const mlp::Params& ref) {
  int owned = 0;
  for (int l = 0; l < pm::kLayers; ++l) {
    if (!w.owns_layer(l)) continue;
    ++owned;
    for (int t = 2 * l; t < 2 * l + 2; ++t) {
      SCOPED_TRACE(what + ", layer " + std::to_string(l) + (t % 2 ? " bias" : " weight"));
      std::vector<float> got = w.params()[static_cast<size_t>(t)];
      if (mpt::inject_enabled()) {
        const size_t i = got.size() / 2;
        mpt::store_bits(WEFT_FLOAT32, got.data(), i, mpt::injected_bits(WEFT_FLOAT32, mpt::load_bits(WEFT_FLOAT32, got.data(), i)));
        EXPECT_GT(mlp::relative_error(got, ref[static_cast<size_t>(t)]), 1e-5) << "the injected corruption was not caught";
        continue;
      }
      EXPECT_LE(mlp::relative_error(got, ref[static_cast<size_t>(t)]), 1e-5);
    }
  }
  EXPECT_GT(owned, 0) << what << ": this rank trained no layer";
}

// The recorded timeline of the last step, checked against weft/pipeline.h's statements and
// causality: the ranks share one host's clock, so a forward starts after its input's forward
// ended (on whichever rank), and a backward after the backward it takes its gradient from.
void check_timeline(const Gen& g, weft_schedule_t s, weft_timeline_t t, int m) {
  weft_timeline_info_t info = WEFT_TIMELINE_INFO_INIT;
  ASSERT_WEFT_OK(weft_timeline_info(t, &info));
  EXPECT_EQ(info.ranks, g_world.size);
  EXPECT_GT(info.makespan, 0.0);
  // (F or backward, stage, micro-batch) -> {start, end}; the backward is B, or I (it makes
  // the input gradient).
  std::map<std::tuple<bool, int, int>, std::pair<double, double>> when;
  for (int r = 0; r < g_world.size; ++r) {
    const weft_action_t* actions = nullptr;
    size_t n = 0, nt = 0;
    ASSERT_WEFT_OK(weft_schedule_actions(s, r, &actions, &n));
    const double *start = nullptr, *end = nullptr;
    weft_rank_stats_t st = WEFT_RANK_STATS_INIT;
    ASSERT_WEFT_OK(weft_timeline_rank(t, r, &start, &end, &nt, &st));
    ASSERT_EQ(nt, n) << "rank " << r;
    for (size_t k = 0; k < n; ++k) {
      EXPECT_LE(start[k], end[k]) << "rank " << r << " action " << k;
      EXPECT_LE(end[k], info.makespan) << "rank " << r << " action " << k;
      EXPECT_GE(start[k], 0.0) << "rank " << r << " action " << k;
      const weft_action_t& a = actions[k];
      if (a.kind == WEFT_ACTION_F || a.kind == WEFT_ACTION_B || a.kind == WEFT_ACTION_I) {
        when[{a.kind == WEFT_ACTION_F, a.stage, a.microbatch}] = {start[k], end[k]};
      }
    }
    const int p = g_world.size;
    if (g.kind == WEFT_SCHEDULE_GPIPE) {
      EXPECT_EQ(st.peak_activations, m) << "GPipe rank " << r;
    }
    if (g.kind == WEFT_SCHEDULE_ONE_F_ONE_B || g.kind == WEFT_SCHEDULE_ZB_H1) {
      EXPECT_EQ(st.peak_activations, std::min(p - r, m)) << g.name << " rank " << r;
    }
  }
  for (const auto& [key, times] : when) {
    const auto [is_forward, stage, mb] = key;
    auto before = when.find({is_forward, is_forward ? stage - 1 : stage + 1, mb});
    if (before == when.end()) continue;  // the first stage's forward, the last stage's backward
    EXPECT_GE(times.first, before->second.second - 1e-6)
        << (is_forward ? "F" : "backward") << " of stage " << stage << ", micro-batch " << mb
        << " started before the action it takes its input from ended";
  }
}

TEST(Pipeline, EveryGeneratorTrainsLikeOneProcess) {
  const int m = microbatches();
  const mlp::Params ref = pm::reference_training(kSteps, m);
  for (const Gen& g : kGenerators) {
    const std::string what = std::string(g.name) + " p=" + std::to_string(g_world.size) + " m=" + std::to_string(m);
    SCOPED_TRACE(what);
    weft_schedule_t s = generate(g, m, 1);  // with REDUCE_GRAD actions
    ASSERT_NE(s, nullptr);
    weft_schedule_info_t si = WEFT_SCHEDULE_INFO_INIT;
    ASSERT_WEFT_OK(weft_schedule_info(s, &si));
    ASSERT_EQ(si.stages, g.v * g_world.size);
    pm::StageWorker w(si.stages, m);
    const std::vector<weft_tensor_t> b = w.boundaries(WEFT_DEVICE_CPU, 0);
    const weft_pipeline_config_t c = config_for(w, b, 1);
    weft_pipeline_t pl = nullptr;
    ASSERT_WEFT_OK(weft_pipeline_create(g_world.comm, s, &c, &pl));
    weft_timeline_t t = nullptr;
    for (int step = 0; step < kSteps; ++step) {
      w.begin_step(step);
      EXPECT_WEFT_OK(weft_timeline_destroy(t));
      t = nullptr;
      ASSERT_WEFT_OK(weft_pipeline_run(pl, &t));
      for (int st = 0; st < si.stages; ++st) {
        int holder = -1;
        ASSERT_WEFT_OK(weft_schedule_stage_rank(s, st, &holder));
        EXPECT_EQ(w.reduce_calls(st), holder == g_world.rank ? 1 : 0) << "REDUCE_GRAD of stage " << st;
      }
      w.end_step();
    }
    ASSERT_NE(t, nullptr);
    check_timeline(g, s, t, m);
    expect_parity(what, w, ref);
    EXPECT_WEFT_OK(weft_timeline_destroy(t));
    EXPECT_WEFT_OK(weft_pipeline_destroy(pl));
    EXPECT_WEFT_OK(weft_schedule_destroy(s));
  }
}

// Rank 1's forward of (stage 1, micro-batch 1) fails: rank 1 returns the callback's status and
// text naming the action; every other rank stops with a timeout (rank 1 stays alive) naming
// another rank, within the communicator's short deadline (3 s).
TEST(Pipeline, AFailingCallbackStopsEveryRank) {
  if (g_world.size < 2) GTEST_SKIP() << "needs a second rank";
  weft_comm_config_t cc = WEFT_COMM_CONFIG_INIT;
  cc.timeout_ms = 3000;
  weft_comm_t comm = nullptr;
  ASSERT_WEFT_OK(weft_comm_split(g_world.comm, 0, g_world.rank, &comm, &cc));
  const int m = microbatches();
  weft_schedule_t s = generate(kGenerators[1], m);
  pm::StageWorker w(g_world.size, m);
  w.fail_at(WEFT_ACTION_F, 1, 1);
  const std::vector<weft_tensor_t> b = w.boundaries(WEFT_DEVICE_CPU, 0);
  const weft_pipeline_config_t c = config_for(w, b, 0);
  weft_pipeline_t pl = nullptr;
  ASSERT_WEFT_OK(weft_pipeline_create(comm, s, &c, &pl));
  w.begin_step(0);
  const double t0 = mpt::now_s();
  const weft_status_t st = weft_pipeline_run(pl, nullptr);
  const double took = mpt::now_s() - t0;
  const std::string msg = mpt::last_error();
  mpt::logf("failing callback: %s: %s (%.2f s)", mpt::status_name(st), msg.c_str(), took);
  EXPECT_LT(took, 20.0);
  const std::string own = "rank " + std::to_string(g_world.rank) + ", action ";
  EXPECT_NE(msg.find(own), std::string::npos) << msg;
  if (g_world.rank == 1) {
    EXPECT_EQ(st, WEFT_ERR_INVALID_ARGUMENT);
    EXPECT_NE(msg.find("(1F1): forward callback failed: injected failure on purpose"), std::string::npos) << msg;
  } else {
    EXPECT_EQ(st, WEFT_ERR_TIMEOUT) << mpt::status_name(st);
    bool names_other = false;
    for (int r = 0; r < g_world.size; ++r) {
      if (r == g_world.rank) continue;
      names_other = names_other || msg.find("rank " + std::to_string(r) + " ") != std::string::npos ||
                    msg.find("rank(s) " + std::to_string(r)) != std::string::npos;
    }
    EXPECT_TRUE(names_other) << msg;
  }
  EXPECT_WEFT_OK(weft_pipeline_destroy(pl));
  EXPECT_WEFT_OK(weft_schedule_destroy(s));
  weft_comm_destroy(comm);  // broken by the failure: its status is not this test's business
  // Rank 1 stays alive until everyone is done, so the others' waits end by their deadline.
  EXPECT_WEFT_OK(weft_barrier(g_world.comm, nullptr, nullptr));
}

TEST(Pipeline, CreateRefusesBadArguments) {
  const int m = microbatches();
  pm::StageWorker w(g_world.size, m);
  std::vector<weft_tensor_t> b = w.boundaries(WEFT_DEVICE_CPU, 0);
  weft_pipeline_t pl = nullptr;
  auto expect_refused = [&](weft_schedule_t s, const weft_pipeline_config_t& c, const char* needle) {
    const weft_status_t st = weft_pipeline_create(g_world.comm, s, &c, &pl);
    const std::string msg = mpt::last_error();
    EXPECT_EQ(st, WEFT_ERR_INVALID_ARGUMENT) << needle << ": " << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(pl, nullptr);
  };
  weft_schedule_t zb = generate(kGenerators[3], m);
  weft_pipeline_config_t c = config_for(w, b, 0);
  c.backward_input = nullptr;
  expect_refused(zb, c, "config->backward_input is NULL");
  // One boundary too many: a worker for S + 1 stages has S of them.
  pm::StageWorker w2(g_world.size + 1, m);
  std::vector<weft_tensor_t> b2 = w2.boundaries(WEFT_DEVICE_CPU, 0);
  c = config_for(w, b2, 0);
  expect_refused(zb, c, "config->nboundaries");
  c = config_for(w, b, 0);
  c.struct_size = 3;
  expect_refused(zb, c, "struct_size");
  c = config_for(w, b, 0);
  c.forward = nullptr;
  expect_refused(zb, c, "config->forward is NULL");
  // A schedule for one rank more than the communicator has.
  weft_schedule_config_t sc = WEFT_SCHEDULE_CONFIG_INIT;
  sc.ranks = g_world.size + 1;
  sc.microbatches = m;
  weft_schedule_t big = nullptr;
  ASSERT_WEFT_OK(weft_schedule_generate(WEFT_SCHEDULE_ONE_F_ONE_B, &sc, &big));
  expect_refused(big, config_for(w2, b2, 0), "the schedule is for");
  EXPECT_WEFT_OK(weft_schedule_destroy(big));
#if !WEFT_TEST_WITH_CUDA
  // A host-only library refuses device boundaries as unsupported, saying why (one rank: one
  // stage, no boundary to declare).
  std::vector<weft_tensor_t> dev = w.boundaries(WEFT_DEVICE_CUDA, 0);
  if (!dev.empty()) {
    c = config_for(w, dev, 0);
    EXPECT_EQ(weft_pipeline_create(g_world.comm, zb, &c, &pl), WEFT_ERR_UNSUPPORTED);
    EXPECT_NE(mpt::last_error().find("built without CUDA"), std::string::npos) << mpt::last_error();
    EXPECT_EQ(pl, nullptr);
  }
#endif
  EXPECT_WEFT_OK(weft_schedule_destroy(zb));
}

// weft_pipeline_create is collective: ranks that pass different boundaries, schedules or record
// settings all get WEFT_ERR_MISMATCH naming what differs (not a hang or a garbled step).
TEST(Pipeline, CreateRefusesRanksThatDisagree) {
  if (g_world.size < 2) GTEST_SKIP() << "needs a second rank";
  const int m = microbatches();
  pm::StageWorker w(g_world.size, m);
  std::vector<weft_tensor_t> b = w.boundaries(WEFT_DEVICE_CPU, 0);
  const int64_t other_shape[2] = {pm::kRows, 1};
  if (g_world.rank == 1) b[0].shape = other_shape;
  weft_schedule_t s = generate(kGenerators[1], m);
  weft_pipeline_t pl = nullptr;
  auto expect_mismatch = [&](weft_schedule_t sched, const weft_pipeline_config_t& c, const char* needle) {
    EXPECT_EQ(weft_pipeline_create(g_world.comm, sched, &c, &pl), WEFT_ERR_MISMATCH) << needle;
    const std::string msg = mpt::last_error();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(pl, nullptr);
  };
  expect_mismatch(s, config_for(w, b, 0), "config->boundaries[0]");
  b = w.boundaries(WEFT_DEVICE_CPU, 0);
  expect_mismatch(s, config_for(w, b, g_world.rank == 0 ? 1 : 0), "config->record");
  weft_schedule_t other = generate(kGenerators[1], g_world.rank == 1 ? m + 1 : m);
  expect_mismatch(other, config_for(w, b, 0), "another schedule");
  EXPECT_WEFT_OK(weft_schedule_destroy(other));
  EXPECT_WEFT_OK(weft_schedule_destroy(s));
}

}  // namespace
