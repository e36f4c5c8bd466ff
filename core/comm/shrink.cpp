// The shrink agreement (shrink.h explains the protocol and why it is safe).
#include "core/comm/shrink.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "core/comm/channel.h"
#include "core/comm/deadline.h"
#include "core/common/backoff.h"
#include "core/common/log.h"
#include "core/device/device_api.h"

namespace weft {
namespace {

using transport::Op;

constexpr uint32_t kMagic = 0x53484b31;  // "SHK1"
constexpr uint32_t kReport = 0;
constexpr uint32_t kDecide = 1;

// Fixed part of every message; a bitmap over the old members follows (REPORT: the members the
// sender knows dead; DECIDE: the survivors).
struct Header {
  uint32_t magic;
  uint32_t kind;
  uint32_t epoch;
  int32_t sender;   // old rank of the sender
  uint32_t id;      // REPORT: the sender's next unused communicator id; DECIDE: the new id
  int32_t decider;  // DECIDE: the coordinator that made the decision (kept when passed on)
  uint32_t members; // size of the old communicator (both sides must agree)
  uint32_t unused;
};

struct Decision {
  std::vector<bool> survivors;  // by old rank
  uint32_t id = 0;
  int decider = -1;
};

// WEFT_TEST_SHRINK_EXIT_AT=<phase>:<rank> (shrink.h): exit abruptly at a chosen point.
// The rank is a world rank: a later shrink of the shrunk communicator renumbers the ranks.
void test_exit_hook(const char* phase, int world_rank) {
  const char* v = std::getenv("WEFT_TEST_SHRINK_EXIT_AT");
  if (!v || !*v) return;
  const char* colon = std::strchr(v, ':');
  if (!colon || std::string(v, colon) != phase || std::atoi(colon + 1) != world_rank) return;
  log(LogLevel::info, "WEFT_TEST_SHRINK_EXIT_AT=%s: world rank %d exits now", v, world_rank);
  _exit(9);
}

int test_drop_rank() {
  const char* v = std::getenv("WEFT_TEST_SHRINK_DROP");
  return v && *v ? std::atoi(v) : -1;
}

// Buffers of sends a dead peer never took and of receives a cancel did not finish: the
// transport may still read or write them, so they live as long as the process (one small
// message each).
std::mutex g_orphans_mutex;
std::deque<std::vector<uint8_t>> g_orphan_buffers;

class Agreement {
 public:
  explicit Agreement(Comm& old);
  ~Agreement();
  Agreement(const Agreement&) = delete;
  Agreement& operator=(const Agreement&) = delete;

  Decision run();

 private:
  transport::Tag tag(uint32_t kind, int sender) const {
    return make_tag(old_.id(), sender, kShrinkSequence, (epoch_ << 1) | kind);
  }
  bool refresh();
  int coordinator() const;
  bool arrived(const std::unique_ptr<Op>& op) const;
  const Header& header(int peer, uint32_t kind) const;
  bool bit(int peer, uint32_t kind, int r) const;
  Decision decision_from(int peer) const;
  void send(int peer, uint32_t kind, const Header& h, const std::vector<bool>& bits);
  void send_report(int coordinator);
  Decision coordinate();
  Decision finish(const Decision& d, bool as_coordinator);
  std::string rank_list(const std::vector<bool>& set) const;
  std::string context() const;
  [[noreturn]] void fail_deadline(const std::string& waiting_for);

