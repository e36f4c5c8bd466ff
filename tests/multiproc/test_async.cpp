// Asynchronous operations: many requests outstanding at once on one communicator, waited in a
// rank-dependent mixed order or polled with weft_test; completion in issue order; point-to-point
// matching in issue order; weft_request_free on a pending request.
#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "inputs.h"
#include "mp_gtest.h"
#include "reference.h"

using mpt::g_world;

namespace {

// One outstanding operation: its request, and a check to run once it completed.
struct Pending {
  std::string name;
  weft_request_t req = nullptr;
  std::function<void()> verify;
};

void wait_or_poll(weft_request_t req, bool poll, const std::string& name) {
  if (!poll) {
    weft_status_t s = weft_wait(req);
    ASSERT_EQ(s, WEFT_OK) << name << ": weft_wait " << mpt::status_name(s) << ": " << mpt::last_error();
    return;
  }
  const double deadline = mpt::now_s() + mpt::default_timeout_ms() / 1000.0;
  for (;;) {
    int done = -1;
    weft_status_t s = weft_test(req, &done);
    if (s == WEFT_OK) {
      ASSERT_EQ(done, 1) << name;
      return;
    }
    ASSERT_EQ(s, WEFT_IN_PROGRESS) << name << ": weft_test " << mpt::status_name(s) << ": " << mpt::last_error();
    ASSERT_EQ(done, 0) << name;
    ASSERT_LT(mpt::now_s(), deadline) << name << " never completed";
    sched_yield();
  }
}

}  // namespace

