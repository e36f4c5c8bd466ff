#include "core/sharding/checkpoint_index.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "core/common/status.h"
#include "core/schema/checkpoint_generated.h"
#include "core/sharding/checkpoint_files.h"

namespace weft::shard {

static_assert(static_cast<int>(schema::CheckpointDType::U64) == static_cast<int>(DType::u64) &&
                  static_cast<int>(schema::CheckpointDType::F8_E5M2) == static_cast<int>(DType::f8e5m2),
              "checkpoint.fbs dtypes must equal weft_dtype_t");

namespace {

// Above this many shards per tensor the pairwise overlap test (quadratic) is skipped and only
// the element count is checked; saves never write overlapping shards, so this only limits how
// much of a hand-made index is examined.
constexpr size_t kMaxPairwiseShards = 1024;

// The verifier only checks a vector's 4-byte length alignment, so an int64 vector in a hand-made
// (or damaged) file may sit at an address that is 4 mod 8: copy the bytes rather than load
// int64s in place (found by tests/fuzz/fuzz_checkpoint_index under UBSan). Little-endian, as
// the file is and as weft's hosts are.
std::vector<int64_t> longs(const flatbuffers::Vector<int64_t>* v) {
  std::vector<int64_t> out(v->size());
  if (!out.empty()) std::memcpy(out.data(), v->Data(), out.size() * sizeof(int64_t));
  return out;
}

// Elements of `shape`, or -1 when it times elem bytes would not fit in int64.
int64_t checked_numel(const Shape& shape, size_t elem) {
  int64_t n = 1;
  const int64_t limit = std::numeric_limits<int64_t>::max() / static_cast<int64_t>(elem);
  for (int64_t e : shape) {
    if (e != 0 && n > limit / e) return -1;
    n *= e;
  }
  return n;
}

void decode_shard(const schema::CheckpointShard* fs, const StoredTensor& t, size_t i, const std::string& what,
                  StoredShard& s) {
  auto bad = [&](const std::string& why) {
    fail(Status::invalid_argument, "%s: tensor '%s' shard %zu: %s", what.c_str(), t.name.c_str(), i, why.c_str());
  };
  s.box.offset = longs(fs->offset());
  s.box.shape = longs(fs->shape());
  if (s.box.offset.size() != t.shape.size() || s.box.shape.size() != t.shape.size()) {
    bad(format("its box has %zu/%zu dims but the tensor has %zu", s.box.offset.size(), s.box.shape.size(),
               t.shape.size()));
  }
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (s.box.offset[d] < 0 || s.box.shape[d] < 0 || s.box.offset[d] > t.shape[d] ||
        s.box.shape[d] > t.shape[d] - s.box.offset[d]) {
      bad(format("box offset %s shape %s lies outside the tensor's shape %s", describe_shape(s.box.offset).c_str(),
                 describe_shape(s.box.shape).c_str(), describe_shape(t.shape).c_str()));
    }
  }
  s.file = fs->file()->str();
  if (!is_plain_file_name(s.file)) bad("its file name '" + s.file + "' is not a plain file name");
  s.byte_offset = fs->byte_offset();
  s.byte_length = fs->byte_length();
  const uint64_t expect = static_cast<uint64_t>(s.box.numel()) * dtype_size(t.dtype);
  if (s.byte_length != expect) {
    bad(format("byte_length is %llu; its box holds %llu bytes", static_cast<unsigned long long>(s.byte_length),
               static_cast<unsigned long long>(expect)));
  }
  if (s.byte_offset > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - s.byte_length) {
    bad("byte_offset + byte_length overflows");
  }
  s.crc = fs->crc32c();
  s.chunk_bytes = fs->chunk_bytes();
  if (s.chunk_bytes == 0) bad("chunk_bytes is 0");
  const uint64_t nchunks = (s.byte_length + s.chunk_bytes - 1) / s.chunk_bytes;
  const size_t have = fs->chunk_crc32c() ? fs->chunk_crc32c()->size() : 0;
  if (have != nchunks) {
    bad(format("%zu chunk checksums for %llu chunks of %llu bytes", have, static_cast<unsigned long long>(nchunks),
               static_cast<unsigned long long>(s.chunk_bytes)));
  }
  if (have) s.chunk_crcs.assign(fs->chunk_crc32c()->begin(), fs->chunk_crc32c()->end());
}

}  // namespace

