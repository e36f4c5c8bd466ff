// How a buffer is cut into one block per rank: offsets and lengths in elements. Even
// partitions put the remainder on the first blocks, so block sizes differ by at most one.
//
// A Blocks is a view computed on demand (even, uniform) or read from the caller's arrays
// (from): making one allocates nothing, so the collectives' steady state stays free of heap
// allocations (tests/multiproc/syscall-budget counts them). The arrays given to from() must
// outlive the view.
#pragma once

#include <cstddef>
#include <vector>

namespace weft::coll {

class Blocks {
 public:
  static Blocks even(size_t count, int n) {
    Blocks b(Kind::even, static_cast<size_t>(n));
    b.base_ = count / b.n_;
    b.extra_ = count % b.n_;
    b.max_length = b.base_ + (b.extra_ ? 1 : 0);
    return b;
  }
  static Blocks uniform(size_t count_per_block, int n) {
    Blocks b(Kind::uniform, static_cast<size_t>(n));
    b.base_ = count_per_block;
    b.max_length = count_per_block;
    return b;
  }
  static Blocks from(const std::vector<size_t>& counts, const std::vector<size_t>& displs) {
    Blocks b(Kind::explicit_arrays, counts.size());
    b.counts_ = counts.data();
    b.displs_ = displs.data();
    for (size_t c : counts) b.max_length = c > b.max_length ? c : b.max_length;
    return b;
  }

  size_t size() const { return n_; }
  size_t offset(size_t i) const {
    switch (kind_) {
      case Kind::even: return i * base_ + (i < extra_ ? i : extra_);
      case Kind::uniform: return i * base_;
      case Kind::explicit_arrays: return displs_[i];
    }
    return 0;
  }
  size_t length(size_t i) const {
    switch (kind_) {
      case Kind::even: return base_ + (i < extra_ ? 1 : 0);
      case Kind::uniform: return base_;
      case Kind::explicit_arrays: return counts_[i];
    }
    return 0;
  }

  size_t max_length = 0;

 private:
  enum class Kind { even, uniform, explicit_arrays };
  Blocks(Kind kind, size_t n) : kind_(kind), n_(n) {}

  Kind kind_;
  size_t n_;
  size_t base_ = 0, extra_ = 0;                          // even, uniform
  const size_t* counts_ = nullptr;                       // explicit_arrays
  const size_t* displs_ = nullptr;
};

}  // namespace weft::coll
