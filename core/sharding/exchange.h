// The point-to-point exchange of boxes (weft/mesh.h: moves no single-dim step can make, and
// every move between two meshes): which source member sends which box to which destination
// member. Every rank computes the same routes from the layouts alone, so sends and receives
// pair up without negotiation.
#pragma once

#include <vector>

#include "core/sharding/sharded.h"

namespace weft::shard {

struct Transfer {
  int src_pos;  // position in the source mesh
  int dst_pos;  // position in the destination mesh
  Box box;      // global box, non-empty
};

// Routes from src (mesh and global shape from `src`, layout src_layout) to dst (dst_layout).
// src_layout may keep PARTIAL dims only when both sides are on one mesh and dst_layout has the
// same PARTIAL there: each destination then takes its terms from sources with its coordinates
// on those dims. Among replicas of a box, a destination takes it from a source in its own
// process when there is one (no wire), else from replica (dst_pos mod count), spreading load.
// Order: by dst_pos, then by the source box's position in row-major order of its offset.
std::vector<Transfer> route_exchange(const Sharded& src, const Layout& src_layout, const Sharded& dst,
                                     const Layout& dst_layout);

// Bytes each source position sends to another process (self-transfers cost nothing).
std::vector<uint64_t> exchange_bytes(const Sharded& src, const Sharded& dst, const std::vector<Transfer>& routes);

}  // namespace weft::shard
