#include "core/collectives/select.h"

namespace weft::coll {
namespace {
// Below this, latency (number of rounds) dominates; above, bandwidth (bytes per rank).
constexpr size_t kSmallMessage = 64 * 1024;
constexpr size_t kTreeLimit = 256 * 1024;
}  // namespace

AllreduceAlgo choose_allreduce(const Comm& comm, size_t bytes, size_t count) {
  AllreduceAlgo forced = comm.config().algorithms.allreduce;
  if (forced != AllreduceAlgo::automatic) return forced;
  if (bytes <= kSmallMessage || count < static_cast<size_t>(comm.size())) return AllreduceAlgo::recursive_doubling;
  return AllreduceAlgo::ring;
}

BroadcastAlgo choose_broadcast(const Comm& comm, size_t bytes, size_t count) {
  BroadcastAlgo forced = comm.config().algorithms.broadcast;
  if (forced != BroadcastAlgo::automatic) return forced;
  if (bytes <= kTreeLimit || count < static_cast<size_t>(comm.size()) || comm.size() <= 2) return BroadcastAlgo::binomial;
  return BroadcastAlgo::scatter_allgather;
}

ReduceAlgo choose_reduce(const Comm& comm, size_t bytes, size_t count) {
  ReduceAlgo forced = comm.config().algorithms.reduce;
  if (forced != ReduceAlgo::automatic) return forced;
  if (bytes <= kTreeLimit || count < static_cast<size_t>(comm.size()) || comm.size() <= 2) return ReduceAlgo::binomial;
  return ReduceAlgo::reduce_scatter_gather;
}

AllgatherAlgo choose_allgather(const Comm& comm, size_t total_bytes) {
  AllgatherAlgo forced = comm.config().algorithms.allgather;
  if (forced != AllgatherAlgo::automatic) return forced;
  return total_bytes <= kSmallMessage ? AllgatherAlgo::bruck : AllgatherAlgo::ring;
}

const char* algo_name(AllreduceAlgo a) {
  switch (a) {
    case AllreduceAlgo::automatic: return "auto";
    case AllreduceAlgo::recursive_doubling: return "recursive_doubling";
    case AllreduceAlgo::ring: return "ring";
    case AllreduceAlgo::rabenseifner: return "rabenseifner";
  }
  return "?";
}
const char* algo_name(BroadcastAlgo a) {
  switch (a) {
    case BroadcastAlgo::automatic: return "auto";
    case BroadcastAlgo::binomial: return "binomial";
    case BroadcastAlgo::scatter_allgather: return "scatter_allgather";
  }
  return "?";
}
const char* algo_name(ReduceAlgo a) {
  switch (a) {
    case ReduceAlgo::automatic: return "auto";
    case ReduceAlgo::binomial: return "binomial";
    case ReduceAlgo::reduce_scatter_gather: return "reduce_scatter_gather";
  }
  return "?";
}
const char* algo_name(AllgatherAlgo a) {
  switch (a) {
    case AllgatherAlgo::automatic: return "auto";
    case AllgatherAlgo::ring: return "ring";
    case AllgatherAlgo::bruck: return "bruck";
  }
  return "?";
}

}  // namespace weft::coll
