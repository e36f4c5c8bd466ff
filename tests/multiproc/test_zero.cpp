// ZeRO stages 0-3 (weft/training.h) against single-process training of
// tests/multiproc/mlp_reference's MLP (whose optimizer is written independently of weft's):
//  - parity: 20 steps, every stage x {AdamW, SGD with momentum} x {no clipping, clipping}, two
//    groups of 247 and 47 elements (divisible by none of 2, 3, 4), <= 1e-5 relative per tensor
//    (max |diff| / max |ref|); stages 1-3 reduce in the same order, so they agree to the bit;
//  - mixed precision (bf16 parameters, float32 master weights): stages 1-3 agree to the bit, and
//    the memory report and the communication volume are ZeRO's formulas exactly;
//  - loss scaling: an inf gradient on one rank makes every rank skip the step and halve the scale;
//  - checkpoints: 10 steps on N ranks, saved, loaded on fewer ranks, 10 more steps = 20 steps;
//  - bad input, each refusal naming the parameter.
// WEFT_TEST_INJECT=1 corrupts one parameter before each parity comparison; it must be caught.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "inject.h"
#include "mlp_reference.h"
#include "mp_gtest.h"
#include "reference.h"
#include "weft/training.h"

using mpt::g_world;
namespace mlp = mpt::mlp;

namespace {

const int kGroups[mlp::kParams] = {0, 0, 0, 1, 1, 1};  // 247 and 47 elements

struct TrainRun {
  int stage = 2;
  weft_dtype_t dtype = WEFT_FLOAT32;
  bool adamw = true;
  float clip = 0.0f;
  int steps = 20;
  int skip_at = -1;        // the step where the last rank hands in an inf gradient
  float loss_scale = 1.0f;
};

weft_optimizer_config_t optimizer_of(const mlp::RefOptimizer& r) {
  weft_optimizer_config_t o = WEFT_OPTIMIZER_CONFIG_INIT;
  o.kind = r.adamw ? WEFT_OPTIMIZER_ADAMW : WEFT_OPTIMIZER_SGD;
  o.lr = r.lr;
  o.momentum = r.adamw ? 0.0f : r.momentum;
  o.beta1 = r.beta1;
  o.beta2 = r.beta2;
  o.eps = r.eps;
  o.weight_decay = r.weight_decay;
  return o;
}

mlp::RefOptimizer reference_optimizer(const TrainRun& run) {
  mlp::RefOptimizer r;
  r.adamw = run.adamw;
  r.lr = run.adamw ? 0.01f : 0.05f;
  r.max_grad_norm = run.clip;
  return r;
}

// Single-process training; a step where a gradient was inf is skipped, as ZeRO does.
mlp::Params reference_training(const TrainRun& run, int first_step = 0) {
  mlp::Params p = mlp::init_params(7), g = p;
  mlp::RefOptimizer opt = reference_optimizer(run);
  std::vector<float> x, y;
  for (int step = first_step; step < run.steps; ++step) {
    if (step == run.skip_at) continue;
    mlp::batch(step, x, y);
    std::vector<const float*> w;
    std::vector<float*> gp;
    for (int k = 0; k < mlp::kParams; ++k) {
      w.push_back(p[k].data());
      gp.push_back(g[k].data());
    }
    mlp::forward_backward(w.data(), x, y, 0, mlp::kBatch, static_cast<float>(mlp::kBatch), gp.data(), [](int) {});
    opt.step(p, g);
  }
  return p;
}

struct ZeroHandle {
  weft_mesh_t mesh = nullptr;
  weft_zero_t zero = nullptr;
  ~ZeroHandle() {
    EXPECT_WEFT_OK(weft_zero_destroy(zero));
    EXPECT_WEFT_OK(weft_mesh_destroy(mesh));
  }
};

// Makes a ZeRO handle over a 1-d "dp" mesh of the given ranks of comm (all when empty); a rank
// outside returns with zero == NULL.
void make_zero(const TrainRun& run, weft_comm_t comm, const std::vector<int>& ranks, ZeroHandle& z) {
  const int n = ranks.empty() ? g_world.size : static_cast<int>(ranks.size());
  const char* names[1] = {"dp"};
  weft_mesh_config_t mc = WEFT_MESH_CONFIG_INIT;
  mc.ranks = ranks.empty() ? nullptr : ranks.data();
  mc.nranks = ranks.size();
  ASSERT_WEFT_OK(weft_mesh_create(comm, 1, &n, names, &mc, &z.mesh));
  int member = 0;
  ASSERT_WEFT_OK(weft_mesh_is_member(z.mesh, &member));
  if (!member) return;
  mlp::Params init = mlp::init_params(7);
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& s : mlp::shapes()) shapes.emplace_back(s.begin(), s.end());
  std::vector<weft_tensor_t> params(mlp::kParams);
  std::vector<const char*> pnames;
  for (int p = 0; p < mlp::kParams; ++p) {
    params[p] = weft_tensor_t{};
    params[p].data = init[p].data();
    params[p].device_type = WEFT_DEVICE_CPU;
    params[p].ndim = static_cast<int>(shapes[p].size());
    params[p].dtype = WEFT_FLOAT32;
    params[p].shape = shapes[p].data();
    pnames.push_back(mlp::name_of(p));
  }
  weft_zero_config_t cfg = WEFT_ZERO_CONFIG_INIT;
  cfg.stage = run.stage;
  cfg.param_dtype = run.dtype;
  cfg.optimizer = optimizer_of(reference_optimizer(run));
  cfg.groups = kGroups;
  cfg.names = pnames.data();
  cfg.max_grad_norm = run.clip;
  cfg.loss_scale = run.loss_scale;
  cfg.dynamic_loss_scale = run.loss_scale != 1.0f;
  ASSERT_WEFT_OK(weft_zero_create(z.mesh, "dp", params.data(), params.size(), &cfg, &z.zero));
  (void)shapes;
}

