// Finished transport operations kept per thread for the next call: the pipelined algorithms
// post an operation per chunk and user point-to-point one per send or receive, and the host
// path's steady state must not allocate per message (tests/multiproc/alloc-budget.txt).
// Unfinished operations never come back here: they go to the world's graveyard, since the
// transport may still write into them.
#pragma once

#include <memory>

#include "transports/transport.h"

namespace weft {

// A recycled operation (state idle, no error) or a new one.
std::unique_ptr<transport::Op> take_pooled_op();
// `op` must be finished (or never posted); NULL is ignored.
void return_pooled_op(std::unique_ptr<transport::Op> op);

}  // namespace weft
