// weft_moe_* refusals (weft/moe.h): bad input on one rank (the last) is refused there before any
// token moves, naming the rank and the token; every other rank fails too, naming that rank,
// instead of waiting for data that never comes; the communicator stays usable afterwards.
// Also weft_moe_layout's counts against a brute-force count.
#include <cmath>
#include <string>
#include <vector>

#include "mp_gtest.h"
#include "weft/moe.h"

using mpt::g_world;

namespace {

constexpr size_t kHidden = 4;

int bad_rank() { return g_world.size - 1; }
bool is_bad() { return g_world.rank == bad_rank(); }

weft_moe_t make_moe(int experts, size_t hidden = kHidden) {
  weft_moe_config_t cfg = WEFT_MOE_CONFIG_INIT;
  cfg.experts = experts;
  cfg.hidden = hidden;
  weft_moe_t moe = nullptr;
  EXPECT_WEFT_OK(weft_moe_create(g_world.comm, &cfg, &moe));
  return moe;
}

// The bad rank's status and text name it and `needle`; the others fail naming the bad rank.
void expect_refused(weft_status_t s, const char* needle, const std::string& what) {
  const std::string msg = mpt::last_error();
  if (is_bad()) {
    EXPECT_EQ(s, WEFT_ERR_INVALID_ARGUMENT) << what << ": " << msg;
    EXPECT_TRUE(mpt::mentions_rank(msg, bad_rank())) << what << ": " << msg;
    EXPECT_TRUE(mpt::contains_ci(msg, needle)) << what << ": expected \"" << needle << "\" in: " << msg;
  } else {
    EXPECT_NE(s, WEFT_OK) << what;
    EXPECT_TRUE(mpt::mentions_rank(msg, bad_rank())) << what << ": " << msg;
  }
}

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> idx;
  std::vector<float> w;
  int64_t shape[2];
  weft_tensor_t t;
  Batch(size_t tokens, int topk, int experts) : x(tokens * kHidden, 1.0f), idx(tokens * static_cast<size_t>(topk)),
                                                w(idx.size(), 0.5f) {
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i % static_cast<size_t>(experts));
    for (size_t t0 = 0; t0 < tokens; ++t0) {
      for (int j = 0; j < topk; ++j) idx[t0 * static_cast<size_t>(topk) + static_cast<size_t>(j)] = (static_cast<int>(t0) + j) % experts;
    }
    shape[0] = static_cast<int64_t>(tokens);
    shape[1] = kHidden;
    t = weft_tensor_t{x.data(), WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, shape, nullptr, 0};
  }
};

// One dispatch in which the bad rank's batch was spoiled by `spoil`; every rank checks the
// refusal, then a clean dispatch shows the communicator still works.
template <class Spoil>
void refused_dispatch(const char* what, const char* needle, int topk_bad, Spoil&& spoil) {
  const int E = 4;
  weft_moe_t moe = make_moe(E);
  ASSERT_NE(moe, nullptr);
  const int k = is_bad() ? topk_bad : 2;
  Batch b(5, k, E);
  if (is_bad()) spoil(b);
  weft_moe_handle_t h = nullptr;
  expect_refused(weft_moe_dispatch(moe, &b.t, b.idx.data(), b.w.data(), 5, k, nullptr, &h), needle, what);
  EXPECT_EQ(h, nullptr) << what;
  Batch good(5, 2, E);
  EXPECT_WEFT_OK(weft_moe_dispatch(moe, &good.t, good.idx.data(), good.w.data(), 5, 2, nullptr, &h));
  EXPECT_WEFT_OK(weft_moe_handle_destroy(h));
  EXPECT_WEFT_OK(weft_moe_destroy(moe));
}

}  // namespace

TEST(MoeBadInput, TopKAboveExperts) {
  refused_dispatch("k > E", "topk", 5, [](Batch&) {});
}

TEST(MoeBadInput, IndexOutOfRange) {
  refused_dispatch("index = E", "token 3", 2, [](Batch& b) { b.idx[3 * 2 + 1] = 4; });
}

TEST(MoeBadInput, NegativeIndexOtherThanDropped) {
  refused_dispatch("index = -2", "token 2", 2, [](Batch& b) { b.idx[2 * 2] = -2; });
}

TEST(MoeBadInput, NaNWeight) {
  refused_dispatch("NaN weight", "token 4", 2, [](Batch& b) { b.w[4 * 2 + 1] = std::nanf(""); });
}

TEST(MoeBadInput, ShapeNotTokensByHidden) {
  refused_dispatch("x not [T, H]", "shape", 2, [](Batch& b) { b.shape[1] = kHidden + 1; });
}

