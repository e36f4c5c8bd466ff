// weft_p2p_batch on host memory: two-way ring exchanges in one batch, all-to-all by hand with
// uneven (and zero) counts, sends and receives to the rank itself, every dtype, requests
// (wait and test), and matching in issue order with plain weft_send/weft_recv in both
// directions. 1 to 8 ranks (a single rank exchanges with itself only).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "inputs.h"
#include "mp_gtest.h"

using mpt::g_world;

namespace {

uint64_t value(int from, int to, uint64_t tag, size_t i) {
  return mpt::hash3(tag, static_cast<uint64_t>(from * 64 + to), i);
}

std::vector<uint64_t> pattern(int from, int to, uint64_t tag, size_t count) {
  std::vector<uint64_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = value(from, to, tag, i);
  return v;
}

weft_p2p_op_t op(weft_p2p_kind_t kind, void* buf, size_t count, weft_dtype_t dtype, int peer) {
  weft_p2p_op_t o;
  std::memset(&o, 0, sizeof o);
  o.kind = kind;
  o.buf = buf;
  o.count = count;
  o.dtype = dtype;
  o.peer = peer;
  return o;
}

// Ring: send to both neighbours and receive from both, in one blocking batch (with 2 ranks both
// neighbours are the same rank, with 1 the rank itself).
TEST(P2PBatch, RingBothDirections) {
  const int n = g_world.size, me = g_world.rank;
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{300000}}) {
    SCOPED_TRACE(count);
    std::vector<uint64_t> to_right = pattern(me, right, 1, count), to_left = pattern(me, left, 2, count);
    std::vector<uint64_t> from_left(count, 0), from_right(count, 0);
    // Receives first on odd ranks: the order inside a batch does not matter across directions.
    std::vector<weft_p2p_op_t> ops = {op(WEFT_P2P_SEND, to_right.data(), count, WEFT_UINT64, right),
                                      op(WEFT_P2P_SEND, to_left.data(), count, WEFT_UINT64, left),
                                      op(WEFT_P2P_RECV, from_left.data(), count, WEFT_UINT64, left),
                                      op(WEFT_P2P_RECV, from_right.data(), count, WEFT_UINT64, right)};
    if (me % 2) std::rotate(ops.begin(), ops.begin() + 2, ops.end());
    ASSERT_WEFT_OK(weft_p2p_batch(ops.data(), ops.size(), g_world.comm, nullptr, nullptr));
    EXPECT_EQ(from_left, pattern(left, me, 1, count));
    EXPECT_EQ(from_right, pattern(right, me, 2, count));
  }
}

// All-to-all by hand: count(src, dst) elements, zero for some pairs, the batch in a
// rank-dependent order, returned as a request and polled with weft_test.
TEST(P2PBatch, AllToAllUnevenCounts) {
  const int n = g_world.size, me = g_world.rank;
  auto count = [](int src, int dst) { return static_cast<size_t>((src + 2 * dst) % 4) * 97; };
  std::vector<std::vector<uint64_t>> out(static_cast<size_t>(n)), in(static_cast<size_t>(n));
  std::vector<weft_p2p_op_t> ops;
  for (int p = 0; p < n; ++p) {
    out[static_cast<size_t>(p)] = pattern(me, p, 3, count(me, p));
    in[static_cast<size_t>(p)].assign(count(p, me), 0);
    ops.push_back(op(WEFT_P2P_SEND, out[static_cast<size_t>(p)].data(), count(me, p), WEFT_UINT64, p));
    ops.push_back(op(WEFT_P2P_RECV, in[static_cast<size_t>(p)].data(), count(p, me), WEFT_UINT64, p));
  }
  std::rotate(ops.begin(), ops.begin() + static_cast<long>((3 * me) % ops.size()), ops.end());
  weft_request_t r = nullptr;
  ASSERT_WEFT_OK(weft_p2p_batch(ops.data(), ops.size(), g_world.comm, nullptr, &r));
  ASSERT_NE(r, nullptr);
  const double deadline = mpt::now_s() + static_cast<double>(mpt::default_timeout_ms()) / 1000.0;
  for (;;) {
    int done = -1;
    weft_status_t s = weft_test(r, &done);
    if (s == WEFT_OK) {
      EXPECT_EQ(done, 1);
      break;
    }
    ASSERT_EQ(s, WEFT_IN_PROGRESS) << mpt::last_error();
    ASSERT_EQ(done, 0);
    ASSERT_LT(mpt::now_s(), deadline) << "weft_test never reported completion";
  }
  EXPECT_WEFT_OK(weft_request_free(r));
  for (int p = 0; p < n; ++p) EXPECT_EQ(in[static_cast<size_t>(p)], pattern(p, me, 3, count(p, me))) << "from " << p;
}

