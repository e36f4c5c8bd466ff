#include "core/comm/progress.h"

#include <sched.h>

#include <algorithm>
#include <string>

#include "core/comm/comm.h"
#include "core/comm/deadline.h"
#include "core/common/log.h"

namespace weft {
namespace {

using transport::Op;

// Backoff after this many empty progress calls: spin, then yield the core, then sleep in
// growing steps (capped so a wake-up costs at most ~0.2 ms).
constexpr int kSpinRounds = 64;
constexpr int kYieldRounds = 256;
constexpr int kMaxSleepUs = 200;

std::string subject_text(const Comm& comm, const WaitSubject& s) {
  if (s.algorithm && *s.algorithm) {
    return format("%s (%s) #%u on %s", s.operation, s.algorithm, s.sequence, comm.describe().c_str());
  }
  return format("%s on %s", s.operation, comm.describe().c_str());
}

std::vector<int> pending_world_ranks(const std::vector<Op*>& ops) {
  std::vector<int> ranks;
  for (const Op* op : ops) {
    if (!op->finished() && std::find(ranks.begin(), ranks.end(), op->peer) == ranks.end()) ranks.push_back(op->peer);
  }
  return ranks;
}

// "rank 3" for a member of comm, "world rank 7" otherwise.
std::string rank_name(const Comm& comm, int world_rank) {
  int r = comm.rank_of_world(world_rank);
  return r >= 0 ? format("rank %d", r) : format("world rank %d", world_rank);
}

// The timeout text: whom this rank waited for and, following the other ranks' stall notices,
// whom they in turn were waiting for; the end of such a chain is the likely cause.
std::string describe_stall(Comm& comm, const std::vector<Op*>& ops) {
  World& world = comm.world();
  std::vector<int> silent = pending_world_ranks(ops);
  if (silent.empty()) return "no rank";
  world.report_stall(silent.front());
  Deadline grace(std::chrono::milliseconds(300));  // the others time out at about the same moment
  while (!grace.expired()) {
    if (!world.transport().progress()) sched_yield();
  }
  std::string out;
  for (int w : silent) out += (out.empty() ? "" : ", ") + std::to_string(comm.rank_of_world(w));
  for (int w : silent) {
    int at = w, hops = 0;
    std::string chain;
    for (int next = world.stalled_on(at); next >= 0 && next != at && hops < world.size(); next = world.stalled_on(at), ++hops) {
      chain += format("; %s is itself waiting for %s", rank_name(comm, at).c_str(), rank_name(comm, next).c_str());
      at = next;
    }
    if (hops) out += chain + format("; likely cause: %s", rank_name(comm, at).c_str());
  }
  return out;
}

// Cancel receives, give everything a bounded chance to finish, and park what is still pending.
void abandon(Comm& comm, const std::vector<Op*>& ops) {
  transport::Transport& t = comm.world().transport();
  for (Op* op : ops) {
    if (!op->finished()) t.cancel(*op);
  }
  Deadline grace(std::chrono::milliseconds(500));
  for (;;) {
    bool all = true;
    for (Op* op : ops) all = all && op->finished();
    if (all || grace.expired()) break;
    if (!t.progress()) sched_yield();
  }
}

// Every failed wait leaves the message stream out of step, so it also breaks the communicator.
[[noreturn]] void fail_wait(Comm& comm, const std::vector<Op*>& ops, Status status, const std::string& message) {
  abandon(comm, ops);
  Error e(status, message);
  comm.mark_broken(e);
  throw e;
}

// A peer failed (its endpoint broke or its process is gone). It may only be a second-hand
// symptom: a rank that left after its own error. Give failure notices a moment to arrive,
// then name the rank that died first, and tell everyone else.
[[noreturn]] void fail_remote(Comm& comm, const std::vector<Op*>& ops, const WaitSubject& subject, int peer_world,
                              const std::string& symptom) {
  World& world = comm.world();
  Deadline grace(std::chrono::milliseconds(50));
  int cause = world.first_dead_among(comm.members());
  while (cause < 0 && !grace.expired()) {
    if (!world.transport().progress()) sched_yield();
    cause = world.first_dead_among(comm.members());
  }
  if (cause < 0) cause = peer_world;
  world.report_failure(cause);
  fail_wait(comm, ops, Status::remote,
            format("%s: rank %d (%s) died or lost its connection (seen here as: %s)", subject_text(comm, subject).c_str(),
                   comm.rank_of_world(cause), world.describe_rank(cause).c_str(), symptom.c_str()));
}

}  // namespace

void wait_ops(Comm& comm, const std::vector<Op*>& ops, const WaitSubject& subject) {
  transport::Transport& t = comm.world().transport();
  Deadline deadline(comm.config().timeout);
  int idle = 0;
  for (;;) {
    bool all_done = true;
    for (Op* op : ops) {
      Op::State s = op->state.load(std::memory_order_acquire);
      if (s == Op::State::pending) {
        all_done = false;
        continue;
      }
      if (s == Op::State::failed) {
        int peer = comm.rank_of_world(op->peer);
        if (op->error.find("truncated") != std::string::npos) {
          fail_wait(comm, ops, Status::mismatch,
                    format("%s: rank %d sent more than the %zu bytes expected", subject_text(comm, subject).c_str(),
                           peer, op->bytes));
        }
        fail_remote(comm, ops, subject, op->peer,
                    format("%s with rank %d failed: %s", op->is_recv ? "receive" : "send", peer, op->error.c_str()));
      }
      if (op->is_recv && op->received != op->bytes) {
        fail_wait(comm, ops, Status::mismatch,
                  format("%s: rank %d sent %zu bytes but %zu were expected", subject_text(comm, subject).c_str(),
                         comm.rank_of_world(op->peer), op->received, op->bytes));
      }
    }
    if (all_done) return;

    if (t.progress()) {
      idle = 0;
      continue;
    }
    ++idle;
    if (idle < kSpinRounds) continue;

    // Nothing moved: the slow checks, then back off.
    if (comm.aborted()) {
      fail_wait(comm, ops, Status::aborted,
                format("%s: aborted by weft_comm_abort", subject_text(comm, subject).c_str()));
    }
    for (Op* op : ops) {
      if (!op->finished() && comm.world().peer_dead(op->peer)) {
        fail_remote(comm, ops, subject, op->peer,
                    format("rank %d stopped answering", comm.rank_of_world(op->peer)));
      }
    }
    if (deadline.expired()) {
      // A member known to be dead (its process is gone, or a failure notice said so) explains
      // the stall better than the live rank this one waited for, which is likely waiting for
      // the dead one itself: name it.
      if (int dead = comm.world().first_dead_among(comm.members()); dead >= 0) {
        fail_remote(comm, ops, subject, dead,
                    format("not complete after %lld ms, and rank %d of this communicator is gone",
                           static_cast<long long>(deadline.budget().count()), comm.rank_of_world(dead)));
      }
      fail_wait(comm, ops, Status::timeout,
                format("%s: timed out after %lld ms; not heard from rank(s) %s", subject_text(comm, subject).c_str(),
                       static_cast<long long>(deadline.budget().count()), describe_stall(comm, ops).c_str()));
    }
    if (idle < kSpinRounds + kYieldRounds) {
      sched_yield();
    } else {
      int step = idle - kSpinRounds - kYieldRounds;
      t.wait_for_activity(step < 8 ? (1 << step) : kMaxSleepUs);
    }
  }
}

}  // namespace weft
