// Loading a distributed checkpoint (weft/mesh.h, weft_checkpoint_load), and checking one
// (weft_checkpoint_verify). Not collective: each rank reads the index, then only the parts of
// stored shards that intersect the box its layout gives it, whatever mesh and layout saved them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/sharding/checkpoint_index.h"
#include "core/sharding/sharded.h"

namespace weft::shard {

// Fills each tensors[i]'s local memory with the values stored under names[i] in dir. All names,
// dtypes and global shapes are checked before any data is read; a read that fails (truncated
// file, checksum) may leave earlier tensors (and part of this one) written. A PARTIAL(sum) dim
// of the destination gets the value at coordinate 0 and zeros elsewhere (weft/mesh.h: a
// REPLICATE dim made PARTIAL keeps its value); other PARTIAL ops get the value everywhere.
void checkpoint_load(const std::string& dir, const std::vector<std::string>& names,
                     const std::vector<std::shared_ptr<const Sharded>>& tensors);

// Every tensor tiles its shape, and every shard reads back with its length and checksums.
void checkpoint_verify(const std::string& dir, const CheckpointIndex& index);

}  // namespace weft::shard
