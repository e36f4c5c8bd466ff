// A plugin gradient codec end to end: the Rust plugin rust_topk (plugins/rust_topk, codec
// "topk"), loaded with weft_plugin_load (WEFT_TEST_TOPK_PLUGIN names the file; with
// WEFT_PLUGINS set too, the communicator's creation already loaded it and the load here returns
// the same codec id), drives the bucketer and ZeRO; every result is compared BIT FOR BIT with an
// independent reference written here:
//   - its own top-k (k = ceil(n / 16) of the largest |x|, ties to the lower index, NaN above
//     all), its own bytes (u32 count, (u32 index, f32 value) pairs by index) and decode;
//   - the reduction of training.h: each rank encodes each chunk of its bucket, every chunk's
//     terms decoded and summed in float32 in rank order (AVG: divided by N in float32), and for
//     an all-reduce the sum encoded again and decoded by everyone;
//   - error feedback: per element v = g + residual, residual = v - decode(encode(v)), carried
//     over steps on every simulated rank;
//   - ZeRO stages 1, 2 and 3 with SGD (p + (-lr) * g, float32): parameters after each step.
// Bucketer: all-reduce and reduce-scatter, SUM and AVG, three bucketings, 3 steps, with and
// without feedback; the stats' wire bytes against the codec's size formula. ZeRO's residuals
// follow a dynamic loss scale (scaled on growth, cleared on a skipped step). Bad input: unknown
// codec ids, non-float32 gradients, feedback on a NATIVE wire, the struct_size rule.
// A convergence demonstration: least squares trained with top-k gradients, with feedback
// reaching a far smaller loss than without (deterministic: every number is the reference's).
// WEFT_TEST_INJECT=1 flips one element of every compared result; each comparison must then fail.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "inject.h"
#include "mp_gtest.h"
#include "reference.h"
#include "weft/plugin.h"
#include "weft/training.h"

using mpt::g_world;

namespace {

// ---------------------------------------------------------------- the reference codec

size_t ref_kept(size_t n) { return (n + 15) / 16; }
size_t ref_bytes(size_t n) { return 4 + 8 * ref_kept(n); }

// |x| as an ordered key: the bits of a non-negative float compare as unsigned integers in
// numeric order, and a NaN's are above infinity's.
uint32_t magnitude_key(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u & 0x7fffffffu;
}

std::vector<unsigned char> ref_encode(const float* x, size_t n) {
  std::vector<size_t> idx(n);
  for (size_t i = 0; i < n; ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return magnitude_key(x[a]) > magnitude_key(x[b]); });
  idx.resize(ref_kept(n));
  std::sort(idx.begin(), idx.end());
  std::vector<unsigned char> out(ref_bytes(n));
  const uint32_t count = static_cast<uint32_t>(n);
  std::memcpy(out.data(), &count, 4);  // little-endian hosts (x86-64, aarch64)
  for (size_t j = 0; j < idx.size(); ++j) {
    const uint32_t i = static_cast<uint32_t>(idx[j]);
    std::memcpy(out.data() + 4 + 8 * j, &i, 4);
    std::memcpy(out.data() + 8 + 8 * j, x + i, 4);
  }
  return out;
}

void ref_decode(const unsigned char* b, size_t n, float* out) {
  std::fill(out, out + n, 0.0f);
  for (size_t j = 0; j < ref_kept(n); ++j) {
    uint32_t i;
    std::memcpy(&i, b + 4 + 8 * j, 4);
    std::memcpy(out + i, b + 8 + 8 * j, 4);
  }
}

// ---------------------------------------------------------------- the reference reduction

