// The stand-in NCCL's groups and launches (fake_nccl.cpp says what is modelled): argument checks,
// the per-thread group that collects operations, and queueing each communicator's share on its
// streams (after a delay, from a background thread, for non-blocking communicators).
#pragma once

#pragma GCC visibility push(default)
#include <nccl.h>
#pragma GCC visibility pop

#include "tests/cuda_emulator/fake_nccl_ops.h"

namespace weft::fake_nccl {

// ncclGroupStart/ncclGroupEnd nesting depth of the calling thread, as NCCL's group state.
extern constinit thread_local int t_depth;

// Issues what the outermost group collected.
ncclResult_t issue_group();

// NCCL's ncclEnqueueCheck: checks, then collects the op into the current group (or a group of
// one, issued at once).
ncclResult_t submit(ncclComm_t comm, Op op);

}  // namespace weft::fake_nccl