// Every kind of operation outstanding at once, then completed in a rank-dependent order
// (rotated by rank, every third one polled with weft_test).
TEST(Async, EveryCollectiveOutstandingAtOnce) {
  const int n = g_world.size, me = g_world.rank, last = n - 1;
  const size_t N = static_cast<size_t>(n);
  weft_comm_t comm = g_world.comm;
  std::vector<Pending> ops;
  auto keep = [](auto v) { return std::make_shared<decltype(v)>(std::move(v)); };

  // allreduce f32 sum, 1000 elements of small integers (exact)
  {
    auto buf = keep(std::vector<float>(1000));
    for (size_t i = 0; i < 1000; ++i) (*buf)[i] = static_cast<float>((me + 1) * static_cast<int>(i % 17));
    Pending p{"allreduce f32 sum", nullptr, nullptr};
    EXPECT_WEFT_OK(weft_allreduce(buf->data(), buf->data(), 1000, WEFT_FLOAT32, WEFT_SUM, comm, nullptr, &p.req));
    p.verify = [buf, n] {
      for (size_t i = 0; i < 1000; ++i)
        ASSERT_EQ((*buf)[i], static_cast<float>(n * (n + 1) / 2 * static_cast<int>(i % 17))) << "index " << i;
    };
    ops.push_back(p);
  }
  // broadcast u8 from the last rank
  {
    auto buf = keep(std::vector<uint8_t>(777, 0));
    if (me == last)
      for (size_t i = 0; i < 777; ++i) (*buf)[i] = static_cast<uint8_t>(i * 7 + 3);
    Pending p{"broadcast u8 root last", nullptr, nullptr};
    EXPECT_WEFT_OK(weft_broadcast(buf->data(), 777, WEFT_UINT8, last, comm, nullptr, &p.req));
    p.verify = [buf] {
      for (size_t i = 0; i < 777; ++i) ASSERT_EQ((*buf)[i], static_cast<uint8_t>(i * 7 + 3)) << "index " << i;
    };
    ops.push_back(p);
  }
  // allgather i32, 5 per rank
  {
    auto send = keep(std::vector<int32_t>(5));
    auto recv = keep(std::vector<int32_t>(5 * N, -1));
    for (int i = 0; i < 5; ++i) (*send)[static_cast<size_t>(i)] = me * 100 + i;
    Pending p{"allgather i32", nullptr, nullptr};
    EXPECT_WEFT_OK(weft_allgather(send->data(), recv->data(), 5, WEFT_INT32, comm, nullptr, &p.req));
    p.verify = [send, recv, n] {
      for (int r = 0; r < n; ++r)
        for (int i = 0; i < 5; ++i) ASSERT_EQ((*recv)[static_cast<size_t>(r * 5 + i)], r * 100 + i);
    };
    ops.push_back(p);
  }
  // reduce_scatter f64 sum, 3 per rank
  {
    auto send = keep(std::vector<double>(3 * N));
    auto recv = keep(std::vector<double>(3, -1));
    for (size_t i = 0; i < 3 * N; ++i) (*send)[i] = static_cast<double>(i) + me;
    Pending p{"reduce_scatter f64 sum", nullptr, nullptr};
    EXPECT_WEFT_OK(weft_reduce_scatter(send->data(), recv->data(), 3, WEFT_FLOAT64, WEFT_SUM, comm, nullptr, &p.req));
    p.verify = [send, recv, n, me] {
      for (size_t i = 0; i < 3; ++i)
        ASSERT_EQ((*recv)[i], static_cast<double>(n) * static_cast<double>(static_cast<size_t>(me) * 3 + i) +
                                  n * (n - 1) / 2.0);
    };
    ops.push_back(p);
  }
  // alltoall i64, 4 per pair
  {
    auto send = keep(std::vector<int64_t>(4 * N));
    auto recv = keep(std::vector<int64_t>(4 * N, -1));
    for (int d = 0; d < n; ++d)
      for (int i = 0; i < 4; ++i) (*send)[static_cast<size_t>(d * 4 + i)] = me * 10000 + d * 10 + i;
    Pending p{"alltoall i64", nullptr, nullptr};
    EXPECT_WEFT_OK(weft_alltoall(send->data(), recv->data(), 4, WEFT_INT64, comm, nullptr, &p.req));
    p.verify = [send, recv, n, me] {
      for (int s = 0; s < n; ++s)
        for (int i = 0; i < 4; ++i) ASSERT_EQ((*recv)[static_cast<size_t>(s * 4 + i)], s * 10000 + me * 10 + i);
    };
    ops.push_back(p);
  }
  // gather u32 to rank 0
  {
    auto send = keep(std::vector<uint32_t>(2, static_cast<uint32_t>(me + 1)));
    auto recv = keep(std::vector<uint32_t>(2 * N, 0));
    Pending p{"gather u32 root 0", nullptr, nullptr};
    EXPECT_WEFT_OK(weft_gather(send->data(), me == 0 ? recv->data() : nullptr, 2, WEFT_UINT32, 0, comm, nullptr, &p.req));
    p.verify = [send, recv, n, me] {
      if (me != 0) return;
      for (size_t i = 0; i < 2 * static_cast<size_t>(n); ++i) ASSERT_EQ((*recv)[i], static_cast<uint32_t>(i / 2 + 1));
    };
    ops.push_back(p);
  }
  // scatter i8 from the last rank
  {
    auto send = keep(std::vector<int8_t>(3 * N, 0));
    auto recv = keep(std::vector<int8_t>(3, 0));
    if (me == last)
      for (size_t i = 0; i < 3 * N; ++i) (*send)[i] = static_cast<int8_t>(static_cast<int>(i) - 50);
    Pending p{"scatter i8 root last", nullptr, nullptr};
    EXPECT_WEFT_OK(weft_scatter(send->data(), recv->data(), 3, WEFT_INT8, last, comm, nullptr, &p.req));
    p.verify = [send, recv, me] {
      for (int i = 0; i < 3; ++i) ASSERT_EQ((*recv)[static_cast<size_t>(i)], static_cast<int8_t>(me * 3 + i - 50));
    };
    ops.push_back(p);
  }
  // barrier
  ops.push_back(Pending{"barrier", nullptr, [] {}});
  EXPECT_WEFT_OK(weft_barrier(comm, nullptr, &ops.back().req));
  // reduce bf16 max to rank 0 (values exact in bf16)
  {
    auto send = keep(std::vector<uint16_t>(9));
    auto recv = keep(std::vector<uint16_t>(9, 0));
    for (size_t i = 0; i < 9; ++i)
      (*send)[i] = static_cast<uint16_t>(mpt::encode_float(WEFT_BFLOAT16, static_cast<double>(me) - static_cast<double>(i), false));
    Pending p{"reduce bf16 max root 0", nullptr, nullptr};
    EXPECT_WEFT_OK(weft_reduce(send->data(), recv->data(), 9, WEFT_BFLOAT16, WEFT_MAX, 0, comm, nullptr, &p.req));
    p.verify = [send, recv, n, me] {
      if (me != 0) return;
      for (size_t i = 0; i < 9; ++i)
        ASSERT_EQ(mpt::decode_float(WEFT_BFLOAT16, (*recv)[i]), static_cast<double>(n - 1) - static_cast<double>(i));
    };
    ops.push_back(p);
  }
  // ring send/recv
  if (n > 1) {
    auto send = keep(std::vector<int32_t>(64));
    auto recv = keep(std::vector<int32_t>(64, -1));
    for (int i = 0; i < 64; ++i) (*send)[static_cast<size_t>(i)] = me * 1000 + i;
    const int from = (me + n - 1) % n;
    Pending pr{"recv from left", nullptr, nullptr};
    EXPECT_WEFT_OK(weft_recv(recv->data(), 64, WEFT_INT32, from, comm, nullptr, &pr.req));
    pr.verify = [recv, from] {
      for (int i = 0; i < 64; ++i) ASSERT_EQ((*recv)[static_cast<size_t>(i)], from * 1000 + i);
    };
    ops.push_back(pr);
    Pending ps{"send to right", nullptr, [send] {}};
    EXPECT_WEFT_OK(weft_send(send->data(), 64, WEFT_INT32, (me + 1) % n, comm, nullptr, &ps.req));
    ops.push_back(ps);
  }
  // Complete in a rank-dependent order.
  const size_t k = ops.size();
  for (size_t j = 0; j < k; ++j) {
    Pending& p = ops[(j + static_cast<size_t>(me) * 3) % k];
    SCOPED_TRACE(p.name);
    ASSERT_NE(p.req, nullptr);
    wait_or_poll(p.req, j % 3 == 1, p.name);
    p.verify();
    EXPECT_WEFT_OK(weft_request_free(p.req));
  }
}