// One bucket of every rank (local[r]: nranks * chunk elements, zero padded) reduced as
// training.h says. residual[r] (same size) is used and updated when feedback. Returns the
// reduced bucket (reduce-scatter: chunk q is rank q's shard; all-reduce: what every rank gets).
std::vector<float> ref_reduce(std::vector<std::vector<float>> local, std::vector<std::vector<float>>* residual,
                              size_t chunk, bool avg, bool allreduce) {
  const size_t N = local.size();
  std::vector<std::vector<std::vector<unsigned char>>> sent(N);
  for (size_t r = 0; r < N; ++r) {
    for (size_t q = 0; q < N; ++q) {
      float* v = local[r].data() + q * chunk;
      if (residual) {
        float* res = (*residual)[r].data() + q * chunk;
        for (size_t i = 0; i < chunk; ++i) v[i] = v[i] + res[i];
      }
      sent[r].push_back(ref_encode(v, chunk));
      if (!residual) continue;
      std::vector<float> seen(chunk);
      ref_decode(sent[r][q].data(), chunk, seen.data());
      float* res = (*residual)[r].data() + q * chunk;
      for (size_t i = 0; i < chunk; ++i) {
        const float lost = v[i] - seen[i];
        res[i] = std::isfinite(lost) ? lost : 0.0f;
      }
    }
  }
  std::vector<float> out(N * chunk);
  std::vector<float> term(chunk);
  for (size_t q = 0; q < N; ++q) {
    float* acc = out.data() + q * chunk;
    ref_decode(sent[0][q].data(), chunk, acc);
    for (size_t r = 1; r < N; ++r) {
      ref_decode(sent[r][q].data(), chunk, term.data());
      for (size_t i = 0; i < chunk; ++i) acc[i] = acc[i] + term[i];
    }
    if (avg) {
      for (size_t i = 0; i < chunk; ++i) acc[i] = acc[i] / static_cast<float>(N);
    }
    if (allreduce) {
      const std::vector<unsigned char> again = ref_encode(acc, chunk);
      ref_decode(again.data(), chunk, acc);
    }
  }
  return out;
}

// ---------------------------------------------------------------- helpers

// The codec's wire id: the plugin loaded (again, when WEFT_PLUGINS already did) by path.
int topk_wire() {
  static int id = [] {
    const char* path = std::getenv("WEFT_TEST_TOPK_PLUGIN");
    if (!path) {
      ADD_FAILURE() << "WEFT_TEST_TOPK_PLUGIN is not set (the path of libweft_rust_topk.so)";
      return -1;
    }
    weft_plugin_t p = nullptr;
    if (weft_plugin_load(path, &p) != WEFT_OK) {
      ADD_FAILURE() << "weft_plugin_load(" << path << "): " << mpt::last_error();
      return -1;
    }
    int ids[3] = {-1, -1, -1};
    const char* names[3] = {"topk.bytes", "topk.encode", "topk.decode"};
    for (int j = 0; j < 3; ++j) {
      weft_plugin_entry_t e = WEFT_PLUGIN_ENTRY_INIT;
      if (weft_plugin_lookup(p, names[j], &e) != WEFT_OK) ADD_FAILURE() << names[j] << ": " << mpt::last_error();
      ids[j] = e.id;
    }
    EXPECT_TRUE(ids[0] == ids[1] && ids[1] == ids[2]) << "a codec's three parts share one id";
    EXPECT_GE(ids[0], WEFT_PLUGIN_ID_BASE);
    return ids[1];
  }();
  return id;
}

weft_tensor_t view_of(void* data, weft_dtype_t dt, const int64_t* shape) {
  weft_tensor_t t{};
  t.data = data;
  t.device_type = WEFT_DEVICE_CPU;
  t.ndim = 1;
  t.dtype = dt;
  t.shape = shape;
  return t;
}

// Bitwise float32 comparison; with injection one element of got is corrupted first (the top
// exponent bit, inject.h) and the comparison must fail.
long g_compared = 0;  // results compared (the last test says how many)

