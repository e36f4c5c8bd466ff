// weft-bench's redistribution "collectives": weft_redistribute (weft/mesh.h) on a 1-d mesh over
// all ranks, measured and checked like the plain collectives so their rows compare on the same
// bytes:
//
//   redist_s2r   S(0) -> R       of a global tensor of `size` bytes    ~ allgather of `size`
//   redist_p2s   P(op) -> S(0)   of a global tensor of `size` bytes    ~ reduce_scatter of `size`
//   redist_s0s1  S(0) -> S(1)    each rank's piece is `size` bytes     ~ alltoall of `size`
//                                (the global tensor is nranks * size)
//
// As in nccl-tests, `size` is what the matching collective calls the message: allgather's
// receive buffer (the whole tensor), reduce_scatter's send buffer (the whole tensor, one term
// per rank), alltoall's per-rank buffer (so redist_s0s1's global tensor is nranks times larger
// and every rank sends and receives exactly what alltoall's ranks do). busbw uses the matching
// collective's factor, (n-1)/n.
//
// The global tensor is 2-d, rows x cols, both multiples of nranks (every shard even), near
// square: cols = the largest multiple of nranks <= sqrt(elements), at least nranks; rows = the
// elements / cols rounded down to a multiple of nranks. The size column is rows * cols (or that
// / nranks) * element size, a little below the requested size when it does not divide.
//
// Element g (row-major global index) of the tensor is a function of g alone (of g and the rank
// for PARTIAL terms); the check compares every element of every rank's result with it.
// Timed: the weft_redistribute call only; the mesh is made once, the sharded handles once per
// size (prepare()). No in-place form (weft_redistribute refuses overlapping memory).
#pragma once

#include <memory>

#include "collectives.h"

namespace weftbench {

// The shape (sizes and the global rows x cols) of a redistribution at `requested_bytes`.
Shape redist_shape(Coll c, size_t requested_bytes, size_t elem_size, int nranks);

// False where the redistribution cannot take the op (PARTIAL(prod) does not exist).
bool redist_supports(Coll c, weft_op_t op);

// A redistribution case (c must be one of the redist_*); creates the mesh (collective).
std::unique_ptr<Bench> make_redistribution(const Comm& comm, Coll c, const DtypeInfo& t, weft_op_t op,
                                           size_t max_bytes);

}  // namespace weftbench
