#include "core/bootstrap/store_wire.h"

#include <algorithm>
#include <cstring>

#include "core/bootstrap/store.h"
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
  const size_t n = std::max<size_t>({a.size(), b.size(), kMaxSecret});
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

bool process_frame(std::string_view frame, Request* out, std::string* error) {
  *out = Request();
  Reader r(frame.data(), frame.size());
  uint8_t op_byte = 0;
  if (!r.u8(op_byte)) {
    *error = "an empty frame (no op code)";
    return false;
  }
  const char* what = nullptr;
  switch (static_cast<Op>(op_byte)) {
    case Op::set:
      what = "SET";
      r.bytes(out->key, kMaxKey, "key");
      r.bytes(out->value, kMaxFrame, "value");
      break;
    case Op::get:
      what = "GET";
      r.u64(out->timeout_ms);
      r.bytes(out->key, kMaxKey, "key");
      break;
    case Op::add: {
      what = "ADD";
      uint64_t delta = 0;
      r.bytes(out->key, kMaxKey, "key");
      r.u64(delta);
      out->delta = static_cast<int64_t>(delta);
      break;
    }
    case Op::wait: {
      what = "WAIT";
      uint32_t count = 0;
      r.u64(out->timeout_ms);
      r.u32(count);
      // Each key takes at least its 4-byte length: a count the frame cannot hold is refused
      // before anything is reserved for it.
      if (r.ok() && count > r.remaining() / 4) {
        *error = format("malformed WAIT request: %u keys cannot fit in the %zu bytes left", count, r.remaining());
        return false;
      }
      out->keys.reserve(count);
      for (uint32_t i = 0; i < count && r.ok(); ++i) {
        out->keys.emplace_back();
        r.bytes(out->keys.back(), kMaxKey, "key");
      }
      break;
    }
  }
  if (!what) {
    *error = format("unknown op code %u", static_cast<unsigned>(op_byte));
    return false;
  }
  if (!r.ok()) {
    *error = format("malformed %s request: %s", what, r.error().c_str());
    return false;
  }
  if (r.remaining() != 0) {
    *error = format("malformed %s request: %zu unexpected bytes after its fields", what, r.remaining());
    return false;
  }
  out->op = static_cast<Op>(op_byte);
  return true;
}

namespace {

Step refuse(std::string why) {
  Step s;
  s.kind = Step::Kind::refuse;
  s.error = std::move(why);
  return s;
}

Step handshake_step(std::string_view in, std::string_view secret) {
  Step s;
  if (in.empty()) return s;
  // The magic is checked on the bytes so far, so garbage is refused without waiting for more.
  if (std::memcmp(in.data(), kMagic, std::min(in.size(), sizeof(kMagic))) != 0) {
    return refuse("bad magic: not a weft store client");
  }
  if (in.size() < kHandshakeHeader) return s;
  const uint32_t version = load_u32(in.data() + 8);
  const uint32_t secret_len = load_u32(in.data() + 12);
  if (version != kProtocolVersion) {
    s.kind = Step::Kind::handshake;
    s.answer = HandshakeStatus::version_refused;
    s.consumed = kHandshakeHeader;
    s.error = format("speaks store protocol version %u; this store speaks version %u", version, kProtocolVersion);
    return s;
  }
  if (secret_len > kMaxSecret) {
    return refuse(format("announced a secret of %u bytes; the limit is %u", secret_len, kMaxSecret));
  }
  if (in.size() - kHandshakeHeader < secret_len) return s;
  s.kind = Step::Kind::handshake;
  s.consumed = kHandshakeHeader + secret_len;
  // Every wrong secret (other length, other bytes, empty, binary) gets the same answer after
  // the same amount of work: nothing tells a guess that was close from one that was not.
  if (!constant_time_equal(in.substr(kHandshakeHeader, secret_len), secret)) {
    s.answer = HandshakeStatus::secret_refused;
    s.error = "wrong job secret";
  }
  return s;
}

}  // namespace

Step next_step(std::string_view in, bool authenticated, std::string_view secret) {
  if (!authenticated) return handshake_step(in, secret);
  Step s;
  if (in.size() < 4) return s;
  const uint32_t len = load_u32(in.data());
  if (len == 0) return refuse("sent an empty frame (no op code)");
  if (len > kMaxFrame) return refuse(format("announced a frame of %u bytes; the limit is %u", len, kMaxFrame));
  if (in.size() - 4 < len) {
    s.frame_length = len;  // wait for the rest of the frame
    return s;
  }
  std::string why;
  if (!process_frame(in.substr(4, len), &s.request, &why)) return refuse(std::move(why));
  s.kind = Step::Kind::request;
  s.consumed = 4 + static_cast<size_t>(len);
  return s;
}

}  // namespace weft::bootstrap::wire
