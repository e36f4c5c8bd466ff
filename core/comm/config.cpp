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
    static const char* const names[] = {"auto", "recursive_doubling", "ring", "rabenseifner"};
    static const AllreduceAlgo values[] = {AllreduceAlgo::automatic, AllreduceAlgo::recursive_doubling,
                                           AllreduceAlgo::ring, AllreduceAlgo::rabenseifner};
    a.allreduce = parse_algo("WEFT_ALGO_ALLREDUCE", names, values);
  }
  {
    static const char* const names[] = {"auto", "binomial", "scatter_allgather"};
    static const BroadcastAlgo values[] = {BroadcastAlgo::automatic, BroadcastAlgo::binomial,
                                           BroadcastAlgo::scatter_allgather};
    a.broadcast = parse_algo("WEFT_ALGO_BROADCAST", names, values);
  }
  {
    static const char* const names[] = {"auto", "binomial", "reduce_scatter_gather"};
    static const ReduceAlgo values[] = {ReduceAlgo::automatic, ReduceAlgo::binomial,
                                        ReduceAlgo::reduce_scatter_gather};
    a.reduce = parse_algo("WEFT_ALGO_REDUCE", names, values);
  }
  {
    static const char* const names[] = {"auto", "ring", "bruck"};
    static const AllgatherAlgo values[] = {AllgatherAlgo::automatic, AllgatherAlgo::ring, AllgatherAlgo::bruck};
    a.allgather = parse_algo("WEFT_ALGO_ALLGATHER", names, values);
  }
  return a;
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