void check_bits(const char* what, std::vector<float> got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ++g_compared;
  const bool injected = mpt::inject_enabled() && !got.empty();
  if (injected) {
    const size_t i = got.size() / 2;
    mpt::store_bits(WEFT_FLOAT32, got.data(), i, mpt::injected_bits(WEFT_FLOAT32, mpt::load_bits(WEFT_FLOAT32, got.data(), i)));
  }
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (mpt::load_bits(WEFT_FLOAT32, got.data(), i) == mpt::load_bits(WEFT_FLOAT32, want.data(), i)) continue;
    if (bad++ == 0) first = i;
  }
  if (injected) {
    EXPECT_GT(bad, 0u) << what << ": the injected corruption was not caught";
    return;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements differ, first " << first << " (got "
                     << (bad ? got[first] : 0.0f) << ", expected " << (bad ? want[first] : 0.0f) << ")";
}

// Gradient element i of gradient g on rank r at step s: multiples of 1/16 in [-2, 2) with many
// equal magnitudes (the tie rule decides) and the occasional large one.
float grad_value(int r, size_t g, size_t i, int s) {
  uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ static_cast<uint32_t>(g * 97 + static_cast<size_t>(r) * 7919 + static_cast<size_t>(s) * 104729);
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  const float v = static_cast<float>(static_cast<int>(h % 64) - 32) / 16.0f;
  return h % 97 == 0 ? v * 8.0f : v;
}

// ---------------------------------------------------------------- the bucketer

struct BucketCase {
  weft_bucket_reduction_t red;
  weft_op_t op;
  std::vector<size_t> bucket_of;
  bool feedback;
};

void run_bucketer(const BucketCase& c) {
  const std::vector<size_t> sizes = {37, 1, 1000, 0, 250};
  const int N = g_world.size, me = g_world.rank;
  const bool allreduce = c.red == WEFT_BUCKET_ALLREDUCE;
  std::vector<std::vector<float>> mem(sizes.size());
  std::vector<int64_t> shapes(sizes.size());
  std::vector<weft_tensor_t> grads;
  for (size_t g = 0; g < sizes.size(); ++g) {
    mem[g].assign(std::max<size_t>(1, sizes[g]), 0.0f);
    shapes[g] = static_cast<int64_t>(sizes[g]);
    grads.push_back(view_of(mem[g].data(), WEFT_FLOAT32, &shapes[g]));
  }
  weft_bucketer_config_t cfg = WEFT_BUCKETER_CONFIG_INIT;
  cfg.bucket_of = c.bucket_of.data();
  cfg.op = c.op;
  cfg.wire = static_cast<weft_wire_format_t>(topk_wire());
  cfg.reduction = c.red;
  cfg.error_feedback = c.feedback;
  weft_bucketer_t b = nullptr;
  ASSERT_WEFT_OK(weft_bucketer_create(g_world.comm, grads.data(), grads.size(), &cfg, &b));
  // The reference's buckets: gradients concatenated in list order, chunk = ceil(count / N).
  const size_t nb = *std::max_element(c.bucket_of.begin(), c.bucket_of.end()) + 1;
  std::vector<size_t> count(nb, 0), offset(sizes.size());
  for (size_t g = 0; g < sizes.size(); ++g) {
    offset[g] = count[c.bucket_of[g]];
    count[c.bucket_of[g]] += sizes[g];
  }
  std::vector<size_t> chunk(nb);
  std::vector<std::vector<std::vector<float>>> residual(nb);
  uint64_t wire_bytes = 0;
  for (size_t k = 0; k < nb; ++k) {
    chunk[k] = (count[k] + N - 1) / N;
    residual[k].assign(N, std::vector<float>(N * chunk[k], 0.0f));
    wire_bytes += (allreduce ? 2 : 1) * static_cast<uint64_t>(N) * ref_bytes(chunk[k]);
  }
  for (int step = 0; step < 3; ++step) {
    for (size_t g = 0; g < sizes.size(); ++g) {
      for (size_t i = 0; i < sizes[g]; ++i) mem[g][i] = grad_value(me, g, i, step);
    }
    for (size_t g = sizes.size(); g-- > 0;) ASSERT_WEFT_OK(weft_bucketer_mark_ready(b, g, mem[g].data(), nullptr));
    ASSERT_WEFT_OK(weft_bucketer_finish(b, nullptr));
    for (size_t k = 0; k < nb; ++k) {
      std::vector<std::vector<float>> local(N, std::vector<float>(N * chunk[k], 0.0f));
      for (int r = 0; r < N; ++r) {
        for (size_t g = 0; g < sizes.size(); ++g) {
          if (c.bucket_of[g] != k) continue;
          for (size_t i = 0; i < sizes[g]; ++i) local[r][offset[g] + i] = grad_value(r, g, i, step);
        }
      }
      const std::vector<float> out =
          ref_reduce(std::move(local), c.feedback ? &residual[k] : nullptr, chunk[k], c.op == WEFT_AVG, allreduce);
      const std::string where = "bucket " + std::to_string(k) + " step " + std::to_string(step);
      if (allreduce) {
        for (size_t g = 0; g < sizes.size(); ++g) {
          if (c.bucket_of[g] != k || sizes[g] == 0) continue;
          const std::vector<float> got(mem[g].begin(), mem[g].begin() + sizes[g]);
          const std::vector<float> want(out.begin() + offset[g], out.begin() + offset[g] + sizes[g]);
          check_bits(("all-reduced gradient " + std::to_string(g) + ", " + where).c_str(), got, want);
        }
        continue;
      }
      weft_tensor_t shard{};
      size_t shard_off = 0;
      ASSERT_WEFT_OK(weft_bucketer_shard(b, k, &shard, &shard_off));
      const size_t n = static_cast<size_t>(shard.shape[0]);
      EXPECT_EQ(shard_off, std::min(count[k], chunk[k] * me)) << where;
      if (n == 0) continue;
      const float* s = static_cast<const float*>(shard.data);
      check_bits(("reduce-scattered shard, " + where).c_str(), std::vector<float>(s, s + n),
                 std::vector<float>(out.begin() + shard_off, out.begin() + shard_off + n));
    }
    weft_bucketer_stats_t st = WEFT_BUCKETER_STATS_INIT;
    ASSERT_WEFT_OK(weft_bucketer_stats(b, &st));
    EXPECT_EQ(st.wire_bytes, wire_bytes) << "the codec's bytes(chunk) per chunk moved";
  }
  if (c.feedback) {
    // The residuals are not all zero, so results after step 0 depend on them being carried.
    bool owed = false;
    for (const auto& per_bucket : residual) {
      for (const auto& rr : per_bucket) owed |= std::any_of(rr.begin(), rr.end(), [](float x) { return x != 0.0f; });
    }
    EXPECT_TRUE(owed) << "the reference's residuals are all zero: the feedback cases test nothing";
  }
  EXPECT_WEFT_OK(weft_bucketer_destroy(b));
}

TEST(PluginCodec, BucketerTopkBitwise) {
  ASSERT_GE(topk_wire(), WEFT_PLUGIN_ID_BASE);
  const std::vector<std::vector<size_t>> bucketings = {{0, 0, 0, 0, 0}, {0, 1, 2, 3, 4}, {0, 0, 1, 1, 2}};
  for (bool feedback : {false, true}) {
    for (weft_bucket_reduction_t red : {WEFT_BUCKET_ALLREDUCE, WEFT_BUCKET_REDUCE_SCATTER}) {
      for (weft_op_t op : {WEFT_SUM, WEFT_AVG}) {
        for (size_t k = 0; k < bucketings.size(); ++k) {
          SCOPED_TRACE(std::string(red == WEFT_BUCKET_ALLREDUCE ? "all-reduce" : "reduce-scatter") + (op == WEFT_SUM ? " SUM" : " AVG") +
                       " bucketing " + std::to_string(k) + (feedback ? " with error feedback" : ""));
          run_bucketer({red, op, bucketings[k], feedback});
        }
      }
    }
  }
}

// ---------------------------------------------------------------- ZeRO

void run_zero(int stage, weft_op_t op, bool feedback) {
  const std::vector<size_t> sizes = {50, 7, 300};
  const int groups[3] = {0, 0, 1};
  const int N = g_world.size, me = g_world.rank;
  const char* names[1] = {"dp"};
  weft_mesh_t mesh = nullptr;
  ASSERT_WEFT_OK(weft_mesh_create(g_world.comm, 1, &N, names, nullptr, &mesh));
  auto init = [](size_t p, size_t i) { return static_cast<float>(static_cast<int>((i * 13 + p * 5) % 17) - 8) * 0.5f; };
  std::vector<std::vector<float>> pinit(sizes.size());
  std::vector<int64_t> shapes(sizes.size());
  std::vector<weft_tensor_t> params;
  for (size_t p = 0; p < sizes.size(); ++p) {
    for (size_t i = 0; i < sizes[p]; ++i) pinit[p].push_back(init(p, i));
    shapes[p] = static_cast<int64_t>(sizes[p]);
    params.push_back(view_of(pinit[p].data(), WEFT_FLOAT32, &shapes[p]));
  }
  weft_zero_config_t cfg = WEFT_ZERO_CONFIG_INIT;
  cfg.stage = stage;
  cfg.optimizer.kind = WEFT_OPTIMIZER_SGD;
  cfg.optimizer.lr = 0.25f;
  cfg.optimizer.momentum = 0.0f;
  cfg.optimizer.weight_decay = 0.0f;
  cfg.groups = groups;
  cfg.grad_op = op;
  cfg.wire = static_cast<weft_wire_format_t>(topk_wire());
  cfg.error_feedback = feedback;
  weft_zero_t z = nullptr;
  ASSERT_WEFT_OK(weft_zero_create(mesh, "dp", params.data(), params.size(), &cfg, &z));
  // The reference: per group the flat parameters (N * chunk) and every rank's residuals.
  const size_t ng = 2;
  std::vector<size_t> count(ng, 0), offset(sizes.size());
  for (size_t p = 0; p < sizes.size(); ++p) {
    offset[p] = count[groups[p]];
    count[groups[p]] += sizes[p];
  }
  std::vector<size_t> chunk(ng);
  std::vector<std::vector<float>> flat(ng);
  std::vector<std::vector<std::vector<float>>> residual(ng);
  uint64_t comm_bytes = 0, reduce_bytes = 0;
  for (size_t g = 0; g < ng; ++g) {
    chunk[g] = (count[g] + N - 1) / N;
    flat[g].assign(N * chunk[g], 0.0f);
    residual[g].assign(N, std::vector<float>(N * chunk[g], 0.0f));
    // The codec's reduce-scatter plus the parameters' float32 all-gather.
    comm_bytes += static_cast<uint64_t>(N) * ref_bytes(chunk[g]) + static_cast<uint64_t>(N) * chunk[g] * 4;
    reduce_bytes += static_cast<uint64_t>(N) * ref_bytes(chunk[g]);
  }
  for (size_t p = 0; p < sizes.size(); ++p) {
    std::copy(pinit[p].begin(), pinit[p].end(), flat[groups[p]].begin() + offset[p]);
  }
  auto grad = [](int r, size_t p, size_t i, int step) { return grad_value(r, 100 + p, i, step); };
  for (int step = 0; step < 3; ++step) {
    for (size_t p = sizes.size(); p-- > 0;) {
      std::vector<float> g(std::max<size_t>(1, sizes[p]));
      for (size_t i = 0; i < sizes[p]; ++i) g[i] = grad(me, p, i, step);
      weft_tensor_t t = view_of(g.data(), WEFT_FLOAT32, &shapes[p]);
      ASSERT_WEFT_OK(weft_zero_grad_ready(z, p, &t));
    }
    weft_zero_step_info_t info = WEFT_ZERO_STEP_INFO_INIT;
    ASSERT_WEFT_OK(weft_zero_step(z, &info));
    EXPECT_EQ(info.skipped, 0);
    // Stage 3 all-gathers no parameters in the step: its volume holds the gathers made (below)
    // to read the previous step's parameters.
    EXPECT_EQ(info.comm_bytes, stage < 3 || step > 0 ? comm_bytes : reduce_bytes);
    for (size_t g = 0; g < ng; ++g) {
      std::vector<std::vector<float>> local(N, std::vector<float>(N * chunk[g], 0.0f));
      for (int r = 0; r < N; ++r) {
        for (size_t p = 0; p < sizes.size(); ++p) {
          if (static_cast<size_t>(groups[p]) != g) continue;
          for (size_t i = 0; i < sizes[p]; ++i) local[r][offset[p] + i] = grad(r, p, i, step);
        }
      }
      const std::vector<float> red = ref_reduce(std::move(local), feedback ? &residual[g] : nullptr, chunk[g], op == WEFT_AVG, false);
      // torch.optim.SGD without momentum or decay: p + (-lr) * g in float32 (lr = 0.25).
      for (size_t e = 0; e < count[g]; ++e) flat[g][e] = flat[g][e] + (-0.25f) * red[e];
    }
    for (size_t g = 0; stage == 3 && g < ng; ++g) ASSERT_WEFT_OK(weft_zero_gather(z, g, nullptr));
    for (size_t p = 0; p < sizes.size(); ++p) {
      weft_tensor_t v{};
      ASSERT_WEFT_OK(weft_zero_param(z, p, &v));
      const float* d = static_cast<const float*>(v.data);
      const auto& f = flat[groups[p]];
      check_bits(("ZeRO stage " + std::to_string(stage) + " parameter " + std::to_string(p) + " step " + std::to_string(step)).c_str(),
                 std::vector<float>(d, d + sizes[p]), std::vector<float>(f.begin() + offset[p], f.begin() + offset[p] + sizes[p]));
    }
    for (size_t g = 0; stage == 3 && g < ng; ++g) ASSERT_WEFT_OK(weft_zero_release(z, g));
  }
  EXPECT_WEFT_OK(weft_zero_destroy(z));
  EXPECT_WEFT_OK(weft_mesh_destroy(mesh));
}

TEST(PluginCodec, ZeroStages1To3TopkBitwise) {
  ASSERT_GE(topk_wire(), WEFT_PLUGIN_ID_BASE);
  for (int stage : {1, 2, 3}) {
    for (weft_op_t op : {WEFT_SUM, WEFT_AVG}) {
      for (bool feedback : {false, true}) {
        SCOPED_TRACE("stage " + std::to_string(stage) + (op == WEFT_SUM ? " SUM" : " AVG") + (feedback ? " with error feedback" : ""));
        run_zero(stage, op, feedback);
      }
    }
  }
}

// ZeRO stage 2 with feedback and a dynamic loss scale (growth 2 every clean step, backoff 0.5):
// the residuals are in loss-scaled units, so weft multiplies them by 2 when the scale grows and
// clears them on a skipped step (rank 0 sends an inf at step 2). The reference does the same.
TEST(PluginCodec, ZeroFeedbackFollowsTheLossScale) {
  ASSERT_GE(topk_wire(), WEFT_PLUGIN_ID_BASE);
  const size_t n = 333;
  const int N = g_world.size, me = g_world.rank;
  const char* names[1] = {"dp"};
  weft_mesh_t mesh = nullptr;
  ASSERT_WEFT_OK(weft_mesh_create(g_world.comm, 1, &N, names, nullptr, &mesh));
  std::vector<float> init(n);
  for (size_t i = 0; i < n; ++i) init[i] = static_cast<float>(static_cast<int>(i % 11) - 5) * 0.5f;
  int64_t shape = static_cast<int64_t>(n);
  weft_tensor_t t = view_of(init.data(), WEFT_FLOAT32, &shape);
  weft_zero_config_t cfg = WEFT_ZERO_CONFIG_INIT;
  cfg.stage = 2;
  cfg.optimizer.kind = WEFT_OPTIMIZER_SGD;
  cfg.optimizer.lr = 0.25f;
  cfg.optimizer.weight_decay = 0.0f;
  cfg.grad_op = WEFT_SUM;
  cfg.wire = static_cast<weft_wire_format_t>(topk_wire());
  cfg.error_feedback = 1;
  cfg.loss_scale = 4.0f;
  cfg.dynamic_loss_scale = 1;
  cfg.growth_interval = 1;
  weft_zero_t z = nullptr;
  ASSERT_WEFT_OK(weft_zero_create(mesh, "dp", &t, 1, &cfg, &z));
  const size_t chunk = (n + N - 1) / N;
  std::vector<float> flat(N * chunk, 0.0f);
  std::copy(init.begin(), init.end(), flat.begin());
  std::vector<std::vector<float>> residual(N, std::vector<float>(N * chunk, 0.0f));
  float scale = 4.0f;
  for (int step = 0; step < 5; ++step) {
    const bool overflow = step == 2;
    auto given = [&](int r, size_t i) {
      if (overflow && r == 0 && i == 3) return std::numeric_limits<float>::infinity();
      return grad_value(r, 7, i, step) * scale;  // exact: the scale is a power of two
    };
    std::vector<float> g(n);
    for (size_t i = 0; i < n; ++i) g[i] = given(me, i);
    weft_tensor_t gt = view_of(g.data(), WEFT_FLOAT32, &shape);
    ASSERT_WEFT_OK(weft_zero_grad_ready(z, 0, &gt));
    weft_zero_step_info_t info = WEFT_ZERO_STEP_INFO_INIT;
    ASSERT_WEFT_OK(weft_zero_step(z, &info));
    std::vector<std::vector<float>> local(N, std::vector<float>(N * chunk, 0.0f));
    for (int r = 0; r < N; ++r) {
      for (size_t i = 0; i < n; ++i) local[r][i] = given(r, i);
    }
    const std::vector<float> red = ref_reduce(std::move(local), &residual, chunk, false, false);
    if (overflow) {
      for (auto& rr : residual) std::fill(rr.begin(), rr.end(), 0.0f);
      scale *= 0.5f;
    } else {
      const float unscale = 1.0f / scale;
      for (size_t e = 0; e < n; ++e) flat[e] = flat[e] + (-0.25f) * (red[e] * unscale);
      scale *= 2.0f;
      for (auto& rr : residual) {
        for (float& x : rr) x = x * 2.0f;
      }
    }
    EXPECT_EQ(info.skipped, overflow ? 1 : 0) << "step " << step;
    EXPECT_EQ(info.loss_scale, scale) << "step " << step;
    weft_tensor_t v{};
    ASSERT_WEFT_OK(weft_zero_param(z, 0, &v));
    const float* d = static_cast<const float*>(v.data);
    check_bits(("loss-scaled ZeRO parameter, step " + std::to_string(step)).c_str(), std::vector<float>(d, d + n),
               std::vector<float>(flat.begin(), flat.begin() + n));
  }
  EXPECT_WEFT_OK(weft_zero_destroy(z));
  EXPECT_WEFT_OK(weft_mesh_destroy(mesh));
}

// ---------------------------------------------------------------- convergence

// Least squares min_x 1/2 mean_r |x - t_r|^2 over D = 256 coordinates, data parallel: rank r's
// gradient is x - t_r, t_r = t + n_r with small per-rank differences n_r that cancel over the
// ranks (pairs +m, -m, m ~ 2^-10 |t|). Gradients are reduce-scattered (AVG) over the top-k codec,
// as ZeRO stages 1-2 do, and every rank applies SGD x -= lr * g to the whole reduced vector (what
// ZeRO's all-gather of the parameters gives). Without feedback only the k = D/16 largest
// components move each step, so x crawls; with feedback every component moves, delayed, and x
// follows plain gradient descent up to an O(lr * |n_r| * 16) neighbourhood (the residuals of the
// per-rank differences). Each rank's shard is compared bitwise with the reference every 50
// steps, so the losses below are the reference's numbers (deterministic); after 300 steps the
// loss with feedback must be below 1e-4 of the initial one and 100x below the loss without.
// (With large per-rank differences, constant-lr feedback only reaches a large neighbourhood,
// and the all-reduce's second, feedback-less encode of the sum drops components for good: the
// demonstration uses neither.)
double train_least_squares(bool feedback, int steps) {
  const size_t D = 256;
  const int N = g_world.size, me = g_world.rank;
  auto target = [](size_t i) { return static_cast<float>(static_cast<int>(i % 7) - 3) * 0.25f; };
  auto noise = [N](int r, size_t i) {
    // Pairs of ranks cancel: +m on an even rank, -m on the next; an odd last rank has none.
    if (N % 2 == 1 && r == N - 1) return 0.0f;
    const float m = static_cast<float>(8 + (i * 5 + static_cast<size_t>(r / 2) * 3) % 9) * 0x1p-10f;
    return r % 2 == 0 ? m : -m;
  };
  std::vector<float> x(D, 0.0f), g(D);
  int64_t shape = static_cast<int64_t>(D);
  weft_tensor_t t = view_of(g.data(), WEFT_FLOAT32, &shape);
  weft_bucketer_config_t cfg = WEFT_BUCKETER_CONFIG_INIT;
  cfg.op = WEFT_AVG;
  cfg.reduction = WEFT_BUCKET_REDUCE_SCATTER;
  cfg.wire = static_cast<weft_wire_format_t>(topk_wire());
  cfg.error_feedback = feedback;
  weft_bucketer_t b = nullptr;
  EXPECT_WEFT_OK(weft_bucketer_create(g_world.comm, &t, 1, &cfg, &b));
  if (!b) return 0.0;
  const size_t chunk = (D + N - 1) / N;
  std::vector<std::vector<float>> residual(N, std::vector<float>(N * chunk, 0.0f));
  const float lr = 0.05f;  // below 1 / (16 * curvature): top-k's feedback delays each component up to ~16 steps
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<float>> local(N, std::vector<float>(N * chunk, 0.0f));
    for (int r = 0; r < N; ++r) {
      for (size_t i = 0; i < D; ++i) local[r][i] = x[i] - (target(i) + noise(r, i));
    }
    std::copy(local[me].begin(), local[me].begin() + D, g.begin());
    EXPECT_WEFT_OK(weft_bucketer_mark_ready(b, 0, g.data(), nullptr));
    EXPECT_WEFT_OK(weft_bucketer_finish(b, nullptr));
    const std::vector<float> want = ref_reduce(std::move(local), feedback ? &residual : nullptr, chunk, true, false);
    if (step % 50 == 0) {
      weft_tensor_t shard{};
      size_t off = 0;
      EXPECT_WEFT_OK(weft_bucketer_shard(b, 0, &shard, &off));
      const float* sh = static_cast<const float*>(shard.data);
      const size_t n = static_cast<size_t>(shard.shape[0]);
      if (n) check_bits("least-squares gradient shard", std::vector<float>(sh, sh + n),
                        std::vector<float>(want.begin() + off, want.begin() + off + n));
    }
    for (size_t i = 0; i < D; ++i) x[i] = x[i] - lr * want[i];
  }
  EXPECT_WEFT_OK(weft_bucketer_destroy(b));
  double loss = 0.0;  // 1/2 |x - t|^2: the excess over the noise's irreducible part
  for (size_t i = 0; i < D; ++i) loss += 0.5 * (static_cast<double>(x[i]) - target(i)) * (static_cast<double>(x[i]) - target(i));
  return loss;
}

