// Collectives through the communicator's shared-memory segment (all ranks on one host).
// Each returns false, having done nothing, when the communicator has no segment; the caller
// then runs its point-to-point algorithm. Data moves in chunks of at most one slot, so the
// working set stays in cache and copy-in, reduction and copy-out of a chunk overlap across
// ranks. Reductions: each rank reduces one part of the chunk, so every element is reduced
// exactly once, in one place, and all ranks copy the same bits.
#pragma once

#include <cstddef>

#include "core/collectives/reducer.h"
#include "core/comm/channel.h"
#include "kernels/cpu/strided_copy.h"

namespace weft::coll {

bool shm_allreduce(Channel& ch, const void* send, void* recv, size_t count, const Reducer& red);
bool shm_reduce(Channel& ch, const void* send, void* recv, size_t count, const Reducer& red, int root);
bool shm_broadcast(Channel& ch, void* buf, size_t bytes, int root);
bool shm_allgather(Channel& ch, const void* send, void* recv, size_t block_bytes);
bool shm_reduce_scatter(Channel& ch, const void* send, void* recv, size_t recvcount, const Reducer& red);
// Block q of the input is send + q * block_bytes, or with `views` the row-major elements of
// views[q] (read straight into the segment: no packed copy). Chunks are whole elements of
// elem bytes, so both forms cut a block alike and ranks using either interoperate.
bool shm_alltoall(Channel& ch, const void* send, const kernels::StridedView* views, void* recv, size_t block_bytes,
                  size_t elem);
bool shm_barrier(Channel& ch);

}  // namespace weft::coll
