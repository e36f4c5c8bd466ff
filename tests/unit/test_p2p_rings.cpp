// The same-host point-to-point engine (transports/shm/p2p_rings.h) on its own: N engines in
// one process stand for N ranks of one host (each has its real shared-memory inbox, mapped by
// the others), driven by one thread, so every interleaving below is exact and repeatable.
// Covered: matching by (peer, tag) in posting order, messages that arrive before their receive
// (one chunk: copied aside; larger: waiting in the ring until a receive wants it or a later
// message's receive needs it moved aside), receives posted in another order than the sends, truncation, a receive larger
// than its message, zero-byte messages, cancel of receives and of half-sent sends, messages
// many times the ring's size, many in flight, 2 to 8 ranks (odd counts too), and that no name
// is left in /dev/shm. Payloads are a pattern computed from (sender, receiver, tag, index), so
// the expected bytes come from the pattern, never from the engine.
//
// WEFT_TEST_INJECT=1 corrupts the observed result of every check once (a payload byte, an op's
// state or size) and the run passes only when every corruption was caught
// (unit.p2p_rings_inject).
#include <dirent.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "inject_tally.h"
#include "transports/shm/p2p_rings.h"

using weft::shm::P2pRings;
using weft::shm::RingShape;
using weft::transport::Op;
using weft::transport::Tag;

namespace {

::testing::Environment* const kInjectionReport = inject::register_report();

// A small ring (4 chunks of 4 KiB) so that wrap-around, a full ring and messages many times the
// ring's size all happen with small buffers.
constexpr RingShape kSmall{4, 4096};

std::vector<char> pattern(int from, int to, Tag tag, int index, size_t bytes) {
  std::vector<char> v(bytes);
  uint32_t x = static_cast<uint32_t>(from * 7919 + to * 104729 + static_cast<int>(tag) * 31 + index * 613 + 1);
  for (auto& c : v) {
    x = x * 1664525u + 1013904223u;  // a plain LCG: independent of anything the engine does
    c = static_cast<char>(x >> 24);
  }
  return v;
}

struct Outcome {
  Op::State state;
  size_t received;
  std::string error_has;  // a word the error must contain ("" when done)
};

std::string state_name(Op::State s) {
  switch (s) {
    case Op::State::idle: return "idle";
    case Op::State::pending: return "pending";
    case Op::State::done: return "done";
    case Op::State::failed: return "failed";
  }
  return "?";
}

void expect_outcome(const Op& op, const Outcome& want, const std::string& what) {
  Outcome got{op.state.load(), op.received, ""};
  const bool words_ok = want.error_has.empty() || op.error.find(want.error_has) != std::string::npos;
  if (inject::enabled()) {
    got.state = got.state == Op::State::done ? Op::State::failed : Op::State::done;  // one corruption per check
    ++inject::tally().injected;
    if (!(got.state == want.state && got.received == want.received && words_ok)) ++inject::tally().caught;
    return;
  }
  EXPECT_TRUE(got.state == want.state && (want.state != Op::State::done || !op.is_recv || got.received == want.received) &&
              words_ok)
      << what << ": state " << state_name(got.state) << " (want " << state_name(want.state) << "), received "
      << got.received << " (want " << want.received << "), error '" << op.error << "' (want it to say '"
      << want.error_has << "')";
}

void expect_bytes(std::vector<char> got, const std::vector<char>& want, const std::string& what) {
  if (inject::enabled()) {
    if (got.empty()) {
      got.push_back(1);
    } else {
      got[got.size() / 2] = static_cast<char>(got[got.size() / 2] ^ 0x5a);
    }
    ++inject::tally().injected;
    if (got != want) ++inject::tally().caught;
    return;
  }
  EXPECT_TRUE(got == want) << what << ": " << got.size() << " bytes differ from the " << want.size() << " expected";
}

// N engines standing for the N ranks of one host.
class Host {
 public:
  explicit Host(int n, RingShape shape = kSmall) {
    static int serial = 0;
    std::vector<int> local;
    for (int r = 0; r < n; ++r) local.push_back(r);
    std::vector<std::string> names;
    for (int r = 0; r < n; ++r) {
      names.push_back("/weft-test-p2p-" + std::to_string(getpid()) + "-" + std::to_string(serial++));
      ranks_.push_back(P2pRings::create(names.back(), r, local, n, shape));
    }
    for (auto& e : ranks_) e->attach(names);
    for (auto& e : ranks_) e->unlink_inbox();
  }
  P2pRings& operator[](int r) { return *ranks_[static_cast<size_t>(r)]; }
  int size() const { return static_cast<int>(ranks_.size()); }

