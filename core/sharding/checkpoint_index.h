// The index of a distributed checkpoint (core/schema/checkpoint.fbs) as core/ sees it, its
// encoding, and the checks a reader runs before trusting it: the FlatBuffers verifier, then
// every field against the others, then (per tensor) that its shards tile it exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/common/dtype.h"
#include "core/sharding/layout.h"

namespace weft::shard {

constexpr uint32_t kCheckpointFormatVersion = 1;
// Shards are checksummed per chunk of this many bytes as well as whole, so a load that needs a
// few rows of a large shard reads and checks about that much, not the whole shard.
constexpr uint64_t kCheckpointChunkBytes = uint64_t{1} << 20;
// Largest index.weft accepted (FlatBuffers' own limit is 2 GiB).
constexpr size_t kMaxIndexBytes = size_t{1} << 31;

struct StoredShard {
  Box box;  // in global coordinates
  std::string file;
  uint64_t byte_offset = 0;
  uint64_t byte_length = 0;
  uint32_t crc = 0;
  uint64_t chunk_bytes = kCheckpointChunkBytes;
  std::vector<uint32_t> chunk_crcs;
};

struct StoredTensor {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  std::vector<StoredShard> shards;
};

struct CheckpointIndex {
  uint32_t format_version = kCheckpointFormatVersion;
  std::string save_id;
  int nranks = 0;
  std::vector<StoredTensor> tensors;
};

// Size-prefixed FlatBuffer bytes (file identifier "WFCK").
std::string encode_index(const CheckpointIndex& index);
// Verifies, then checks every field: format version, dtypes, shapes (0..8 dims, extents >= 0),
// unique tensor names, each shard's box inside its tensor with the tensor's ndim, byte length =
// elements x element size, chunk checksums present, file names plain. `what` names the source
// in messages (a path, or "rank 3's shard list"). Throws invalid_argument (unsupported for a
// newer format version).
CheckpointIndex decode_index(const void* bytes, size_t size, const std::string& what);
// The tensor's shards are pairwise disjoint and cover it (their elements add up to the
// tensor's): otherwise some values were never stored. Throws invalid_argument naming `what` and
// the tensor.
void check_coverage(const StoredTensor& t, const std::string& what);

// dir/index.weft, decoded (a missing index says so).
CheckpointIndex read_index(const std::string& dir);
// Writes dir/index.weft atomically: to a temporary name, fsync (when `durable`), rename, fsync of
// the directory. A crash leaves either the old index or the new one, never a torn one.
// *renamed is set once the new index is in place (a later failure must not undo the files it
// names).
void write_index(const std::string& dir, const CheckpointIndex& index, bool durable, bool* renamed = nullptr);

// "[2, 0]" for messages.
std::string describe_shape(const Shape& s);
// "the shard at [2, 0] of shape [2, 5]".
std::string describe_shard(const StoredShard& s);

}  // namespace weft::shard