TEST(PluginCodec, ErrorFeedbackConvergesWhereTopkAloneStalls) {
  ASSERT_GE(topk_wire(), WEFT_PLUGIN_ID_BASE);
  const int steps = 300;
  double initial = 0.0;
  for (size_t i = 0; i < 256; ++i) {
    const double t = static_cast<double>(static_cast<int>(i % 7) - 3) * 0.25;
    initial += 0.5 * t * t;
  }
  const double with = train_least_squares(true, steps), without = train_least_squares(false, steps);
  if (g_world.rank == 0) {
    mpt::logf("least squares, top-k AVG reduce-scatter, %d steps on %d ranks: loss %.3e with error feedback, %.3e "
              "without (initial %.3e)", steps, g_world.size, with, without, initial);
  }
  EXPECT_LT(with, 1e-4 * initial) << "error feedback should converge";
  EXPECT_LT(100.0 * with, without) << "top-k without feedback should crawl far above";
}

// ---------------------------------------------------------------- bad input

TEST(PluginCodec, RefusalsNameWhatIsWrong) {
  std::vector<float> a(10);
  std::vector<double> d(10);
  int64_t s = 10;
  weft_tensor_t ta = view_of(a.data(), WEFT_FLOAT32, &s), td = view_of(d.data(), WEFT_FLOAT64, &s);
  weft_bucketer_t b = nullptr;
  weft_bucketer_config_t cfg = WEFT_BUCKETER_CONFIG_INIT;
  // Feedback on the NATIVE wire.
  cfg.error_feedback = 1;
  EXPECT_EQ(weft_bucketer_create(g_world.comm, &ta, 1, &cfg, &b), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "error_feedback")) << mpt::last_error();
  // Ids that are no codec: between the built-in ones and the plugins', and a plugin id never given out.
  for (int id : {3, 63, WEFT_PLUGIN_ID_BASE + 5000}) {
    cfg.error_feedback = 0;
    cfg.wire = static_cast<weft_wire_format_t>(id);
    EXPECT_EQ(weft_bucketer_create(g_world.comm, &ta, 1, &cfg, &b), WEFT_ERR_INVALID_ARGUMENT) << id;
    EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "wire") && mpt::contains_ci(mpt::last_error(), std::to_string(id)))
        << mpt::last_error();
  }
  // The plugin codec takes float32 only.
  cfg.wire = static_cast<weft_wire_format_t>(topk_wire());
  EXPECT_EQ(weft_bucketer_create(g_world.comm, &td, 1, &cfg, &b), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "float32") && mpt::contains_ci(mpt::last_error(), "topk"))
      << mpt::last_error();
  // struct_size rule: a config from before error_feedback existed never reads it.
  cfg.wire = WEFT_WIRE_NATIVE;
  cfg.error_feedback = 1;
  cfg.struct_size = offsetof(weft_bucketer_config_t, error_feedback);
  ASSERT_WEFT_OK(weft_bucketer_create(g_world.comm, &ta, 1, &cfg, &b));
  EXPECT_WEFT_OK(weft_bucketer_destroy(b));
  // ZeRO: feedback on NATIVE, a codec with bf16 parameters.
  const char* names[1] = {"dp"};
  const int N = g_world.size;
  weft_mesh_t mesh = nullptr;
  ASSERT_WEFT_OK(weft_mesh_create(g_world.comm, 1, &N, names, nullptr, &mesh));
  weft_zero_t z = nullptr;
  weft_zero_config_t zc = WEFT_ZERO_CONFIG_INIT;
  zc.error_feedback = 1;
  EXPECT_EQ(weft_zero_create(mesh, "dp", &ta, 1, &zc, &z), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "error_feedback")) << mpt::last_error();
  zc.wire = static_cast<weft_wire_format_t>(topk_wire());
  zc.param_dtype = WEFT_BFLOAT16;
  EXPECT_EQ(weft_zero_create(mesh, "dp", &ta, 1, &zc, &z), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "float32")) << mpt::last_error();
  EXPECT_WEFT_OK(weft_mesh_destroy(mesh));
}

// Last: every test above compared something (a case that returned early would show here).
TEST(PluginCodec, ZzComparedResults) {
  if (g_world.rank == 0) mpt::logf("%ld results compared bitwise with the reference%s", g_compared,
                                   mpt::inject_enabled() ? " (each with one injected corruption, caught)" : "");
  EXPECT_GT(g_compared, 100);
}

}  // namespace
