// Tensor-parallel training in C (weft/training.h): tests/multiproc/mlp_reference's MLP with its
// first layer column-parallel (fc1's output features split over "tp" by torch.chunk's rule: 13
// over 2 is 7 + 6, over 3 is 5 + 5 + 3) and its second row-parallel (fc2's input features split
// the same way), weft_region_apply COPY before fc1 and REDUCE after fc2 (forward and backward),
// fc2's bias and fc3 replicated. The optimizer is weft's ZeRO over the "dp" dim of a dp x tp mesh,
// each tp coordinate with its own shards - so this is TP = n at n ranks and DP = 2 x TP = 2 at 4.
// 20 steps of AdamW must equal single-process training (mlp_reference.h's RefOptimizer) to
// <= 1e-5 relative on every parameter shard. WEFT_TEST_INJECT=1 corrupts one element of each
// shard before comparing; every corruption must be caught.
#include <cmath>
#include <cstring>
#include <vector>

#include "inject.h"
#include "mlp_reference.h"
#include "mp_gtest.h"
#include "reference.h"
#include "weft/training.h"

using mpt::g_world;
namespace mlp = mpt::mlp;

namespace {

// torch.chunk's split of n over k: [begin, end) of part i.
void chunk(int n, int k, int i, int* begin, int* end) {
  const int c = (n + k - 1) / k;
  *begin = std::min(n, i * c);
  *end = std::min(n, (i + 1) * c);
}

weft_tensor_t view(void* data, const int64_t* shape, int ndim) {
  weft_tensor_t t{};
  t.data = data;
  t.device_type = WEFT_DEVICE_CPU;
  t.ndim = ndim;
  t.dtype = WEFT_FLOAT32;
  t.shape = shape;
  return t;
}

struct Shards {
  int h0 = 0, h1 = 0;  // this tp rank's hidden features [h0, h1) of fc1's output / fc2's input
  std::vector<std::vector<int64_t>> shapes;
  // This rank's parameters cut from the full ones.
  mlp::Params cut(const mlp::Params& full) const {
    const int n = h1 - h0;
    mlp::Params p(mlp::kParams);
    p[0].assign(full[0].begin() + h0 * mlp::kIn, full[0].begin() + h1 * mlp::kIn);
    p[1].assign(full[1].begin() + h0, full[1].begin() + h1);
    p[2].resize(static_cast<size_t>(mlp::kH2 * n));
    for (int o = 0; o < mlp::kH2; ++o)
      for (int i = 0; i < n; ++i) p[2][o * n + i] = full[2][o * mlp::kH1 + h0 + i];
    p[3] = full[3];
    p[4] = full[4];
    p[5] = full[5];
    return p;
  }
};

TEST(TensorParallel, TrainsLikeOneProcess) {
  const int tp = g_world.size == 4 ? 2 : g_world.size;
  const int dp = g_world.size / tp;
  if (mlp::kBatch % dp != 0) GTEST_SKIP();
  const int shape[2] = {dp, tp};
  const char* names[2] = {"dp", "tp"};
  weft_mesh_t mesh = nullptr;
  ASSERT_WEFT_OK(weft_mesh_create(g_world.comm, 2, shape, names, nullptr, &mesh));
  int coords[2];
  ASSERT_WEFT_OK(weft_mesh_coords(mesh, coords, nullptr));
  Shards s;
  chunk(mlp::kH1, tp, coords[1], &s.h0, &s.h1);
  const int n = s.h1 - s.h0;
  s.shapes = {{n, mlp::kIn}, {n}, {mlp::kH2, n}, {mlp::kH2}, {mlp::kOut, mlp::kH2}, {mlp::kOut}};

  const mlp::Params init = mlp::init_params(11);
  mlp::Params mine = s.cut(init);
  std::vector<weft_tensor_t> params;
  std::vector<const char*> pnames;
  for (int p = 0; p < mlp::kParams; ++p) {
    params.push_back(view(mine[p].data(), s.shapes[p].data(), static_cast<int>(s.shapes[p].size())));
    pnames.push_back(mlp::name_of(p));
  }
  weft_zero_config_t cfg = WEFT_ZERO_CONFIG_INIT;
  cfg.stage = 1;
  cfg.names = pnames.data();
  cfg.optimizer.lr = 0.01f;  // AdamW, as RefOptimizer's defaults
  cfg.optimizer.weight_decay = 0.01f;
  weft_zero_t z = nullptr;
  ASSERT_WEFT_OK(weft_zero_create(mesh, "dp", params.data(), params.size(), &cfg, &z));

  mlp::Params ref = init, ref_grads = init;
  mlp::RefOptimizer ref_opt;
  const int rows = mlp::kBatch / dp, row0 = coords[0] * rows;
  std::vector<float> x, y;
  for (int step = 0; step < 20; ++step) {
    mlp::batch(step, x, y);
    {  // the reference: one process, the whole batch
      std::vector<const float*> w;
      std::vector<float*> g;
      for (int p = 0; p < mlp::kParams; ++p) {
        w.push_back(ref[p].data());
        g.push_back(ref_grads[p].data());
      }
      mlp::forward_backward(w.data(), x, y, 0, mlp::kBatch, static_cast<float>(mlp::kBatch), g.data(), [](int) {});
      ref_opt.step(ref, ref_grads);
    }
    std::vector<const float*> w(mlp::kParams);
    for (int p = 0; p < mlp::kParams; ++p) {
      weft_tensor_t v{};
      ASSERT_WEFT_OK(weft_zero_param(z, static_cast<size_t>(p), &v));
      w[p] = static_cast<const float*>(v.data);
    }
    // Forward. COPY: identity forward (its backward all-reduces d(input), which no parameter needs).
    std::vector<float> xin(x.begin() + row0 * mlp::kIn, x.begin() + (row0 + rows) * mlp::kIn), xr(xin.size());
    int64_t xs[2] = {rows, mlp::kIn};
    weft_tensor_t tx = view(xin.data(), xs, 2), txr = view(xr.data(), xs, 2);
    ASSERT_WEFT_OK(weft_region_apply(mesh, "tp", WEFT_REGION_COPY, 0, 0, &tx, &txr, nullptr, nullptr));
    std::vector<float> a1(static_cast<size_t>(rows * n)), z2(static_cast<size_t>(rows * mlp::kH2), 0.0f);
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < n; ++o) {
        float acc = w[1][o];
        for (int i = 0; i < mlp::kIn; ++i) acc += w[0][o * mlp::kIn + i] * xr[r * mlp::kIn + i];
        a1[r * n + o] = std::tanh(acc);
      }
      for (int o = 0; o < mlp::kH2; ++o) {
        float acc = 0.0f;
        for (int i = 0; i < n; ++i) acc += w[2][o * n + i] * a1[r * n + i];
        z2[r * mlp::kH2 + o] = acc;  // this rank's partial sum of fc2
      }
    }
    int64_t zs[2] = {rows, mlp::kH2};
    weft_tensor_t tz = view(z2.data(), zs, 2);
    ASSERT_WEFT_OK(weft_region_apply(mesh, "tp", WEFT_REGION_REDUCE, 0, 0, &tz, &tz, nullptr, nullptr));
    // The replicated rest of the model: mlp_reference's forward/backward of fc3 on a2, by hand.
    std::vector<float> a2(z2.size()), out(static_cast<size_t>(rows * mlp::kOut));
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < mlp::kH2; ++o) a2[r * mlp::kH2 + o] = std::tanh(z2[r * mlp::kH2 + o] + w[3][o]);
      for (int j = 0; j < mlp::kOut; ++j) {
        float acc = w[5][j];
        for (int i = 0; i < mlp::kH2; ++i) acc += w[4][j * mlp::kH2 + i] * a2[r * mlp::kH2 + i];
        out[r * mlp::kOut + j] = acc;
      }
    }
    // Backward, last layer first; each layer's gradients go to ZeRO as they are final.
    mlp::Params g = mine;
    for (auto& t : g) std::fill(t.begin(), t.end(), 0.0f);
    std::vector<float> dz2(z2.size());
    for (int r = 0; r < rows; ++r) {
      std::vector<float> d(mlp::kOut);
      for (int j = 0; j < mlp::kOut; ++j) d[j] = (out[r * mlp::kOut + j] - y[(row0 + r) * mlp::kOut + j]) / rows;
      for (int j = 0; j < mlp::kOut; ++j) {
        g[5][j] += d[j];
        for (int i = 0; i < mlp::kH2; ++i) g[4][j * mlp::kH2 + i] += d[j] * a2[r * mlp::kH2 + i];
      }
      for (int i = 0; i < mlp::kH2; ++i) {
        float s2 = 0.0f;
        for (int j = 0; j < mlp::kOut; ++j) s2 += w[4][j * mlp::kH2 + i] * d[j];
        const float act = a2[r * mlp::kH2 + i];
        dz2[r * mlp::kH2 + i] = s2 * (1.0f - act * act);
      }
    }
    for (int p : {4, 5}) {
      weft_tensor_t t = view(g[p].data(), s.shapes[p].data(), static_cast<int>(s.shapes[p].size()));
      ASSERT_WEFT_OK(weft_zero_grad_ready(z, static_cast<size_t>(p), &t));
    }
    // REDUCE's backward is the identity: every tp rank continues with the whole dz2.
    std::vector<float> dz2_in(dz2.size());
    weft_tensor_t td = view(dz2.data(), zs, 2), tdi = view(dz2_in.data(), zs, 2);
    ASSERT_WEFT_OK(weft_region_apply(mesh, "tp", WEFT_REGION_REDUCE, 1, 0, &td, &tdi, nullptr, nullptr));
    std::vector<float> dz1(a1.size());
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < mlp::kH2; ++o) {
        g[3][o] += dz2_in[r * mlp::kH2 + o];
        for (int i = 0; i < n; ++i) g[2][o * n + i] += dz2_in[r * mlp::kH2 + o] * a1[r * n + i];
      }
      for (int i = 0; i < n; ++i) {
        float s1 = 0.0f;
        for (int o = 0; o < mlp::kH2; ++o) s1 += w[2][o * n + i] * dz2_in[r * mlp::kH2 + o];
        const float act = a1[r * n + i];
        dz1[r * n + i] = s1 * (1.0f - act * act);
      }
    }
    for (int p : {2, 3}) {
      weft_tensor_t t = view(g[p].data(), s.shapes[p].data(), static_cast<int>(s.shapes[p].size()));
      ASSERT_WEFT_OK(weft_zero_grad_ready(z, static_cast<size_t>(p), &t));
    }
    std::vector<float> dx(xin.size(), 0.0f), dx_sum(xin.size());
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < n; ++o) {
        g[1][o] += dz1[r * n + o];
        for (int i = 0; i < mlp::kIn; ++i) {
          g[0][o * mlp::kIn + i] += dz1[r * n + o] * xr[r * mlp::kIn + i];
          dx[r * mlp::kIn + i] += w[0][o * mlp::kIn + i] * dz1[r * n + o];
        }
      }
    }
    for (int p : {0, 1}) {
      weft_tensor_t t = view(g[p].data(), s.shapes[p].data(), static_cast<int>(s.shapes[p].size()));
      ASSERT_WEFT_OK(weft_zero_grad_ready(z, static_cast<size_t>(p), &t));
    }
    // COPY's backward: the tp ranks' partial input gradients summed (what a layer before this
    // block would continue with; no parameter here needs it).
    weft_tensor_t tdx = view(dx.data(), xs, 2), tdxs = view(dx_sum.data(), xs, 2);
    ASSERT_WEFT_OK(weft_region_apply(mesh, "tp", WEFT_REGION_COPY, 1, 0, &tdx, &tdxs, nullptr, nullptr));
    ASSERT_WEFT_OK(weft_zero_step(z, nullptr));
  }
  const mlp::Params want = s.cut(ref);
  for (int p = 0; p < mlp::kParams; ++p) {
    weft_tensor_t v{};
    ASSERT_WEFT_OK(weft_zero_param(z, static_cast<size_t>(p), &v));
    std::vector<float> got(static_cast<const float*>(v.data), static_cast<const float*>(v.data) + want[p].size());
    SCOPED_TRACE(mlp::name_of(p));
    if (mpt::inject_enabled()) {
      const size_t i = got.size() / 2;
      mpt::store_bits(WEFT_FLOAT32, got.data(), i, mpt::injected_bits(WEFT_FLOAT32, mpt::load_bits(WEFT_FLOAT32, got.data(), i)));
      EXPECT_GT(mlp::relative_error(got, want[p]), 1e-5) << "the injected corruption was not caught";
      continue;
    }
    const double e = mlp::relative_error(got, want[p]);
    EXPECT_LE(e, 1e-5);
    if (g_world.rank == 0) mpt::logf("dp %d x tp %d, %s: relative error %.2e\n", dp, tp, mlp::name_of(p), e);
  }
  EXPECT_WEFT_OK(weft_zero_destroy(z));
  EXPECT_WEFT_OK(weft_mesh_destroy(mesh));
}

}  // namespace
