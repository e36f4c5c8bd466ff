// The single-process reference for sharded tensors (weft/mesh.h): meshes as plain grids, the
// split rule, the global tensor, the terms PARTIAL layouts hold, the local piece every rank
// must hold after weft_redistribute, and the bytes a single-dim step must send.
//
// Written from mesh.h's prose alone; shares no code with core/mesh or core/sharding.
//
// Data: every element of the global tensor is a small non-negative integer (value_limit(dtype)
// at most), so that every term, every partial sum and every result below is exactly
// representable in every dtype and every comparison is bit for bit:
//   e5m2 represents the integers 0..8 exactly (beyond 8 only every other one), e4m3 0..16,
//   bf16 0..256, f16 0..2048, int8 0..127, uint8 0..255; the limits are 8, 16, 256, 1000, 120,
//   250 and 1000 for the wider types. Terms are never negative (unsigned types) and never
//   exceed the limit. (P(avg) sources of integer dtypes use limit / members, see Data.)
//
// PARTIAL sources: the mesh member at coordinates c holds term(c, g) for global element g:
//   1. linear dims (SUM, AVG) split the value in mesh-dim order: SUM into non-negative pieces
//      that add up to it, AVG into value +- d (one rank up, one down) whose mean is the value;
//   2. MAX dims: members off the "designated" coordinate (one per element and dim, chosen by
//      hash) subtract delta in [0, piece] from their piece; MIN dims add eps in [0, limit-piece].
// Because delta >= 0 vanishes at the designated coordinate and sums only shrink under it, the
// reductions commute: any order of all-reducing the partial dims gives the value, and so does
// any partial order (what a kept PARTIAL dim holds, see expected_term). Sums over SUM dims never
// exceed the value, so they stay exact too. Restrictions (checked): MIN and MAX never share a
// layout, and AVG and MIN only appear as a layout's only PARTIAL dim (their mixed partial
// results would be non-integers).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/weft.h"

namespace mpt::shard {

using Layout = std::vector<weft_placement_t>;
using Shape = std::vector<int64_t>;

weft_placement_t S(int dim);
weft_placement_t R();
weft_placement_t P(weft_op_t op);
bool same_placement(const weft_placement_t& a, const weft_placement_t& b);
std::string placement_name(const weft_placement_t& p);  // "S(0)", "R", "P(sum)"
std::string layout_name(const Layout& l);               // "[S(0),P(max)]"
std::string shape_name(const Shape& s);                 // "{5,3}", "{}" for a scalar
// "S0" "S1" "R" "Psum" "Pmax" "Pavg" "Pmin", and "S0,R" for layouts (for command lines).
bool parse_layout(const std::string& text, Layout* out);
std::string layout_arg(const Layout& l);

// A mesh as the reference sees it: its shape and, in mesh order, the parent ranks of its
// members (row-major over the shape: the last dim varies fastest).
struct Mesh {
  std::vector<int> shape;
  std::vector<int> ranks;  // parent rank of each mesh position

  int ndims() const { return static_cast<int>(shape.size()); }
  int size() const;
  std::vector<int> coords(int mesh_rank) const;
  int mesh_rank_of(const std::vector<int>& coords) const;
  int position_of_parent(int parent_rank) const;  // -1 when not a member
  // The members sharing `mesh_rank`'s coordinates on every dim outside `dims` (increasing),
  // in row-major order over `dims`: the group weft_mesh_comm(dims) gives.
  std::vector<int> group(int mesh_rank, const std::vector<int>& dims) const;
};

// torch.chunk's rule for one split: n elements over k ranks, chunk c = ceil(n / k); rank i
// holds [i*c, min((i+1)*c, n)) (empty past the end).
void chunk(int64_t n, int k, int i, int64_t* start, int64_t* len);

struct Box {
  Shape offset, shape;
  int64_t numel() const;
};
// The global box of mesh member `mesh_rank`'s local piece: for every tensor dim, the mesh dims
// that shard it split it left to right, each splitting the previous chunk again (nested).
Box local_box(const Mesh& mesh, const Layout& layout, const Shape& global, int mesh_rank);
int64_t overlap_numel(const Box& a, const Box& b);

int64_t numel(const Shape& s);
// Row-major linear index of a global index.
int64_t linear_index(const Shape& global, const int64_t* idx);

// The largest value a term or element may take in dtype (see the comment above).
int64_t value_limit(weft_dtype_t dt);
// Bit pattern of the integer v (0 <= v <= value_limit) in dtype.
uint64_t encode_int(weft_dtype_t dt, int64_t v);

// One global tensor and the terms its PARTIAL layouts hold.
class Data {
 public:
  // avg_ranks: the number of members along the source's P(avg) dim (1 without one). Integer
  // AVG divides the *wrapped* sum (common.h), so for integer dtypes the values shrink to
  // value_limit / avg_ranks: the sum of the terms then never wraps.
  Data(weft_dtype_t dt, uint64_t seed, Shape global, int avg_ranks = 1);

  weft_dtype_t dtype() const { return dt_; }
  const Shape& global() const { return global_; }
  int64_t value(int64_t linear) const;  // the global value of element `linear`

  // What member `mesh_rank` of `mesh` holds at element `linear` in layout `layout` (the value
  // itself when no dim is PARTIAL). This is how the test fills the source.
  int64_t term(const Mesh& mesh, const Layout& layout, int mesh_rank, int64_t linear) const;

  // What member `dst_rank` of dst_mesh must hold at element `linear` after
  // weft_redistribute(src, dst). mesh.h fixes it as follows:
  //   - a PARTIAL dim of dst is "kept" when src is on the same mesh and has the same PARTIAL
  //     op on that dim (no step changes it): the member keeps the terms along it; every other
  //     PARTIAL dim of src is reduced.
  //   - a PARTIAL dim of dst that is not kept is a REPLICATE -> PARTIAL step: SUM keeps the
  //     value on coordinate 0 and zeros elsewhere, AVG/MIN/MAX keep it everywhere.
  int64_t expected(const Mesh& src_mesh, const Layout& src, bool same_mesh, const Mesh& dst_mesh, const Layout& dst,
                   int dst_rank, int64_t linear) const;

 private:
  // The reduction over the src-partial dims in `reduce` (all others at coords' values).
  int64_t reduce_terms(const Mesh& mesh, const Layout& layout, std::vector<int>& coords,
                       const std::vector<int>& reduce, size_t next, int64_t linear) const;
  int64_t term_at(const Mesh& mesh, const Layout& layout, const std::vector<int>& coords, int64_t linear) const;

  weft_dtype_t dt_;
  uint64_t seed_;
  Shape global_;
  int64_t limit_;
};

// Checks the layout restrictions above; returns "" or what is wrong.
std::string check_partial_mix(const Layout& l);
// The avg_ranks argument of Data for a source layout on mesh.
int avg_ranks(const Mesh& mesh, const Layout& l);

// Bytes member `mesh_rank` must send in a step that changes only mesh dim `dim` from src to
// dst (SHARD->REPLICATE all-gather, PARTIAL->SHARD reduce-scatter, SHARD(a)->SHARD(b)
// all-to-all): the elements of its source box that each other member of its `dim` group needs,
// i.e. sum over peers j of |src_box(me) & dst_box(j)| elements. Algorithm-independent: what a
// direct exchange moves.
uint64_t single_dim_bytes(const Mesh& mesh, const Layout& src, const Layout& dst, const Shape& global,
                          weft_dtype_t dt, int dim, int mesh_rank);

}  // namespace mpt::shard
