// A device mesh (weft/mesh.h, "meshes"): an n-d grid of a communicator's ranks with named dims,
// and one sub-communicator per set of dims, all made when the mesh is made so queries never
// communicate. Every rank of the parent holds the mesh; non-members hold a descriptor (the grid
// without coordinates or communicators) so they can describe the other side of a
// redistribution between meshes.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/comm.h"
#include "core/sharding/layout.h"

namespace weft::mesh {

class Mesh {
 public:
  // Collective over every rank of parent (run it on parent's executor). ranks: mesh position ->
  // parent rank, product(shape) of them (empty = all of parent's ranks in order). Throws
  // invalid_argument for bad shapes, names or ranks and mismatch when ranks disagree.
  static std::shared_ptr<Mesh> create(const std::shared_ptr<Comm>& parent, std::vector<int> shape,
                                      std::vector<std::string> names, std::vector<int> ranks);

  int ndims() const { return static_cast<int>(shape_.size()); }
  const std::vector<int>& shape() const { return shape_; }
  const std::vector<std::string>& names() const { return names_; }
  int size() const { return static_cast<int>(parent_ranks_.size()); }
  bool member() const { return pos_ >= 0; }
  int position() const { return pos_; }               // mesh rank (row-major); -1 when not a member
  const std::vector<int>& coords() const { return coords_; }  // empty when not a member
  int parent_rank(int pos) const { return parent_ranks_[static_cast<size_t>(pos)]; }
  // The mesh position of a parent rank, -1 when it is not a member.
  int position_of_parent_rank(int parent_rank) const;
  std::vector<int> coords_of(int pos) const;
  int position_of(const std::vector<int>& coords) const;
  const std::shared_ptr<Comm>& parent() const { return parent_; }

  // The communicator over the dims in `mask` (bit m = mesh dim m), ranks ordered row-major over
  // those dims. Members only; mask in 1 .. 2^ndims - 1.
  const std::shared_ptr<Comm>& group(unsigned mask) const { return groups_[mask]; }
  const std::shared_ptr<Comm>& whole() const { return groups_[(1u << shape_.size()) - 1]; }
  // The position in group(1 << dim) of the member with coordinate c on `dim` is c.

  // The box of the global tensor held by member `pos` in `layout`.
  shard::Box box_of(int pos, const shard::Shape& global, const shard::Layout& layout) const {
    return shard::local_box(global, shape_, layout, coords_of(pos));
  }

 private:
  std::vector<int> shape_;
  std::vector<std::string> names_;
  std::vector<int> parent_ranks_;
  std::shared_ptr<Comm> parent_;
  int pos_ = -1;
  std::vector<int> coords_;
  std::array<std::shared_ptr<Comm>, 1u << shard::kMaxMeshDims> groups_;
};

}  // namespace weft::mesh
