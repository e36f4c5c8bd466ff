// The gradient bucketer (weft/training.h) against plain single-process references:
//  - exact reductions: every dtype it takes x SUM/AVG x all-reduce/reduce-scatter x bucket
//    sizes (one gradient per bucket, a few, one bucket), gradients of 0, 1, odd and large sizes,
//    small-integer values so every sum is exact and the expected bits follow from weft.h's rule
//    (sum, then for AVG divide in float32 - float64 for FLOAT64 - and round once);
//  - the compressed wires (BF16, FP8_E4M3) within training.h's stated error bound, element by
//    element, with the measured error printed;
//  - data-parallel training of tests/multiproc/mlp_reference's MLP for 20 steps equal to one
//    process within 1e-5 (max |diff| / max |ref| per tensor);
//  - bad input: each refusal names the gradient.
// WEFT_TEST_INJECT=1 corrupts one result element before each comparison; every comparison must
// then fail (the test inverts its expectation), proving the checks can fail.
#include <cmath>
#include <cstring>
#include <vector>

#include "inject.h"
#include "mlp_reference.h"
#include "mp_gtest.h"
#include "reference.h"
#include "weft/training.h"

using mpt::g_world;

namespace {

weft_tensor_t view_of(void* data, weft_dtype_t dt, const int64_t* shape, int ndim) {
  weft_tensor_t t{};
  t.data = data;
  t.device_type = WEFT_DEVICE_CPU;
  t.ndim = ndim;
  t.dtype = dt;
  t.shape = shape;
  return t;
}

// With injection on, flips one element of `got` (the top exponent bit, inject.h) and expects the
// comparison to fail instead.
template <class Compare>
void check(const char* what, void* got, weft_dtype_t dt, size_t n, Compare ok) {
  if (mpt::inject_enabled() && n > 0) {
    mpt::store_bits(dt, got, n / 2, mpt::injected_bits(dt, mpt::load_bits(dt, got, n / 2)));
    EXPECT_FALSE(ok()) << what << ": the injected corruption was not caught";
    return;
  }
  EXPECT_TRUE(ok()) << what;
}

// Gradient g's element i on rank r: small integers, so sums of up to 8 ranks are exact.
double grad_value(int r, size_t g, size_t i) { return static_cast<double>(static_cast<int>((i * 7 + g * 3 + r) % 9) - 4); }

struct ExactCase {
  weft_dtype_t dt;
  weft_op_t op;
  weft_bucket_reduction_t red;
  size_t bucket_bytes;
};

void run_exact(const ExactCase& c) {
  const std::vector<size_t> sizes = {0, 1, 7, 1000, 4099, 3};
  const size_t esize = mpt::dtype_bytes(c.dt);
  std::vector<std::vector<unsigned char>> mem(sizes.size());
  std::vector<int64_t> shapes(sizes.size());
  std::vector<weft_tensor_t> grads;
  for (size_t g = 0; g < sizes.size(); ++g) {
    mem[g].resize(std::max<size_t>(1, sizes[g]) * esize);
    shapes[g] = static_cast<int64_t>(sizes[g]);
    grads.push_back(view_of(mem[g].data(), c.dt, &shapes[g], 1));
  }
  weft_bucketer_config_t cfg = WEFT_BUCKETER_CONFIG_INIT;
  cfg.bucket_bytes = c.bucket_bytes;
  cfg.op = c.op;
  cfg.reduction = c.red;
  weft_bucketer_t b = nullptr;
  ASSERT_WEFT_OK(weft_bucketer_create(g_world.comm, grads.data(), grads.size(), &cfg, &b));
  for (int step = 0; step < 2; ++step) {
    for (size_t g = 0; g < sizes.size(); ++g) {
      for (size_t i = 0; i < sizes[g]; ++i) {
        mpt::store_bits(c.dt, mem[g].data(), i, mpt::encode_float(c.dt, grad_value(g_world.rank, g + step, i), false));
      }
    }
    // Backward order is list order; mark the last two first to exercise out-of-order readiness.
    const size_t n = sizes.size();
    std::vector<size_t> order = {n - 1, n - 2};
    for (size_t g = 0; g + 2 < n; ++g) order.push_back(g);
    for (size_t g : order) ASSERT_WEFT_OK(weft_bucketer_mark_ready(b, g, mem[g].data(), nullptr));
    ASSERT_WEFT_OK(weft_bucketer_finish(b, nullptr));
    // The expected value of element i of gradient g: the exact sum, divided for AVG.
    auto expected = [&](size_t g, size_t i) {
      double sum = 0.0;
      for (int r = 0; r < g_world.size; ++r) sum += grad_value(r, g + step, i);
      if (c.op == WEFT_AVG) {
        sum = c.dt == WEFT_FLOAT64 ? sum / g_world.size
                                   : static_cast<double>(static_cast<float>(sum) / static_cast<float>(g_world.size));
      }
      return mpt::encode_float(c.dt, sum, false);
    };
    for (size_t g = 0; g < n; ++g) {
      size_t bucket = 0, offset = 0;
      ASSERT_WEFT_OK(weft_bucketer_bucket_of(b, g, &bucket, &offset));
      if (c.red == WEFT_BUCKET_ALLREDUCE) {
        check("all-reduced gradient", mem[g].data(), c.dt, sizes[g], [&] {
          for (size_t i = 0; i < sizes[g]; ++i) {
            if (mpt::load_bits(c.dt, mem[g].data(), i) != expected(g, i)) return false;
          }
          return true;
        });
        continue;
      }
      weft_tensor_t shard{};
      size_t shard_off = 0;
      ASSERT_WEFT_OK(weft_bucketer_shard(b, bucket, &shard, &shard_off));
      const size_t count = static_cast<size_t>(shard.shape[0]);
      // The part of gradient g inside this rank's chunk of its bucket.
      const size_t lo = std::max(offset, shard_off), hi = std::min(offset + sizes[g], shard_off + count);
      if (lo >= hi) continue;
      unsigned char* base = static_cast<unsigned char*>(shard.data) + (lo - shard_off) * esize;
      check("reduce-scattered chunk", base, c.dt, hi - lo, [&] {
        for (size_t e = lo; e < hi; ++e) {
          if (mpt::load_bits(c.dt, base, e - lo) != expected(g, e - offset)) return false;
        }
        return true;
      });
    }
  }
  weft_bucketer_stats_t st = WEFT_BUCKETER_STATS_INIT;
  ASSERT_WEFT_OK(weft_bucketer_stats(b, &st));
  EXPECT_EQ(st.steps, 2u);
  EXPECT_WEFT_OK(weft_bucketer_destroy(b));
}

TEST(Bucketer, ExactEveryDtypeOpAndBucketing) {
  for (weft_dtype_t dt : {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_BFLOAT16, WEFT_FLOAT16}) {
    for (weft_op_t op : {WEFT_SUM, WEFT_AVG}) {
      for (weft_bucket_reduction_t red : {WEFT_BUCKET_ALLREDUCE, WEFT_BUCKET_REDUCE_SCATTER}) {
        for (size_t bytes : {size_t{1}, size_t{4096}, size_t{0}}) {
          SCOPED_TRACE(std::string(mpt::dtype_name(dt)) + " " + mpt::op_name(op) + (red ? " reduce-scatter" : " all-reduce") +
                       " bucket_bytes " + std::to_string(bytes));
          run_exact({dt, op, red, bytes});
        }
      }
    }
  }
}

// training.h's bound for one element: u * (sum |g_r| [+ |S|]) + 2^-10 * (sum s_r [+ s]) + eps32.
TEST(Bucketer, CompressedWireWithinStatedBound) {
  const size_t n = 3000;  // several FP8 blocks, the last one partial, chunks not block-aligned
  const int N = g_world.size;
  for (weft_wire_format_t wire : {WEFT_WIRE_BF16, WEFT_WIRE_FP8_E4M3}) {
    for (weft_bucket_reduction_t red : {WEFT_BUCKET_ALLREDUCE, WEFT_BUCKET_REDUCE_SCATTER}) {
      auto value = [](int r, size_t i) {
        // Magnitudes spread over ~2^-12..2^4 so FP8's scaled subnormals are reached.
        const double m = std::ldexp(1.0 + static_cast<double>((i * 37 + r * 11) % 97) / 97.0, static_cast<int>((i * 5 + r) % 17) - 12);
        return static_cast<float>(((i + r) % 3 == 0) ? -m : m);
      };
      std::vector<float> g(n);
      int64_t shape = static_cast<int64_t>(n);
      weft_tensor_t t = view_of(g.data(), WEFT_FLOAT32, &shape, 1);
      weft_bucketer_config_t cfg = WEFT_BUCKETER_CONFIG_INIT;
      cfg.wire = wire;
      cfg.op = WEFT_SUM;
      cfg.reduction = red;
      weft_bucketer_t b = nullptr;
      ASSERT_WEFT_OK(weft_bucketer_create(g_world.comm, &t, 1, &cfg, &b));
      for (size_t i = 0; i < n; ++i) g[i] = value(g_world.rank, i);
      ASSERT_WEFT_OK(weft_bucketer_mark_ready(b, 0, g.data(), nullptr));
      ASSERT_WEFT_OK(weft_bucketer_finish(b, nullptr));
      const double u = wire == WEFT_WIRE_BF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -4);
      const bool fp8 = wire == WEFT_WIRE_FP8_E4M3;
      // Block scales, computed here from the inputs (absmax / 448 per block of the chunk).
      const size_t chunk = (n + N - 1) / N;
      auto block_scale = [&](int r, size_t i, bool of_sum) {
        const size_t c0 = i / chunk * chunk, b0 = c0 + (i - c0) / WEFT_WIRE_FP8_BLOCK * WEFT_WIRE_FP8_BLOCK;
        const size_t b1 = std::min({b0 + WEFT_WIRE_FP8_BLOCK, c0 + chunk, n});
        double m = 0.0;
        for (size_t k = b0; k < b1; ++k) {
          double v = 0.0;
          if (of_sum) {
            for (int q = 0; q < N; ++q) v += value(q, k);
          } else {
            v = value(r, k);
          }
          m = std::max(m, std::fabs(v));
        }
        return m / 448.0 * 1.0001;  // the sum's scale is taken from its float32 value: a little slack
      };
      weft_tensor_t shard{};
      size_t off = 0;
      const float* res = g.data();
      size_t lo = 0, hi = n;
      if (red == WEFT_BUCKET_REDUCE_SCATTER) {
        ASSERT_WEFT_OK(weft_bucketer_shard(b, 0, &shard, &off));
        res = static_cast<const float*>(shard.data);
        lo = off;
        hi = off + static_cast<size_t>(shard.shape[0]);
      }
      double worst = 0.0;  // measured error / bound
      std::vector<float> got(res, res + (hi - lo));
      check("compressed reduction", got.data(), WEFT_FLOAT32, got.size(), [&] {
        bool ok = true;
        for (size_t i = lo; i < hi; ++i) {
          double S = 0.0, abs_sum = 0.0, scales = 0.0;
          for (int r = 0; r < N; ++r) {
            S += value(r, i);
            abs_sum += std::fabs(value(r, i));
            if (fp8) scales += block_scale(r, i, false);
          }
          const bool ar = red == WEFT_BUCKET_ALLREDUCE;
          double bound = u * (abs_sum + (ar ? std::fabs(S) : 0.0)) + (N + 1) * std::ldexp(1.0, -24) * abs_sum;
          if (fp8) bound += std::ldexp(1.0, -10) * (scales + (ar ? block_scale(0, i, true) : 0.0));
          const double err = std::fabs(static_cast<double>(got[i - lo]) - S);
          worst = std::max(worst, bound > 0 ? err / bound : err);
          if (!(err <= bound)) ok = false;
        }
        return ok;
      });
      if (!mpt::inject_enabled()) {
        mpt::logf("wire %s %s: worst error = %.3f of the stated bound\n", fp8 ? "fp8_e4m3" : "bf16",
                  red == WEFT_BUCKET_ALLREDUCE ? "all-reduce" : "reduce-scatter", worst);
      }
      EXPECT_WEFT_OK(weft_bucketer_destroy(b));
    }
  }
}

