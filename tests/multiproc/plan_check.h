// Checks weft_redistribute_plan against mesh.h's promises, without communication:
//   - a change of one mesh dim m (same mesh, m's group larger than one rank, a non-empty tensor,
//     and no mesh dim right of m sharding the tensor dim m shards before or after: that nested
//     split would change too)
//     runs exactly one communicating step, on m, of the documented kind: SHARD->REPLICATE
//     ALLGATHER, PARTIAL->REPLICATE ALLREDUCE, PARTIAL->SHARD REDUCE_SCATTER, SHARD(a)->SHARD(b)
//     ALLTOALL; REPLICATE->SHARD and REPLICATE->PARTIAL communicate nothing (LOCAL steps only);
//     SHARD->PARTIAL goes through REPLICATE (an ALLGATHER) and PARTIAL(x)->PARTIAL(y) through an
//     ALLREDUCE;
//   - for ALLGATHER, REDUCE_SCATTER and ALLTOALL of such a change: bytes_sent equals the bytes
//     the reference computes (shard::single_dim_bytes) and max_bytes_sent its maximum over the
//     mesh;
//   - an unchanged layout communicates nothing; LOCAL steps send nothing; between two meshes
//     the plan exchanges boxes (EXCHANGE steps, plus reductions of a PARTIAL source);
//   - the count query (steps = NULL) and a short capacity agree with the full answer.
#pragma once

#include <string>
#include <vector>

#include "sharding_reference.h"
#include "weft/weft.h"

namespace mpt {

struct PlanInput {
  const shard::Mesh* src_mesh;
  const shard::Mesh* dst_mesh;
  bool same_mesh;
  const shard::Layout* src;
  const shard::Layout* dst;
  const shard::Shape* global;
  weft_dtype_t dt;
  int my_src_rank;  // mesh position in src's mesh, -1 when not a member
};

// Returns the problems found ("" when none).
std::string check_plan(const PlanInput& in, weft_sharded_t src, weft_sharded_t dst);

const char* step_kind_name(int kind);

}  // namespace mpt