// Operations on one communicator complete in issue order: once request j reports done, every
// earlier request reports done too.
TEST(Async, CompletionInIssueOrder) {
  const int n = g_world.size;
  constexpr int K = 12;
  std::vector<std::vector<int64_t>> bufs(K);
  std::vector<weft_request_t> reqs(K, nullptr);
  for (int k = 0; k < K; ++k) {
    bufs[static_cast<size_t>(k)].assign(static_cast<size_t>(1 + k * 500), k);
    ASSERT_WEFT_OK(weft_allreduce(bufs[static_cast<size_t>(k)].data(), bufs[static_cast<size_t>(k)].data(),
                                  bufs[static_cast<size_t>(k)].size(), WEFT_INT64, WEFT_SUM, g_world.comm, nullptr,
                                  &reqs[static_cast<size_t>(k)]));
  }
  std::vector<int> done(K, 0);
  const double deadline = mpt::now_s() + mpt::default_timeout_ms() / 1000.0;
  int remaining = K;
  while (remaining > 0) {
    for (int k = K - 1; k >= 0; --k) {  // poll newest first
      if (done[static_cast<size_t>(k)]) continue;
      int d = -1;
      weft_status_t s = weft_test(reqs[static_cast<size_t>(k)], &d);
      ASSERT_TRUE(s == WEFT_OK || s == WEFT_IN_PROGRESS) << mpt::status_name(s) << ": " << mpt::last_error();
      if (s == WEFT_OK) {
        done[static_cast<size_t>(k)] = 1;
        --remaining;
        for (int j = 0; j < k; ++j) {
          if (done[static_cast<size_t>(j)]) continue;
          int dj = -1;
          weft_status_t sj = weft_test(reqs[static_cast<size_t>(j)], nullptr);  // done may be NULL
          (void)dj;
          EXPECT_EQ(sj, WEFT_OK) << "request " << k << " completed before earlier request " << j;
          if (sj == WEFT_OK) {
            done[static_cast<size_t>(j)] = 1;
            --remaining;
          }
        }
      }
    }
    ASSERT_LT(mpt::now_s(), deadline) << "requests never completed";
    sched_yield();
  }
  for (int k = 0; k < K; ++k) {
    for (int64_t v : bufs[static_cast<size_t>(k)]) ASSERT_EQ(v, static_cast<int64_t>(k) * n) << "request " << k;
    EXPECT_WEFT_OK(weft_request_free(reqs[static_cast<size_t>(k)]));
  }
}

