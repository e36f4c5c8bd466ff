// WEFT_DEBUG=check (or config check_collectives): before a collective, every rank tells every
// other rank what it is about to do, and all ranks fail with Status::mismatch, showing both
// sides, when they disagree, instead of hanging or producing garbage. The exchange completes
// on every rank before anyone fails, so the communicator stays usable afterwards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/comm/channel.h"
#include "core/common/dtype.h"

namespace weft::coll {

struct CallSignature {
  const char* operation = "";
  int dtype = -1;          // -1 = not part of the contract
  int op = -1;
  int root = -1;
  uint64_t count = 0;      // must be equal on every rank (or UINT64_MAX = not compared)
  uint64_t layout_hash = 0;  // hash of count/displacement arrays that must agree on all ranks
  // For alltoallv: what this rank sends to each peer, checked against the peer's recvcounts.
  const std::vector<size_t>* send_counts = nullptr;
  const std::vector<size_t>* recv_counts = nullptr;
};

constexpr uint64_t kNotCompared = ~uint64_t{0};

uint64_t hash_sizes(const std::vector<size_t>& a, const std::vector<size_t>& b);

// No-op unless checking is enabled for the communicator.
void check_signature(Channel& ch, const CallSignature& mine);

}  // namespace weft::coll
