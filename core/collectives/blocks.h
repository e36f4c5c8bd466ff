// How a buffer is cut into one block per rank: offsets and lengths in elements. Even
// partitions put the remainder on the first blocks, so block sizes differ by at most one.
#pragma once

#include <cstddef>
#include <vector>

namespace weft::coll {

struct Blocks {
  std::vector<size_t> offset;
  std::vector<size_t> length;
  size_t max_length = 0;

  static Blocks even(size_t count, int n) {
    Blocks b;
    b.offset.resize(static_cast<size_t>(n));
    b.length.resize(static_cast<size_t>(n));
    size_t base = count / static_cast<size_t>(n), extra = count % static_cast<size_t>(n), at = 0;
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
      b.offset[i] = at;
      b.length[i] = base + (i < extra ? 1 : 0);
      at += b.length[i];
    }
    b.max_length = base + (extra ? 1 : 0);
    return b;
  }
  static Blocks uniform(size_t count_per_block, int n) {
    Blocks b;
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
      b.offset.push_back(i * count_per_block);
      b.length.push_back(count_per_block);
    }
    b.max_length = count_per_block;
    return b;
  }
  static Blocks from(const std::vector<size_t>& counts, const std::vector<size_t>& displs) {
    Blocks b;
    b.offset = displs;
    b.length = counts;
    for (size_t c : counts) b.max_length = c > b.max_length ? c : b.max_length;
    return b;
  }
};

}  // namespace weft::coll