// float32 copies of the parameters (they must be readable: gathered at stage 3).
mlp::Params widen_params(weft_zero_t z) {
  mlp::Params out(mlp::kParams);
  for (int p = 0; p < mlp::kParams; ++p) {
    weft_tensor_t v{};
    EXPECT_WEFT_OK(weft_zero_param(z, static_cast<size_t>(p), &v));
    out[p].resize(static_cast<size_t>(mlp::count_of(p)));
    for (size_t i = 0; v.data && i < out[p].size(); ++i) {
      out[p][i] = static_cast<float>(mpt::decode_float(v.dtype, mpt::load_bits(v.dtype, v.data, i)));
    }
  }
  return out;
}

// Stage 3: all-gathers both groups, the second as a prefetch (a request) behind the first.
void gather_all(weft_zero_t z, bool reverse) {
  weft_request_t next = nullptr;
  EXPECT_WEFT_OK(weft_zero_gather(z, reverse ? 1 : 0, nullptr));
  EXPECT_WEFT_OK(weft_zero_gather(z, reverse ? 0 : 1, &next));
  if (next) EXPECT_WEFT_OK(weft_wait(next));
  EXPECT_WEFT_OK(weft_request_free(next));
}

void release_all(weft_zero_t z) {
  for (size_t g = 0; g < 2; ++g) EXPECT_WEFT_OK(weft_zero_release(z, g));
}

mlp::Params read_params(weft_zero_t z) {
  gather_all(z, false);
  mlp::Params p = widen_params(z);
  release_all(z);
  return p;
}

// Steps [first, last) of data-parallel training on this rank's rows of each batch.
std::vector<weft_zero_step_info_t> train(const TrainRun& run, weft_zero_t z, int first, int last, int dp_rank, int dp_size) {
  std::vector<weft_zero_step_info_t> infos;
  const int rows = mlp::kBatch / dp_size;
  std::vector<float> x, y;
  mlp::Params grads(mlp::kParams);
  for (int p = 0; p < mlp::kParams; ++p) grads[p].resize(static_cast<size_t>(mlp::count_of(p)));
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& s : mlp::shapes()) shapes.emplace_back(s.begin(), s.end());
  float scale = run.loss_scale;  // what the loss is multiplied by: the latest step's answer
  for (int step = first; step < last; ++step) {
    mlp::batch(step, x, y);
    gather_all(z, false);
    mlp::Params w = widen_params(z);
    std::vector<const float*> wp;
    for (auto& t : w) wp.push_back(t.data());
    mlp::Activations acts;
    mlp::forward(wp.data(), x, dp_rank * rows, rows, acts);
    release_all(z);
    gather_all(z, true);  // stage 3 gathers again for backward: ZeRO-3's third P
    w = widen_params(z);
    wp.clear();
    for (auto& t : w) wp.push_back(t.data());
    std::vector<float*> gp;
    for (auto& t : grads) gp.push_back(t.data());
    mlp::backward(wp.data(), acts, y, static_cast<float>(rows), gp.data(), [&](int layer) {
      for (int p = 2 * layer; p < 2 * layer + 2; ++p) {
        std::vector<unsigned char> g(grads[p].size() * mpt::dtype_bytes(run.dtype));
        for (size_t i = 0; i < grads[p].size(); ++i) {
          double v = static_cast<double>(grads[p][i]) * scale;
          if (step == run.skip_at && dp_rank == dp_size - 1 && p == 2 && i == 5) v = INFINITY;
          mpt::store_bits(run.dtype, g.data(), i, mpt::encode_float(run.dtype, v, false));
        }
        weft_tensor_t t{};
        t.data = g.data();
        t.device_type = WEFT_DEVICE_CPU;
        t.ndim = static_cast<int>(shapes[p].size());
        t.dtype = run.dtype;
        t.shape = shapes[p].data();
        EXPECT_WEFT_OK(weft_zero_grad_ready(z, static_cast<size_t>(p), &t));
      }
    });
    release_all(z);
    weft_zero_step_info_t info = WEFT_ZERO_STEP_INFO_INIT;
    EXPECT_WEFT_OK(weft_zero_step(z, &info));
    scale = info.loss_scale;
    infos.push_back(info);
  }
  return infos;
}

