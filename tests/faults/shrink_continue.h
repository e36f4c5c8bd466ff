// The fault matrix's "shrink" scenarios (scripts/fault-matrix): after a rank reported the
// failure, it shrinks the communicator (weft_comm_shrink) and runs a checked stream on the new
// one. A new communicator that still holds a rank that died during the shrink fails its first
// operation on every survivor; they then shrink it again (at most 4 rounds).
//
// Lines for the script (one each, flushed):
//   SHRINK-OK rank=R size=S members=W1,W2,.. rounds=K shrink_ms=MS ops=N t=WALL_MS
//     (members: the world ranks of the new communicator in its order, gathered over it, so
//     every survivor prints the list the others actually hold)
//   SHRINK-FAILED rank=R round=K status=NAME msg="..."
#pragma once

#include <cstdint>

#include "weft/weft.h"

namespace faults {

// Returns the process exit code: 0 when the survivors shrank and the checked stream on the new
// communicator passed (then every operation's result matched the reference), 8 otherwise; 7
// under WEFT_TEST_INJECT=1 when a corrupted result went uncaught (an INJECT line says so).
// `comm` (the old communicator) is not destroyed here.
int shrink_and_continue(weft_comm_t comm, int world_rank, uint64_t seed, size_t max_bytes, long ops);

}  // namespace faults
