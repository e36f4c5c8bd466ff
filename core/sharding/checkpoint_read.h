// Reading stored shards of a checkpoint (core/sharding/checkpoint_index.h): only the chunks
// that hold the wanted box, each checked against its CRC-32C before any of its bytes is used;
// or, for verification, a whole shard with its whole checksum. Used by load, verify and the
// safetensors export. Data files are opened once per reader.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/sharding/checkpoint_files.h"
#include "core/sharding/checkpoint_index.h"
#include "kernels/cpu/strided_copy.h"

namespace weft::shard {

class ShardReader {
 public:
  explicit ShardReader(std::string dir) : dir_(std::move(dir)) {}

  // Copies `box` (global coordinates, inside s.box) of shard s of tensor t into dst, a host view
  // of box's shape. Reads the chunks of s that hold box, in pieces of bounded size, and checks
  // each chunk's checksum. Errors (invalid_argument) name the file and the tensor: a missing or
  // truncated data file, a checksum mismatch.
  void read_box(const StoredTensor& t, const StoredShard& s, const Box& box, const kernels::StridedView& dst);

  // Reads all of s once, checking each chunk's checksum and the whole shard's.
  void verify(const StoredTensor& t, const StoredShard& s);

 private:
  // The shard's data file, opened once; fails when it is shorter than the shard needs.
  const Fd& file_for(const StoredTensor& t, const StoredShard& s);
  // Reads chunks [c0, c1] of s into buf_ (at (c - c0) * chunk_bytes) where needed[c - c0]; checks them.
  void read_chunks(const StoredTensor& t, const StoredShard& s, uint64_t c0, uint64_t c1,
                   const std::vector<char>& needed);
  [[noreturn]] void checksum_error(const StoredTensor& t, const StoredShard& s, uint64_t begin, uint64_t end,
                                   const char* what, uint32_t stored, uint32_t got) const;
  char* buffer(size_t bytes);

  std::string dir_;
  std::map<std::string, Fd> files_;
  std::unique_ptr<char[]> buf_;
  size_t buf_size_ = 0;
};

}  // namespace weft::shard
