// The two ring passes that several collectives share.
#pragma once

#include <cstdint>

#include "core/collectives/blocks.h"
#include "core/collectives/reducer.h"
#include "core/comm/channel.h"

namespace weft::coll {

// Ring reduce-scatter: afterwards `out` (block[rank].length elements) holds block `rank` of
// the reduction of every rank's `in`. `out` may alias in's own block. Uses scratch slots 2, 3.
// Steps used: step_base .. step_base + n - 2.
void ring_reduce_scatter(Channel& ch, const void* in, void* out, const Blocks& blocks, const Reducer& red,
                         uint32_t step_base);

// Ring allgather in place: block[rank] of buf is filled, afterwards every block is.
// Steps used: step_base .. step_base + n - 2.
void ring_allgather(Channel& ch, void* buf, const Blocks& blocks, size_t elem, uint32_t step_base);

}  // namespace weft::coll
