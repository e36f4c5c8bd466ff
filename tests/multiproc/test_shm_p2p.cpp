// Same-host point-to-point between processes (the shared-memory rings of
// transports/shm/p2p_rings.h, which carry weft_send/weft_recv and weft_p2p_batch between ranks
// of one host): every rank sends every other rank many messages at once, of sizes from 0 bytes
// to many times a ring (8 x 256 KiB), in a rank-dependent posting order, then receives with the
// wrong count and checks the refusal. The ctest entries run it at 2 to 8 ranks (odd too) with
// WEFT_DEBUG=info and require the log line saying the rings are in use (so a silent fallback
// to UCX cannot pass). Expected payloads come from a hash of (sender, receiver, index).
//
// WEFT_TEST_INJECT=1 corrupts every checked result once (a payload element, a status) and the
// run passes only when every corruption was caught (mp_shm_p2p_inject_n3).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "../unit/inject_tally.h"
#include "inputs.h"
#include "mp_gtest.h"

using mpt::g_world;

namespace {

::testing::Environment* const kInjectionReport = inject::register_report();

std::vector<uint64_t> pattern(int from, int to, int index, size_t count) {
  std::vector<uint64_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = mpt::hash3(static_cast<uint64_t>(index), static_cast<uint64_t>(from * 64 + to), i);
  return v;
}

void expect_payload(std::vector<uint64_t> got, const std::vector<uint64_t>& want, const char* what) {
  if (inject::enabled()) {
    if (got.empty()) {
      got.push_back(1);
    } else {
      got[got.size() / 2] ^= 1ull << 62;
    }
    ++inject::tally().injected;
    if (got != want) ++inject::tally().caught;
    return;
  }
  EXPECT_TRUE(got == want) << what << ": " << got.size() << " elements differ from the expected pattern";
}

void expect_status(weft_status_t got, weft_status_t want, const char* what) {
  if (inject::enabled()) {
    got = got == WEFT_OK ? WEFT_ERR_INTERNAL : WEFT_OK;
    ++inject::tally().injected;
    if (got != want) ++inject::tally().caught;
    return;
  }
  EXPECT_EQ(got, want) << what << ": " << mpt::status_name(got) << " (" << mpt::last_error() << ")";
}

// Element counts (uint64) per message index: 0 bytes, small, one chunk, just over one chunk,
// over the whole ring (8 x 256 KiB), and 3 MiB.
constexpr size_t kCounts[] = {0, 1, 32768, 32769, 300000, 393216};
constexpr int kMessages = 6;

TEST(ShmP2P, ManyInFlightToEveryPeerInMixedOrder) {
  const int n = g_world.size, me = g_world.rank;
  std::vector<std::vector<uint64_t>> out, in;
  std::vector<weft_request_t> requests;
  std::vector<std::pair<int, int>> recv_of;  // (peer, index) per receive buffer
  // Receives first on even ranks, sends first on odd ones; peers in a rank-dependent rotation.
  for (int pass = 0; pass < 2; ++pass) {
    const bool sending = (pass == 0) == (me % 2 == 1);
    for (int k = 1; k < n; ++k) {
      const int peer = (me + (me % 2 ? k : n - k)) % n;
      for (int i = 0; i < kMessages; ++i) {
        weft_request_t r = nullptr;
        const size_t count = kCounts[(i + me + peer) % kMessages];
        if (sending) {
          out.push_back(pattern(me, peer, i, count));
          ASSERT_WEFT_OK(weft_send(out.back().data(), count, WEFT_UINT64, peer, g_world.comm, nullptr, &r));
        } else {
          in.emplace_back(kCounts[(i + me + peer) % kMessages], 0);
          recv_of.emplace_back(peer, i);
          ASSERT_WEFT_OK(weft_recv(in.back().data(), in.back().size(), WEFT_UINT64, peer, g_world.comm, nullptr, &r));
        }
        requests.push_back(r);
      }
    }
  }
  for (weft_request_t r : requests) expect_status(weft_wait(r), WEFT_OK, "wait for a send or receive");
  for (size_t b = 0; b < in.size(); ++b) {
    const auto [peer, i] = recv_of[b];
    expect_payload(in[b], pattern(peer, me, i, in[b].size()), "message from a local peer");
  }
}

// Last: a count mismatch breaks the communicator it happens on, so it runs on a duplicate.
TEST(ShmP2P, ReceiveSmallerOrLargerThanTheMessageIsRefused) {
  const int n = g_world.size, me = g_world.rank;
  if (n < 2) GTEST_SKIP() << "needs a peer";
  for (size_t extra : {size_t{0}, size_t{2}}) {
    weft_comm_t dup = nullptr;
    ASSERT_WEFT_OK(weft_comm_dup(g_world.comm, &dup));
    // Rank 0 sends 1000 elements to rank 1, which expects 998 (truncation) or 1002.
    std::vector<uint64_t> buf(1002, 7);
    weft_status_t s = WEFT_OK;
    if (me == 0) s = weft_send(buf.data(), 1000, WEFT_UINT64, 1, dup, nullptr, nullptr);
    if (me == 1) s = weft_recv(buf.data(), extra ? 1002 : 998, WEFT_UINT64, 0, dup, nullptr, nullptr);
    expect_status(s, me == 1 ? WEFT_ERR_MISMATCH : WEFT_OK, extra ? "receive larger than its message" : "receive smaller than its message");
    weft_comm_destroy(dup);
  }
}

}  // namespace
