// Megatron's tensor / sequence parallel regions (weft/training.h, weft_region_apply) as
// redistributions of core/sharding over one mesh dim, every other mesh dim REPLICATE:
//   all-gather      S(split_dim) -> R
//   reduce-scatter  P(sum)       -> S(split_dim)
//   all-reduce      P(sum)       -> R
//   keep chunk      R            -> S(split_dim)   (a local slice)
//   identity        R            -> R              (a copy; nothing when in and out are one view)
// so chunks follow the layouts' split rule (torch.chunk's, uneven and empty chunks included)
// and the steps run on core/sharding/redistribute.cpp's algorithm over host or device memory.
// Pure arithmetic and validation here: no communication, no data.
#pragma once

#include <memory>

#include "core/mesh/mesh.h"
#include "core/sharding/plan.h"
#include "core/sharding/sharded.h"

namespace weft::training {

// weft_region_t's values.
enum class Region : int { copy = 0, reduce = 1, scatter = 2, gather = 3, seq_gather = 4, seq_reduce_scatter = 5 };
constexpr int kNumRegions = 6;
const char* region_name(Region r);  // "WEFT_REGION_COPY", ...

// The communication one direction of a region makes.
enum class RegionOp { identity, allreduce, keep_chunk, allgather, reduce_scatter };
RegionOp region_op(Region r, bool backward);
const char* region_op_name(RegionOp op);  // "identity", "all-reduce (sum)", ...

// Whether the op splits along split_dim (the chunk rule applies, so split_dim must be a dim of
// the tensor); identity and all-reduce keep the whole tensor on both sides and ignore it.
bool region_splits(RegionOp op);
// Whether in and out may be one view (in == out): the ops that keep the shape.
inline bool region_in_place_ok(RegionOp op) { return !region_splits(op); }

// One call, validated and ready to run: the two sides as sharded tensors of one global shape on
// `mesh`, and the plan from in into out (empty for identity: redistribute() then copies).
struct RegionCall {
  RegionOp op = RegionOp::identity;
  std::shared_ptr<const shard::Sharded> in;
  std::shared_ptr<const shard::Sharded> out;
  std::shared_ptr<const shard::Plan> plan;
};

// A side of a call as the caller passed it: its view and memory kind.
struct RegionTensor {
  kernels::StridedView view;  // elem set from the dtype; shape/ndim as passed
  DType dtype = DType::f32;
  bool on_device = false;  // declared CUDA device memory (device_type WEFT_DEVICE_CUDA)
  int device = -1;
};

// Builds the call for this rank (a member of `mesh`) along mesh dim `dim`. Throws
// invalid_argument naming "in", "out" or "split_dim" for: different dtypes, a split_dim outside
// the tensor's dims (ops that split), a shape that is not what the op makes (naming the
// argument, the expected and the actual shape, and this rank), and overlapping memory other
// than in == out for identity and all-reduce. The whole extent along split_dim is the gathered
// side's own: out's for an all-gather, in's for every other op (each rank knows it, so every
// rank derives the same global shape without communicating).
RegionCall make_region_call(const std::shared_ptr<mesh::Mesh>& mesh, int dim, RegionOp op, int split_dim,
                            const RegionTensor& in, const RegionTensor& out);

// True when in and out are the same view (same first element, shape and strides): the one
// overlap identity and all-reduce accept.
bool same_view(const kernels::StridedView& a, const kernels::StridedView& b);

}  // namespace weft::training
