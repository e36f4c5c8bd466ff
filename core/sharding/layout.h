// Layouts as core/ sees them (weft/mesh.h, "layouts"): one placement per mesh dim, the split
// rule for uneven sizes (torch.chunk's), and the box of the global tensor each mesh member
// holds. Pure arithmetic: no communication, no data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/common/dtype.h"

namespace weft::shard {

constexpr int kMaxTensorDims = 8;
constexpr int kMaxMeshDims = 4;

enum class Kind : int { replicate = 0, shard = 1, partial = 2 };

struct Placement {
  Kind kind = Kind::replicate;
  int dim = 0;                  // Kind::shard: the tensor dim
  ReduceOp op = ReduceOp::sum;  // Kind::partial: how the terms combine

  bool operator==(const Placement& o) const {
    return kind == o.kind && (kind != Kind::shard || dim == o.dim) && (kind != Kind::partial || op == o.op);
  }
  bool is_shard() const { return kind == Kind::shard; }
  bool is_partial() const { return kind == Kind::partial; }
};
using Layout = std::vector<Placement>;  // one per mesh dim
using Shape = std::vector<int64_t>;

// "S(0)", "R", "P(sum)" and "[S(0), R]" for messages and plans.
std::string describe(const Placement& p);
std::string describe(const Layout& layout);

// A box of the global tensor: the index of its first element and its extent per dim.
struct Box {
  Shape offset;
  Shape shape;
  int64_t numel() const;
  bool operator==(const Box& o) const { return offset == o.offset && shape == o.shape; }
};
// The common part of two boxes of one tensor (extents 0 where they do not meet).
Box intersect(const Box& a, const Box& b);

// The split rule: chunk i of a dim of n elements over k ranks is [begin, end) with chunk size
// c = ceil(n / k): begin = min(i * c, n), end = min(begin + c, n).
struct Range {
  int64_t begin;
  int64_t end;
};
Range chunk(int64_t n, int64_t k, int64_t i);

// The box held by the mesh member at `coords`: for each tensor dim, the mesh dims that shard it
// split it in mesh-dim order, leftmost outermost.
Box local_box(const Shape& global, const std::vector<int>& mesh_shape, const Layout& layout,
              const std::vector<int>& coords);

// Throws invalid_argument naming "placements[i]" for a shard of a tensor dim outside
// [0, tensor_ndim) or a partial with an op other than sum, avg, min, max.
void validate(const Layout& layout, int tensor_ndim);

// The mesh dims that shard tensor dim d, in mesh order.
std::vector<int> shard_dims_of(const Layout& layout, int d);

}  // namespace weft::shard
