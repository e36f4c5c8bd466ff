#include "core/sharding/checkpoint_safetensors.h"

#include <unistd.h>

#include <cstring>

#include "core/common/status.h"
#include "core/schema/checkpoint_generated.h"
#include "core/sharding/checkpoint_files.h"
#include "core/sharding/checkpoint_read.h"

namespace weft::shard {
namespace {

// safetensors refuses headers above 100 MB (MAX_HEADER_SIZE in its Rust crate).
constexpr size_t kMaxHeaderBytes = 100000000;
// Tensors are assembled through a buffer of at most this size.
constexpr int64_t kBlockBytes = int64_t{16} << 20;

// JSON must be UTF-8: names that are not would make the file unreadable, so they are refused.
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n;  // continuation bytes
    uint32_t cp;
    if (c < 0x80) {
      n = 0, cp = c;
    } else if ((c >> 5) == 0x6) {
      n = 1, cp = c & 0x1Fu;
    } else if ((c >> 4) == 0xE) {
      n = 2, cp = c & 0x0Fu;
    } else if ((c >> 3) == 0x1E) {
      n = 3, cp = c & 0x07u;
    } else {
      return false;
    }
    if (s.size() - i - 1 < n) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) return false;
      cp = (cp << 6) | (cc & 0x3Fu);
    }
    // Overlong forms, UTF-16 surrogates and values past U+10FFFF are not UTF-8 (Rust refuses them).
    static constexpr uint32_t kMin[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return false;
    i += n + 1;
  }
  return true;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

uint64_t tensor_bytes(const StoredTensor& t) {
  return static_cast<uint64_t>(Box{Shape(t.shape.size(), 0), t.shape}.numel()) * dtype_size(t.dtype);
}

}  // namespace

std::string safetensors_header(const CheckpointIndex& index) {
  // Appended piece by piece: GCC 12's -Wrestrict misfires on `"literal" + std::string&&`.
  std::string h = "{\"__metadata__\":{\"format\":\"weft-checkpoint\",\"weft_save_id\":";
  h += json_string(index.save_id);
  h += "}";
  uint64_t at = 0;
  for (const StoredTensor& t : index.tensors) {
    if (t.name == "__metadata__") {
      fail(Status::invalid_argument, "tensor '__metadata__': safetensors reserves that name for its metadata");
    }
    if (!valid_utf8(t.name)) {
      fail(Status::invalid_argument, "tensor name '%s' is not UTF-8; a safetensors header is JSON", t.name.c_str());
    }
    const uint64_t end = at + tensor_bytes(t);
    h += ",";
    h += json_string(t.name);
    h += ":{\"dtype\":\"";
    h += schema::EnumNameCheckpointDType(static_cast<schema::CheckpointDType>(t.dtype));
    h += "\",\"shape\":[";
    for (size_t k = 0; k < t.shape.size(); ++k) {
      if (k) h += ",";
      h += std::to_string(t.shape[k]);
    }
    h += "],\"data_offsets\":[";
    h += std::to_string(at);
    h += ",";
    h += std::to_string(end);
    h += "]}";
    at = end;
  }
  h += "}";
  // safetensors pads the header with spaces so the data starts 8-byte aligned.
  h.append((8 - h.size() % 8) % 8, ' ');
  if (h.size() > kMaxHeaderBytes) {
    fail(Status::unsupported, "the safetensors header would be %zu bytes; safetensors reads at most %zu", h.size(),
         kMaxHeaderBytes);
  }
  return h;
}

void export_safetensors(const std::string& dir, const CheckpointIndex& index, const std::string& path) {
  const std::string index_path = join_path(dir, kIndexFile);
  for (const StoredTensor& t : index.tensors) check_coverage(t, index_path);
  const std::string header = safetensors_header(index);
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  try {
    Fd out = create_new(tmp);
    uint64_t pos = 0;
    const uint64_t len = header.size();
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(len >> (8 * i));
    out.write_at(le, 8, pos);
    out.write_at(header.data(), header.size(), 8);
    pos = 8 + header.size();
    ShardReader reader(dir);
    std::vector<char> block;
    for (const StoredTensor& t : index.tensors) {
      const size_t e = dtype_size(t.dtype);
      // Row-major blocks of the global tensor, each filled from the shards it meets.
      for_each_block(t.shape, row_major_strides(t.shape), std::max<int64_t>(1, kBlockBytes / static_cast<int64_t>(e)),
                     [&](const Shape& off, const Shape& ext) {
                       const Box b{off, ext};
                       const auto bytes = static_cast<size_t>(b.numel()) * e;
                       if (block.size() < bytes) block.resize(bytes);
                       const kernels::StridedView view = kernels::StridedView::contiguous(
                           block.data(), e, static_cast<int>(ext.size()), ext.data());
                       for (const StoredShard& s : t.shards) {
                         const Box common = intersect(b, s.box);
                         if (common.numel() == 0) continue;
                         Shape rel(off.size());
                         for (size_t k = 0; k < rel.size(); ++k) rel[k] = common.offset[k] - off[k];
                         reader.read_box(t, s, common, view.sub(rel.data(), common.shape.data()));
                       }
                       out.write_at(block.data(), bytes, pos);
                       pos += bytes;
                     });
    }
    out.close();
    rename_file(tmp, path);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

}  // namespace weft::shard
