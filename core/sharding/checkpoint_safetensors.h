// Exporting a checkpoint as one safetensors file (weft/mesh.h,
// weft_checkpoint_export_safetensors): an 8-byte little-endian header length, a JSON header
// {"name": {"dtype", "shape", "data_offsets"}, "__metadata__": {...}} padded with spaces to a
// multiple of 8 bytes, then each tensor's bytes in row-major order, assembled from its shards.
// Readable by Hugging Face's safetensors and by anyone with a JSON parser.
#pragma once

#include <string>

#include "core/sharding/checkpoint_index.h"

namespace weft::shard {

// Writes `path` (through a temporary name in the same directory, renamed when complete). Every
// shard read is checked against its checksums; tensors must tile their shapes.
void export_safetensors(const std::string& dir, const CheckpointIndex& index, const std::string& path);

// The JSON header for `index` with data laid out in index order, padded to a multiple of 8
// bytes (exposed for tests).
std::string safetensors_header(const CheckpointIndex& index);

}  // namespace weft::shard
