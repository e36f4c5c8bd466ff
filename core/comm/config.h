// Communicator settings after defaults and environment are applied (weft_comm_config_t in
// core terms), and the algorithm each collective is forced to (WEFT_ALGO_<COLLECTIVE>).
#pragma once

#include <chrono>
#include <string>

namespace weft {

enum class AllreduceAlgo { automatic, recursive_doubling, ring, rabenseifner };
enum class BroadcastAlgo { automatic, binomial, scatter_allgather };
enum class ReduceAlgo { automatic, binomial, reduce_scatter_gather };
enum class AllgatherAlgo { automatic, ring, bruck };

// Read from the environment when a communicator is created (init, split, dup), so a program
// or test can set WEFT_ALGO_* and dup a communicator to get another algorithm.
struct AlgorithmChoice {
  AllreduceAlgo allreduce = AllreduceAlgo::automatic;
  BroadcastAlgo broadcast = BroadcastAlgo::automatic;
  ReduceAlgo reduce = ReduceAlgo::automatic;
  AllgatherAlgo allgather = AllgatherAlgo::automatic;
};

// Throws Error(invalid_argument) naming the variable, its value and the accepted names.
AlgorithmChoice algorithms_from_env();

struct CommConfig {
  std::chrono::milliseconds timeout{300000};
  std::string name = "weft";
  bool check_collectives = false;
  AlgorithmChoice algorithms;
};

// Default timeout: WEFT_TIMEOUT (seconds, may be fractional) or 300 s. Throws on a bad value.
std::chrono::milliseconds timeout_from_env();

}  // namespace weft