// Data-parallel training with the bucketer equals one process training on the whole batch.
TEST(Bucketer, DataParallelTrainingEqualsOneProcess) {
  namespace mlp = mpt::mlp;
  if (mlp::kBatch % g_world.size != 0) GTEST_SKIP() << "the batch does not split over " << g_world.size << " ranks";
  mlp::Params ref = mlp::init_params(42), mine = ref, ref_grads = ref, grads = ref;
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& s : mlp::shapes()) shapes.emplace_back(s.begin(), s.end());
  // Backward produces the last layer first: register in that order.
  const int order[mlp::kParams] = {4, 5, 2, 3, 0, 1};
  std::vector<weft_tensor_t> views;
  for (int p : order) views.push_back(view_of(grads[p].data(), WEFT_FLOAT32, shapes[p].data(), static_cast<int>(shapes[p].size())));
  weft_bucketer_config_t cfg = WEFT_BUCKETER_CONFIG_INIT;
  cfg.bucket_bytes = 600;  // a few buckets, so some reduce while backward goes on
  weft_bucketer_t b = nullptr;
  ASSERT_WEFT_OK(weft_bucketer_create(g_world.comm, views.data(), views.size(), &cfg, &b));
  size_t nb = 0;
  ASSERT_WEFT_OK(weft_bucketer_num_buckets(b, &nb));
  EXPECT_GT(nb, 1u);
  mlp::RefOptimizer ref_opt, opt;
  const int rows = mlp::kBatch / g_world.size;
  std::vector<float> x, y;
  for (int step = 0; step < 20; ++step) {
    mlp::batch(step, x, y);
    std::vector<const float*> w, wr;
    std::vector<float*> gp, gr;
    for (int p = 0; p < mlp::kParams; ++p) {
      w.push_back(mine[p].data());
      wr.push_back(ref[p].data());
      gp.push_back(grads[p].data());
      gr.push_back(ref_grads[p].data());
    }
    mlp::forward_backward(wr.data(), x, y, 0, mlp::kBatch, static_cast<float>(mlp::kBatch), gr.data(), [](int) {});
    ref_opt.step(ref, ref_grads);
    mlp::forward_backward(w.data(), x, y, g_world.rank * rows, rows, static_cast<float>(rows), gp.data(), [&](int layer) {
      for (size_t k = 0; k < mlp::kParams; ++k) {
        if (order[k] / 2 == layer) ASSERT_WEFT_OK(weft_bucketer_mark_ready(b, k, grads[order[k]].data(), nullptr));
      }
    });
    ASSERT_WEFT_OK(weft_bucketer_finish(b, nullptr));
    opt.step(mine, grads);
  }
  for (int p = 0; p < mlp::kParams; ++p) {
    check(mlp::name_of(p), mine[p].data(), WEFT_FLOAT32, mine[p].size(),
          [&] { return mlp::relative_error(mine[p], ref[p]) <= 1e-5; });
    if (!mpt::inject_enabled()) mpt::logf("DP parity %s: relative error %.2e\n", mlp::name_of(p), mlp::relative_error(mine[p], ref[p]));
  }
  EXPECT_WEFT_OK(weft_bucketer_destroy(b));
}