// Messages between a pair match in issue order; async sends, then blocking and async receives.
TEST(Async, PointToPointMatchesInIssueOrder) {
  const int n = g_world.size, me = g_world.rank;
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  constexpr int kMsgs = 5;
  auto count_of = [](int m) { return static_cast<size_t>(33 + 1000 * m); };  // 33 .. 4033
  // Every rank sends kMsgs messages to every other rank, then receives them.
  std::vector<std::vector<uint64_t>> out(static_cast<size_t>(n * kMsgs)), in(static_cast<size_t>(n * kMsgs));
  std::vector<weft_request_t> reqs;
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    for (int m = 0; m < kMsgs; ++m) {
      auto& b = out[static_cast<size_t>(p * kMsgs + m)];
      b.resize(count_of(m));
      for (size_t i = 0; i < b.size(); ++i) b[i] = mpt::hash3(static_cast<uint64_t>(me), static_cast<uint64_t>(p * kMsgs + m), i);
      weft_request_t r = nullptr;
      ASSERT_WEFT_OK(weft_send(b.data(), b.size(), WEFT_UINT64, p, g_world.comm, nullptr, &r));
      reqs.push_back(r);
    }
  }
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    for (int m = 0; m < kMsgs; ++m) {
      auto& b = in[static_cast<size_t>(p * kMsgs + m)];
      b.assign(count_of(m), 0);
      if (m % 2 == 0) {
        ASSERT_WEFT_OK(weft_recv(b.data(), b.size(), WEFT_UINT64, p, g_world.comm, nullptr, nullptr));
      } else {
        weft_request_t r = nullptr;
        ASSERT_WEFT_OK(weft_recv(b.data(), b.size(), WEFT_UINT64, p, g_world.comm, nullptr, &r));
        reqs.push_back(r);
      }
    }
  }
  std::reverse(reqs.begin(), reqs.end());
  for (weft_request_t r : reqs) {
    EXPECT_WEFT_OK(weft_wait(r));
    EXPECT_WEFT_OK(weft_request_free(r));
  }
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    for (int m = 0; m < kMsgs; ++m)
      for (size_t i = 0; i < count_of(m); ++i)
        ASSERT_EQ(in[static_cast<size_t>(p * kMsgs + m)][i],
                  mpt::hash3(static_cast<uint64_t>(p), static_cast<uint64_t>(me * kMsgs + m), i))
            << "message " << m << " from rank " << p << " index " << i;
  }
}

// weft_comm_destroy waits for this rank's outstanding operations; their requests stay valid
// until freed.
TEST(Async, DestroyWaitsForOutstandingOperations) {
  const int n = g_world.size;
  weft_comm_t d = nullptr;
  ASSERT_WEFT_OK(weft_comm_dup(g_world.comm, &d));
  std::vector<double> a(200000, 1.0), b(3000, 2.0);
  weft_request_t ra = nullptr, rb = nullptr;
  ASSERT_WEFT_OK(weft_allreduce(a.data(), a.data(), a.size(), WEFT_FLOAT64, WEFT_SUM, d, nullptr, &ra));
  ASSERT_WEFT_OK(weft_allreduce(b.data(), b.data(), b.size(), WEFT_FLOAT64, WEFT_MAX, d, nullptr, &rb));
  ASSERT_WEFT_OK(weft_comm_destroy(d));
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], static_cast<double>(n)) << "index " << i;
  for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b[i], 2.0) << "index " << i;
  int done = 0;
  EXPECT_WEFT_OK(weft_test(ra, &done));
  EXPECT_EQ(done, 1);
  EXPECT_WEFT_OK(weft_wait(rb));
  EXPECT_WEFT_OK(weft_request_free(ra));
  EXPECT_WEFT_OK(weft_request_free(rb));
}

