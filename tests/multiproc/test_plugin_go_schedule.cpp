// The Go plugin go_schedule (plugins/go_schedule/) under the pipeline executor: every rank loads
// it (weft_plugin_load, WEFT_TEST_PLUGIN names the file), generates its SCHEDULE entry
// "eager_1f1b" for p = the world size and runs 10 SGD steps of pipeline_model's 8-layer MLP;
// the result is compared with single-process training of the same model (pipeline_model's
// reference, independent of weft), as test_pipeline.cpp does for the built-in generators.
//  - parity: this rank's layers within 1e-5 relative of the reference (test_pipeline.cpp's
//    bound: the schedule runs each stage's backwards in micro-batch order, so the gradient sums
//    agree to the bit, and the bound only covers SGD's rounding);
//  - the schedule: its kind is the entry's id, its compute lists are eager 1F1B's rule written
//    out here independently (warm-up min(p - r + 1, m) forwards, then F/B in turn, then the
//    remaining B), and the recorded peak of held activations is min(p - r + 2, m);
//  - the plugin's FUNCTION entries called by name agree with the rule;
//  - a stages_per_rank the plugin does not make is refused naming the plugin.
// WEFT_TEST_INJECT=1 corrupts one parameter before each parity comparison and one expected list
// and value per check; each must be caught.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "inject.h"
#include "mp_gtest.h"
#include "pipeline_model.h"
#include "reference.h"
#include "weft/weft.h"

using mpt::g_world;
namespace mlp = mpt::mlp;
namespace pm = mpt::pipe;