void expect_parity(const char* what, mlp::Params& got, const mlp::Params& ref) {
  for (int p = 0; p < mlp::kParams; ++p) {
    SCOPED_TRACE(std::string(what) + " " + mlp::name_of(p));
    if (mpt::inject_enabled()) {
      const size_t i = got[p].size() / 2;
      mpt::store_bits(WEFT_FLOAT32, got[p].data(), i, mpt::injected_bits(WEFT_FLOAT32, mpt::load_bits(WEFT_FLOAT32, got[p].data(), i)));
      EXPECT_GT(mlp::relative_error(got[p], ref[p]), 1e-5) << "the injected corruption was not caught";
      continue;
    }
    EXPECT_LE(mlp::relative_error(got[p], ref[p]), 1e-5);
  }
}

std::string describe(const TrainRun& r) {
  return "stage " + std::to_string(r.stage) + (r.adamw ? " AdamW" : " SGD") + (r.clip > 0 ? " clip" : "") + " " +
         mpt::dtype_name(r.dtype);
}

TEST(Zero, EveryStageTrainsLikeOneProcess) {
  if (mlp::kBatch % g_world.size != 0) GTEST_SKIP();
  for (bool adamw : {true, false}) {
    for (float clip : {0.0f, 0.05f}) {
      std::vector<mlp::Params> by_stage;
      for (int stage = 0; stage <= 3; ++stage) {
        TrainRun run;
        run.stage = stage;
        run.adamw = adamw;
        run.clip = clip;
        SCOPED_TRACE(describe(run));
        ZeroHandle z;
        make_zero(run, g_world.comm, {}, z);
        ASSERT_NE(z.zero, nullptr);
        const auto infos = train(run, z.zero, 0, run.steps, g_world.rank, g_world.size);
        if (clip > 0) {
          EXPECT_GT(infos[0].grad_norm, clip) << "the clipping case must clip";
        }
        by_stage.push_back(read_params(z.zero));
        mlp::Params got = by_stage.back();
        expect_parity(describe(run).c_str(), got, reference_training(run));
      }
      // Stages 1-3 reduce-scatter the same buckets in the same order: equal to the bit.
      for (int stage = 2; stage <= 3; ++stage) {
        for (int p = 0; p < mlp::kParams; ++p) {
          EXPECT_EQ(0, std::memcmp(by_stage[stage][p].data(), by_stage[1][p].data(), by_stage[1][p].size() * 4))
              << "stage " << stage << " vs stage 1, " << mlp::name_of(p);
        }
      }
    }
  }
}