  Comm& old_;
  World& world_;
  transport::Transport& t_;
  const int n_;
  const int me_;
  const uint32_t epoch_;
  const size_t bytes_;
  Deadline deadline_;
  std::vector<bool> dead_;       // seen dead here
  std::vector<bool> suspected_;  // reported dead by others (coordinator only)
  int reported_to_ = -1;
  // Receives, one per peer and kind: a rank sends each peer at most one REPORT (its
  // coordinators only move up) and one DECIDE (it returns right after) per shrink.
  std::vector<std::vector<uint8_t>> in_[2];
  std::vector<std::unique_ptr<Op>> recv_[2];
  std::deque<std::vector<uint8_t>> out_;
  std::vector<std::unique_ptr<Op>> sends_;
  std::vector<int> send_peer_;
};

Agreement::Agreement(Comm& old)
    : old_(old),
      world_(old.world()),
      t_(old.world().transport()),
      n_(old.size()),
      me_(old.rank()),
      epoch_(old.next_shrink_epoch() & 0x7fff),
      bytes_(sizeof(Header) + (static_cast<size_t>(old.size()) + 7) / 8),
      deadline_(2 * old.config().timeout),
      dead_(static_cast<size_t>(n_), false),
      suspected_(static_cast<size_t>(n_), false) {
  for (uint32_t kind : {kReport, kDecide}) {
    in_[kind].resize(static_cast<size_t>(n_));
    recv_[kind].resize(static_cast<size_t>(n_));
    for (int p = 0; p < n_; ++p) {
      if (p == me_) continue;
      in_[kind][p].assign(bytes_, 0);
      recv_[kind][p] = std::make_unique<Op>();
      t_.recv(*recv_[kind][p], old_.world_rank_of(p), tag(kind, p), in_[kind][p].data(), bytes_);
    }
  }
}

Agreement::~Agreement() {
  // Late messages can never match: the next shrink of this communicator has another epoch.
  std::vector<Op*> pending;
  for (auto& ops : recv_)
    for (auto& op : ops)
      if (op && !op->finished()) {
        t_.cancel(*op);
        pending.push_back(op.get());
      }
  for (auto& op : sends_)
    if (!op->finished()) pending.push_back(op.get());
  Deadline grace(std::chrono::milliseconds(200));
  Backoff backoff;
  while (!grace.expired() && std::any_of(pending.begin(), pending.end(), [](Op* op) { return !op->finished(); })) {
    if (!t_.progress()) backoff.pause();
  }
  // A receive still unfinished after its cancel may already be matched (a cancel cannot stop a
  // message that is being delivered), so its buffer may yet be written: it stays alive with the
  // orphaned send buffers rather than die with this object.
  for (uint32_t kind : {kReport, kDecide}) {
    for (size_t p = 0; p < recv_[kind].size(); ++p) {
      std::unique_ptr<Op>& op = recv_[kind][p];
      if (!op || op->finished()) continue;
      world_.bury(std::move(op));
      std::lock_guard<std::mutex> lock(g_orphans_mutex);
      g_orphan_buffers.push_back(std::move(in_[kind][p]));
    }
  }
  for (size_t i = 0; i < sends_.size(); ++i) {
    if (sends_[i]->finished()) continue;
    world_.bury(std::move(sends_[i]));
    std::lock_guard<std::mutex> lock(g_orphans_mutex);
    g_orphan_buffers.push_back(std::move(out_[i]));
  }
}

// Drives the transport and updates who is known dead. True when something moved.
bool Agreement::refresh() {
  bool moved = t_.progress();
  for (int p = 0; p < n_; ++p) {
    if (p != me_ && !dead_[p] && world_.peer_dead(old_.world_rank_of(p))) {
      dead_[p] = true;
      world_.report_failure(old_.world_rank_of(p));
      moved = true;
    }
  }
  return moved;
}

int Agreement::coordinator() const {
  for (int p = 0; p < n_; ++p)
    if (p == me_ || !dead_[p]) return p;
  return me_;
}

// A receive that completed with a well-formed message (anything else is a protocol error: the
// peers run a different weft, or a message of another protocol took this tag).
bool Agreement::arrived(const std::unique_ptr<Op>& op) const {
  if (!op || !op->finished() || op->state.load() != Op::State::done) return false;
  if (op->received != bytes_) {
    fail(Status::internal, "shrink of %s: a message of %zu bytes arrived from world rank %d; expected %zu",
         old_.describe().c_str(), op->received, op->peer, bytes_);
  }
  return true;
}

const Header& Agreement::header(int peer, uint32_t kind) const {
  const Header& h = *reinterpret_cast<const Header*>(in_[kind][peer].data());
  if (h.magic != kMagic || h.kind != kind || h.epoch != epoch_ || h.sender != peer ||
      h.members != static_cast<uint32_t>(n_) || (kind == kDecide && (h.decider < 0 || h.decider >= n_))) {
    fail(Status::internal, "shrink of %s: malformed %s from rank %d (magic %#x, epoch %u/%u, %u members/%d)",
         old_.describe().c_str(), kind == kReport ? "report" : "decision", peer, h.magic, h.epoch, epoch_, h.members, n_);
  }
  return h;
}

bool Agreement::bit(int peer, uint32_t kind, int r) const {
  return (in_[kind][peer][sizeof(Header) + static_cast<size_t>(r) / 8] >> (r % 8)) & 1;
}

Decision Agreement::decision_from(int peer) const {
  const Header& h = header(peer, kDecide);
  Decision d;
  d.id = h.id;
  d.decider = h.decider;
  d.survivors.resize(static_cast<size_t>(n_));
  for (int r = 0; r < n_; ++r) d.survivors[r] = bit(peer, kDecide, r);
  return d;
}

void Agreement::send(int peer, uint32_t kind, const Header& h, const std::vector<bool>& bits) {
  out_.emplace_back(bytes_, 0);
  std::vector<uint8_t>& buf = out_.back();
  std::memcpy(buf.data(), &h, sizeof(h));
  for (int r = 0; r < n_; ++r)
    if (bits[r]) buf[sizeof(Header) + static_cast<size_t>(r) / 8] |= static_cast<uint8_t>(1u << (r % 8));
  sends_.push_back(std::make_unique<Op>());
  send_peer_.push_back(peer);
  t_.send(*sends_.back(), old_.world_rank_of(peer), tag(kind, me_), buf.data(), bytes_);
}

void Agreement::send_report(int coordinator) {
  Header h{kMagic, kReport, epoch_, me_, world_.next_unused_comm_id(1), -1, static_cast<uint32_t>(n_), 0};
  send(coordinator, kReport, h, dead_);
  reported_to_ = coordinator;
  log(LogLevel::info, "shrink of %s: reported to coordinator rank %d (known dead: %s)", old_.describe().c_str(),
      coordinator, rank_list(dead_).c_str());
  test_exit_hook("reported", old_.world_rank_of(me_));
}

Decision Agreement::run() {
  Backoff backoff;
  for (;;) {
    const bool moved = refresh();
    const int c = coordinator();
    if (c == me_) return coordinate();
    // Only the current coordinator's decision is accepted: every rank that accepts one has
    // then reported to no later coordinator, which therefore waits for its DECIDE (shrink.h).
    if (arrived(recv_[kDecide][c])) return finish(decision_from(c), false);
    if (reported_to_ != c) send_report(c);
    if (deadline_.expired()) fail_deadline(format("a decision from rank %d, the coordinator", c));
    moved ? backoff.reset() : backoff.pause();
  }
}

Decision Agreement::coordinate() {
  Backoff backoff;
  for (;;) {
    const bool moved = refresh();
    // Sticky: a decision an earlier coordinator made is adopted as it is.
    for (int p = 0; p < n_; ++p)
      if (p != me_ && arrived(recv_[kDecide][p])) return finish(decision_from(p), true);
    std::vector<bool> missing(static_cast<size_t>(n_), false);
    bool any_missing = false;
    for (int p = 0; p < n_; ++p) {
      if (p == me_ || !arrived(recv_[kReport][p])) continue;
      header(p, kReport);
      for (int r = 0; r < n_; ++r)
        if (r != me_ && bit(p, kReport, r)) suspected_[r] = true;
    }
    for (int p = 0; p < n_; ++p) {
      if (p == me_ || dead_[p] || suspected_[p] || arrived(recv_[kReport][p])) continue;
      missing[p] = any_missing = true;
    }
    if (!any_missing) break;
    if (deadline_.expired()) fail_deadline("reports from rank(s) " + rank_list(missing) + " (this rank coordinates)");
    moved ? backoff.reset() : backoff.pause();
  }
  test_exit_hook("collected", old_.world_rank_of(me_));
  Decision d;
  d.decider = me_;
  d.id = world_.next_unused_comm_id(1);
  d.survivors.resize(static_cast<size_t>(n_));
  for (int p = 0; p < n_; ++p) {
    d.survivors[p] = p == me_ || (!dead_[p] && !suspected_[p]);
    if (p != me_ && d.survivors[p]) d.id = std::max(d.id, header(p, kReport).id);
  }
  if (d.id > kMaxCommId) {
    fail(Status::unsupported, "shrink of %s: communicator ids exhausted (next unused id %u)", old_.describe().c_str(), d.id);
  }
  return finish(d, true);
}

// Passes the decision on (the coordinator to everyone, an acceptor to everyone too, so later
// coordinators learn it), waits for those sends, and checks this rank's place in it.
Decision Agreement::finish(const Decision& d, bool as_coordinator) {
  Header h{kMagic, kDecide, epoch_, me_, d.id, d.decider, static_cast<uint32_t>(n_), 0};
  std::vector<int> to;
  for (int p = 0; p < n_; ++p)
    if (p != me_ && !dead_[p]) to.push_back(p);
  const size_t first_send = sends_.size();
  for (size_t i = 0; i < to.size(); ++i) {
    if (as_coordinator && i == to.size() / 2 && std::getenv("WEFT_TEST_SHRINK_EXIT_AT")) {
      // Let the first half leave this process before the hook ends it.
      Deadline flush(std::chrono::milliseconds(1000));
      while (!flush.expired() && std::any_of(sends_.begin() + static_cast<long>(first_send), sends_.end(),
                                             [](const std::unique_ptr<Op>& op) { return !op->finished(); }))
        t_.progress();
      test_exit_hook("half-decided", old_.world_rank_of(me_));
    }
    send(to[i], kDecide, h, d.survivors);
  }
  Backoff backoff;
  for (;;) {
    const bool moved = refresh();
    bool done = true;
    for (size_t i = first_send; i < sends_.size(); ++i)
      done = done && (sends_[i]->finished() || dead_[send_peer_[i]]);
    if (done) break;
    if (deadline_.expired()) fail_deadline("the decision to reach the other survivors");
    moved ? backoff.reset() : backoff.pause();
  }
  log(LogLevel::info, "shrink of %s: %s decision of rank %d: survivors %s, new id %u", old_.describe().c_str(),
      as_coordinator && d.decider == me_ ? "made the" : "accepted the", d.decider, rank_list(d.survivors).c_str(), d.id);
  if (!d.survivors[me_]) {
    std::vector<bool> gone(static_cast<size_t>(n_));
    for (int p = 0; p < n_; ++p) gone[p] = !d.survivors[p];
    fail(Status::remote,
         "shrink of %s: rank %d was left out by the survivors' agreement (decided by rank %d), which took rank(s) %s for "
         "dead; this rank must not use the old communicator's survivors any more",
         old_.describe().c_str(), me_, d.decider, rank_list(gone).c_str());
  }
  return d;
}

std::string Agreement::rank_list(const std::vector<bool>& set) const {
  std::string out;
  for (int r = 0; r < n_; ++r)
    if (set[r]) {
      if (!out.empty()) out += ',';
      out += std::to_string(r);
    }
  return out.empty() ? "none" : out;
}

std::string Agreement::context() const {
  return format("shrink of %s (rank %d; known dead: %s)", old_.describe().c_str(), me_, rank_list(dead_).c_str());
}

void Agreement::fail_deadline(const std::string& waiting_for) {
  fail(Status::timeout, "%s: timed out after %lld ms waiting for %s", context().c_str(),
       static_cast<long long>(deadline_.budget().count()), waiting_for.c_str());
}

}  // namespace

std::shared_ptr<Comm> shrink_comm(Comm& old, CommConfig config) {
  Decision d = Agreement(old).run();
  if (const int drop = test_drop_rank(); drop == old.rank()) {
    for (int p = old.size() - 1; p >= 0; --p)
      if (p != drop && d.survivors[p]) {
        d.survivors[p] = false;
        break;
      }
  }
  std::vector<int> members;
  int my_rank = -1;
  for (int p = 0; p < old.size(); ++p) {
    if (!d.survivors[p]) continue;
    if (p == old.rank()) my_rank = static_cast<int>(members.size());
    members.push_back(old.world_rank_of(p));
  }
  if (!old.world().try_reserve_comm_id(d.id)) {
    fail(Status::internal, "shrink of %s: the agreed communicator id %u is already taken in this process (a split "
         "running on another thread took it); the survivors must shrink again", old.describe().c_str(), d.id);
  }
  auto comm = std::make_shared<Comm>(old.world_ptr(), std::move(members), my_rank, d.id, std::move(config));
  // Shared memory is set up by the first collective, not here: a member that died after the
  // decision then fails that collective on every survivor alike, and they shrink again.
  // Device memory: the GPU and its table are the old communicator's; NCCL is set up afresh
  // among the survivors (the old NCCL communicator may be broken, so no ncclCommSplit).
  gpu::attach(*comm, &old, nullptr);
  return comm;
}

}  // namespace weft