// weft_request_free on a pending request waits for it; the result is then complete.
TEST(Async, FreeWaitsForPendingRequest) {
  const int n = g_world.size;
  std::vector<double> buf(100000, 1.0);
  weft_request_t r = nullptr;
  ASSERT_WEFT_OK(weft_allreduce(buf.data(), buf.data(), buf.size(), WEFT_FLOAT64, WEFT_SUM, g_world.comm, nullptr, &r));
  ASSERT_WEFT_OK(weft_request_free(r));
  for (size_t i = 0; i < buf.size(); ++i) ASSERT_EQ(buf[i], static_cast<double>(n)) << "index " << i;
}

// Many small requests outstanding, completed last-to-first.
TEST(Async, SixtyFourOutstandingWaitedBackwards) {
  const int n = g_world.size, me = g_world.rank;
  constexpr int K = 64;
  std::vector<int32_t> vals(K);
  std::vector<weft_request_t> reqs(K, nullptr);
  for (int k = 0; k < K; ++k) {
    vals[static_cast<size_t>(k)] = me * K + k;
    ASSERT_WEFT_OK(weft_allreduce(&vals[static_cast<size_t>(k)], &vals[static_cast<size_t>(k)], 1, WEFT_INT32, WEFT_MAX,
                                  g_world.comm, nullptr, &reqs[static_cast<size_t>(k)]));
  }
  for (int k = K - 1; k >= 0; --k) {
    EXPECT_WEFT_OK(weft_wait(reqs[static_cast<size_t>(k)]));
    EXPECT_WEFT_OK(weft_request_free(reqs[static_cast<size_t>(k)]));
  }
  for (int k = 0; k < K; ++k) EXPECT_EQ(vals[static_cast<size_t>(k)], (n - 1) * K + k);
}

// A blocking call returns after every earlier operation on the communicator completed.
TEST(Async, BlockingCallAfterAsyncOnesMeansTheyAreDone) {
  const int n = g_world.size;
  constexpr int K = 6;
  std::vector<std::vector<int32_t>> bufs(K);
  std::vector<weft_request_t> reqs(K, nullptr);
  for (int k = 0; k < K; ++k) {
    bufs[static_cast<size_t>(k)].assign(static_cast<size_t>(1 + 20000 * k), 1);
    ASSERT_WEFT_OK(weft_allreduce(bufs[static_cast<size_t>(k)].data(), bufs[static_cast<size_t>(k)].data(),
                                  bufs[static_cast<size_t>(k)].size(), WEFT_INT32, WEFT_SUM, g_world.comm, nullptr,
                                  &reqs[static_cast<size_t>(k)]));
  }
  int64_t one = 1, sum = 0;
  ASSERT_WEFT_OK(weft_allreduce(&one, &sum, 1, WEFT_INT64, WEFT_SUM, g_world.comm, nullptr, nullptr));
  EXPECT_EQ(sum, n);
  for (int k = 0; k < K; ++k) {
    int done = -1;
    EXPECT_EQ(weft_test(reqs[static_cast<size_t>(k)], &done), WEFT_OK)
        << "request " << k << " issued before a blocking call that returned is not complete";
    EXPECT_EQ(done, 1);
    for (int32_t v : bufs[static_cast<size_t>(k)]) ASSERT_EQ(v, n) << "request " << k;
    EXPECT_WEFT_OK(weft_request_free(reqs[static_cast<size_t>(k)]));
  }
}
