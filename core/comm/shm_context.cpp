#include "core/comm/shm_context.h"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>

#include "core/comm/channel.h"
#include "core/comm/comm.h"
#include "core/comm/deadline.h"
#include "core/common/log.h"

namespace weft {
namespace {

// Setup messages use steps far from any algorithm's.
constexpr uint32_t kSetupStep = 0xe000;
constexpr size_t kNameBytes = 64;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

std::unique_ptr<ShmContext> ShmContext::setup(Channel& ch, size_t slot_bytes) {
  Comm& comm = ch.comm();
  const int n = comm.size(), rank = comm.rank();
  char name[kNameBytes] = {0};
  std::unique_ptr<shm::Segment> seg;
  if (rank == 0) {
    std::random_device rd;
    std::snprintf(name, sizeof(name), "/weft-%d-%u-%08x%08x", static_cast<int>(getpid()), comm.id(), rd(), rd());
    try {
      seg = shm::Segment::create(name, n, slot_bytes);
    } catch (const Error& e) {
      log(LogLevel::info, "%s: no shared-memory collectives: %s", comm.describe().c_str(), e.what());
      name[0] = '\0';
    }
    for (int p = 1; p < n; ++p) ch.isend(p, kSetupStep, name, sizeof(name));
    ch.wait();
  } else {
    ch.irecv(0, kSetupStep, name, sizeof(name));
    ch.wait();
    name[kNameBytes - 1] = '\0';
    if (name[0]) {
      try {
        seg = shm::Segment::open(name, n, slot_bytes);
      } catch (const Error& e) {
        log(LogLevel::info, "%s: cannot map %s: %s", comm.describe().c_str(), name, e.what());
      }
    }
  }
  // Everyone reports to rank 0, which announces whether all ranks mapped the segment.
  char ok = seg ? 1 : 0;
  if (rank == 0) {
    std::string oks(static_cast<size_t>(n), '\0');
    for (int p = 1; p < n; ++p) ch.irecv(p, kSetupStep + 1, &oks[static_cast<size_t>(p)], 1);
    ch.wait();
    for (int p = 1; p < n; ++p) ok = static_cast<char>(ok && oks[static_cast<size_t>(p)]);
    for (int p = 1; p < n; ++p) ch.isend(p, kSetupStep + 2, &ok, 1);
    ch.wait();
    if (seg) seg->unlink();
  } else {
    ch.isend(0, kSetupStep + 1, &ok, 1);
    ch.irecv(0, kSetupStep + 2, &ok, 1);
    ch.wait();
  }
  if (!ok) return nullptr;
  log(LogLevel::info, "%s: shared-memory collectives via %s (%zu-byte slots)", comm.describe().c_str(), name, slot_bytes);
  return std::unique_ptr<ShmContext>(new ShmContext(std::move(seg)));
}

void ShmContext::barrier(Channel& ch) {
  Comm& comm = ch.comm();
  const int n = segment_->nranks(), rank = comm.rank();
  const uint64_t epoch = ++epoch_;
  segment_->arrival(rank).store(epoch, std::memory_order_release);
  int waiting_for = 0;  // ranks below this one have arrived
  Clock::time_point started{};
  // Spin briefly (peers on other cores arrive within ~1 us), then yield the core (ranks may
  // outnumber cores), then sleep in short steps; every 256 rounds check abort, the peer we
  // wait for, and the deadline (counted from the first check, so the fast path reads no clock).
  for (uint64_t spin = 0;; ++spin) {
    while (waiting_for < n && segment_->arrival(waiting_for).load(std::memory_order_acquire) >= epoch) ++waiting_for;
    if (waiting_for == n) return;
    if (spin < 64) {
      cpu_relax();
      continue;
    }
    if ((spin & 255) == 0) check_waiting(ch, waiting_for, epoch, started);
    if (spin < 4096) {
      sched_yield();
    } else {
      struct timespec ts{0, 50000};
      nanosleep(&ts, nullptr);
    }
  }
}

void ShmContext::check_waiting(Channel& ch, int waiting_for, uint64_t epoch, Clock::time_point& started) {
  Comm& comm = ch.comm();
  auto fail_with = [&](Status status, const std::string& why) {
    Error e(status, format("%s (shm) #%u on %s: %s", ch.operation(), ch.sequence(), comm.describe().c_str(), why.c_str()));
    comm.mark_broken(e);
    throw e;
  };
  if (comm.aborted()) fail_with(Status::aborted, "aborted by weft_comm_abort");
  const int world_rank = comm.world_rank_of(waiting_for);
  if (comm.world().peer_dead(world_rank)) {
    int cause = comm.world().first_dead_among(comm.members());
    if (cause < 0) cause = world_rank;
    comm.world().report_failure(cause);
    int cause_rank = static_cast<int>(std::find(comm.members().begin(), comm.members().end(), cause) - comm.members().begin());
    fail_with(Status::remote, format("rank %d (%s) died", cause_rank, comm.world().describe_rank(cause).c_str()));
  }
  Clock::time_point now = Clock::now();
  if (started == Clock::time_point{}) {
    started = now;
    return;
  }
  if (now - started < comm.config().timeout) return;
  // As for point-to-point waits (progress.cpp): a member known to be dead explains the stall
  // better than the live ranks that have not arrived, which are likely waiting for it too.
  if (int dead = comm.world().first_dead_among(comm.members()); dead >= 0) {
    comm.world().report_failure(dead);
    fail_with(Status::remote, format("not complete after %lld ms, and rank %d (%s) of this communicator is gone",
                                     static_cast<long long>(comm.config().timeout.count()), comm.rank_of_world(dead),
                                     comm.world().describe_rank(dead).c_str()));
  }
  std::string missing;
  for (int r = 0; r < segment_->nranks(); ++r) {
    if (segment_->arrival(r).load(std::memory_order_acquire) < epoch) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
  }
  fail_with(Status::timeout, format("timed out after %lld ms; not heard from rank(s) %s",
                                    static_cast<long long>(comm.config().timeout.count()), missing.c_str()));
}

}  // namespace weft