// A handle reused with another token count: combine's out has T + 1 rows on the bad rank.
TEST(MoeBadInput, CombineWithAnotherTokenCount) {
  const int E = 4;
  weft_moe_t moe = make_moe(E);
  ASSERT_NE(moe, nullptr);
  Batch b(6, 2, E);
  weft_moe_handle_t h = nullptr;
  ASSERT_WEFT_OK(weft_moe_dispatch(moe, &b.t, b.idx.data(), b.w.data(), 6, 2, nullptr, &h));
  weft_moe_received_t rc = WEFT_MOE_RECEIVED_INIT;
  ASSERT_WEFT_OK(weft_moe_handle_received(h, &rc));
  const size_t T = is_bad() ? 7 : 6;
  std::vector<float> out(T * kHidden);
  int64_t oshape[2] = {static_cast<int64_t>(T), kHidden};
  weft_tensor_t ot{out.data(), WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, oshape, nullptr, 0};
  expect_refused(weft_moe_combine(moe, h, &rc.tokens, 1, &ot, nullptr), "out", "combine with T + 1");
  // The same handle with the right count still works on every rank.
  oshape[0] = 6;
  EXPECT_WEFT_OK(weft_moe_combine(moe, h, &rc.tokens, 1, &ot, nullptr));
  // Combine of the received tokens themselves: out = sum of the kept weights * x = 2 * 0.5 * 1.
  for (size_t i = 0; i < 6 * kHidden; ++i) EXPECT_EQ(out[i], 1.0f) << i;
  EXPECT_WEFT_OK(weft_moe_handle_destroy(h));
  EXPECT_WEFT_OK(weft_moe_destroy(moe));
}

TEST(MoeBadInput, HiddenSizeDiffersAtCreate) {
  if (g_world.size < 2) GTEST_SKIP() << "needs two ranks";
  weft_moe_config_t cfg = WEFT_MOE_CONFIG_INIT;
  cfg.experts = 4;
  cfg.hidden = is_bad() ? 9 : 8;
  weft_moe_t moe = nullptr;
  const weft_status_t s = weft_moe_create(g_world.comm, &cfg, &moe);
  const std::string msg = mpt::last_error();
  EXPECT_EQ(s, WEFT_ERR_MISMATCH) << msg;
  EXPECT_EQ(moe, nullptr);
  EXPECT_TRUE(mpt::contains_ci(msg, "hidden")) << msg;
  // Ranks other than the bad one name it; the bad one names the first rank that differs (0).
  EXPECT_TRUE(mpt::mentions_rank(msg, is_bad() ? 0 : bad_rank())) << msg;
}

TEST(MoeBadInput, BadConfigOnOneRank) {
  weft_moe_config_t cfg = WEFT_MOE_CONFIG_INIT;
  cfg.experts = 4;
  cfg.hidden = 8;
  const int32_t bad_map[4] = {0, 0, 0, g_world.size};
  if (is_bad()) cfg.expert_rank = bad_map;
  weft_moe_t moe = nullptr;
  expect_refused(weft_moe_create(g_world.comm, &cfg, &moe), "expert_rank[3]", "expert_rank out of range");
  EXPECT_EQ(moe, nullptr);
}

TEST(MoeLayout, CountsMatchBruteForce) {
  const int E = 7, k = 3, N = 3;
  const size_t T = 11;
  std::vector<int32_t> idx(T * k);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = (i % 5 == 4) ? WEFT_MOE_DROPPED : static_cast<int32_t>((i * 5 + i / 3) % E);
  const int32_t map[E] = {2, 0, 1, 1, 0, 2, 2};
  for (const int32_t* placement : {static_cast<const int32_t*>(nullptr), map}) {
    std::vector<int64_t> per_rank(N, -1), per_expert(E, -1);
    std::vector<uint8_t> in_rank(T * N, 7);
    ASSERT_WEFT_OK(weft_moe_layout(idx.data(), T, k, E, N, placement, per_rank.data(), per_expert.data(), in_rank.data()));
    std::vector<int64_t> want_rank(N, 0), want_expert(E, 0);
    for (size_t t = 0; t < T; ++t) {
      for (int r = 0; r < N; ++r) {
        bool hit = false;
        for (int j = 0; j < k; ++j) {
          const int e = idx[t * k + static_cast<size_t>(j)];
          // torch.chunk's rule for 7 experts over 3 ranks: c = 3 -> {0,1,2}, {3,4,5}, {6}.
          if (e >= 0 && (placement ? placement[e] : e / 3) == r) hit = true;
        }
        want_rank[static_cast<size_t>(r)] += hit;
        EXPECT_EQ(in_rank[t * N + static_cast<size_t>(r)], hit ? 1 : 0) << t << " " << r;
      }
      for (int j = 0; j < k; ++j) {
        if (idx[t * k + static_cast<size_t>(j)] >= 0) ++want_expert[static_cast<size_t>(idx[t * k + static_cast<size_t>(j)])];
      }
    }
    EXPECT_EQ(per_rank, want_rank);
    EXPECT_EQ(per_expert, want_expert);
  }
  idx[4] = E;
  EXPECT_EQ(weft_moe_layout(idx.data(), T, k, E, N, nullptr, nullptr, nullptr, nullptr), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "token 1")) << mpt::last_error();
}

