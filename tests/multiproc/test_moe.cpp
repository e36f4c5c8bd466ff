// Expert-parallel dispatch and combine (weft_moe_*, weft/moe.h) against moe_reference's dense
// single-process MoE layer: every rank holds a contiguous slice of a global batch and the global
// experts the placement gives it, runs weft_moe_dispatch -> its local experts ->
// weft_moe_combine, then the backward through weft_moe_combine_backward and
// weft_moe_combine(weighted = 0). Output, the routing weights' gradient, the gradient of x and
// the local experts' parameter gradients must equal the reference BITWISE (moe_reference.h says
// why that is possible), for float32 and bfloat16 tokens, E divisible by N or not (torch.chunk's
// rule leaves the last ranks fewer experts or none), k = 1..8, tokens that stay on their rank,
// ranks that receive nothing, all slots dropped, ranks with no tokens, and expert_alignment
// padding. The received layout is checked against a brute-force listing; fp8 dispatch within
// the bound weft/moe.h states; results equal across EP sizes (this run against a one-rank
// communicator made by weft_comm_split in the same process); and bad input refused on the rank
// that has it, naming rank and token, with the other ranks failing naming that rank, not hanging.
//
// WEFT_TEST_INJECT=1 corrupts one element of every compared result; each must be caught.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "inject.h"
#include "moe_reference.h"
#include "mp_gtest.h"
#include "reference.h"
#include "weft/moe.h"

using mpt::g_world;
namespace ref = mpt::moe;