  // Drives every engine until all ops finished (or 20 s, far above the milliseconds needed).
  bool drive(const std::vector<Op*>& ops) {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
      bool all = true;
      for (Op* op : ops) all = all && op->finished();
      if (all) return true;
      if (std::chrono::steady_clock::now() > until) return false;
      for (auto& e : ranks_) e->progress();
    }
  }
  void spin(int rounds) {
    for (int i = 0; i < rounds; ++i)
      for (auto& e : ranks_) e->progress();
  }

 private:
  std::vector<std::unique_ptr<P2pRings>> ranks_;
};

const Outcome kDone{Op::State::done, 0, ""};
Outcome done(size_t received) { return {Op::State::done, received, ""}; }

TEST(P2pRings, OrderPerTagAndOutOfOrderTagsWithManyInFlight) {
  for (int n : {2, 3, 5, 8}) {
    Host host(n);
    // Every rank sends every other rank 3 messages on each of 3 tags (sizes from 0 to 5x the
    // ring), all posted at once; receivers post tag 2 first, then 0, then 1.
    const size_t sizes[] = {0, 100, 4096, 4097, 5 * 4 * 4096 + 13};
    struct Msg { int from, to; Tag tag; int index; std::vector<char> want, got; Op op; };
    std::vector<std::unique_ptr<Msg>> sends, recvs;
    for (int from = 0; from < n; ++from)
      for (int to = 0; to < n; ++to) {
        if (from == to) continue;
        for (Tag tag = 0; tag < 3; ++tag)
          for (int i = 0; i < 3; ++i) {
            auto m = std::make_unique<Msg>();
            m->from = from, m->to = to, m->tag = tag, m->index = i;
            m->want = pattern(from, to, tag, i, sizes[(from + to + tag + i) % 5]);
            host[from].send(m->op, to, tag, m->want.data(), m->want.size());
            sends.push_back(std::move(m));
          }
      }
    host.spin(3);  // some messages arrive before their receives (unexpected), some after
    for (int to = 0; to < n; ++to)
      for (Tag tag : {Tag{2}, Tag{0}, Tag{1}})
        for (int from = 0; from < n; ++from) {
          if (from == to) continue;
          for (int i = 0; i < 3; ++i) {
            auto m = std::make_unique<Msg>();
            m->from = from, m->to = to, m->tag = tag, m->index = i;
            m->want = pattern(from, to, tag, i, sizes[(from + to + tag + i) % 5]);
            m->got.assign(m->want.size() + 8, 0);  // larger than the message: received says how much came
            host[to].recv(m->op, from, tag, m->got.data(), m->got.size());
            recvs.push_back(std::move(m));
          }
        }
    std::vector<Op*> ops;
    for (auto& m : sends) ops.push_back(&m->op);
    for (auto& m : recvs) ops.push_back(&m->op);
    ASSERT_TRUE(host.drive(ops)) << n << " ranks: not all operations finished";
    for (auto& m : sends) expect_outcome(m->op, kDone, "send");
    for (auto& m : recvs) {
      std::string what = std::to_string(n) + " ranks, " + std::to_string(m->from) + "->" + std::to_string(m->to) +
                         " tag " + std::to_string(m->tag) + " #" + std::to_string(m->index);
      expect_outcome(m->op, done(m->want.size()), what);
      m->got.resize(m->op.received);
      expect_bytes(m->got, m->want, what);
    }
  }
}

const Outcome kPending{Op::State::pending, 0, ""};

TEST(P2pRings, SmallMessagesAreCopiedAsideLargeOnesWaitForTheirReceives) {
  Host host(3);
  auto a = pattern(0, 1, 7, 0, 9 * 4096 + 1), c = pattern(2, 1, 8, 0, 0), d = pattern(2, 1, 9, 0, 3);
  Op sa, sc, sd;
  host[0].send(sa, 1, 7, a.data(), a.size());
  host[2].send(sc, 1, 8, c.data(), c.size());
  host[2].send(sd, 1, 9, d.data(), d.size());
  ASSERT_TRUE(host.drive({&sc, &sd}));  // one-chunk sends finish with no receive posted
  host.spin(20);
  expect_outcome(sa, kPending, "a send of 9 chunks before its receive is posted (rendezvous)");
  std::vector<char> ra(a.size()), rc(4, 'x'), rd(16);
  Op oa, oc, od;
  host[1].recv(od, 2, 9, rd.data(), rd.size());
  host[1].recv(oc, 2, 8, rc.data(), rc.size());
  host[1].recv(oa, 0, 7, ra.data(), ra.size());
  ASSERT_TRUE(host.drive({&sa, &oa, &oc, &od}));
  expect_outcome(oa, done(a.size()), "large message received once posted");
  expect_outcome(oc, done(0), "zero-byte unexpected message");
  expect_outcome(od, done(d.size()), "small unexpected message, received in another order");
  expect_bytes(ra, a, "large message received once posted");
  rd.resize(od.received);
  expect_bytes(rd, d, "small unexpected message");
  expect_bytes(rc, std::vector<char>(4, 'x'), "a zero-byte receive leaves its buffer alone");
}

