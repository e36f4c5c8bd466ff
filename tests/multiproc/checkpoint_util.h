// What the checkpoint tests (test_checkpoint*.cpp, checkpoint_tools_test.py) share: the global
// tensors they save, generated from element indices; their own implementation of mesh.h's split
// rule (no code shared with core/sharding); local pieces in contiguous or transposed memory;
// and the handles, directories and files around a save and a load. Talks to weft.h only.
//
// Values: byte k of element `linear` of a tensor with seed s is (linear*131 + k*29 + s*7 + 13)
// mod 251 (raw bit patterns, compared bit for bit; checkpoint_tools_test.py computes the same).
// A PARTIAL(sum) tensor on a mesh dim of n members holds, at member r, the f32 term
// (linear mod 5) + r; its value is n*(linear mod 5) + n(n-1)/2.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/weft.h"

namespace ckt {

using Shape = std::vector<int64_t>;
using Layout = std::vector<weft_placement_t>;

weft_placement_t S(int dim);
weft_placement_t R();
weft_placement_t Psum();

unsigned char pattern_byte(uint32_t seed, int64_t linear, size_t k);
float partial_term(int64_t linear, int member);
float partial_value(int64_t linear, int members);

int64_t numel(const Shape& s);
std::string shape_text(const Shape& s);

// mesh.h's split rule, written again: chunk c = ceil(n/k); member i holds
// [min(i*c, n), min(i*c + c, n)); mesh dims split a tensor dim in mesh order, nested.
struct Box {
  Shape offset, shape;
};
Box ref_box(const Shape& global, const std::vector<int>& mesh_shape, const Layout& layout,
            const std::vector<int>& coords);
// Number of members with a non-empty box and coordinate 0 on every non-SHARD dim: how many
// shards a save stores.
size_t ref_shard_count(const Shape& global, const std::vector<int>& mesh_shape, const Layout& layout);

// A rank's local piece: memory it owns, row-major or transposed (column-major strides), every
// byte 0xCD until written.
class Piece {
 public:
  Piece(weft_dtype_t dt, Shape shape, bool transposed);
  weft_tensor_t view();  // points into this object
  unsigned char* at(const int64_t* idx);
  const Shape& shape() const { return shape_; }
  size_t esize() const { return esize_; }
  weft_dtype_t dtype() const { return dt_; }

 private:
  weft_dtype_t dt_;
  size_t esize_;
  Shape shape_, strides_;
  std::vector<unsigned char> mem_;
};

// Calls fn(idx) for every index of `shape` in row-major order (once for a 0-dim shape).
template <typename F>
void for_each_index(const Shape& shape, F&& fn) {
  if (numel(shape) == 0) return;
  Shape idx(shape.size(), 0);
  for (;;) {
    fn(idx.data());
    size_t k = shape.size();
    for (; k-- > 0;) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
    if (k == static_cast<size_t>(-1)) return;
  }
}

// What a tensor is in a test: its name, dtype, global shape, seed, and, for a tensor saved as
// PARTIAL(sum) terms (dtype f32), the number of members of that P(sum) mesh dim.
struct Spec {
  std::string name;
  weft_dtype_t dtype;
  Shape global;
  uint32_t seed;
  int partial_members = 0;
};

// A mesh handle with its shape and this rank's coordinates (empty for a non-member).
struct Mesh {
  weft_mesh_t handle = nullptr;
  std::vector<int> shape;
  std::vector<int> coords;
  ~Mesh();
  Mesh() = default;
  Mesh(const Mesh&) = delete;
};
// Collective over comm. ranks: NULL = all of comm's ranks in order.
void make_mesh(Mesh& m, weft_comm_t comm, const std::vector<int>& shape, const std::vector<int>* ranks = nullptr);

// A sharded tensor of `spec` on `mesh` in `layout` with its local piece.
struct Tensor {
  Spec spec;
  Layout layout;
  const Mesh* mesh = nullptr;
  Box box;            // this rank's box (members)
  Piece* piece = nullptr;
  weft_sharded_t handle = nullptr;
  ~Tensor();
  Tensor() = default;
  Tensor(const Tensor&) = delete;
};
// Makes the handle; fill: write the values the source holds (the PARTIAL(sum) terms where the
// layout has a P(sum) dim; at most one), else leave 0xCD.
void make_tensor(Tensor& t, const Spec& spec, const Mesh& mesh, const Layout& layout, bool transposed, bool fill);
// Number of elements that differ from what a load must give (the value; zeros for a
// PARTIAL(sum) dim where this rank is not at coordinate 0); the first one described in *first.
int64_t count_wrong(const Tensor& t, std::string* first);

// comm's ranks below n, in order; NULL on the others. Collective over comm.
weft_comm_t split_first(weft_comm_t comm, int n);
// A fresh directory made by rank 0 and its path on every rank. Collective over comm.
std::string shared_tempdir(weft_comm_t comm, const char* tag);
void remove_tree(const std::string& dir);
std::vector<std::string> list_files(const std::string& dir);
// The data files (data-*.bin) of dir, and their total size.
std::vector<std::string> data_files(const std::string& dir, uint64_t* total_bytes);
void flip_byte(const std::string& path, uint64_t offset);
void truncate_file(const std::string& path, uint64_t size);
void write_file(const std::string& path, const std::string& bytes);
void barrier(weft_comm_t comm);

}  // namespace ckt