TEST(Bucketer, BadInputIsNamed) {
  std::vector<float> a(10), c(5);
  std::vector<uint16_t> h(4);
  int64_t sa = 10, sc = 5, sh = 4;
  weft_tensor_t v[2] = {view_of(a.data(), WEFT_FLOAT32, &sa, 1), view_of(c.data(), WEFT_FLOAT32, &sc, 1)};
  const char* names[2] = {"layer.weight", "layer.bias"};
  weft_bucketer_config_t cfg = WEFT_BUCKETER_CONFIG_INIT;
  cfg.names = names;
  weft_bucketer_t b = nullptr;
  ASSERT_WEFT_OK(weft_bucketer_create(g_world.comm, v, 2, &cfg, &b));
  // Moved gradient.
  std::vector<float> moved(10);
  EXPECT_EQ(weft_bucketer_mark_ready(b, 0, moved.data(), nullptr), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "layer.weight")) << mpt::last_error();
  // Twice.
  ASSERT_WEFT_OK(weft_bucketer_mark_ready(b, 0, a.data(), nullptr));
  EXPECT_EQ(weft_bucketer_mark_ready(b, 0, a.data(), nullptr), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "twice")) << mpt::last_error();
  // Never marked (the same on every rank, so nothing is left waiting).
  EXPECT_EQ(weft_bucketer_finish(b, nullptr), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "layer.bias")) << mpt::last_error();
  ASSERT_WEFT_OK(weft_bucketer_mark_ready(b, 1, c.data(), nullptr));
  ASSERT_WEFT_OK(weft_bucketer_finish(b, nullptr));
  EXPECT_EQ(weft_bucketer_shard(b, 0, nullptr, nullptr), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_WEFT_OK(weft_bucketer_destroy(b));
  // A dtype mix in one bucket (explicit bucket_of).
  weft_tensor_t mix[2] = {view_of(a.data(), WEFT_FLOAT32, &sa, 1), view_of(h.data(), WEFT_BFLOAT16, &sh, 1)};
  const size_t one_bucket[2] = {0, 0};
  cfg.bucket_of = one_bucket;
  EXPECT_EQ(weft_bucketer_create(g_world.comm, mix, 2, &cfg, &b), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "mixes")) << mpt::last_error();
  // A wire format the dtype cannot take.
  cfg.bucket_of = nullptr;
  cfg.wire = WEFT_WIRE_FP8_E4M3;
  EXPECT_EQ(weft_bucketer_create(g_world.comm, mix + 1, 1, &cfg, &b), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "wire")) << mpt::last_error();
  EXPECT_WEFT_OK(weft_bucketer_destroy(nullptr));
}

}  // namespace
