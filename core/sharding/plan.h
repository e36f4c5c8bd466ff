// Planning a redistribution (weft/mesh.h, "redistribution"): which steps turn one layout into
// another, each a collective over one mesh dim's group or a local copy, in the order that moves
// the fewest bytes; and, where no order of single-dim steps can do it (or the meshes differ), a
// point-to-point exchange of exactly the needed boxes. Pure arithmetic: every rank computes the
// same plan without communicating.
#pragma once

#include <cstdint>
#include <vector>

#include "core/sharding/sharded.h"

namespace weft::shard {

enum class StepKind : int { local = 0, allgather = 1, allreduce = 2, reduce_scatter = 3, alltoall = 4, exchange = 5 };
const char* step_name(StepKind k);

struct Step {
  StepKind kind;
  int mesh_dim;      // the mesh dim changed; -1 for an exchange
  Placement from, to;
  Layout before;     // on the source mesh
  Layout after;      // on the source mesh, or for an exchange on the destination mesh
  uint64_t bytes_sent = 0;      // by this rank (see weft_redistribute_step_t)
  uint64_t max_bytes_sent = 0;  // by the member that sends most
  bool on_dst_mesh = false;     // local steps after an exchange run on the destination mesh
};

struct Plan {
  std::vector<Step> steps;
  bool between_meshes = false;
};

// src and dst describe the same global tensor (checked by the caller).
Plan make_plan(const Sharded& src, const Sharded& dst);

// The sub-box of `box` (a member's box in layout with `mesh_dim` not sharding) that the member
// with coordinate c on mesh_dim holds when mesh_dim shards tensor dim d as the innermost split.
Box split_box(const Box& box, int d, int k, int c);

}  // namespace weft::shard