// Small sends complete without their receives only up to a bound (32 copied aside, plus what
// the ring holds): a sender nobody receives from must not grow the receiver's heap without limit.
// A receive posted for a later message still moves every earlier one aside.
TEST(P2pRings, SmallSendsGetAheadOfTheirReceivesOnlyUpToABound) {
  Host host(2);
  constexpr int kSends = 50, kAhead = 32 + 4;  // copied aside + kSmall's 4 chunks
  std::vector<std::vector<char>> want;
  std::vector<Op> sends(kSends), recvs(kSends);
  for (int i = 0; i < kSends; ++i) {
    want.push_back(pattern(0, 1, 3, i, 100 + static_cast<size_t>(i)));
    host[0].send(sends[static_cast<size_t>(i)], 1, 3, want.back().data(), want.back().size());
  }
  host.spin(50);
  int finished = 0;
  for (const Op& op : sends) finished += op.finished() ? 1 : 0;
  if (inject::enabled()) {
    ++inject::tally().injected;
    if (finished + 1 != kAhead) ++inject::tally().caught;
  } else {
    EXPECT_EQ(finished, kAhead) << "sends finished with no receive posted";
  }
  // The last message's receive (another tag) first: everything before it is moved aside.
  auto late = pattern(0, 1, 4, 0, 10);
  Op s_late, r_late;
  std::vector<char> got_late(late.size());
  host[0].send(s_late, 1, 4, late.data(), late.size());
  host[1].recv(r_late, 0, 4, got_late.data(), got_late.size());
  std::vector<Op*> ops{&s_late, &r_late};
  for (Op& op : sends) ops.push_back(&op);
  ASSERT_TRUE(host.drive(ops)) << "a receive for a later message must move the earlier ones aside";
  expect_bytes(got_late, late, "message behind 50 unreceived ones");
  std::vector<std::vector<char>> got(kSends);
  ops.clear();
  for (int i = 0; i < kSends; ++i) {
    got[static_cast<size_t>(i)].assign(want[static_cast<size_t>(i)].size(), 0);
    host[1].recv(recvs[static_cast<size_t>(i)], 0, 3, got[static_cast<size_t>(i)].data(), got[static_cast<size_t>(i)].size());
    ops.push_back(&recvs[static_cast<size_t>(i)]);
  }
  ASSERT_TRUE(host.drive(ops));
  for (int i = 0; i < kSends; ++i) {
    expect_outcome(recvs[static_cast<size_t>(i)], done(want[static_cast<size_t>(i)].size()), "message #" + std::to_string(i));
    expect_bytes(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)], "message #" + std::to_string(i) + " in order");
  }
}

TEST(P2pRings, AReceiveForALaterMessageMovesAWaitingOneAside) {
  Host host(2);
  auto a = pattern(0, 1, 1, 0, 7 * 4096), b = pattern(0, 1, 2, 0, 6 * 4096);
  Op sa, sb, ra, rb;
  host[0].send(sa, 1, 1, a.data(), a.size());
  host[0].send(sb, 1, 2, b.data(), b.size());
  std::vector<char> got_a(a.size()), got_b(b.size());
  host[1].recv(rb, 0, 2, got_b.data(), got_b.size());  // only the second message's receive
  ASSERT_TRUE(host.drive({&sa, &sb, &rb}));
  host[1].recv(ra, 0, 1, got_a.data(), got_a.size());
  ASSERT_TRUE(host.drive({&ra}));
  expect_outcome(rb, done(b.size()), "message behind one nobody wanted yet");
  expect_outcome(ra, done(a.size()), "message copied aside for the one behind it");
  expect_bytes(got_b, b, "message behind one nobody wanted yet");
  expect_bytes(got_a, a, "message copied aside for the one behind it");
}

