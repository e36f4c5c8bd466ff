// Where a process learns its rank, the world size and the store address: weft's variables,
// then torchrun's, Open MPI's, PMI's and Slurm's (see weft_comm_init_from_env in weft.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace weft::bootstrap {

struct LaunchEnv {
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;         // -1 when the launcher did not say
  std::string master_addr;     // store host
  uint16_t master_port = 0;    // store port
  std::string secret;          // WEFT_JOB_SECRET, or a documented weak default
  bool store_hosted = false;   // WEFT_STORE_HOSTED=1: the launcher runs the store, not rank 0
  std::string source;          // "weft", "torchrun", "openmpi", "pmi", "slurm": for logs
};

// Reads the process environment. Throws weft::Error(invalid_argument) naming the variable that
// is missing or malformed and what was expected.
LaunchEnv read_launch_env();
// Same, with an injectable lookup (tests).
LaunchEnv read_launch_env(const std::function<const char*(const char*)>& getenv_fn);

}  // namespace weft::bootstrap
