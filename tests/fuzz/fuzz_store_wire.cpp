// libFuzzer target: the store's wire protocol as the server reads it (core/bootstrap/store_wire.h),
// without sockets. The bytes are one connection's input stream: the handshake header (magic,
// version, secret length, secret) and then length-prefixed frames, each decoded field by field
// with wire::Reader exactly in the order StoreServer::Impl::process_frame reads SET, GET, ADD and
// WAIT, under the same limits (kMaxKey, kMaxFrame, the WAIT count bound). Checked independently:
// the Reader never reads past its frame, a field it returns is the bytes at that place of the
// input, lengths above their limit are refused, after one failure every read fails, and
// remaining() only ever falls.
#include <cstdint>
#include <cstring>
#include <string>

#include "core/bootstrap/store.h"
#include "core/bootstrap/store_wire.h"
#include "tests/fuzz/fuzz_common.h"

using namespace weft::bootstrap;

namespace {

// Follows a Reader over one frame and checks each read against the frame's bytes.
struct Checked {
  const char* base;
  size_t size;
  wire::Reader r;
  size_t at = 0;
  bool failed = false;

  Checked(const char* p, size_t n) : base(p), size(n), r(p, n) {}

  void after(bool got, size_t width) {
    if (failed && got) fuzz::broken("store_wire", "read after a failure", std::to_string(at));
    if (got) at += width;
    failed = failed || !got;
    if (got != r.ok()) fuzz::broken("store_wire", "ok() disagrees", r.error());
    if (r.remaining() != size - at) fuzz::broken("store_wire", "remaining", std::to_string(r.remaining()));
    if (!r.ok() && r.error().empty()) fuzz::broken("store_wire", "failure without a message", "");
  }
  bool u8() {
    uint8_t v = 0;
    const bool fits = !failed && size - at >= 1;
    const bool got = r.u8(v);
    if (got != fits || (got && v != static_cast<uint8_t>(base[at]))) fuzz::broken("store_wire", "u8", "");
    after(got, 1);
    return got;
  }
  bool u32(uint32_t& v) {
    const bool fits = !failed && size - at >= 4;
    const bool got = r.u32(v);
    if (got != fits || (got && v != wire::load_u32(base + at))) fuzz::broken("store_wire", "u32", "");
    after(got, 4);
    return got;
  }
  bool u64(uint64_t& v) {
    const bool fits = !failed && size - at >= 8;
    const bool got = r.u64(v);
    if (got != fits || (got && v != wire::load_u64(base + at))) fuzz::broken("store_wire", "u64", "");
    after(got, 8);
    return got;
  }
  bool bytes(uint32_t max_len) {
    std::string out;
    bool fits = !failed && size - at >= 4;
    uint32_t len = fits ? wire::load_u32(base + at) : 0;
    fits = fits && len <= max_len && size - at - 4 >= len;
    const bool got = r.bytes(out, max_len, "field");
    if (got != fits) fuzz::broken("store_wire", "bytes accepted or refused wrongly", r.error());
    if (got && (out.size() != len || std::memcmp(out.data(), base + at + 4, len) != 0)) {
      fuzz::broken("store_wire", "bytes", "the field is not the frame's bytes");
    }
    // A length field that was read and then refused does not move `at` in the Reader's contract:
    // the Reader is failed from then on, so only remaining() of a success is compared.
    if (got) {
      after(true, 4 + static_cast<size_t>(len));
    } else {
      failed = true;
      if (r.ok() || r.error().empty()) fuzz::broken("store_wire", "bytes failure not reported", "");
    }
    return got;
  }
};

// One frame as process_frame reads it.
void frame(const char* p, size_t n) {
  Checked c(p, n);
  if (!c.u8()) return;
  uint64_t t = 0;
  uint32_t count = 0;
  switch (static_cast<wire::Op>(static_cast<uint8_t>(p[0]))) {
    case wire::Op::set: c.bytes(kMaxKey) && c.bytes(kMaxFrame); break;
    case wire::Op::get: c.u64(t) && c.bytes(kMaxKey); break;
    case wire::Op::add: c.bytes(kMaxKey) && c.u64(t); break;
    case wire::Op::wait:
      if (!c.u64(t) || !c.u32(count)) break;
      if (count > c.r.remaining() / 4) break;  // the server refuses before reserving
      for (uint32_t i = 0; i < count && c.bytes(kMaxKey); ++i) {
      }
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* p = reinterpret_cast<const char*>(data);
  size_t left = size;
  // The handshake header as process_handshake reads it (the magic is not required: a fuzzer
  // rarely finds it, and the frames behind it are what matter).
  if (left < wire::kHandshakeHeader) return 0;
  const uint32_t secret_len = wire::load_u32(p + 12);
  if (secret_len > wire::kMaxSecret || left - wire::kHandshakeHeader < secret_len) return 0;
  const std::string_view secret(p + wire::kHandshakeHeader, secret_len);
  if (wire::constant_time_equal(secret, "job-secret") != (secret == "job-secret")) {
    fuzz::broken("store_wire", "constant_time_equal", std::string(secret));
  }
  p += wire::kHandshakeHeader + secret_len;
  left -= wire::kHandshakeHeader + secret_len;
  // Frames as process_input cuts them: u32 length (1..kMaxFrame), then that many bytes.
  while (left >= 4) {
    const uint32_t len = wire::load_u32(p);
    if (len == 0 || len > kMaxFrame || left - 4 < len) return 0;
    frame(p + 4, len);
    p += 4 + len;
    left -= 4 + static_cast<size_t>(len);
  }
  return 0;
}