TEST(P2pRings, ReceivePostedWhileItsMessageIsHalfArrivedGetsAllOfIt) {
  Host host(2);
  // A receive for another tag makes the engine take the message in as it arrives (copied aside).
  auto a = pattern(1, 0, 3, 0, 12 * 4096 + 5), other = pattern(1, 0, 99, 0, 10);
  std::vector<char> got(a.size()), got_other(other.size());
  Op s, r, s_other, r_other;
  host[0].recv(r_other, 1, 99, got_other.data(), got_other.size());
  host[1].send(s, 0, 3, a.data(), a.size());
  host.spin(2);  // part of it is in the unexpected entry, the rest still in (or before) the ring
  expect_outcome(s, kPending, "a send of 13 chunks after two rounds");
  host[0].recv(r, 1, 3, got.data(), got.size());
  host[1].send(s_other, 0, 99, other.data(), other.size());
  ASSERT_TRUE(host.drive({&s, &r, &s_other, &r_other}));
  expect_outcome(r, done(a.size()), "half-arrived message");
  expect_bytes(got, a, "half-arrived message");
  expect_bytes(got_other, other, "message for the receive posted first");
}

TEST(P2pRings, TruncationFailsTheReceiveAndKeepsTheStreamInStep) {
  Host host(2);
  auto big = pattern(0, 1, 5, 0, 6 * 4096), after = pattern(0, 1, 5, 1, 300);
  auto big2 = pattern(0, 1, 6, 0, 3000), after2 = pattern(0, 1, 6, 1, 30);  // one chunk each: sent eagerly
  std::vector<char> small(100), r_after(after.size()), small2(10), r_after2(after2.size());
  Op s1, s2, s3, s4, r1, r2, r3, r4;
  host[1].recv(r1, 0, 5, small.data(), small.size());  // posted first: truncated on arrival
  host[1].recv(r2, 0, 5, r_after.data(), r_after.size());
  host[0].send(s1, 1, 5, big.data(), big.size());
  host[0].send(s2, 1, 5, after.data(), after.size());
  host[0].send(s3, 1, 6, big2.data(), big2.size());  // arrives unexpected: truncated when posted
  host[0].send(s4, 1, 6, after2.data(), after2.size());
  ASSERT_TRUE(host.drive({&s1, &s2, &r1, &r2, &s3, &s4}));
  host[1].recv(r3, 0, 6, small2.data(), small2.size());
  host[1].recv(r4, 0, 6, r_after2.data(), r_after2.size());
  ASSERT_TRUE(host.drive({&r3, &r4}));
  expect_outcome(r1, {Op::State::failed, 0, "truncated"}, "receive smaller than a message it waited for");
  expect_outcome(r3, {Op::State::failed, 0, "truncated"}, "receive smaller than an arrived message");
  expect_outcome(r2, done(after.size()), "message after a truncated one");
  expect_outcome(r4, done(after2.size()), "message after a truncated unexpected one");
  expect_bytes(r_after, after, "message after a truncated one");
  expect_bytes(r_after2, after2, "message after a truncated unexpected one");
}