// bf16 parameters with float32 master weights and Adam: K = 12 bytes of state per parameter.
TEST(Zero, MixedPrecisionMemoryAndVolumeAreZeroFormulas) {
  if (mlp::kBatch % g_world.size != 0) GTEST_SKIP();
  const uint64_t N = static_cast<uint64_t>(g_world.size);
  const uint64_t per_rank = (247 + N - 1) / N + (47 + N - 1) / N;  // P / N: each group padded
  const uint64_t P = per_rank * N;
  std::vector<mlp::Params> by_stage;
  for (int stage = 0; stage <= 3; ++stage) {
    TrainRun run;
    run.stage = stage;
    run.dtype = WEFT_BFLOAT16;
    run.steps = 6;
    SCOPED_TRACE(describe(run));
    ZeroHandle z;
    make_zero(run, g_world.comm, {}, z);
    ASSERT_NE(z.zero, nullptr);
    const auto infos = train(run, z.zero, 0, run.steps, g_world.rank, g_world.size);
    weft_zero_memory_t m = WEFT_ZERO_MEMORY_INIT;
    ASSERT_WEFT_OK(weft_zero_memory(z.zero, &m));
    const uint64_t params = stage == 3 ? 2 * per_rank : 2 * P;
    const uint64_t grads = stage >= 2 ? 2 * per_rank : 2 * P;
    const uint64_t optimizer = stage == 0 ? 12 * P : 12 * per_rank;
    EXPECT_EQ(m.params, params);
    EXPECT_EQ(m.grads, grads);
    EXPECT_EQ(m.optimizer, optimizer);
    EXPECT_LE(m.buffers, m.buffers_peak) << "between steps only buffers kept for reuse remain";
    if (stage >= 2) {
      EXPECT_GT(m.buffers_peak, 0u) << "buckets (stages 2-3) and gathered groups (stage 3)";
    }
    if (g_world.size > 1 || stage < 3) {
      for (const auto& info : infos) EXPECT_EQ(info.comm_elements, (stage == 3 ? 3 : 2) * P);
    }
    if (g_world.rank == 0) {
      mpt::logf("bf16 stage %d: params %llu grads %llu optimizer %llu peak buffers %llu bytes (P = %llu), %llu elements/step\n",
                stage, (unsigned long long)m.params, (unsigned long long)m.grads, (unsigned long long)m.optimizer,
                (unsigned long long)m.buffers_peak, (unsigned long long)P, (unsigned long long)infos[0].comm_elements);
    }
    by_stage.push_back(read_params(z.zero));
  }
  for (int stage = 2; stage <= 3; ++stage) {
    for (int p = 0; p < mlp::kParams; ++p) {
      EXPECT_EQ(0, std::memcmp(by_stage[stage][p].data(), by_stage[1][p].data(), by_stage[1][p].size() * 4))
          << "bf16 stage " << stage << " vs stage 1, " << mlp::name_of(p);
    }
  }
}

TEST(Zero, AnInfOnOneRankSkipsTheStepEverywhere) {
  if (mlp::kBatch % g_world.size != 0) GTEST_SKIP();
  TrainRun run;
  run.stage = 2;
  run.loss_scale = 1024.0f;
  run.skip_at = 4;
  run.steps = 8;
  ZeroHandle z;
  make_zero(run, g_world.comm, {}, z);
  ASSERT_NE(z.zero, nullptr);
  const auto infos = train(run, z.zero, 0, run.steps, g_world.rank, g_world.size);
  for (int s = 0; s < run.steps; ++s) {
    EXPECT_EQ(infos[s].skipped, s == run.skip_at ? 1 : 0) << "step " << s;
    EXPECT_EQ(infos[s].loss_scale, s >= run.skip_at ? 512.0f : 1024.0f) << "step " << s;
  }
  mlp::Params got = read_params(z.zero);
  expect_parity("loss scaling", got, reference_training(run));
}

// Saved on all ranks after 10 steps, loaded on N - 1 (or 1), 10 more steps: the 20-step result.
TEST(Zero, StateLoadsOnAnotherDataParallelSize) {
  const int M = std::max(1, g_world.size - 1);
  if (mlp::kBatch % g_world.size != 0 || mlp::kBatch % M != 0) GTEST_SKIP();
  char dir[256] = {0};
  if (g_world.rank == 0) {
    std::strcpy(dir, "/tmp/weft-zero-test-XXXXXX");
    ASSERT_NE(mkdtemp(dir), nullptr);
  }
  ASSERT_WEFT_OK(weft_broadcast(dir, sizeof dir, WEFT_UINT8, 0, g_world.comm, nullptr, nullptr));
  for (int stage : {1, 3}) {
    TrainRun run;
    run.stage = stage;
    SCOPED_TRACE(describe(run));
    {
      ZeroHandle z;
      make_zero(run, g_world.comm, {}, z);
      ASSERT_NE(z.zero, nullptr);
      train(run, z.zero, 0, 10, g_world.rank, g_world.size);
      ASSERT_WEFT_OK(weft_zero_save(z.zero, dir));
    }
    std::vector<int> ranks;
    for (int r = 0; r < M; ++r) ranks.push_back(r);
    ZeroHandle z;
    make_zero(run, g_world.comm, ranks, z);
    if (z.zero) {
      ASSERT_WEFT_OK(weft_zero_load(z.zero, dir));
      train(run, z.zero, 10, 20, g_world.rank, M);
      mlp::Params got = read_params(z.zero);
      expect_parity("resumed", got, reference_training(run));
    }
    ASSERT_WEFT_OK(weft_barrier(g_world.comm, nullptr, nullptr));
  }
  if (g_world.rank == 0) std::system((std::string("rm -rf ") + dir).c_str());
}