// Several messages to the rank itself in one batch match in order; a plain weft_send to self is
// received by a later batch and a batch send to self by a later weft_recv.
TEST(P2PBatch, Self) {
  const int me = g_world.rank;
  std::vector<uint64_t> a = pattern(me, me, 4, 5), b = pattern(me, me, 5, 0), c = pattern(me, me, 6, 70000);
  std::vector<uint64_t> ra(5, 0), rb, rc(70000, 0);
  std::vector<weft_p2p_op_t> ops = {op(WEFT_P2P_RECV, ra.data(), 5, WEFT_UINT64, me),
                                    op(WEFT_P2P_SEND, a.data(), 5, WEFT_UINT64, me),
                                    op(WEFT_P2P_SEND, b.data(), 0, WEFT_UINT64, me),
                                    op(WEFT_P2P_RECV, rb.data(), 0, WEFT_UINT64, me),
                                    op(WEFT_P2P_SEND, c.data(), 70000, WEFT_UINT64, me),
                                    op(WEFT_P2P_RECV, rc.data(), 70000, WEFT_UINT64, me)};
  ASSERT_WEFT_OK(weft_p2p_batch(ops.data(), ops.size(), g_world.comm, nullptr, nullptr));
  EXPECT_EQ(ra, a);
  EXPECT_EQ(rc, c);

  std::vector<uint64_t> d = pattern(me, me, 7, 33), rd(33, 0);
  weft_request_t r = nullptr;
  ASSERT_WEFT_OK(weft_send(d.data(), d.size(), WEFT_UINT64, me, g_world.comm, nullptr, &r));
  weft_p2p_op_t recv = op(WEFT_P2P_RECV, rd.data(), 33, WEFT_UINT64, me);
  ASSERT_WEFT_OK(weft_p2p_batch(&recv, 1, g_world.comm, nullptr, nullptr));
  EXPECT_WEFT_OK(weft_wait(r));
  EXPECT_WEFT_OK(weft_request_free(r));
  EXPECT_EQ(rd, d);

  std::fill(rd.begin(), rd.end(), 0);
  weft_p2p_op_t send = op(WEFT_P2P_SEND, d.data(), 33, WEFT_UINT64, me);
  ASSERT_WEFT_OK(weft_p2p_batch(&send, 1, g_world.comm, nullptr, &r));
  ASSERT_WEFT_OK(weft_recv(rd.data(), rd.size(), WEFT_UINT64, me, g_world.comm, nullptr, nullptr));
  EXPECT_WEFT_OK(weft_wait(r));
  EXPECT_WEFT_OK(weft_request_free(r));
  EXPECT_EQ(rd, d);
}

// Every dtype travels bit for bit (NaN patterns and all: bytes, not values), shifted right.
TEST(P2PBatch, EveryDtype) {
  const int n = g_world.size, me = g_world.rank;
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  const size_t count = 13;
  for (int dt = 0; dt < WEFT_NUM_DTYPES; ++dt) {
    SCOPED_TRACE(dt);
    const weft_dtype_t dtype = static_cast<weft_dtype_t>(dt);
    size_t elem = 0;
    ASSERT_WEFT_OK(weft_dtype_size(dtype, &elem));
    std::vector<uint8_t> out(count * elem), in(count * elem, 0), expect(count * elem);
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = static_cast<uint8_t>(value(me, right, 8 + static_cast<uint64_t>(dt), i));
      expect[i] = static_cast<uint8_t>(value(left, me, 8 + static_cast<uint64_t>(dt), i));
    }
    weft_p2p_op_t ops[2] = {op(WEFT_P2P_RECV, in.data(), count, dtype, left),
                            op(WEFT_P2P_SEND, out.data(), count, dtype, right)};
    ASSERT_WEFT_OK(weft_p2p_batch(ops, 2, g_world.comm, nullptr, nullptr));
    EXPECT_EQ(in, expect);
  }
}

