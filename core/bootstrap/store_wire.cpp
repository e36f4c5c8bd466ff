#include "core/bootstrap/store_wire.h"

#include "core/common/status.h"

namespace weft::bootstrap::wire {

void put_u8(std::string& out, uint8_t v) { out.push_back(static_cast<char>(v)); }

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}

void put_bytes(std::string& out, std::string_view bytes) {
  put_u32(out, static_cast<uint32_t>(bytes.size()));
  out.append(bytes.data(), bytes.size());
}

uint32_t load_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

uint64_t load_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

bool Reader::need(size_t n, const char* what) {
  if (!error_.empty()) return false;
  if (n > left_) {
    error_ = format("%s needs %zu bytes but only %zu remain in the frame", what, n, left_);
    return false;
  }
  return true;
}

bool Reader::u8(uint8_t& v) {
  if (!need(1, "a u8 field")) return false;
  v = static_cast<uint8_t>(*p_);
  p_ += 1;
  left_ -= 1;
  return true;
}

bool Reader::u32(uint32_t& v) {
  if (!need(4, "a u32 field")) return false;
  v = load_u32(p_);
  p_ += 4;
  left_ -= 4;
  return true;
}

bool Reader::u64(uint64_t& v) {
  if (!need(8, "a u64 field")) return false;
  v = load_u64(p_);
  p_ += 8;
  left_ -= 8;
  return true;
}

bool Reader::bytes(std::string& out, uint32_t max_len, const char* what) {
  uint32_t len = 0;
  if (!u32(len)) return false;
  if (len > max_len) {
    error_ = format("%s length %u exceeds the limit of %u bytes", what, len, max_len);
    return false;
  }
  if (!need(len, what)) return false;
  // Only now, with len known to fit inside bytes already received, is anything allocated.
  out.assign(p_, len);
  p_ += len;
  left_ -= len;
  return true;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  // Keep the compiler from turning the loop into an early-exit compare.
  volatile unsigned sink = diff;
  return sink == 0;
}

}  // namespace weft::bootstrap::wire