// combine_backward before any weighted combine has no expert outputs for grad_weights: refused
// on every rank (the handle's state is the same everywhere here, so every rank names itself).
TEST(MoeBadInput, BackwardBeforeCombine) {
  weft_moe_t moe = make_moe(4);
  ASSERT_NE(moe, nullptr);
  Batch b(3, 2, 4);
  weft_moe_handle_t h = nullptr;
  ASSERT_WEFT_OK(weft_moe_dispatch(moe, &b.t, b.idx.data(), b.w.data(), 3, 2, nullptr, &h));
  weft_moe_received_t rc = WEFT_MOE_RECEIVED_INIT;
  ASSERT_WEFT_OK(weft_moe_handle_received(h, &rc));
  std::vector<float> grad_rows(rc.rows * kHidden), gw(6);
  int64_t gshape[2] = {static_cast<int64_t>(rc.rows), kHidden};
  weft_tensor_t gt{grad_rows.data(), WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, gshape, nullptr, 0};
  const weft_status_t s = weft_moe_combine_backward(moe, h, &b.t, &gt, gw.data(), nullptr);
  EXPECT_NE(s, WEFT_OK);
  EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "weighted weft_moe_combine")) << mpt::last_error();
  EXPECT_WEFT_OK(weft_moe_handle_destroy(h));
  EXPECT_WEFT_OK(weft_moe_destroy(moe));
}

// A handle may outlive its weft_moe_t: what it received stays readable.
TEST(MoeBadInput, HandleOutlivesMoe) {
  weft_moe_t moe = make_moe(4);
  ASSERT_NE(moe, nullptr);
  Batch b(4, 1, 4);
  weft_moe_handle_t h = nullptr;
  ASSERT_WEFT_OK(weft_moe_dispatch(moe, &b.t, b.idx.data(), b.w.data(), 4, 1, nullptr, &h));
  EXPECT_WEFT_OK(weft_moe_destroy(moe));
  weft_moe_received_t rc = WEFT_MOE_RECEIVED_INIT;
  EXPECT_WEFT_OK(weft_moe_handle_received(h, &rc));
  EXPECT_EQ(rc.tokens.dtype, WEFT_FLOAT32);
  EXPECT_EQ(rc.tokens.shape[1], static_cast<int64_t>(kHidden));
  EXPECT_WEFT_OK(weft_moe_handle_destroy(h));
}

// config.device = 1 without CUDA: refused on every rank, saying why.
TEST(MoeBadInput, DeviceNeedsCuda) {
#if WEFT_TEST_WITH_CUDA
  GTEST_SKIP() << "a CUDA build takes device = 1 (tests/gpu/mp_moe_device.cpp)";
#else
  weft_moe_config_t cfg = WEFT_MOE_CONFIG_INIT;
  cfg.experts = 4;
  cfg.hidden = 8;
  cfg.device = 1;
  weft_moe_t moe = nullptr;
  EXPECT_EQ(weft_moe_create(g_world.comm, &cfg, &moe), WEFT_ERR_UNSUPPORTED);
  EXPECT_EQ(moe, nullptr);
  EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "without CUDA")) << mpt::last_error();
#endif
}

// A rank that never calls dispatch: the others fail at the communicator's deadline (1.5 s here)
// with WEFT_ERR_TIMEOUT naming it, rather than hanging.
TEST(MoeBadInput, MissingRankMeetsTheDeadline) {
  if (g_world.size < 2) GTEST_SKIP() << "needs two ranks";
  weft_comm_config_t cc = WEFT_COMM_CONFIG_INIT;
  cc.timeout_ms = 1500;
  weft_comm_t c = nullptr;
  ASSERT_WEFT_OK(weft_comm_split(g_world.comm, 0, g_world.rank, &c, &cc));
  weft_moe_config_t cfg = WEFT_MOE_CONFIG_INIT;
  cfg.experts = 4;
  cfg.hidden = kHidden;
  weft_moe_t moe = nullptr;
  ASSERT_WEFT_OK(weft_moe_create(c, &cfg, &moe));
  if (is_bad()) {
    mpt::sleep_ms(2500);
  } else {
    Batch b(5, 2, 4);
    weft_moe_handle_t h = nullptr;
    const double t0 = mpt::now_s();
    const weft_status_t s = weft_moe_dispatch(moe, &b.t, b.idx.data(), b.w.data(), 5, 2, nullptr, &h);
    const double dt = mpt::now_s() - t0;
    const std::string msg = mpt::last_error();
    EXPECT_EQ(s, WEFT_ERR_TIMEOUT) << msg;
    EXPECT_EQ(h, nullptr);
    EXPECT_LT(dt, 6.0) << msg;
    EXPECT_TRUE(mpt::mentions_rank(msg, bad_rank())) << msg;
  }
  EXPECT_WEFT_OK(weft_moe_destroy(moe));
  weft_comm_destroy(c);
  EXPECT_WEFT_OK(weft_barrier(g_world.comm, nullptr, nullptr));
}