std::string describe_shape(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string describe_shard(const StoredShard& s) {
  return "the shard at " + describe_shape(s.box.offset) + " of shape " + describe_shape(s.box.shape);
}

std::string encode_index(const CheckpointIndex& index) {
  flatbuffers::FlatBufferBuilder fbb(1024);
  std::vector<flatbuffers::Offset<schema::CheckpointTensor>> tensors;
  tensors.reserve(index.tensors.size());
  for (const StoredTensor& t : index.tensors) {
    std::vector<flatbuffers::Offset<schema::CheckpointShard>> shards;
    shards.reserve(t.shards.size());
    for (const StoredShard& s : t.shards) {
      shards.push_back(schema::CreateCheckpointShardDirect(fbb, &s.box.offset, &s.box.shape, s.file.c_str(),
                                                           s.byte_offset, s.byte_length, s.crc, s.chunk_bytes,
                                                           &s.chunk_crcs));
    }
    tensors.push_back(schema::CreateCheckpointTensorDirect(fbb, t.name.c_str(),
                                                           static_cast<schema::CheckpointDType>(t.dtype), &t.shape,
                                                           &shards));
  }
  auto root = schema::CreateCheckpointIndexDirect(fbb, index.format_version, index.save_id.c_str(), index.nranks,
                                                  &tensors);
  // Size-prefixed: the verifier then also checks that the file is exactly as long as written.
  schema::FinishSizePrefixedCheckpointIndexBuffer(fbb, root);
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

CheckpointIndex decode_index(const void* bytes, size_t size, const std::string& what) {
  // The verifier checks alignment relative to the buffer start and the accessors read scalars
  // in place: give the bytes 8-byte-aligned storage unless they already are.
  std::vector<uint64_t> storage;
  const auto* buf = static_cast<const uint8_t*>(bytes);
  if (reinterpret_cast<uintptr_t>(buf) % 8 != 0) {
    storage.assign(size / 8 + 1, 0);
    std::memcpy(storage.data(), bytes, size);
    buf = reinterpret_cast<const uint8_t*>(storage.data());
  }
  // max_tables: one table per shard; the default (one million) would refuse large checkpoints.
  flatbuffers::Verifier verifier(buf, size, 64, 1u << 30);
  if (size < 8 || size > kMaxIndexBytes || !schema::VerifySizePrefixedCheckpointIndexBuffer(verifier)) {
    fail(Status::invalid_argument,
         "%s (%zu bytes) failed FlatBuffers verification: corrupt, truncated or not a weft checkpoint index",
         what.c_str(), size);
  }
  const schema::CheckpointIndex* root = schema::GetSizePrefixedCheckpointIndex(buf);
  CheckpointIndex index;
  index.format_version = root->format_version();
  if (index.format_version > kCheckpointFormatVersion) {
    fail(Status::unsupported, "%s has format version %u; this weft reads version %u (written by a newer weft?)",
         what.c_str(), index.format_version, kCheckpointFormatVersion);
  }
  if (index.format_version != kCheckpointFormatVersion) {
    fail(Status::invalid_argument, "%s has format version %u; expected %u", what.c_str(), index.format_version,
         kCheckpointFormatVersion);
  }
  index.save_id = root->save_id()->str();
  // Names come from C strings and are written with c_str(): a NUL inside one would not survive
  // being written again (and is no name weft wrote).
  if (index.save_id.find('\0') != std::string::npos) {
    fail(Status::invalid_argument, "%s: its save id holds a NUL byte", what.c_str());
  }
  index.nranks = root->nranks();
  const auto* fts = root->tensors();
  const size_t count = fts ? fts->size() : 0;
  index.tensors.resize(count);
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < count; ++i) {
    const schema::CheckpointTensor* ft = fts->Get(static_cast<flatbuffers::uoffset_t>(i));
    StoredTensor& t = index.tensors[i];
    t.name = ft->name()->str();
    if (t.name.empty()) fail(Status::invalid_argument, "%s: tensor %zu has an empty name", what.c_str(), i);
    if (t.name.find('\0') != std::string::npos) {
      fail(Status::invalid_argument, "%s: tensor %zu's name holds a NUL byte", what.c_str(), i);
    }
    if (!names.insert(t.name).second) {
      fail(Status::invalid_argument, "%s: tensor '%s' is listed twice", what.c_str(), t.name.c_str());
    }
    const int dt = static_cast<int>(ft->dtype());
    if (!dtype_valid(dt)) fail(Status::invalid_argument, "%s: tensor '%s' has dtype %d", what.c_str(), t.name.c_str(), dt);
    t.dtype = static_cast<DType>(dt);
    t.shape = longs(ft->shape());
    if (t.shape.size() > static_cast<size_t>(kMaxTensorDims)) {
      fail(Status::invalid_argument, "%s: tensor '%s' has %zu dims; at most %d", what.c_str(), t.name.c_str(),
           t.shape.size(), kMaxTensorDims);
    }
    for (int64_t e : t.shape) {
      if (e < 0) {
        fail(Status::invalid_argument, "%s: tensor '%s' has shape %s", what.c_str(), t.name.c_str(),
             describe_shape(t.shape).c_str());
      }
    }
    if (checked_numel(t.shape, dtype_size(t.dtype)) < 0) {
      fail(Status::invalid_argument, "%s: tensor '%s' of shape %s is too large", what.c_str(), t.name.c_str(),
           describe_shape(t.shape).c_str());
    }
    const auto* fss = ft->shards();
    const size_t nshards = fss ? fss->size() : 0;
    t.shards.resize(nshards);
    for (size_t j = 0; j < nshards; ++j) {
      decode_shard(fss->Get(static_cast<flatbuffers::uoffset_t>(j)), t, j, what, t.shards[j]);
    }
  }
  return index;
}

void check_coverage(const StoredTensor& t, const std::string& what) {
  const int64_t total = Box{Shape(t.shape.size(), 0), t.shape}.numel();
  int64_t covered = 0;  // no overflow: each shard lies inside the tensor, and we stop past total
  for (const StoredShard& s : t.shards) {
    covered += s.box.numel();
    if (covered > total) break;
  }
  if (t.shards.size() <= kMaxPairwiseShards) {
    for (size_t a = 0; a < t.shards.size(); ++a) {
      for (size_t b = a + 1; b < t.shards.size(); ++b) {
        if (intersect(t.shards[a].box, t.shards[b].box).numel() > 0 && t.shards[a].box.numel() > 0) {
          fail(Status::invalid_argument, "%s: tensor '%s': %s (file %s) overlaps %s (file %s)", what.c_str(),
               t.name.c_str(), describe_shard(t.shards[a]).c_str(), t.shards[a].file.c_str(),
               describe_shard(t.shards[b]).c_str(), t.shards[b].file.c_str());
        }
      }
    }
  }
  if (covered != total) {
    fail(Status::invalid_argument, "%s: tensor '%s' of shape %s has %lld elements but its %zu stored shards hold %s%lld",
         what.c_str(), t.name.c_str(), describe_shape(t.shape).c_str(), static_cast<long long>(total), t.shards.size(),
         covered > total ? "more than " : "", static_cast<long long>(covered));
  }
}

CheckpointIndex read_index(const std::string& dir) {
  const std::string path = join_path(dir, kIndexFile);
  if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) {
    fail(Status::invalid_argument, "no checkpoint in %s: %s does not exist", dir.c_str(), path.c_str());
  }
  std::vector<uint64_t> storage;
  const size_t size = read_whole(path, kMaxIndexBytes, storage);
  return decode_index(storage.data(), size, path);
}

void write_index(const std::string& dir, const CheckpointIndex& index, bool durable, bool* renamed) {
  const std::string bytes = encode_index(index);
  const std::string tmp = join_path(dir, temp_index_name(index.save_id));
  try {
    Fd f = create_new(tmp);
    f.write_at(bytes.data(), bytes.size(), 0);
    if (durable) f.sync();
    f.close();
    test_kill_point("index", 0);
    // The data files' names (made by every rank) must be durable before the index that names
    // them can be: one fsync of the directory before the rename covers them all.
    if (durable) sync_dir(dir);
    rename_file(tmp, join_path(dir, kIndexFile));
    if (renamed) *renamed = true;
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  if (durable) sync_dir(dir);
}

}  // namespace weft::shard
