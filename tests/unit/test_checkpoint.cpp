// Checkpoint internals (core/sharding/checkpoint_*): CRC-32C against RFC 3720's vectors, the
// chunked checksums, the file names a save may remove, the row-major block walk, the index's
// round trip and every check decode_index and check_coverage make, the shard reader reading
// only the chunks a box needs (a corrupt chunk elsewhere goes unnoticed, one inside fails with
// file and tensor named), and the safetensors header.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/common/status.h"
#include "core/sharding/checkpoint_crc32c.h"
#include "core/sharding/checkpoint_files.h"
#include "core/sharding/checkpoint_index.h"
#include "core/sharding/checkpoint_read.h"
#include "core/sharding/checkpoint_safetensors.h"

using namespace weft;
using namespace weft::shard;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  return "no error";
}

CheckpointIndex sample_index() {
  CheckpointIndex ix;
  ix.save_id = "0123456789abcdef";
  ix.nranks = 2;
  StoredTensor t{"w", DType::f32, {4, 3}, {}};
  for (int r = 0; r < 2; ++r) {
    StoredShard s;
    s.box = {{2 * r, 0}, {2, 3}};
    s.file = data_file_name(ix.save_id, r);
    s.byte_length = 24;
    s.crc = 0x1234u + static_cast<uint32_t>(r);
    s.chunk_crcs = {7u};
    t.shards.push_back(s);
  }
  ix.tensors.push_back(t);
  ix.tensors.push_back(StoredTensor{"scalar", DType::i64, {}, {}});
  return ix;
}

CheckpointIndex round_trip(const CheckpointIndex& ix) {
  const std::string bytes = encode_index(ix);
  return decode_index(bytes.data(), bytes.size(), "test index");
}

}  // namespace

TEST(Crc32c, Rfc3720Vectors) {
  EXPECT_EQ(crc32c(0, "123456789", 9), 0xE3069283u);
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xFF), inc(32);
  for (int i = 0; i < 32; ++i) inc[static_cast<size_t>(i)] = static_cast<unsigned char>(i);
  EXPECT_EQ(crc32c(0, zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(0, ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(0, inc.data(), 32), 0x46DD794Eu);
  // Continuing a CRC equals one pass over the concatenation, at every split and alignment.
  for (size_t cut = 0; cut <= 32; ++cut) EXPECT_EQ(crc32c(crc32c(0, inc.data(), cut), inc.data() + cut, 32 - cut), 0x46DD794Eu);
}

TEST(Crc32c, ChunkedMatchesPieces) {
  std::vector<unsigned char> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 7 + 3);
  ChunkedCrc c(64);
  for (size_t at = 0, step = 1; at < data.size(); at += step, step = step * 3 % 97 + 1) {
    c.feed(data.data() + at, std::min(step, data.size() - at));
  }
  EXPECT_EQ(c.whole(), crc32c(0, data.data(), data.size()));
  const std::vector<uint32_t> chunks = c.finish();
  ASSERT_EQ(chunks.size(), 16u);  // ceil(1000 / 64)
  for (size_t k = 0; k < chunks.size(); ++k) {
    EXPECT_EQ(chunks[k], crc32c(0, data.data() + k * 64, std::min<size_t>(64, 1000 - k * 64))) << k;
  }
}

// crc32c_combine (which builds the whole-shard CRC from the chunk CRCs) against crc32c of the
// concatenation, for split points across lengths 0 .. 3 KiB of varied bytes.
TEST(Crc32c, CombineEqualsTheCrcOfTheConcatenation) {
  std::vector<unsigned char> b(3072);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<unsigned char>((i * 131 + 7) ^ (i >> 5));
  for (size_t n : {size_t{0}, size_t{1}, size_t{9}, size_t{1000}, size_t{3072}}) {
    for (size_t cut : {size_t{0}, n / 3, n / 2, n}) {
      const uint32_t whole = weft::shard::crc32c(0, b.data(), n);
      const uint32_t a = weft::shard::crc32c(0, b.data(), cut);
      const uint32_t c = weft::shard::crc32c(0, b.data() + cut, n - cut);
      EXPECT_EQ(weft::shard::crc32c_combine(a, c, n - cut), whole) << "n " << n << " cut " << cut;
    }
  }
}

TEST(CheckpointFiles, OnlyASavesOwnNamesAreRemovable) {
  EXPECT_TRUE(is_checkpoint_file_name(data_file_name("00ff", 12)));
  EXPECT_TRUE(is_checkpoint_file_name(temp_index_name("abc123")));
  for (const char* keep : {"index.weft", "data-xyz-r1.bin", "data-ab-r.bin", "data-ab-r1.binx", "model.bin",
                           "index.weft.tmp-", "index.weft.tmp-zz", "data--r1.bin"}) {
    EXPECT_FALSE(is_checkpoint_file_name(keep)) << keep;
  }
  for (const char* bad : {"", ".", "..", "../x", "a/b", "/abs"}) EXPECT_FALSE(is_plain_file_name(bad)) << bad;
  EXPECT_TRUE(is_plain_file_name("data-1-r0.bin"));
}

