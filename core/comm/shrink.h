// Shrink: after ranks of a communicator died, the survivors agree on who is gone and form a
// new communicator without them (NCCL's ncclCommShrink, MPI ULFM's MPI_Comm_shrink).
//
// The old communicator may be broken (a wait failed) and its rank 0 (perhaps the store's
// host) may be among the dead, so the agreement uses neither its collectives nor the store:
// only transport point-to-point messages tagged with the old communicator's id and the
// reserved sequence kShrinkSequence (channel.h), the step carrying the shrink's epoch.
//
// Protocol (rotating coordinator, sticky decision):
//  - The coordinator is the lowest member this rank does not know to be dead. Every other rank
//    sends it a REPORT (the members it knows dead, its next unused communicator id) and waits
//    for a DECIDE from it; when the coordinator is found dead, the rank moves on to the next
//    lowest and reports again.
//  - The coordinator waits until every member it does not know dead (or hear reported dead)
//    has sent a REPORT or a DECIDE. A DECIDE seen from anyone is adopted unchanged; else it
//    decides: survivors = members minus every dead set it knows, id = the largest next
//    unused id reported. It sends the DECIDE to every member it does not know dead.
//  - A rank that accepts a DECIDE sends it on to every member it does not know dead before
//    returning. So a rank that accepted decision D and is still alive has delivered D to every
//    later coordinator, which waits for a message from it and adopts D: no two surviving
//    ranks return different decisions (unless a live rank was falsely taken for dead).
//  - Every wait backs off and ends at twice the communicator's deadline: survivors enter the
//    shrink up to one deadline apart (a rank blocked in an operation with live peers learns of
//    the death only when that operation times out), and the first must not give up on the last.
// A decision adopted from a coordinator that died while sending it still lists that
// coordinator: the new communicator is then consistent but holds a dead member, its first
// operation fails naming it, and the survivors shrink again.
#pragma once

#include <memory>

#include "core/comm/comm.h"

namespace weft {

// Collective over the surviving members of `old` (run it on old's executor). Throws a
// weft::Error naming ranks when this rank was excluded, the deadline passed or the agreed id
// could not be reserved here.
//
// Test hooks (tests/multiproc/test_shrink.cpp, tests/faults):
//   WEFT_TEST_SHRINK_EXIT_AT=<phase>:<rank>  world rank <rank> calls _exit(9) at <phase>:
//     "reported" (a non-coordinator, after sending its report), "collected" (the coordinator,
//     after hearing from everyone, before deciding), "half-decided" (the coordinator, after
//     sending its decision to half of the others).
//   WEFT_TEST_SHRINK_DROP=<rank>  rank <rank> of `old` drops the last other survivor from its
//     result after agreeing, to prove that the tests' agreement check catches a disagreement.
std::shared_ptr<Comm> shrink_comm(Comm& old, CommConfig config);

}  // namespace weft
