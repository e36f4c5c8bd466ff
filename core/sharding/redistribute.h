// Running a redistribution plan (core/sharding/plan.h): each single-dim step is one collective
// over the mesh dim's group, fed and drained through strided copies only where the pieces are
// not already contiguous slabs of the buffers; an exchange posts exactly the needed boxes
// point-to-point. The memory the tensors live in is the backend's business (backend.h).
#pragma once

#include "core/sharding/backend.h"
#include "core/sharding/plan.h"
#include "core/sharding/sharded.h"

namespace weft::shard {

// Collective over the members of src's and dst's meshes. Runs on the calling thread; the caller
// runs it where the mesh's (or, between meshes, the parent's) operations run: its executor.
// src.local and dst.local must not overlap.
void redistribute(const Sharded& src, const Sharded& dst, const Plan& plan, Backend& backend);
// Host memory, the plan made here.
void redistribute(const Sharded& src, const Sharded& dst);

}  // namespace weft::shard
