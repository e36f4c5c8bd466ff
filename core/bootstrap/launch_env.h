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
  bool weak_secret = false;    // no WEFT_JOB_SECRET: secret is derived from the job's address
  bool store_hosted = false;   // WEFT_STORE_HOSTED=1: the launcher runs the store, not rank 0
  std::string source;          // "weft", "torchrun", "openmpi", "pmi", "slurm": for logs
};

// Reads the process environment. Throws weft::Error(invalid_argument) naming the variable that
// is missing or malformed and what was expected.
LaunchEnv read_launch_env();
// Same, with an injectable lookup (tests).
LaunchEnv read_launch_env(const std::function<const char*(const char*)>& getenv_fn);

// What rank 0 says (once, at WEFT_DEBUG=info) when it hosts the store on bind_addr: "" when the
// job has a real secret or the store listens on loopback only; otherwise that anyone who reaches
// the port can join. No launcher weft reads (torchrun, Open MPI, PMI, Slurm) hands its ranks a
// shared secret, and the ids they share (job id, run id) are no secret either, so weft cannot
// derive one: it says so instead.
std::string open_store_warning(const LaunchEnv& env, const std::string& bind_addr);

}  // namespace weft::bootstrap