// A batch's sends are received by plain weft_recv and plain weft_send's messages by a batch, in
// issue order per pair: messages 1 and 2 go in a batch, 3 by weft_send; the receiver takes 1 with
// weft_recv and 2 and 3 in a batch.
TEST(P2PBatch, MatchesPlainSendRecv) {
  const int n = g_world.size, me = g_world.rank;
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  const size_t counts[3] = {11, 5000, 3};
  std::vector<uint64_t> m[3], got[3];
  for (int k = 0; k < 3; ++k) {
    m[k] = pattern(me, right, 20 + static_cast<uint64_t>(k), counts[k]);
    got[k].assign(counts[k], 0);
  }
  weft_p2p_op_t sends[2] = {op(WEFT_P2P_SEND, m[0].data(), counts[0], WEFT_UINT64, right),
                            op(WEFT_P2P_SEND, m[1].data(), counts[1], WEFT_UINT64, right)};
  weft_request_t rs = nullptr, r3 = nullptr;
  ASSERT_WEFT_OK(weft_p2p_batch(sends, 2, g_world.comm, nullptr, &rs));
  ASSERT_WEFT_OK(weft_send(m[2].data(), counts[2], WEFT_UINT64, right, g_world.comm, nullptr, &r3));
  ASSERT_WEFT_OK(weft_recv(got[0].data(), counts[0], WEFT_UINT64, left, g_world.comm, nullptr, nullptr));
  weft_p2p_op_t recvs[2] = {op(WEFT_P2P_RECV, got[1].data(), counts[1], WEFT_UINT64, left),
                            op(WEFT_P2P_RECV, got[2].data(), counts[2], WEFT_UINT64, left)};
  ASSERT_WEFT_OK(weft_p2p_batch(recvs, 2, g_world.comm, nullptr, nullptr));
  EXPECT_WEFT_OK(weft_wait(rs));
  EXPECT_WEFT_OK(weft_request_free(rs));
  EXPECT_WEFT_OK(weft_request_free(r3));
  for (int k = 0; k < 3; ++k) EXPECT_EQ(got[k], pattern(left, me, 20 + static_cast<uint64_t>(k), counts[k])) << k;
}

// An empty batch completes at once, with or without a request, ops NULL or not.
TEST(P2PBatch, Empty) {
  weft_p2p_op_t unused = op(WEFT_P2P_SEND, nullptr, 0, WEFT_FLOAT32, 0);
  ASSERT_WEFT_OK(weft_p2p_batch(nullptr, 0, g_world.comm, nullptr, nullptr));
  ASSERT_WEFT_OK(weft_p2p_batch(&unused, 0, g_world.comm, nullptr, nullptr));
  weft_request_t r = nullptr;
  ASSERT_WEFT_OK(weft_p2p_batch(nullptr, 0, g_world.comm, nullptr, &r));
  ASSERT_NE(r, nullptr);
  int done = 0;
  EXPECT_WEFT_OK(weft_test(r, &done));
  EXPECT_EQ(done, 1);
  EXPECT_WEFT_OK(weft_wait(r));
  EXPECT_WEFT_OK(weft_request_free(r));
}

// Batches interleaved with collectives on the same communicator keep both working.
TEST(P2PBatch, BetweenCollectives) {
  const int n = g_world.size, me = g_world.rank;
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  for (int round = 0; round < 3; ++round) {
    int64_t x = me + round, sum = 0;
    ASSERT_WEFT_OK(weft_allreduce(&x, &sum, 1, WEFT_INT64, WEFT_SUM, g_world.comm, nullptr, nullptr));
    EXPECT_EQ(sum, static_cast<int64_t>(n) * (n - 1) / 2 + static_cast<int64_t>(n) * round);
    int64_t out = me * 10 + round, in = -1;
    weft_p2p_op_t ops[2] = {op(WEFT_P2P_SEND, &out, 1, WEFT_INT64, right), op(WEFT_P2P_RECV, &in, 1, WEFT_INT64, left)};
    ASSERT_WEFT_OK(weft_p2p_batch(ops, 2, g_world.comm, nullptr, nullptr));
    EXPECT_EQ(in, left * 10 + round);
  }
}

}  // namespace
