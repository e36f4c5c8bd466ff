#include "core/sharding/checkpoint_read.h"

#include "core/common/status.h"
#include "core/sharding/checkpoint_crc32c.h"

namespace weft::shard {
namespace {

// A piece of a box is read through a buffer spanning at most this many bytes of the shard
// (plus the two chunks at its ends), so memory stays bounded whatever the shard's size.
constexpr int64_t kMaxSpanBytes = int64_t{32} << 20;

}  // namespace

char* ShardReader::buffer(size_t bytes) {
  if (bytes > buf_size_) {
    buf_.reset(new char[bytes]);  // uninitialised: chunks are read into it before use
    buf_size_ = bytes;
  }
  return buf_.get();
}

const Fd& ShardReader::file_for(const StoredTensor& t, const StoredShard& s) {
  auto it = files_.find(s.file);
  if (it == files_.end()) {
    const std::string path = join_path(dir_, s.file);
    try {
      it = files_.emplace(s.file, open_read(path)).first;
    } catch (const Error& e) {
      fail(e.status(), "%s (the data of tensor '%s')", e.message().c_str(), t.name.c_str());
    }
  }
  const uint64_t size = it->second.size();
  if (size < s.byte_offset + s.byte_length) {
    fail(Status::invalid_argument,
         "%s is truncated: it has %llu bytes but tensor '%s' (%s) is stored at bytes [%llu, %llu)",
         it->second.path().c_str(), static_cast<unsigned long long>(size), t.name.c_str(), describe_shard(s).c_str(),
         static_cast<unsigned long long>(s.byte_offset), static_cast<unsigned long long>(s.byte_offset + s.byte_length));
  }
  return it->second;
}

void ShardReader::checksum_error(const StoredTensor& t, const StoredShard& s, uint64_t begin, uint64_t end,
                                 const char* what, uint32_t stored, uint32_t got) const {
  fail(Status::invalid_argument,
       "checksum mismatch in %s at bytes [%llu, %llu) (%s of tensor '%s', %s): the index says crc32c 0x%08x, the "
       "file holds 0x%08x",
       join_path(dir_, s.file).c_str(), static_cast<unsigned long long>(s.byte_offset + begin),
       static_cast<unsigned long long>(s.byte_offset + end), what, t.name.c_str(), describe_shard(s).c_str(), stored,
       got);
}

void ShardReader::read_chunks(const StoredTensor& t, const StoredShard& s, uint64_t c0, uint64_t c1,
                              const std::vector<char>& needed) {
  const Fd& f = file_for(t, s);
  const uint64_t C = s.chunk_bytes;
  char* buf = buffer(static_cast<size_t>((c1 - c0 + 1) * C));
  for (uint64_t a = c0; a <= c1;) {
    if (!needed[a - c0]) {
      ++a;
      continue;
    }
    uint64_t b = a;  // one read for each run of needed chunks
    while (b + 1 <= c1 && needed[b + 1 - c0]) ++b;
    const uint64_t begin = a * C, end = std::min((b + 1) * C, s.byte_length);
    char* dst = buf + (a - c0) * C;
    const size_t got = f.read_at(dst, end - begin, s.byte_offset + begin);
    if (got != end - begin) {
      fail(Status::invalid_argument, "%s is truncated: reading tensor '%s' (%s) stopped at byte %llu of the file",
           f.path().c_str(), t.name.c_str(), describe_shard(s).c_str(),
           static_cast<unsigned long long>(s.byte_offset + begin + got));
    }
    for (uint64_t c = a; c <= b; ++c) {
      const uint64_t cb = c * C, ce = std::min(cb + C, s.byte_length);
      const uint32_t crc = crc32c(0, buf + (c - c0) * C, ce - cb);
      if (crc != s.chunk_crcs[c]) checksum_error(t, s, cb, ce, "a chunk", s.chunk_crcs[c], crc);
    }
    a = b + 1;
  }
}

void ShardReader::read_box(const StoredTensor& t, const StoredShard& s, const Box& box,
                           const kernels::StridedView& dst) {
  const auto e = static_cast<int64_t>(dtype_size(t.dtype));
  const auto C = static_cast<int64_t>(s.chunk_bytes);
  const size_t nd = box.shape.size();
  const Shape st = row_major_strides(s.box.shape);
  Shape rel(nd);
  for (size_t k = 0; k < nd; ++k) rel[k] = box.offset[k] - s.box.offset[k];
  // Cost of a step along each dim = the shard bytes it spans, so each piece's span is bounded.
  for_each_block(box.shape, st, std::max<int64_t>(1, kMaxSpanBytes / e), [&](const Shape& off, const Shape& ext) {
    int64_t first = 0, last = 0;  // shard element indices of the piece's first and last element
    for (size_t k = 0; k < nd; ++k) {
      first += (rel[k] + off[k]) * st[k];
      last += (rel[k] + off[k] + ext[k] - 1) * st[k];
    }
    const int64_t c0 = first * e / C, c1 = ((last + 1) * e - 1) / C;
    // Mark the chunks the piece's contiguous runs touch: the dims after q are whole in the
    // shard, so a run is ext[q] * st[q] elements; the dims up to q-1 are walked.
    size_t q = nd;
    while (q > 0 && (q == nd || ext[q] == s.box.shape[q])) --q;
    if (nd == 0) q = 0;
    const int64_t run = nd == 0 ? 1 : ext[q] * st[q];
    std::vector<char> needed(static_cast<size_t>(c1 - c0 + 1), 0);
    Shape idx(nd, 0);
    for (;;) {
      int64_t start = first;
      for (size_t k = 0; k < q; ++k) start += idx[k] * st[k];
      const int64_t a = start * e / C, b = ((start + run) * e - 1) / C;
      for (int64_t c = a; c <= b; ++c) needed[static_cast<size_t>(c - c0)] = 1;
      size_t k = q;
      for (; k-- > 0;) {
        if (++idx[k] < ext[k]) break;
        idx[k] = 0;
      }
      if (k == static_cast<size_t>(-1)) break;
    }
    const kernels::StridedView out = dst.sub(off.data(), ext.data());
    int64_t numel = 1;
    for (size_t k = 0; k < nd; ++k) numel *= ext[k];
    if (run == numel && first * e == c0 * C &&
        ((last + 1) * e == (c1 + 1) * C || static_cast<uint64_t>((last + 1) * e) == s.byte_length) &&
        kernels::is_contiguous(out)) {
      const Fd& f = file_for(t, s);
      for (int64_t c = c0; c <= c1; ++c) {
        const uint64_t cb = static_cast<uint64_t>(c) * C, ce = std::min(cb + C, s.byte_length);
        char* p = out.base + (cb - c0 * C);
        if (f.read_at(p, ce - cb, s.byte_offset + cb) != ce - cb)
          fail(Status::invalid_argument, "%s is truncated (tensor '%s')", f.path().c_str(), t.name.c_str());
        const uint32_t crc = crc32c(0, p, ce - cb);
        if (crc != s.chunk_crcs[static_cast<size_t>(c)]) checksum_error(t, s, cb, ce, "a chunk", s.chunk_crcs[static_cast<size_t>(c)], crc);
      }
      return;
    }
    read_chunks(t, s, static_cast<uint64_t>(c0), static_cast<uint64_t>(c1), needed);
    // The piece, as a view of the chunks just read.
    kernels::StridedView src;
    src.base = buf_.get() + (first * e - c0 * C);
    src.elem = static_cast<size_t>(e);
    src.ndim = static_cast<int>(nd);
    for (size_t k = 0; k < nd; ++k) {
      src.shape[k] = ext[k];
      src.strides[k] = st[k];
    }
    kernels::strided_copy(dst.sub(off.data(), ext.data()), src);
  });
}

void ShardReader::verify(const StoredTensor& t, const StoredShard& s) {
  file_for(t, s);  // a missing or short file fails here, even for an empty shard
  const uint64_t C = s.chunk_bytes;
  const uint64_t nchunks = s.chunk_crcs.size();
  const uint64_t per_read = std::max<uint64_t>(1, static_cast<uint64_t>(kMaxSpanBytes) / C);
  uint32_t whole = 0;
  for (uint64_t c0 = 0; c0 < nchunks; c0 += per_read) {
    const uint64_t c1 = std::min(nchunks, c0 + per_read) - 1;
    read_chunks(t, s, c0, c1, std::vector<char>(static_cast<size_t>(c1 - c0 + 1), 1));
    whole = crc32c(whole, buf_.get(), static_cast<size_t>(std::min((c1 + 1) * C, s.byte_length) - c0 * C));
  }
  if (whole != s.crc) checksum_error(t, s, 0, s.byte_length, "the whole shard", s.crc, whole);
}

}  // namespace weft::shard