TEST(Zero, BadInputIsNamed) {
  TrainRun run;
  run.stage = 3;
  ZeroHandle z;
  make_zero(run, g_world.comm, {}, z);
  ASSERT_NE(z.zero, nullptr);
  weft_tensor_t v{};
  EXPECT_EQ(weft_zero_param(z.zero, 0, &v), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "gather")) << mpt::last_error();
  std::vector<float> g(13 * 7, 0.5f);
  int64_t shape[2] = {13, 7};
  weft_tensor_t t{};
  t.data = g.data();
  t.device_type = WEFT_DEVICE_CPU;
  t.ndim = 2;
  t.dtype = WEFT_FLOAT32;
  t.shape = shape;
  ASSERT_WEFT_OK(weft_zero_grad_ready(z.zero, 0, &t));
  EXPECT_EQ(weft_zero_grad_ready(z.zero, 0, &t), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "fc1.weight")) << mpt::last_error();
  EXPECT_EQ(weft_zero_step(z.zero, nullptr), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "fc1.bias")) << mpt::last_error();
  shape[0] = 7;
  shape[1] = 13;
  EXPECT_EQ(weft_zero_grad_ready(z.zero, 2, &t), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "fc2.weight")) << mpt::last_error();
  t.dtype = WEFT_BFLOAT16;
  EXPECT_EQ(weft_zero_grad_ready(z.zero, 1, &t), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(weft_zero_load(z.zero, "/nonexistent/weft-zero"), WEFT_ERR_INVALID_ARGUMENT);
}

// A state saved with one set of shapes refuses to load into another, naming the parameter.
TEST(Zero, LoadWithOtherShapesIsRefused) {
  char dir[256] = {0};
  if (g_world.rank == 0) {
    std::strcpy(dir, "/tmp/weft-zero-shapes-XXXXXX");
    ASSERT_NE(mkdtemp(dir), nullptr);
  }
  ASSERT_WEFT_OK(weft_broadcast(dir, sizeof dir, WEFT_UINT8, 0, g_world.comm, nullptr, nullptr));
  TrainRun run;
  {
    ZeroHandle z;
    make_zero(run, g_world.comm, {}, z);
    ASSERT_WEFT_OK(weft_zero_save(z.zero, dir));
  }
  const char* names[1] = {"dp"};
  const int n = g_world.size;
  weft_mesh_t mesh = nullptr;
  ASSERT_WEFT_OK(weft_mesh_create(g_world.comm, 1, &n, names, nullptr, &mesh));
  // fc2.weight transposed: the same element count, another shape.
  std::vector<float> a(13 * 7), b(13), c(11 * 13), d(11), e(3 * 11), f(3);
  int64_t s0[2] = {13, 7}, s1[1] = {13}, s2[2] = {13, 11}, s3[1] = {11}, s4[2] = {3, 11}, s5[1] = {3};
  float* data[6] = {a.data(), b.data(), c.data(), d.data(), e.data(), f.data()};
  const int64_t* shapes[6] = {s0, s1, s2, s3, s4, s5};
  const int ndims[6] = {2, 1, 2, 1, 2, 1};
  std::vector<weft_tensor_t> params(6);
  std::vector<const char*> pnames;
  for (int p = 0; p < 6; ++p) {
    params[p] = weft_tensor_t{};
    params[p].data = data[p];
    params[p].device_type = WEFT_DEVICE_CPU;
    params[p].ndim = ndims[p];
    params[p].dtype = WEFT_FLOAT32;
    params[p].shape = shapes[p];
    pnames.push_back(mlp::name_of(p));
  }
  weft_zero_config_t cfg = WEFT_ZERO_CONFIG_INIT;
  cfg.groups = kGroups;
  cfg.names = pnames.data();
  cfg.optimizer = optimizer_of(reference_optimizer(run));
  weft_zero_t z = nullptr;
  ASSERT_WEFT_OK(weft_zero_create(mesh, "dp", params.data(), params.size(), &cfg, &z));
  EXPECT_EQ(weft_zero_load(z, dir), WEFT_ERR_MISMATCH);
  EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "fc2.weight")) << mpt::last_error();
  EXPECT_WEFT_OK(weft_zero_destroy(z));
  EXPECT_WEFT_OK(weft_mesh_destroy(mesh));
  ASSERT_WEFT_OK(weft_barrier(g_world.comm, nullptr, nullptr));
  if (g_world.rank == 0) std::system((std::string("rm -rf ") + dir).c_str());
}

}  // namespace