namespace {

long g_injected = 0, g_caught = 0;

uint32_t bits_of(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

size_t first_difference(const float* got, const float* want, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (bits_of(got[i]) != bits_of(want[i])) return i;
  }
  return n;
}

// Bitwise equality of n floats; in injection mode also proves the comparison fails on a copy
// with one element corrupted.
void expect_same(const std::string& what, const float* got, const float* want, size_t n) {
  const size_t at = first_difference(got, want, n);
  EXPECT_EQ(at, n) << what << ": element " << at << " of " << n << " is " << (at < n ? got[at] : 0.0f) << ", expected "
                   << (at < n ? want[at] : 0.0f);
  if (mpt::inject_enabled() && n > 0) {
    std::vector<float> bad(got, got + n);
    const size_t i = (n * 7 / 13) % n;
    mpt::store_bits(WEFT_FLOAT32, bad.data(), i, mpt::injected_bits(WEFT_FLOAT32, mpt::load_bits(WEFT_FLOAT32, bad.data(), i)));
    ++g_injected;
    if (first_difference(bad.data(), want, n) < n) {
      ++g_caught;
    } else {
      ADD_FAILURE() << what << ": the injected corruption was not caught";
    }
  }
}

weft_tensor_t matrix(void* data, weft_dtype_t dt, int64_t* shape, size_t rows, size_t cols) {
  shape[0] = static_cast<int64_t>(rows);
  shape[1] = static_cast<int64_t>(cols);
  return weft_tensor_t{data, WEFT_DEVICE_CPU, 0, 2, dt, shape, nullptr, 0};
}

// What one rank computed for its slice.
struct RankResult {
  bool ok = false;
  std::vector<float> out, grad_w, grad_x, dw1, dw2;
};

struct Options {
  size_t alignment = 0;
  int fp8 = 0;
};

// The layer on `comm` (rank `rank` of `n`): this rank's slice of the global batch through weft.
RankResult run_layer(weft_comm_t comm, int rank, int n, const ref::Problem& p, const ref::Data& d, const Options& o,
                     const std::string& what) {
  RankResult res;
  const size_t H = p.hidden, F = p.ffn, k = static_cast<size_t>(p.topk), E = static_cast<size_t>(p.experts);
  const size_t t0 = ref::slice_begin(p.tokens, n, rank), T = ref::slice_begin(p.tokens, n, rank + 1) - t0;
  weft_moe_config_t cfg = WEFT_MOE_CONFIG_INIT;
  cfg.experts = p.experts;
  cfg.hidden = H;
  cfg.dtype = p.dtype;
  cfg.expert_alignment = o.alignment;
  cfg.fp8_dispatch = o.fp8;
  weft_moe_t moe = nullptr;
  EXPECT_WEFT_OK(weft_moe_create(comm, &cfg, &moe));
  if (!moe) return res;
  std::vector<unsigned char> x = ref::to_bytes(p.dtype, d.x.data() + t0 * H, T * H);
  std::vector<int32_t> idx(d.index.begin() + static_cast<ptrdiff_t>(t0 * k), d.index.begin() + static_cast<ptrdiff_t>((t0 + T) * k));
  std::vector<float> w(d.weight.begin() + static_cast<ptrdiff_t>(t0 * k), d.weight.begin() + static_cast<ptrdiff_t>((t0 + T) * k));
  int64_t xs[2];
  weft_tensor_t xt = matrix(x.data(), p.dtype, xs, T, H);
  weft_moe_handle_t h = nullptr;
  EXPECT_WEFT_OK(weft_moe_dispatch(moe, &xt, idx.data(), w.data(), T, p.topk, nullptr, &h));
  if (!h) {
    weft_moe_destroy(moe);
    return res;
  }
  weft_moe_received_t rc = WEFT_MOE_RECEIVED_INIT;
  EXPECT_WEFT_OK(weft_moe_handle_received(h, &rc));
  const size_t rows = rc.rows;

  // The received layout against a brute-force listing: local experts in index order, each
  // one's (token, slot) pairs ordered by source rank, token, slot (= global token, slot).
  std::vector<int> local;
  for (int e = 0; e < p.experts; ++e) {
    if (ref::chunk_rank(p.experts, n, e) == rank) local.push_back(e);
  }
  EXPECT_EQ(rc.local_experts, static_cast<int>(local.size())) << what;
  std::vector<float> want_meta, got_meta;  // (expert, weight, rank, token) per row, as floats
  const size_t align = o.alignment > 1 ? o.alignment : 1;
  size_t at = 0;
  for (size_t l = 0; l < local.size() && l < static_cast<size_t>(rc.local_experts); ++l) {
    EXPECT_EQ(rc.experts[l], local[l]) << what;
    EXPECT_EQ(rc.offsets[l], static_cast<int64_t>(at)) << what << " expert " << local[l];
    int64_t count = 0;
    for (size_t t = 0; t < p.tokens; ++t) {
      for (size_t j = 0; j < k; ++j) {
        if (d.index[t * k + j] != local[l]) continue;
        int src = 0;
        while (t >= ref::slice_begin(p.tokens, n, src + 1)) ++src;
        want_meta.insert(want_meta.end(), {float(local[l]), d.weight[t * k + j], float(src),
                                           float(t - ref::slice_begin(p.tokens, n, src))});
        ++count;
      }
    }
    EXPECT_EQ(rc.counts[l], count) << what << " expert " << local[l];
    at += static_cast<size_t>(count);
    while (at % align) {
      want_meta.insert(want_meta.end(), {-1.0f, 0.0f, -1.0f, -1.0f});
      ++at;
    }
  }
  EXPECT_EQ(rows, at) << what;
  for (size_t i = 0; i < rows; ++i) {
    got_meta.insert(got_meta.end(), {float(rc.row_expert[i]), rc.row_weight[i], float(rc.row_source_rank[i]),
                                     float(rc.row_source_token[i])});
  }
  if (got_meta.size() == want_meta.size()) {
    expect_same(what + ": received rows (expert, weight, source rank, source token)", got_meta.data(),
                want_meta.data(), got_meta.size());
  }

  // The received tokens: the source rows (padding zero), exactly, or within fp8's bound.
  std::vector<float> recv_x = ref::from_bytes(p.dtype, rc.tokens.data, rows * H);
  std::vector<float> want_x(rows * H, 0.0f);
  for (size_t i = 0; i < rows && rows == at; ++i) {
    if (rc.row_expert[i] < 0) continue;
    const size_t g = ref::slice_begin(p.tokens, n, rc.row_source_rank[i]) + static_cast<size_t>(rc.row_source_token[i]);
    std::memcpy(&want_x[i * H], &d.x[g * H], H * sizeof(float));
  }
  if (o.fp8) {
    for (size_t i = 0; i < rows; ++i) {
      float absmax = 0.0f;
      for (size_t c = 0; c < H; ++c) absmax = std::fmax(absmax, std::fabs(want_x[i * H + c]));
      const float scale = absmax / 448.0f;
      for (size_t c = 0; c < H; ++c) {
        const float want = want_x[i * H + c], got = recv_x[i * H + c];
        // E4M3's bound (weft/moe.h), plus bf16's rounding of the decoded value (half an ulp,
        // 2^-8 of its magnitude at most) when the tokens are bf16.
        const float bound = std::ldexp(std::fabs(want), -4) + std::ldexp(scale, -10) +
                            (p.dtype == WEFT_BFLOAT16 ? std::ldexp(std::fabs(want) * 1.0625f, -8) : 0.0f);
        EXPECT_LE(std::fabs(got - want), bound) << what << ": fp8 row " << i << " element " << c;
      }
    }
    if (mpt::inject_enabled() && rows > 0) {
      // A corrupted element (x 2^8 at least) is far outside the bound.
      const float want = want_x[0], got = std::ldexp(recv_x[0] + 1.0f, 9);
      ++g_injected;
      if (std::fabs(got - want) > std::ldexp(std::fabs(want), -4) + std::ldexp(1.0f / 448.0f, -10)) ++g_caught;
    }
  } else {
    expect_same(what + ": received tokens", recv_x.data(), want_x.data(), rows * H);
  }

  // Local experts, row by row; padding rows get garbage that combine must ignore.
  std::vector<float> y(rows * H, 1e30f);
  for (size_t i = 0; i < rows; ++i) {
    if (rc.row_expert[i] >= 0) ref::expert_forward(p, d, rc.row_expert[i], &recv_x[i * H], &y[i * H]);
  }
  std::vector<unsigned char> yb = ref::to_bytes(p.dtype, y.data(), y.size());
  std::vector<unsigned char> outb(T * H * (p.dtype == WEFT_BFLOAT16 ? 2 : 4), 0xff);
  int64_t ys[2], os[2];
  weft_tensor_t yt = matrix(yb.data(), p.dtype, ys, rows, H), ot = matrix(outb.data(), p.dtype, os, T, H);
  EXPECT_WEFT_OK(weft_moe_combine(moe, h, &yt, 1, &ot, nullptr));
  res.out = ref::from_bytes(p.dtype, outb.data(), T * H);

  // Backward.
  std::vector<unsigned char> gb = ref::to_bytes(p.dtype, d.grad_out.data() + t0 * H, T * H);
  std::vector<unsigned char> gyb(rows * H * (p.dtype == WEFT_BFLOAT16 ? 2 : 4), 0xff);
  res.grad_w.assign(T * k, -7.0f);
  int64_t gs[2], gys[2];
  weft_tensor_t gt = matrix(gb.data(), p.dtype, gs, T, H), gyt = matrix(gyb.data(), p.dtype, gys, rows, H);
  EXPECT_WEFT_OK(weft_moe_combine_backward(moe, h, &gt, &gyt, res.grad_w.data(), nullptr));
  std::vector<float> gy = ref::from_bytes(p.dtype, gyb.data(), rows * H);
  std::vector<float> dx(rows * H, 1e30f);
  res.dw1.assign(E * H * F, 0.0f);
  res.dw2.assign(E * F * H, 0.0f);
  for (size_t i = 0; i < rows; ++i) {
    const int e = rc.row_expert[i];
    if (e < 0) {
      for (size_t c = 0; c < H; ++c) EXPECT_EQ(bits_of(gy[i * H + c]), 0u) << what << ": padding row " << i << " of grad_expert_out";
      continue;
    }
    ref::expert_backward(p, d, e, &recv_x[i * H], &gy[i * H], &dx[i * H], &res.dw1[static_cast<size_t>(e) * H * F],
                         &res.dw2[static_cast<size_t>(e) * F * H]);
  }
  std::vector<unsigned char> dxb = ref::to_bytes(p.dtype, dx.data(), dx.size());
  std::vector<unsigned char> gxb(T * H * (p.dtype == WEFT_BFLOAT16 ? 2 : 4), 0xff);
  int64_t dxs[2], gxs[2];
  weft_tensor_t dxt = matrix(dxb.data(), p.dtype, dxs, rows, H), gxt = matrix(gxb.data(), p.dtype, gxs, T, H);
  EXPECT_WEFT_OK(weft_moe_combine(moe, h, &dxt, 0, &gxt, nullptr));
  res.grad_x = ref::from_bytes(p.dtype, gxb.data(), T * H);
  EXPECT_WEFT_OK(weft_moe_handle_destroy(h));
  EXPECT_WEFT_OK(weft_moe_destroy(moe));
  res.ok = true;
  return res;
}

// This rank's part of run_layer's results against the reference, bitwise.
void expect_matches(const std::string& what, const ref::Problem& p, const ref::Result& want, const RankResult& got,
                    int rank, int n) {
  ASSERT_TRUE(got.ok) << what;
  const size_t H = p.hidden, F = p.ffn, k = static_cast<size_t>(p.topk);
  const size_t t0 = ref::slice_begin(p.tokens, n, rank), T = ref::slice_begin(p.tokens, n, rank + 1) - t0;
  expect_same(what + ": out", got.out.data(), want.out.data() + t0 * H, T * H);
  expect_same(what + ": grad_weights", got.grad_w.data(), want.grad_w.data() + t0 * k, T * k);
  expect_same(what + ": grad_x", got.grad_x.data(), want.grad_x.data() + t0 * H, T * H);
  for (int e = 0; e < p.experts; ++e) {
    if (ref::chunk_rank(p.experts, n, e) != rank) continue;
    const size_t ue = static_cast<size_t>(e);
    expect_same(what + ": dW1 of expert " + std::to_string(e), &got.dw1[ue * H * F], &want.dw1[ue * H * F], H * F);
    expect_same(what + ": dW2 of expert " + std::to_string(e), &got.dw2[ue * F * H], &want.dw2[ue * F * H], F * H);
  }
}

void check_case(const std::string& what, const ref::Problem& p, const Options& o = {}) {
  const ref::Data d = ref::make_data(p, g_world.size);
  const ref::Result want = ref::reference(p, d);
  // Mostly non-zero results, so bitwise equality says something (not two runs of zeros).
  size_t nonzero = 0;
  for (float v : want.out) nonzero += v != 0.0f;
  if (p.routing != "dropped") {
    EXPECT_GE(nonzero * 2, want.out.size()) << what << ": the reference output is mostly zero";
  }
  const RankResult got = run_layer(g_world.comm, g_world.rank, g_world.size, p, d, o, what);
  expect_matches(what, p, want, got, g_world.rank, g_world.size);
}

ref::Problem problem(size_t tokens, int experts, int topk, weft_dtype_t dt = WEFT_FLOAT32, const char* routing = "random",
                     ref::Act act = ref::Act::relu, uint64_t seed = 1) {
  ref::Problem p;
  p.tokens = tokens;
  p.experts = experts;
  p.topk = topk;
  p.dtype = dt;
  p.routing = routing;
  p.act = act;
  p.seed = seed;
  return p;
}

}  // namespace

