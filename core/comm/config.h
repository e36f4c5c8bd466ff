// Communicator settings after defaults and environment are applied (weft_comm_config_t in
// core terms), and the algorithm each collective is forced to (WEFT_ALGO_<COLLECTIVE>).
#pragma once

#include <chrono>
#include <string>

namespace weft {

// `shm`: through a shared-memory segment, when every rank is on one host (else the
// size-based point-to-point choice).
enum class AllreduceAlgo { automatic, recursive_doubling, ring, rabenseifner, shm };
enum class BroadcastAlgo { automatic, binomial, scatter_allgather, shm };
enum class ReduceAlgo { automatic, binomial, reduce_scatter_gather, shm };
enum class AllgatherAlgo { automatic, ring, bruck, shm };
enum class ReduceScatterAlgo { automatic, ring, shm };
enum class AlltoallAlgo { automatic, pairwise, shm };
enum class BarrierAlgo { automatic, dissemination, shm };

// Read from the environment when a communicator is created (init, split, dup), so a program
// or test can set WEFT_ALGO_* and dup a communicator to get another algorithm.
struct AlgorithmChoice {
  AllreduceAlgo allreduce = AllreduceAlgo::automatic;
  BroadcastAlgo broadcast = BroadcastAlgo::automatic;
  ReduceAlgo reduce = ReduceAlgo::automatic;
  AllgatherAlgo allgather = AllgatherAlgo::automatic;
  ReduceScatterAlgo reduce_scatter = ReduceScatterAlgo::automatic;
  AlltoallAlgo alltoall = AlltoallAlgo::automatic;
  BarrierAlgo barrier = BarrierAlgo::automatic;
  // The point-to-point ring and halving passes cut each block into chunks of this many bytes
  // so that receiving, reducing and sending overlap (WEFT_P2P_CHUNK_BYTES; 0: whole blocks).
  size_t p2p_chunk_bytes = kDefaultP2PChunkBytes;
  static constexpr size_t kDefaultP2PChunkBytes = 1024 * 1024;
};

// Throws Error(invalid_argument) naming the variable, its value and the accepted names (or,
// for WEFT_P2P_CHUNK_BYTES, the accepted range).
AlgorithmChoice algorithms_from_env();

struct CommConfig {
  std::chrono::milliseconds timeout{300000};
  std::string name = "weft";
  bool check_collectives = false;
  AlgorithmChoice algorithms;
  // Shared-memory collectives for single-host communicators: WEFT_SHM=0 turns them off;
  // WEFT_SHM_SLOT_BYTES sets each rank's slot (the pipelining chunk), default 512 KiB.
  bool shm = true;
  size_t shm_slot_bytes = 512 * 1024;
};

// Reads WEFT_SHM and WEFT_SHM_SLOT_BYTES into config. Throws on a bad value.
void shm_settings_from_env(CommConfig& config);

// Default timeout: WEFT_TIMEOUT (seconds, may be fractional) or 300 s. Throws on a bad value.
std::chrono::milliseconds timeout_from_env();

}  // namespace weft