TEST(P2pRings, CancelledReceivesAndHalfSentSendsLeaveLaterMessagesIntact) {
  Host host(3);
  // A posted receive, cancelled: the message goes to the next receive with its tag.
  auto m = pattern(2, 0, 9, 0, 777);
  std::vector<char> lost(777), got(777);
  Op rc, r, s;
  host[0].recv(rc, 2, 9, lost.data(), lost.size());
  EXPECT_TRUE(host[0].cancel(rc));
  host[0].recv(r, 2, 9, got.data(), got.size());
  host[2].send(s, 0, 9, m.data(), m.size());
  ASSERT_TRUE(host.drive({&r, &s}));
  expect_outcome(rc, {Op::State::failed, 0, "cancel"}, "cancelled receive");
  expect_outcome(r, done(m.size()), "receive after a cancelled one");
  expect_bytes(got, m, "receive after a cancelled one");

  // A send cancelled with half its chunks in the ring, its receive posted: the receive fails,
  // the sender's next message arrives whole.
  auto big = pattern(1, 0, 4, 0, 20 * 4096), next = pattern(1, 0, 4, 1, 5000);
  std::vector<char> rbig(big.size()), rnext(next.size());
  Op sb, sn, rb, rn;
  host[0].recv(rb, 1, 4, rbig.data(), rbig.size());
  host[0].recv(rn, 1, 4, rnext.data(), rnext.size());
  host[1].send(sb, 0, 4, big.data(), big.size());  // fills the ring; nobody drains it yet
  EXPECT_TRUE(host[1].cancel(sb));
  host[1].send(sn, 0, 4, next.data(), next.size());
  ASSERT_TRUE(host.drive({&rb, &rn, &sn}));
  expect_outcome(sb, {Op::State::failed, 0, "cancel"}, "cancelled half-sent send");
  expect_outcome(rb, {Op::State::failed, 0, "cancelled"}, "receive of a cancelled send");
  expect_outcome(rn, done(next.size()), "message after a cancelled send");
  expect_bytes(rnext, next, "message after a cancelled send");

  // The same with no receive posted yet: the message waits in the ring (its first chunk), the
  // cancel marker behind it makes the receiver drop both, and the next message gets through.
  auto small = pattern(1, 0, 4, 2, 3000);
  Op sb2, sn2, rn2;
  host[1].send(sb2, 0, 4, big.data(), big.size());
  host.spin(2);
  EXPECT_TRUE(host[1].cancel(sb2));
  host[1].send(sn2, 0, 4, small.data(), small.size());
  ASSERT_TRUE(host.drive({&sn2}));  // one chunk, sent eagerly: in the ring now
  host.spin(1);
  std::vector<char> rnext2(small.size());
  host[0].recv(rn2, 1, 4, rnext2.data(), rnext2.size());
  ASSERT_TRUE(host.drive({&rn2}));
  expect_outcome(rn2, done(small.size()), "message after a cancelled waiting send");
  expect_bytes(rnext2, small, "message after a cancelled waiting send");

  // A receive cancelled while its message is arriving: the rest is dropped, the next is whole.
  Op sb3, sn3, rb3, rn3;
  std::vector<char> rbig3(big.size(), 0), rnext3(next.size());
  host[0].recv(rb3, 1, 4, rbig3.data(), rbig3.size());
  host[1].send(sb3, 0, 4, big.data(), big.size());
  host.spin(2);
  EXPECT_TRUE(host[0].cancel(rb3));
  host[0].recv(rn3, 1, 4, rnext3.data(), rnext3.size());
  host[1].send(sn3, 0, 4, next.data(), next.size());
  ASSERT_TRUE(host.drive({&sb3, &sn3, &rn3}));
  expect_outcome(rb3, {Op::State::failed, 0, "cancel"}, "receive cancelled mid-message");
  expect_outcome(rn3, done(next.size()), "message after a receive cancelled mid-message");
  expect_bytes(rnext3, next, "message after a receive cancelled mid-message");
  EXPECT_FALSE(host[0].cancel(rn3));  // finished ops are not the engine's any more
}

TEST(P2pRings, DefaultShapeMovesSixteenMebibytesAndLeavesNothingInDevShm) {
  {
    Host host(2, RingShape{});
    auto a = pattern(0, 1, 1, 0, 16u << 20), b = pattern(1, 0, 1, 0, (1u << 20) + 3);
    std::vector<char> ra(a.size()), rb(b.size());
    Op s1, s2, r1, r2;
    host[1].recv(r1, 0, 1, ra.data(), ra.size());
    host[0].recv(r2, 1, 1, rb.data(), rb.size());
    host[0].send(s1, 1, 1, a.data(), a.size());
    host[1].send(s2, 0, 1, b.data(), b.size());
    ASSERT_TRUE(host.drive({&s1, &s2, &r1, &r2}));
    expect_outcome(r1, done(a.size()), "16 MiB");
    expect_outcome(r2, done(b.size()), "1 MiB + 3");
    expect_bytes(ra, a, "16 MiB");
    expect_bytes(rb, b, "1 MiB + 3");
    EXPECT_FALSE(host[0].busy());
  }
  const std::string mine = "weft-test-p2p-" + std::to_string(getpid()) + "-";
  int left = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) left += std::strncmp(e->d_name, mine.c_str(), mine.size()) == 0;
    closedir(d);
  }
  EXPECT_EQ(left, 0) << "inboxes left in /dev/shm";
}

TEST(P2pRings, BadShapesAreRefused) {
  std::vector<int> local{0, 1};
  EXPECT_THROW(P2pRings::create("/weft-test-p2p-bad", 0, local, 2, RingShape{1, 4096}), weft::Error);
  EXPECT_THROW(P2pRings::create("/weft-test-p2p-bad", 0, local, 2, RingShape{4, 100}), weft::Error);
}

}  // namespace