namespace {

constexpr int kSteps = 10;

// Records one check: with injection the (corrupted) comparison must fail.
void check(bool ok, const std::string& what) {
  if (mpt::inject_enabled()) {
    EXPECT_FALSE(ok) << what << ": the injected corruption was not caught";
  } else {
    EXPECT_TRUE(ok) << what;
  }
}
int corrupt(int v) { return mpt::inject_enabled() ? v + 1 : v; }

weft_plugin_t load_plugin() {
  const char* path = std::getenv("WEFT_TEST_PLUGIN");
  if (!path) mpt::die("WEFT_TEST_PLUGIN is not set (the path of libweft_go_schedule.so)");
  weft_plugin_t p = nullptr;
  MPT_OK(weft_plugin_load(path, &p));
  return p;
}

// Eager 1F1B's compute list of rank r, from plugins/go_schedule/README.md's rule.
std::vector<weft_action_t> eager_list(int p, int r, int m) {
  const int w = std::min(p - r + 1, m);
  std::vector<weft_action_t> l;
  for (int i = 0; i < w; ++i) l.push_back({WEFT_ACTION_F, r, i});
  for (int i = 0; i < m - w; ++i) {
    l.push_back({WEFT_ACTION_F, r, w + i});
    l.push_back({WEFT_ACTION_B, r, i});
  }
  for (int i = m - w; i < m; ++i) l.push_back({WEFT_ACTION_B, r, i});
  return l;
}

bool same_compute(const weft_action_t* got, size_t n, std::vector<weft_action_t> want) {
  if (mpt::inject_enabled()) want.pop_back();
  std::vector<weft_action_t> compute;
  for (size_t k = 0; k < n; ++k) {
    if (got[k].kind == WEFT_ACTION_F || got[k].kind == WEFT_ACTION_B) compute.push_back(got[k]);
  }
  if (compute.size() != want.size()) return false;
  for (size_t k = 0; k < want.size(); ++k) {
    if (compute[k].kind != want[k].kind || compute[k].stage != want[k].stage ||
        compute[k].microbatch != want[k].microbatch) {
      return false;
    }
  }
  return true;
}

int32_t call_i32(weft_plugin_t plugin, const char* name, int p, int r, int m) {
  weft_value_t args[3] = {WEFT_VALUE_INIT, WEFT_VALUE_INIT, WEFT_VALUE_INIT};
  const int vals[3] = {p, r, m};
  for (int k = 0; k < 3; ++k) {
    args[k].type = WEFT_TYPE_I32;
    args[k].i = vals[k];
  }
  weft_value_t out = WEFT_VALUE_INIT;
  EXPECT_WEFT_OK(weft_plugin_call(plugin, name, args, 3, &out));
  return static_cast<int32_t>(out.i);
}

TEST(PluginGoSchedule, EagerOneFOneBTrainsLikeOneProcess) {
  weft_plugin_t plugin = load_plugin();
  weft_plugin_entry_t e = WEFT_PLUGIN_ENTRY_INIT;
  ASSERT_WEFT_OK(weft_plugin_lookup(plugin, "eager_1f1b", &e));
  ASSERT_EQ(e.kind, WEFT_PLUGIN_SCHEDULE);
  ASSERT_GE(e.id, WEFT_PLUGIN_ID_BASE);
  const int p = g_world.size, m = 2 * p + 1, r = g_world.rank;
  weft_schedule_config_t sc = WEFT_SCHEDULE_CONFIG_INIT;
  sc.ranks = p;
  sc.microbatches = m;
  sc.reduce_grad = 1;
  weft_schedule_t s = nullptr;
  ASSERT_WEFT_OK(weft_schedule_generate(static_cast<weft_schedule_kind_t>(e.id), &sc, &s));
  weft_schedule_info_t si = WEFT_SCHEDULE_INFO_INIT;
  ASSERT_WEFT_OK(weft_schedule_info(s, &si));
  check(corrupt(si.kind) == e.id, "the schedule's kind is the plugin entry's id");
  for (int q = 0; q < p; ++q) {
    const weft_action_t* actions = nullptr;
    size_t n = 0;
    ASSERT_WEFT_OK(weft_schedule_actions(s, q, &actions, &n));
    check(same_compute(actions, n, eager_list(p, q, m)), "rank " + std::to_string(q) + "'s compute order");
    check(corrupt(call_i32(plugin, "warmup", p, q, m)) == std::min(p - q + 1, m), "warmup() by name");
    check(corrupt(call_i32(plugin, "peak_activations", p, q, m)) == std::min(p - q + 2, m), "peak_activations()");
  }
  const mlp::Params ref = pm::reference_training(kSteps, m);
  pm::StageWorker w(si.stages, m);
  const std::vector<weft_tensor_t> b = w.boundaries(WEFT_DEVICE_CPU, 0);
  weft_pipeline_config_t c = WEFT_PIPELINE_CONFIG_INIT;
  c.forward = c.backward = c.backward_input = c.backward_weight = c.reduce_grad = &pm::StageWorker::callback;
  c.user_data = &w;
  c.boundaries = b.data();
  c.nboundaries = b.size();
  c.record = 1;
  weft_pipeline_t pl = nullptr;
  ASSERT_WEFT_OK(weft_pipeline_create(g_world.comm, s, &c, &pl));
  weft_timeline_t t = nullptr;
  for (int step = 0; step < kSteps; ++step) {
    w.begin_step(step);
    EXPECT_WEFT_OK(weft_timeline_destroy(t));
    t = nullptr;
    ASSERT_WEFT_OK(weft_pipeline_run(pl, &t));
    EXPECT_EQ(w.reduce_calls(r), 1) << "REDUCE_GRAD of stage " << r;
    w.end_step();
  }
  weft_rank_stats_t st = WEFT_RANK_STATS_INIT;
  const double *start = nullptr, *end = nullptr;
  size_t nt = 0;
  ASSERT_WEFT_OK(weft_timeline_rank(t, r, &start, &end, &nt, &st));
  check(corrupt(st.peak_activations) == std::min(p - r + 2, m), "recorded peak of held activations");
  for (int l = 0; l < pm::kLayers; ++l) {
    if (!w.owns_layer(l)) continue;
    for (int k = 2 * l; k < 2 * l + 2; ++k) {
      std::vector<float> got = w.params()[static_cast<size_t>(k)];
      if (mpt::inject_enabled()) {
        const size_t i = got.size() / 2;
        mpt::store_bits(WEFT_FLOAT32, got.data(), i,
                        mpt::injected_bits(WEFT_FLOAT32, mpt::load_bits(WEFT_FLOAT32, got.data(), i)));
      }
      check(mlp::relative_error(got, ref[static_cast<size_t>(k)]) <= 1e-5,
            "layer " + std::to_string(l) + (k % 2 ? " bias" : " weight") + " against one process");
    }
  }
  EXPECT_WEFT_OK(weft_timeline_destroy(t));
  EXPECT_WEFT_OK(weft_pipeline_destroy(pl));
  EXPECT_WEFT_OK(weft_schedule_destroy(s));
  // v = 2 is not eager_1f1b's: refused with the plugin named and its return value.
  sc.stages_per_rank = 2;
  const weft_status_t refused = weft_schedule_generate(static_cast<weft_schedule_kind_t>(e.id), &sc, &s);
  const std::string msg = mpt::last_error();
  check(refused != WEFT_OK && msg.find(mpt::inject_enabled() ? "<injected>" : "eager_1f1b") != std::string::npos &&
            msg.find("go_schedule") != std::string::npos,
        "v = 2 refused naming the plugin: " + msg);
  EXPECT_WEFT_OK(weft_plugin_destroy(plugin));
}

}  // namespace