TEST(CheckpointFiles, BlocksCoverTheBoxInRowMajorRunsWithinTheBudget) {
  const Shape shapes[] = {{7, 5, 3}, {1, 1, 9}, {4}, {}, {3, 0, 2}, {2, 3, 4, 5}};
  for (const Shape& shape : shapes) {
    for (int64_t budget : {1, 2, 7, 15, 60, 1000}) {
      const Shape st = row_major_strides(shape);
      int64_t next = 0;  // the row-major index the next block must start at
      for_each_block(shape, st, budget, [&](const Shape& off, const Shape& ext) {
        int64_t first = 0, n = 1;
        for (size_t k = 0; k < shape.size(); ++k) {
          first += off[k] * st[k];
          n *= ext[k];
        }
        EXPECT_EQ(first, next);
        EXPECT_LE(n, std::max<int64_t>(budget, shape.empty() ? 1 : shape.back()));
        next += n;
      });
      EXPECT_EQ(next, (Box{Shape(shape.size(), 0), shape}.numel()));
    }
  }
}

TEST(CheckpointIndex, RoundTripAndCoverage) {
  const CheckpointIndex ix = sample_index();
  const CheckpointIndex back = round_trip(ix);
  EXPECT_EQ(back.save_id, ix.save_id);
  EXPECT_EQ(back.nranks, 2);
  ASSERT_EQ(back.tensors.size(), 2u);
  EXPECT_EQ(back.tensors[0].name, "w");
  EXPECT_EQ(back.tensors[0].shards[1].box, (Box{{2, 0}, {2, 3}}));
  EXPECT_EQ(back.tensors[0].shards[1].crc, 0x1235u);
  EXPECT_EQ(back.tensors[1].shape, Shape{});
  check_coverage(back.tensors[0], "t");
  StoredTensor hole = back.tensors[0];
  hole.shards.pop_back();
  EXPECT_NE(error_of([&] { check_coverage(hole, "t"); }).find("hold 6"), std::string::npos);
  StoredTensor overlap = back.tensors[0];
  overlap.shards[1].box.offset[0] = 1;
  EXPECT_NE(error_of([&] { check_coverage(overlap, "t"); }).find("overlaps"), std::string::npos);
}

TEST(CheckpointIndex, DecodeRefusesWhatDoesNotAddUp) {
  const std::string good = encode_index(sample_index());
  // Every truncation and a flipped identifier fail the verifier.
  for (size_t n = 0; n < good.size(); n += 7) {
    EXPECT_NE(error_of([&] { decode_index(good.data(), n, "ix"); }).find("FlatBuffers verification"), std::string::npos)
        << n;
  }
  std::string foreign = good;
  foreign[8] ^= 1;  // inside "WFCK"
  EXPECT_NE(error_of([&] { decode_index(foreign.data(), foreign.size(), "ix"); }).find("verification"),
            std::string::npos);
  // A NUL inside a name (found by tests/fuzz/fuzz_checkpoint_index): encode_index writes names
  // from c_str(), so such a name would not survive being written again.
  std::string nul = good;
  nul[nul.find("scalar") + 2] = '\0';
  EXPECT_NE(error_of([&] { decode_index(nul.data(), nul.size(), "ix"); }).find("NUL byte"), std::string::npos);
  struct Case {
    const char* want;
    std::function<void(CheckpointIndex&)> damage;
  };
  const Case cases[] = {
      {"outside the tensor", [](CheckpointIndex& i) { i.tensors[0].shards[0].box.shape[1] = 4; }},
      {"dims", [](CheckpointIndex& i) { i.tensors[0].shards[0].box.offset.pop_back(); }},
      {"byte_length", [](CheckpointIndex& i) { i.tensors[0].shards[0].byte_length = 20; }},
      {"not a plain file name", [](CheckpointIndex& i) { i.tensors[0].shards[0].file = "../etc/passwd"; }},
      {"chunk checksums", [](CheckpointIndex& i) { i.tensors[0].shards[0].chunk_crcs.clear(); }},
      {"chunk_bytes is 0", [](CheckpointIndex& i) { i.tensors[0].shards[0].chunk_bytes = 0; }},
      {"listed twice", [](CheckpointIndex& i) { i.tensors[1].name = "w"; }},
      {"dtype", [](CheckpointIndex& i) { i.tensors[1].dtype = static_cast<DType>(40); }},
      {"shape", [](CheckpointIndex& i) { i.tensors[1].shape = {-1}; }},
      {"format version", [](CheckpointIndex& i) { i.format_version = 0; }},
  };
  for (const Case& c : cases) {
    CheckpointIndex ix = sample_index();
    c.damage(ix);
    const std::string msg = error_of([&] { round_trip(ix); });
    EXPECT_NE(msg.find(c.want), std::string::npos) << c.want << ": " << msg;
  }
  CheckpointIndex newer = sample_index();
  newer.format_version = 2;
  try {
    round_trip(newer);
    ADD_FAILURE() << "a newer format was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::unsupported);
  }
}