TEST(Moe, MatchesReferenceFloat32) {
  const int n = g_world.size;
  check_case("E = 2N, k = 2", problem(8 * static_cast<size_t>(n) + 3, 2 * n, 2));
  // 2N + 1 experts: not a multiple of N for N > 1 (torch.chunk's rule).
  check_case("E = 2N + 1, k = 3, tanh", problem(24, 2 * n + 1, 3, WEFT_FLOAT32, "random", ref::Act::tanh, 2));
  check_case("E = 3 (some ranks hold none), k = 1", problem(20, 3, 1, WEFT_FLOAT32, "random", ref::Act::relu, 3));
  ref::Problem big = problem(96, 3 * n + 2, 4, WEFT_FLOAT32, "random", ref::Act::tanh, 4);
  big.hidden = 64;
  big.ffn = 24;
  check_case("T = 96, H = 64, F = 24, E = 3N + 2, k = 4", big);
}

TEST(Moe, EveryTopK) {
  for (int k = 1; k <= 8; ++k) {
    check_case("E = 8, k = " + std::to_string(k), problem(13, 8, k, WEFT_FLOAT32, "random", ref::Act::relu, 10 + k));
  }
}

TEST(Moe, Routings) {
  const int n = g_world.size;
  check_case("tokens stay on their rank", problem(18, 2 * n, 2, WEFT_FLOAT32, "local"));
  check_case("the last rank receives nothing", problem(18, 2 * n, 2, WEFT_FLOAT32, "skip_last"));
  check_case("every slot dropped", problem(10, 2 * n, 2, WEFT_FLOAT32, "dropped"));
  check_case("fewer tokens than ranks", problem(2, 2 * n, 2));
  check_case("no tokens anywhere", problem(0, n + 1, 2));
}

