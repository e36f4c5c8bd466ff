#include "core/sharding/checkpoint_crc32c.h"

#include <algorithm>
#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace weft::shard {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // Castagnoli, bit-reversed

// Slicing-by-8 tables: table[k][b] is the CRC of byte b followed by k zero bytes, so eight
// input bytes are folded with eight lookups instead of eight serial steps.
using Tables = std::array<std::array<uint32_t, 256>, 8>;
constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c & 1u) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; ++b) {
    for (size_t k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  }
  return t;
}
constexpr Tables kTables = make_tables();

uint32_t crc_software(uint32_t c, const unsigned char* p, size_t n) {
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);  // little-endian hosts only (checkpoint data is little-endian)
    w ^= c;
    c = kTables[7][w & 0xFF] ^ kTables[6][(w >> 8) & 0xFF] ^ kTables[5][(w >> 16) & 0xFF] ^
        kTables[4][(w >> 24) & 0xFF] ^ kTables[3][(w >> 32) & 0xFF] ^ kTables[2][(w >> 40) & 0xFF] ^
        kTables[1][(w >> 48) & 0xFF] ^ kTables[0][w >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xFFu];
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc_sse42(uint32_t c, const unsigned char* p, size_t n) {
  uint64_t c64 = c;
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c64 = _mm_crc32_u64(c64, w);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<uint32_t>(c64);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}
const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");
#endif

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "checkpoint files are little-endian; big-endian hosts are not supported");

}  // namespace

uint32_t crc32c(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
#if defined(__x86_64__)
  if (kHaveSse42) return ~crc_sse42(c, p, n);
#endif
  return ~crc_software(c, p, n);
}

namespace {
uint32_t gf2_times(const uint32_t* mat, uint32_t vec) {
  uint32_t sum = 0;
  while (vec) {
    if (vec & 1) sum ^= *mat;
    vec >>= 1;
    ++mat;
  }
  return sum;
}
void gf2_square(uint32_t* sq, const uint32_t* mat) {
  for (int n = 0; n < 32; ++n) sq[n] = gf2_times(mat, mat[n]);
}
}  // namespace

uint32_t crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2) {
  if (len2 == 0) return crc1;
  uint32_t even[32], odd[32];
  odd[0] = kPoly;
  uint32_t row = 1;
  for (int n = 1; n < 32; ++n) {
    odd[n] = row;
    row <<= 1;
  }
  gf2_square(even, odd);
  gf2_square(odd, even);
  do {
    gf2_square(even, odd);
    if (len2 & 1) crc1 = gf2_times(even, crc1);
    len2 >>= 1;
    if (!len2) break;
    gf2_square(odd, even);
    if (len2 & 1) crc1 = gf2_times(odd, crc1);
    len2 >>= 1;
  } while (len2);
  return crc1 ^ crc2;
}

void ChunkedCrc::feed(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  while (n > 0) {
    const size_t take = static_cast<size_t>(std::min<uint64_t>(n, chunk_bytes_ - in_chunk_));
    current_ = crc32c(current_, p, take);
    in_chunk_ += take;
    p += take;
    n -= take;
    if (in_chunk_ == chunk_bytes_) {
      whole_ = crc32c_combine(whole_, current_, in_chunk_);
      chunks_.push_back(current_);
      current_ = 0;
      in_chunk_ = 0;
    }
  }
}

std::vector<uint32_t> ChunkedCrc::finish() {
  if (in_chunk_ > 0) chunks_.push_back(current_);
  current_ = 0;
  in_chunk_ = 0;
  return std::move(chunks_);
}

}  // namespace weft::shard
