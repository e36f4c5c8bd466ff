// The environment each rank starts with: the parent's, with the job's variables on top.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weftrun {

struct JobInfo {
  int world_size = 0;
  std::string master_addr;   // where weftrun's store listens
  uint16_t store_port = 0;   // weftrun's store: WEFT_MASTER_PORT
  uint16_t torch_port = 0;   // free port for torch.distributed's own store: MASTER_PORT
  std::string secret;        // WEFT_JOB_SECRET
};

// "NAME=value" strings: `base` (normally environ) minus every variable the job defines, then
// the job's variables for `rank`. The launcher defines the job, so a RANK or WEFT_RANK left in
// the user's shell is overridden, never inherited.
std::vector<std::string> rank_environment(const char* const* base, const JobInfo& job, int rank);

// A TCP port on `addr` that is free right now (bind to port 0, read it back, close). Another
// process could take it before the rank binds it; torchrun accepts the same race.
uint16_t pick_free_port(const std::string& addr);

}  // namespace weftrun