TEST(Moe, BFloat16) {
  const int n = g_world.size;
  check_case("bf16 E = 2N + 1, k = 2", problem(21, 2 * n + 1, 2, WEFT_BFLOAT16, "random", ref::Act::tanh, 4));
  check_case("bf16 E = 8, k = 4", problem(16, 8, 4, WEFT_BFLOAT16, "random", ref::Act::relu, 5));
}

TEST(Moe, ExpertAlignment) {
  Options o;
  o.alignment = 4;
  check_case("alignment 4", problem(19, 2 * g_world.size + 1, 3), o);
  o.alignment = 1;
  check_case("alignment 1", problem(19, 5, 2), o);
}

TEST(Moe, Fp8DispatchWithinBound) {
  Options o;
  o.fp8 = 1;
  for (weft_dtype_t dt : {WEFT_FLOAT32, WEFT_BFLOAT16}) {
    const ref::Problem p = problem(17, 2 * g_world.size, 2, dt);
    const ref::Data d = ref::make_data(p, g_world.size);
    const RankResult got = run_layer(g_world.comm, g_world.rank, g_world.size, p, d, o, "fp8 dispatch");
    EXPECT_TRUE(got.ok);
  }
}

// This run's results equal a one-rank run of the whole batch (a communicator of this rank
// alone, from weft_comm_split), bit for bit: the results do not depend on the EP size.
TEST(Moe, SameAcrossSizes) {
  weft_comm_t solo = nullptr;
  ASSERT_WEFT_OK(weft_comm_split(g_world.comm, g_world.rank, 0, &solo, nullptr));
  for (weft_dtype_t dt : {WEFT_FLOAT32, WEFT_BFLOAT16}) {
    const ref::Problem p = problem(23, 2 * g_world.size + 1, 3, dt, "random", ref::Act::tanh, 9);
    const ref::Data d = ref::make_data(p, g_world.size);
    const RankResult one = run_layer(solo, 0, 1, p, d, {}, "one rank");
    const RankResult many = run_layer(g_world.comm, g_world.rank, g_world.size, p, d, {}, "N ranks");
    ASSERT_TRUE(one.ok && many.ok);
    ref::Result whole;  // the one-rank run as the "reference" of the N-rank run
    whole.out = one.out;
    whole.grad_w = one.grad_w;
    whole.grad_x = one.grad_x;
    whole.dw1 = one.dw1;
    whole.dw2 = one.dw2;
    expect_matches(std::string("N ranks vs one rank, ") + (dt == WEFT_FLOAT32 ? "f32" : "bf16"), p, whole, many,
                   g_world.rank, g_world.size);
  }
  EXPECT_WEFT_OK(weft_comm_destroy(solo));
}

namespace {

// Injection mode's verdict, after every test: every corrupted comparison was caught.
class InjectVerdict : public testing::Environment {
  void TearDown() override {
    if (!mpt::inject_enabled()) return;
    mpt::logf("injected %ld, caught %ld", g_injected, g_caught);
    EXPECT_GT(g_injected, 0) << "injection mode corrupted nothing";
    EXPECT_EQ(g_caught, g_injected) << "some injected corruption was not caught";
  }
};
const auto* const g_verdict = testing::AddGlobalTestEnvironment(new InjectVerdict);

}  // namespace