TEST(ShardReader, ReadsOnlyTheChunksABoxNeeds) {
  const std::string dir = std::filesystem::temp_directory_path() / ("weft-unit-ckpt-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // A shard [6, 10] of 2-byte elements at global offset [2, 0] of a [8, 10] tensor, checksummed in 16-byte
  // chunks (8 elements: rows straddle chunks), 3 bytes into its file.
  StoredTensor t{"m", DType::f16, {8, 10}, {}};  // 2-byte elements, compared as bits
  StoredShard s;
  s.box = {{2, 0}, {6, 10}};
  s.file = "data-0-r0.bin";
  s.byte_offset = 3;
  s.byte_length = 120;
  s.chunk_bytes = 16;
  std::vector<uint16_t> vals(60);
  for (size_t i = 0; i < vals.size(); ++i) vals[i] = static_cast<uint16_t>(1000 + i);
  ChunkedCrc crc(16);
  crc.feed(vals.data(), 120);
  s.crc = crc.whole();
  s.chunk_crcs = crc.finish();
  std::string file(3, 'x');
  file.append(reinterpret_cast<const char*>(vals.data()), 120);
  auto write = [&](const std::string& bytes) {
    FILE* f = std::fopen((dir + "/" + s.file).c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  };
  write(file);
  auto read = [&](const Box& box, bool transposed) {
    std::vector<uint16_t> out(static_cast<size_t>(box.numel()), 0);
    kernels::StridedView v = kernels::StridedView::contiguous(out.data(), 2, 2, box.shape.data());
    if (transposed) v.strides[0] = 1, v.strides[1] = box.shape[0];
    ShardReader(dir).read_box(t, s, box, v);
    for (int64_t i = 0; i < box.shape[0]; ++i)
      for (int64_t j = 0; j < box.shape[1]; ++j) {
        const size_t at = static_cast<size_t>(transposed ? j * box.shape[0] + i : i * box.shape[1] + j);
        const int64_t src = (box.offset[0] + i - 2) * 10 + box.offset[1] + j;
        EXPECT_EQ(out[at], 1000 + src) << "box at " << box.offset[0] << "," << box.offset[1] << " element " << i << "," << j;
      }
  };
  for (const Box& b : {Box{{2, 0}, {6, 10}}, Box{{3, 2}, {2, 5}}, Box{{2, 9}, {6, 1}}, Box{{7, 0}, {1, 10}}}) {
    read(b, false);
    read(b, true);
    ShardReader(dir).verify(t, s);
  }
  // Damage chunk 7 (elements 56..59: row 7 of the tensor, columns 6..9).
  file[3 + 7 * 16 + 1] ^= 0x20;
  write(file);
  read(Box{{2, 0}, {5, 10}}, false);  // rows 2-6 never touch chunk 7
  read(Box{{7, 0}, {1, 5}}, true);    // row 7, columns 0..4: chunk 6 only (elements 50..54)
  const std::string msg = error_of([&] { read(Box{{7, 5}, {1, 5}}, false); });
  EXPECT_NE(msg.find("checksum mismatch"), std::string::npos) << msg;
  EXPECT_NE(msg.find(s.file), std::string::npos) << msg;
  EXPECT_NE(msg.find("'m'"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { ShardReader(dir).verify(t, s); }).find("checksum mismatch"), std::string::npos);
  // Truncated: the file must hold the whole shard.
  write(file.substr(0, 100));
  EXPECT_NE(error_of([&] { read(Box{{2, 0}, {1, 1}}, false); }).find("truncated"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(Safetensors, HeaderIsPaddedEscapedAndUtf8) {
  CheckpointIndex ix;
  ix.save_id = "ab";
  ix.tensors.push_back(StoredTensor{"a\"b\\c\n", DType::bf16, {2, 3}, {}});
  ix.tensors.push_back(StoredTensor{"s", DType::f8e4m3, {}, {}});
  const std::string h = safetensors_header(ix);
  EXPECT_EQ(h.size() % 8, 0u);
  EXPECT_NE(h.find(R"("a\"b\\c\u000a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]})"), std::string::npos) << h;
  EXPECT_NE(h.find(R"("s":{"dtype":"F8_E4M3","shape":[],"data_offsets":[12,13]})"), std::string::npos) << h;
  EXPECT_EQ(h.find_last_not_of(' '), h.find_last_of('}'));
  ix.tensors[1].name = "\xC3\x28";  // not UTF-8
  EXPECT_NE(error_of([&] { safetensors_header(ix); }).find("UTF-8"), std::string::npos);
  ix.tensors[1].name = "__metadata__";
  EXPECT_NE(error_of([&] { safetensors_header(ix); }).find("reserves"), std::string::npos);
}
