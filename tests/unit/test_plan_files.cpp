// The planner's text formats (core/plan/files.cpp) and its C ABI (weft/plan.h): values read as
// written, every malformed line refused naming file:line and the key, and the shims' promises
// (struct_size, handles, capacity, the fixed layout through weft_plan_load). Expected numbers are
// the ones written in the files here. WEFT_TEST_INJECT=1 moves each checked value and flips each
// checked truth once; the run passes only when every one was caught (ctest unit.plan_files_inject).
#include <gtest/gtest.h>

#include "pipeline_inject_checks.h"

#include <cstddef>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>

#include "core/plan/plan.h"
#include "weft/weft.h"

using namespace weft;
using namespace weft::plan;
using pipecheck::check_value;

namespace {

const char* const kModel =
    "# a comment line\n"
    "layer name=embed count=1 params=1000 flops=2e9 act=10 out=8   # trailing comment\n"
    "\n"
    "layer name=block count=4 params=5000 fwd=0.01 bwd=0.03 act=100 out=8 tp=1 kv=4\r\n"
    "layer name=moe count=2 params=8000 fwd=0.02 experts=8 topk=2 tp=0 out=8\n"
    "train global_batch=16 weight_bytes=4 grad_bytes=4 optimizer_bytes=8\n";

const char* const kCluster =
    "cluster hosts=2 ranks_per_host=4 memory=1e9 flops=1e12\n"
    "cluster intra_bw=1e10 intra_lat=1e-6 inter_bw=1e9 inter_lat=1e-5\n"
    "cluster intra_allreduce=2:3e-6,4:2e-5 intra_alltoall=4:7e-6\n";

// Refused with invalid_argument and a message that holds every needle.
void refused(const std::function<void()>& f, std::initializer_list<std::string> needles, const std::string& what) {
  try {
    f();
    inject::check(false, what + ": accepted");
  } catch (const Error& e) {
    bool ok = e.status() == Status::invalid_argument;
    for (const std::string& n : needles) ok = ok && e.message().find(n) != std::string::npos;
    inject::check(ok, what + ": message '" + e.message() + "'");
  }
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST(PlanFiles, ValuesAreReadAsWritten) {
  const ModelFile m = parse_model(kModel, "m.model");
  inject::check(m.layers.size() == 3 && m.layers[1].name == "block" && m.layers[2].name == "moe", "three layers by name");
  check_value(m.layers[0].forward_flops, 2e9, "embed flops");
  check_value(m.layers[1].count, 4, "block count");
  check_value(m.layers[1].backward_seconds, 0.03, "block bwd");
  check_value(m.layers[1].context_bytes, 4, "block kv");
  check_value(m.layers[2].experts, 8, "moe experts");
  check_value(m.layers[2].top_k, 2, "moe topk");
  inject::check(!m.layers[2].tensor_parallel && m.layers[1].tensor_parallel, "tp=0 and tp=1");
  const ModelFile split = parse_model("layer name=mlp fwd=1 tp_rep=0.375 tp_ar=1\n", "s.model");
  check_value(split.layers[0].tp_replicated, 0.375, "tp_rep");
  check_value(split.layers[0].tp_allreduces, 1, "tp_ar");
  check_value(m.layers[1].tp_replicated, 0, "tp_rep's default");
  check_value(m.layers[1].tp_allreduces, 0, "tp_ar's default (= 2)");
  const ModelFile moe = parse_model("layer name=moe fwd=1 params=800 experts=4 shared=96\n"
                                    "train grad_allreduce_bytes=8\n", "e.model");
  check_value(moe.layers[0].shared_params, 96, "shared");
  check_value(moe.grad_allreduce_bytes, 8, "train grad_allreduce_bytes");
  check_value(m.layers[2].shared_params, 0, "shared's default");
  check_value(m.grad_allreduce_bytes, 0, "grad_allreduce_bytes' default (none)");
  check_value(m.global_batch, 16, "train global_batch");
  check_value(m.optimizer_bytes, 8, "train optimizer_bytes");
  const Cluster c = parse_cluster(kCluster, "c.cluster");
  check_value(c.hosts, 2, "hosts");
  check_value(c.ranks_per_host, 4, "ranks_per_host");
  check_value(c.memory, 1e9, "memory");
  check_value(c.inter_latency, 1e-5, "inter_lat (second line)");
  inject::check(c.intra_collectives.size() == 3, "three measured collectives");
  if (c.intra_collectives.size() == 3) {
    inject::check(c.intra_collectives[0].kind == Collective::allreduce && c.intra_collectives[2].kind == Collective::alltoall,
                  "kinds in file order");
    check_value(c.intra_collectives[1].ranks, 4, "intra_allreduce's second size");
    check_value(c.intra_collectives[1].seconds, 2e-5, "intra_allreduce's second seconds");
    check_value(c.intra_collectives[2].seconds, 7e-6, "intra_alltoall's seconds");
  }
}

TEST(PlanFiles, MalformedLinesNameFileLineAndKey) {
  auto model = [](const std::string& text) { return [text] { parse_model(text, "m.model"); }; };
  auto cluster = [](const std::string& text) { return [text] { parse_cluster(text, "c.cluster"); }; };
  refused(model("layer name=a fwd=1\nlayer name=b fwd=1 colour=red\n"), {"m.model:2", "'colour'"}, "unknown key");
  refused(model("\n\nlayer name=a fwd=1.5x\n"), {"m.model:3", "'fwd'", "1.5x"}, "bad number");
  refused(model("layer name=a fwd=-1\n"), {"m.model:1", "'fwd'"}, "negative number");
  refused(model("layer name=a fwd=nan\n"), {"m.model:1", "'fwd'"}, "nan");
  refused(model("layer name=a fwd=1e999\n"), {"m.model:1", "'fwd'"}, "overflow");
  refused(model("layer name=a count=2.5 fwd=1\n"), {"m.model:1", "'count'"}, "fractional count");
  refused(model("layer name=a fwd=1 fwd=2\n"), {"m.model:1", "'fwd'", "twice"}, "repeated key");
  refused(model("layer name=a params=3\n"), {"m.model:1", "'flops'", "'fwd'"}, "neither flops nor fwd");
  refused(model("layer fwd=1\n"), {"m.model:1", "'name'"}, "no name");
  refused(model("layer name=a fwd=1 tp=2\n"), {"m.model:1", "'tp'"}, "tp 2");
  refused(model("layer name=a fwd=1 tp_rep=1.5\n"), {"m.model:1", "'tp_rep'", "0..1"}, "tp_rep above 1");
  refused(model("layer name=a fwd=1 tp_rep=-0.5\n"), {"m.model:1", "'tp_rep'"}, "negative tp_rep");
  refused(model("layer name=a fwd=1 tp_ar=1.5\n"), {"m.model:1", "'tp_ar'"}, "fractional tp_ar");
  refused(model("layer name=a fwd=1 tp_ar=65\n"), {"m.model:1", "'tp_ar'", "64"}, "tp_ar 65");
  refused(model("layer name=a fwd=1 experts=4 topk=5\n"), {"m.model:1", "'topk'"}, "topk > experts");
  refused(model("layer name=a fwd=1 params=10 shared=4\n"), {"m.model:1", "'shared'", "MoE"}, "shared of a dense layer");
  refused(model("layer name=a fwd=1 params=10 experts=2 shared=11\n"), {"m.model:1", "'shared'", "0..params"},
          "shared > params");
  refused(model("layer name=a fwd=1\ntrain grad_allreduce_bytes=-8\n"), {"m.model:2", "'grad_allreduce_bytes'"},
          "negative grad_allreduce_bytes");
  refused(model("layer name=a fwd=1 oops\n"), {"m.model:1", "'oops'"}, "no '='");
  refused(model("lair name=a fwd=1\n"), {"m.model:1", "'lair'"}, "unknown line");
  refused(model("# only a comment\n"), {"m.model", "no 'layer'"}, "no layers");
  refused(cluster("cluster ranks_per_host=4 memory=1 intra_bw=1 speed=3\n"), {"c.cluster:1", "'speed'"}, "cluster key");
  refused(cluster("cluster ranks_per_host=4 intra_bw=1\n"), {"c.cluster", "'memory'"}, "missing memory");
  refused(cluster("cluster hosts=2 ranks_per_host=4 memory=1 intra_bw=1\n"), {"c.cluster", "'inter_bw'"},
          "two hosts, no inter_bw");
  refused(cluster("cluster ranks_per_host=4 memory=1\ncluster memory=2 intra_bw=1\n"), {"c.cluster:2", "'memory'", "twice"},
          "key set on two lines");
  const std::string base = "cluster ranks_per_host=4 memory=1 intra_bw=1 ";
  refused(cluster(base + "intra_allreduce=2\n"), {"c.cluster:1", "'intra_allreduce'", "RANKS:SECONDS"}, "no colon");
  refused(cluster(base + "intra_alltoall=2:1e-6,2:2e-6\n"), {"c.cluster:1", "'intra_alltoall'", "each once"}, "size twice");
  refused(cluster(base + "intra_alltoall=1:1e-6\n"), {"c.cluster:1", "'intra_alltoall'", ">= 2"}, "size 1");
  refused(cluster(base + "intra_allreduce=2:x\n"), {"c.cluster:1", "'intra_allreduce'", "'x'"}, "bad seconds");
  refused(cluster(base + "intra_allreduce=2.5:1\n"), {"c.cluster:1", "'intra_allreduce'", "2.5"}, "fractional size");
  refused(cluster(base + "intra_allreduce=\n"), {"c.cluster:1", "'intra_allreduce'", "empty"}, "empty list");
}

TEST(PlanFiles, LoadThroughTheAbiMatchesTheCoreAndKeepsItsPromises) {
  const std::string mp = write_temp("plan_test.model", kModel), cp = write_temp("plan_test.cluster", kCluster);
  weft_plan_layout_t fixed = WEFT_PLAN_LAYOUT_INIT;
  fixed.dp = 2, fixed.tp = 2, fixed.pp = 2, fixed.ep = 4, fixed.zero_stage = 1;
  fixed.schedule = WEFT_SCHEDULE_ONE_F_ONE_B, fixed.microbatches = 4;
  weft_plan_config_t config = WEFT_PLAN_CONFIG_INIT;
  config.layout = &fixed;
  weft_plan_t plan = nullptr;
  ASSERT_EQ(weft_plan_load(mp.c_str(), cp.c_str(), &config, &plan), WEFT_OK) << weft_last_error();
  weft_plan_layout_t got = WEFT_PLAN_LAYOUT_INIT;
  ASSERT_EQ(weft_plan_layout(plan, 0, &got), WEFT_OK) << weft_last_error();
  // The same description straight into core/: the shim must hand over every field unchanged.
  Options o;
  const ModelFile m = parse_model(kModel, "m");
  o.layers = m.layers;
  o.cluster = parse_cluster(kCluster, "c");
  o.global_batch = 16, o.weight_bytes = 4, o.grad_bytes = 4, o.optimizer_bytes = 8;
  o.fixed = true;
  o.layout.dp = 2, o.layout.tp = 2, o.layout.pp = 2, o.layout.ep = 4, o.layout.zero = 1;
  o.layout.schedule = pipeline::Method::one_f_one_b, o.layout.microbatches = 4;
  const Layout want = make_plan(o).layouts.at(0);
  check_value(got.step_seconds, want.step, "ABI step = core step");
  check_value(got.memory_per_rank, want.memory, "ABI memory = core memory");
  check_value(got.communication_bytes, want.communication_bytes, "ABI bytes = core bytes");
  check_value(got.ep, 4, "ABI ep");
  // Its JSON names the fields the tool promises.
  size_t length = 0;
  ASSERT_EQ(weft_plan_format(plan, WEFT_PLAN_FORMAT_JSON, nullptr, 0, &length), WEFT_OK);
  std::string json(length + 1, '\0');
  ASSERT_EQ(weft_plan_format(plan, WEFT_PLAN_FORMAT_JSON, json.data(), json.size(), &length), WEFT_OK);
  bool all = true;
  for (const char* f : {"\"dp\"", "\"tp\"", "\"pp\"", "\"ep\"", "\"cp\"", "\"zero\"", "\"schedule\": \"1f1b\"",
                        "\"microbatches\": 4", "\"stages_per_rank\"", "\"step_seconds\"", "\"compute_seconds\"",
                        "\"communication_seconds\"", "\"bubble_fraction\"", "\"memory_bytes\"",
                        "\"communication_bytes\"", "\"fits\"", "\"scaling\": null"}) {
    all = all && json.find(f) != std::string::npos;
  }
  inject::check(all, "JSON fields: " + json);
  inject::check(weft_plan_format(plan, WEFT_PLAN_FORMAT_JSON, json.data(), length - 1, &length) ==
                    WEFT_ERR_INVALID_ARGUMENT,
                "a buffer one byte short is refused");
  inject::check(weft_plan_layout(plan, 1, &got) == WEFT_ERR_INVALID_ARGUMENT, "index past the kept layouts");
  weft_plan_layout_t bad = WEFT_PLAN_LAYOUT_INIT;
  bad.struct_size = sizeof bad + 8;
  inject::check(weft_plan_layout(plan, 0, &bad) == WEFT_ERR_INVALID_ARGUMENT, "struct_size too large");
  ASSERT_EQ(weft_plan_destroy(plan), WEFT_OK);
  inject::check(weft_plan_layout(plan, 0, &got) == WEFT_ERR_INVALID_ARGUMENT &&
                    std::string(weft_last_error()).find("destroyed") != std::string::npos,
                "a destroyed plan is caught");
  inject::check(weft_plan_destroy(nullptr) == WEFT_OK, "destroy(NULL) is fine");
  // Errors through the ABI: the file's line and key.
  const std::string badp = write_temp("plan_bad.model", "layer name=a fwd=1\nlayer name=b fwd=x\n");
  inject::check(weft_plan_load(badp.c_str(), cp.c_str(), nullptr, &plan) == WEFT_ERR_INVALID_ARGUMENT &&
                    std::string(weft_last_error()).find("plan_bad.model:2: key 'fwd'") != std::string::npos,
                std::string("bad number through the ABI: ") + weft_last_error());
  inject::check(weft_plan_load("/nonexistent/x.model", cp.c_str(), nullptr, &plan) == WEFT_ERR_INVALID_ARGUMENT &&
                    std::string(weft_last_error()).find("/nonexistent/x.model") != std::string::npos,
                "a missing file is named");
  weft_plan_config_t old = WEFT_PLAN_CONFIG_INIT;
  old.struct_size = 3;
  inject::check(weft_plan_load(mp.c_str(), cp.c_str(), &old, &plan) == WEFT_ERR_INVALID_ARGUMENT, "struct_size 3");
}

TEST(PlanFiles, SearchAndScalingThroughTheAbi) {
  const std::string mp = write_temp("plan_test2.model", kModel), cp = write_temp("plan_test2.cluster", kCluster);
  weft_plan_config_t config = WEFT_PLAN_CONFIG_INIT;
  config.top = 3;
  config.scaling = 1;
  weft_plan_t plan = nullptr;
  ASSERT_EQ(weft_plan_load(mp.c_str(), cp.c_str(), &config, &plan), WEFT_OK) << weft_last_error();
  weft_plan_info_t info = WEFT_PLAN_INFO_INIT;
  ASSERT_EQ(weft_plan_info(plan, &info), WEFT_OK);
  check_value(info.ranks, 8, "all 2 x 4 ranks");
  check_value(static_cast<double>(info.count), 3, "top 3 kept");
  double previous = 0;
  bool sorted = true;
  for (size_t i = 0; i < info.count; ++i) {
    weft_plan_layout_t l = WEFT_PLAN_LAYOUT_INIT;
    ASSERT_EQ(weft_plan_layout(plan, i, &l), WEFT_OK);
    sorted = sorted && l.fits && l.step_seconds >= previous && l.dp * l.tp * l.pp * l.cp == 8;
    previous = l.step_seconds;
  }
  inject::check(sorted, "kept layouts fit, use 8 ranks and come fastest first");
  weft_plan_scaling_t s = WEFT_PLAN_SCALING_INIT;
  weft_plan_scaling_point_t pts[8];
  size_t n = 0;
  ASSERT_EQ(weft_plan_scaling(plan, &s, pts, 8, &n), WEFT_OK) << weft_last_error();
  check_value(static_cast<double>(n), 4, "points at 1, 2, 4, 8 ranks");
  check_value(s.serial_fraction, (1 / s.speedup - 1.0 / 8) / (1 - 1.0 / 8), "s from the speedup", 1e-12);
  check_value(pts[3].strong_seconds, s.step_seconds, "the last strong point is the plan's best", 1e-12);
  ASSERT_EQ(weft_plan_destroy(plan), WEFT_OK);
}

TEST(PlanFiles, CreateThroughTheAbiCarriesTheMeasuredCollectives) {
  // kCluster's description as a struct (its measured collectives as an array) and one MoE
  // layer: weft_plan_create must predict what weft_plan_load predicts from the files.
  const weft_plan_collective_t measured[] = {
      {WEFT_PLAN_ALLREDUCE, 2, 3e-6}, {WEFT_PLAN_ALLREDUCE, 4, 2e-5}, {WEFT_PLAN_ALLTOALL, 4, 7e-6}};
  weft_plan_cluster_t cluster = WEFT_PLAN_CLUSTER_INIT;
  cluster.hosts = 2, cluster.ranks_per_host = 4, cluster.memory_per_rank = 1e9, cluster.flops_per_rank = 1e12;
  cluster.intra_bandwidth = 1e10, cluster.intra_latency = 1e-6, cluster.inter_bandwidth = 1e9;
  cluster.inter_latency = 1e-5;
  cluster.intra_collectives = measured;
  cluster.num_intra_collectives = 3;
  weft_plan_layer_t layer = {"moe", 2, 8, 2, 0, 8000, 0, 0.02, 0, 0, 8, 0, 0, 0, 0};
  weft_plan_layout_t fixed = WEFT_PLAN_LAYOUT_INIT;
  fixed.dp = 2, fixed.tp = 4, fixed.ep = 4, fixed.schedule = WEFT_SCHEDULE_ONE_F_ONE_B, fixed.microbatches = 1;
  weft_plan_config_t config = WEFT_PLAN_CONFIG_INIT;
  config.layers = &layer, config.num_layers = 1, config.cluster = &cluster, config.global_batch = 16;
  config.layout = &fixed;
  weft_plan_t plan = nullptr;
  ASSERT_EQ(weft_plan_create(&config, &plan), WEFT_OK) << weft_last_error();
  weft_plan_layout_t got = WEFT_PLAN_LAYOUT_INIT;
  ASSERT_EQ(weft_plan_layout(plan, 0, &got), WEFT_OK) << weft_last_error();
  ASSERT_EQ(weft_plan_destroy(plan), WEFT_OK);
  const std::string mp = write_temp("plan_test3.model", "layer name=moe count=2 params=8000 fwd=0.02 experts=8 topk=2 tp=0 out=8\n");
  const std::string cp = write_temp("plan_test3.cluster", kCluster);
  config.global_batch = 16;
  ASSERT_EQ(weft_plan_load(mp.c_str(), cp.c_str(), &config, &plan), WEFT_OK) << weft_last_error();
  weft_plan_layout_t from_files = WEFT_PLAN_LAYOUT_INIT;
  ASSERT_EQ(weft_plan_layout(plan, 0, &from_files), WEFT_OK) << weft_last_error();
  ASSERT_EQ(weft_plan_destroy(plan), WEFT_OK);
  check_value(got.step_seconds, from_files.step_seconds, "create's step = load's step", 1e-12);
  // Without the table the all-to-alls cost the link's latencies: a different step.
  cluster.num_intra_collectives = 0;
  ASSERT_EQ(weft_plan_create(&config, &plan), WEFT_OK) << weft_last_error();
  weft_plan_layout_t plain = WEFT_PLAN_LAYOUT_INIT;
  ASSERT_EQ(weft_plan_layout(plan, 0, &plain), WEFT_OK) << weft_last_error();
  ASSERT_EQ(weft_plan_destroy(plan), WEFT_OK);
  inject::check(plain.step_seconds != got.step_seconds, "the measured collectives reached the prediction");
  cluster.num_intra_collectives = 2;
  cluster.intra_collectives = nullptr;
  inject::check(weft_plan_create(&config, &plan) == WEFT_ERR_INVALID_ARGUMENT &&
                    std::string(weft_last_error()).find("intra_collectives is NULL") != std::string::npos,
                std::string("NULL entries with a count: ") + weft_last_error());
  cluster.intra_collectives = measured;
  const weft_plan_collective_t too_big[] = {{WEFT_PLAN_ALLTOALL, 5, 1e-6}};
  cluster.intra_collectives = too_big;
  cluster.num_intra_collectives = 1;
  inject::check(weft_plan_create(&config, &plan) == WEFT_ERR_INVALID_ARGUMENT &&
                    std::string(weft_last_error()).find("intra_collectives[0].ranks") != std::string::npos,
                std::string("a group larger than a host: ") + weft_last_error());
}

TEST(PlanFiles, LayersOfTheFirstReleaseAreReadAtTheirStride) {
  // A caller built against the first weft/plan.h: 80-byte layers (no tp_replicated, no
  // tp_allreduces) and a config that ends before layer_size. Its prediction must equal the
  // current layout's with those two fields 0, and the new fields must reach the prediction.
  struct FirstLayer {
    const char* name;
    int count, experts, top_k, tensor_parallel;
    double params, forward_flops, forward_seconds, backward_seconds, activation_bytes, output_bytes, context_bytes;
  };
  static_assert(sizeof(FirstLayer) == 80, "the first release's weft_plan_layer_t");
  const FirstLayer old[2] = {{"mlp", 2, 0, 1, 1, 5000, 0, 0.01, 0.02, 0, 1e5, 0},
                             {"moe", 1, 8, 2, 0, 8000, 0, 0.02, 0, 0, 1e5, 0}};
  weft_plan_layer_t now[2] = {{"mlp", 2, 0, 1, 1, 5000, 0, 0.01, 0.02, 0, 1e5, 0, 0, 0, 0},
                              {"moe", 1, 8, 2, 0, 8000, 0, 0.02, 0, 0, 1e5, 0, 0, 0, 0}};
  weft_plan_cluster_t cluster = WEFT_PLAN_CLUSTER_INIT;
  cluster.ranks_per_host = 4, cluster.memory_per_rank = 1e9, cluster.intra_bandwidth = 1e10;
  cluster.intra_latency = 1e-6;
  weft_plan_layout_t fixed = WEFT_PLAN_LAYOUT_INIT;
  fixed.tp = 4, fixed.ep = 4, fixed.schedule = WEFT_SCHEDULE_ONE_F_ONE_B, fixed.microbatches = 2;
  auto step = [&](weft_plan_config_t config, const void* layers) {
    config.layers = static_cast<const weft_plan_layer_t*>(layers), config.num_layers = 2;
    config.cluster = &cluster, config.global_batch = 8, config.layout = &fixed;
    weft_plan_t plan = nullptr;
    weft_plan_layout_t got = WEFT_PLAN_LAYOUT_INIT;
    if (weft_plan_create(&config, &plan) != WEFT_OK) return -1.0;
    const bool ok = weft_plan_layout(plan, 0, &got) == WEFT_OK;
    weft_plan_destroy(plan);
    return ok ? got.step_seconds : -1.0;
  };
  const weft_plan_config_t current = WEFT_PLAN_CONFIG_INIT;
  check_value(static_cast<double>(current.layer_size), sizeof(weft_plan_layer_t), "the INIT macro's layer_size");
  const double want = step(current, now);
  inject::check(want > 0, std::string("the current layout predicts: ") + weft_last_error());
  weft_plan_config_t older = current;
  older.struct_size = offsetof(weft_plan_config_t, layer_size);  // a config without the field
  check_value(step(older, old), want, "80-byte layers from a config without layer_size", 1e-12);
  weft_plan_config_t zero = current;
  zero.layer_size = 0;
  check_value(step(zero, old), want, "layer_size 0 = the first release's 80 bytes", 1e-12);
  zero.layer_size = 80;
  check_value(step(zero, old), want, "layer_size 80", 1e-12);
  // The new fields move the prediction: a replicated share adds compute, one all-reduce less
  // each way removes communication.
  now[0].tp_replicated = 0.5;
  inject::check(step(current, now) > want, "tp_replicated 0.5 makes the step slower");
  now[0].tp_replicated = 0, now[0].tp_allreduces = 1;
  inject::check(step(current, now) < want, "tp_allreduces 1 makes the step faster");
  weft_plan_config_t bad = current;
  bad.layer_size = 88;
  inject::check(step(bad, now) < 0 && std::string(weft_last_error()).find("layer_size = 88") != std::string::npos,
                std::string("layer_size 88: ") + weft_last_error());
  bad.layer_size = sizeof(weft_plan_layer_t) + 8;
  inject::check(step(bad, now) < 0 && std::string(weft_last_error()).find("layer_size") != std::string::npos,
                std::string("a layer_size beyond this library's: ") + weft_last_error());
  now[0].tp_replicated = 2;
  inject::check(step(current, now) < 0 && std::string(weft_last_error()).find("layers[0].tp_replicated") != std::string::npos,
                std::string("tp_replicated 2 through the ABI: ") + weft_last_error());
  now[0].tp_replicated = 0, now[0].tp_allreduces = 0;
  // shared_params (the MoE layer, tp 4: summed over tp each step) and the config's
  // grad_allreduce_bytes reach the prediction; a config that ends before the latter reads 0.
  now[1].shared_params = 4000;
  inject::check(step(current, now) > want, "shared_params 4000 adds the tp sum of their gradients");
  now[1].shared_params = 0;
  weft_plan_config_t wide = current;
  wide.grad_allreduce_bytes = 8;
  fixed.dp = 2, fixed.tp = 2, fixed.ep = 2;
  const double dp2 = step(current, now);
  inject::check(step(wide, now) > dp2, "grad_allreduce_bytes 8 adds an all-reduce over dp 2");
  weft_plan_config_t short_config = wide;
  short_config.struct_size = offsetof(weft_plan_config_t, grad_allreduce_bytes);
  check_value(step(short_config, now), dp2, "a config ending before grad_allreduce_bytes reads none", 1e-12);
  now[1].shared_params = 9000;
  inject::check(step(current, now) < 0 && std::string(weft_last_error()).find("layers[1].shared_params") != std::string::npos,
                std::string("shared_params above params through the ABI: ") + weft_last_error());
}
