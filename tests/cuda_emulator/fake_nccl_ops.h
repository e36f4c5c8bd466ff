// The stand-in NCCL's operations (fake_nccl.cpp says what is modelled): an operation, and running
// one communicator's share of a group on the stream worker, through files in the communicator's
// directory (c<k>.<rank> for collectives, p<src>.<dst>.<n> for sends).
#pragma once

#pragma GCC visibility push(default)
#include <nccl.h>
#pragma GCC visibility pop

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "tests/cuda_emulator/fake_nccl_state.h"

namespace weft::fake_nccl {

enum class Kind : uint32_t { allreduce = 1, broadcast, reduce, allgather, reducescatter, send, recv };

const char* kind_name(Kind k);

struct Op {
  Kind kind;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;  // root, or the peer of a send/recv
  cudaStream_t stream;
  uint64_t seq = 0;  // collective number, or the number of the send/recv to/from this peer
};

// One communicator's share of one group (or one call outside a group): the ops run together,
// after the communicator's previous unit, whatever stream each is on.
struct Unit {
  std::shared_ptr<State> st;
  std::vector<Op> ops;
  uint64_t seq = 0;
};

// Runs the unit's ops once the communicator's previous unit has run (NCCL serialises a
// communicator's work); skipped after an abort or a failure. Counts itself in units_done.
void execute(const Unit& u);

}  // namespace weft::fake_nccl
