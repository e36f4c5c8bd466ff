#include "core/comm/config.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/common/status.h"

namespace weft {
namespace {

template <typename Enum, size_t N>
Enum parse_algo(const char* var, const char* const (&names)[N], const Enum (&values)[N]) {
  const char* v = std::getenv(var);
  if (!v || !*v || std::strcmp(v, "auto") == 0) return values[0];
  std::string accepted;
  for (size_t i = 0; i < N; ++i) {
    if (std::strcmp(v, names[i]) == 0) return values[i];
    accepted += (i ? ", " : "");
    accepted += names[i];
  }
  fail(Status::invalid_argument, "%s='%s' is not an algorithm; expected one of: %s", var, v,
       accepted.c_str());
}

}  // namespace

AlgorithmChoice algorithms_from_env() {
  AlgorithmChoice a;
  {
    static const char* const names[] = {"auto", "recursive_doubling", "ring", "rabenseifner", "shm"};
    static const AllreduceAlgo values[] = {AllreduceAlgo::automatic, AllreduceAlgo::recursive_doubling,
                                           AllreduceAlgo::ring, AllreduceAlgo::rabenseifner, AllreduceAlgo::shm};
    a.allreduce = parse_algo("WEFT_ALGO_ALLREDUCE", names, values);
  }
  {
    static const char* const names[] = {"auto", "binomial", "scatter_allgather", "shm"};
    static const BroadcastAlgo values[] = {BroadcastAlgo::automatic, BroadcastAlgo::binomial,
                                           BroadcastAlgo::scatter_allgather, BroadcastAlgo::shm};
    a.broadcast = parse_algo("WEFT_ALGO_BROADCAST", names, values);
  }
  {
    static const char* const names[] = {"auto", "binomial", "reduce_scatter_gather", "shm"};
    static const ReduceAlgo values[] = {ReduceAlgo::automatic, ReduceAlgo::binomial,
                                        ReduceAlgo::reduce_scatter_gather, ReduceAlgo::shm};
    a.reduce = parse_algo("WEFT_ALGO_REDUCE", names, values);
  }
  {
    static const char* const names[] = {"auto", "ring", "bruck", "shm"};
    static const AllgatherAlgo values[] = {AllgatherAlgo::automatic, AllgatherAlgo::ring, AllgatherAlgo::bruck,
                                           AllgatherAlgo::shm};
    a.allgather = parse_algo("WEFT_ALGO_ALLGATHER", names, values);
  }
  {
    static const char* const names[] = {"auto", "ring", "shm"};
    static const ReduceScatterAlgo values[] = {ReduceScatterAlgo::automatic, ReduceScatterAlgo::ring,
                                               ReduceScatterAlgo::shm};
    a.reduce_scatter = parse_algo("WEFT_ALGO_REDUCE_SCATTER", names, values);
  }
  {
    static const char* const names[] = {"auto", "pairwise", "shm"};
    static const AlltoallAlgo values[] = {AlltoallAlgo::automatic, AlltoallAlgo::pairwise, AlltoallAlgo::shm};
    a.alltoall = parse_algo("WEFT_ALGO_ALLTOALL", names, values);
  }
  {
    static const char* const names[] = {"auto", "dissemination", "shm"};
    static const BarrierAlgo values[] = {BarrierAlgo::automatic, BarrierAlgo::dissemination, BarrierAlgo::shm};
    a.barrier = parse_algo("WEFT_ALGO_BARRIER", names, values);
  }
  if (const char* v = std::getenv("WEFT_P2P_CHUNK_BYTES"); v && *v) {
    errno = 0;
    char* end = nullptr;
    unsigned long long b = std::strtoull(v, &end, 10);
    if (errno || end == v || *end || b > (1ull << 30)) {
      fail(Status::invalid_argument, "WEFT_P2P_CHUNK_BYTES='%s'; expected 0 (whole blocks) .. 1073741824", v);
    }
    a.p2p_chunk_bytes = static_cast<size_t>(b);
  }
  return a;
}

void shm_settings_from_env(CommConfig& config) {
  if (const char* v = std::getenv("WEFT_SHM"); v && *v) {
    if (std::strcmp(v, "0") == 0) {
      config.shm = false;
    } else if (std::strcmp(v, "1") == 0) {
      config.shm = true;
    } else {
      fail(Status::invalid_argument, "WEFT_SHM='%s'; expected 0 or 1", v);
    }
  }
  if (const char* v = std::getenv("WEFT_SHM_SLOT_BYTES"); v && *v) {
    errno = 0;
    char* end = nullptr;
    unsigned long long b = std::strtoull(v, &end, 10);
    if (errno || end == v || *end || b < 4096 || b > (1ull << 30)) {
      fail(Status::invalid_argument, "WEFT_SHM_SLOT_BYTES='%s'; expected 4096 .. 1073741824", v);
    }
    config.shm_slot_bytes = static_cast<size_t>(b) & ~size_t{63};
  }
}

std::chrono::milliseconds timeout_from_env() {
  const char* v = std::getenv("WEFT_TIMEOUT");
  if (!v || !*v) return std::chrono::milliseconds(300000);
  errno = 0;
  char* end = nullptr;
  double seconds = std::strtod(v, &end);
  if (errno != 0 || end == v || *end != '\0' || !(seconds > 0) || !std::isfinite(seconds) || seconds > 1e7) {
    fail(Status::invalid_argument, "WEFT_TIMEOUT='%s' is not a positive number of seconds", v);
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000.0)));
}

}  // namespace weft
