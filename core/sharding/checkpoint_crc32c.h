// CRC-32C (Castagnoli, the iSCSI/ext4 polynomial) for checkpoint shards (core/schema/
// checkpoint.fbs). Chosen over zlib's CRC-32 because x86 (SSE4.2) and ARMv8 compute it in one
// instruction, so checking every byte a load reads costs little next to the read itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::shard {

// The CRC-32C of `n` bytes continued from `crc` (0 for a fresh start): crc32c(crc32c(0, a), b)
// equals the CRC of a followed by b. crc32c(0, "123456789", 9) = 0xE3069283.
uint32_t crc32c(uint32_t crc, const void* data, size_t n);
// The CRC of a followed by b from crc1 = CRC(a), crc2 = CRC(b) and b's length.
uint32_t crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2);

// The checksums a shard is stored with: the whole byte stream's CRC and one CRC per chunk of
// chunk_bytes (the last chunk shorter), fed in pieces of any size.
class ChunkedCrc {
 public:
  // chunk_bytes > 0.
  explicit ChunkedCrc(uint64_t chunk_bytes) : chunk_bytes_(chunk_bytes > 0 ? chunk_bytes : 1) {}
  void feed(const void* data, size_t n);
  // The whole stream's CRC and the chunks' (closing the last, partial chunk).
  uint32_t whole() const { return crc32c_combine(whole_, current_, in_chunk_); }
  std::vector<uint32_t> finish();

 private:
  uint64_t chunk_bytes_;
  uint32_t whole_ = 0;
  uint32_t current_ = 0;
  uint64_t in_chunk_ = 0;  // bytes of the current chunk seen so far
  std::vector<uint32_t> chunks_;
};

}  // namespace weft::shard
