#include "core/collectives/select.h"

#include "core/common/status.h"

namespace weft::coll {
namespace {
// Below this, latency (number of rounds) dominates; above, bandwidth (bytes per rank).
constexpr size_t kSmallMessage = 64 * 1024;
constexpr size_t kTreeLimit = 256 * 1024;

// The forced or automatic choice resolves to shm when the ranks share a host; a forced
// point-to-point algorithm is kept; `automatic` means "decide by size". A forced shm that cannot
// run (shared memory off, ranks on several hosts, or the segment's set-up failed: allow_shm is
// false after the shared-memory path declined) is an error, not a silent fallback: the user
// asked for it, and a test that forces it must not pass on another algorithm. Every rank reaches
// the same verdict (the configuration is per communicator and the set-up's outcome is agreed).
template <typename Algo>
Algo forced_or_shm(const Comm& comm, Algo forced, bool allow_shm, const char* variable) {
  const bool shm_ok = allow_shm && comm.shm_possible();
  if (forced == Algo::shm) {
    if (shm_ok) return Algo::shm;
    if (comm.size() > 1) {
      fail(Status::unsupported, "%s=shm on %s, but its shared-memory collectives cannot run: %s", variable,
           comm.describe().c_str(), comm.shm_unavailable_reason().c_str());
    }
    return Algo::automatic;  // one rank: nothing to share, every algorithm is a local copy
  }
  if (forced == Algo::automatic && shm_ok) return Algo::shm;
  return forced;
}
}  // namespace

AllreduceAlgo choose_allreduce(const Comm& comm, size_t bytes, size_t count, bool allow_shm) {
  AllreduceAlgo forced = forced_or_shm(comm, comm.config().algorithms.allreduce, allow_shm, "WEFT_ALGO_ALLREDUCE");
  if (forced != AllreduceAlgo::automatic) return forced;
  if (bytes <= kSmallMessage || count < static_cast<size_t>(comm.size())) return AllreduceAlgo::recursive_doubling;
  return AllreduceAlgo::ring;
}

BroadcastAlgo choose_broadcast(const Comm& comm, size_t bytes, size_t count, bool allow_shm) {
  BroadcastAlgo forced = forced_or_shm(comm, comm.config().algorithms.broadcast, allow_shm, "WEFT_ALGO_BROADCAST");
  if (forced != BroadcastAlgo::automatic) return forced;
  if (bytes <= kTreeLimit || count < static_cast<size_t>(comm.size()) || comm.size() <= 2) return BroadcastAlgo::binomial;
  return BroadcastAlgo::scatter_allgather;
}

ReduceAlgo choose_reduce(const Comm& comm, size_t bytes, size_t count, bool allow_shm) {
  ReduceAlgo forced = forced_or_shm(comm, comm.config().algorithms.reduce, allow_shm, "WEFT_ALGO_REDUCE");
  if (forced != ReduceAlgo::automatic) return forced;
  if (bytes <= kTreeLimit || count < static_cast<size_t>(comm.size()) || comm.size() <= 2) return ReduceAlgo::binomial;
  return ReduceAlgo::reduce_scatter_gather;
}

AllgatherAlgo choose_allgather(const Comm& comm, size_t total_bytes, bool allow_shm) {
  AllgatherAlgo forced = forced_or_shm(comm, comm.config().algorithms.allgather, allow_shm, "WEFT_ALGO_ALLGATHER");
  if (forced != AllgatherAlgo::automatic) return forced;
  return total_bytes <= kSmallMessage ? AllgatherAlgo::bruck : AllgatherAlgo::ring;
}

ReduceScatterAlgo choose_reduce_scatter(const Comm& comm, bool allow_shm) {
  ReduceScatterAlgo a = forced_or_shm(comm, comm.config().algorithms.reduce_scatter, allow_shm, "WEFT_ALGO_REDUCE_SCATTER");
  return a == ReduceScatterAlgo::automatic ? ReduceScatterAlgo::ring : a;
}

AlltoallAlgo choose_alltoall(const Comm& comm, bool allow_shm) {
  AlltoallAlgo a = forced_or_shm(comm, comm.config().algorithms.alltoall, allow_shm, "WEFT_ALGO_ALLTOALL");
  return a == AlltoallAlgo::automatic ? AlltoallAlgo::pairwise : a;
}

BarrierAlgo choose_barrier(const Comm& comm, bool allow_shm) {
  BarrierAlgo a = forced_or_shm(comm, comm.config().algorithms.barrier, allow_shm, "WEFT_ALGO_BARRIER");
  return a == BarrierAlgo::automatic ? BarrierAlgo::dissemination : a;
}

const char* algo_name(AllreduceAlgo a) {
  switch (a) {
    case AllreduceAlgo::automatic: return "auto";
    case AllreduceAlgo::shm: return "shm";
    case AllreduceAlgo::recursive_doubling: return "recursive_doubling";
    case AllreduceAlgo::ring: return "ring";
    case AllreduceAlgo::rabenseifner: return "rabenseifner";
  }
  return "?";
}
const char* algo_name(BroadcastAlgo a) {
  switch (a) {
    case BroadcastAlgo::automatic: return "auto";
    case BroadcastAlgo::shm: return "shm";
    case BroadcastAlgo::binomial: return "binomial";
    case BroadcastAlgo::scatter_allgather: return "scatter_allgather";
  }
  return "?";
}
const char* algo_name(ReduceAlgo a) {
  switch (a) {
    case ReduceAlgo::automatic: return "auto";
    case ReduceAlgo::shm: return "shm";
    case ReduceAlgo::binomial: return "binomial";
    case ReduceAlgo::reduce_scatter_gather: return "reduce_scatter_gather";
  }
  return "?";
}
const char* algo_name(AllgatherAlgo a) {
  switch (a) {
    case AllgatherAlgo::automatic: return "auto";
    case AllgatherAlgo::shm: return "shm";
    case AllgatherAlgo::ring: return "ring";
    case AllgatherAlgo::bruck: return "bruck";
  }
  return "?";
}

}  // namespace weft::coll
