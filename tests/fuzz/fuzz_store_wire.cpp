// libFuzzer target: the store's wire protocol as the server reads it, through the server's own
// decoder: wire::next_step (core/bootstrap/store_wire.h), the pure function StoreServer's loop
// calls on each connection's buffered input, and wire::process_frame behind it. The bytes are
// one connection's input stream: the handshake (magic, version, secret length, secret), then
// length-prefixed request frames. Checked against a decoding written here independently (plain
// byte arithmetic): what is accepted, refused or waited for, how many bytes each step uses, the
// handshake's answer (welcome exactly for the right secret; one answer for every wrong one), and
// every field of every request. wire::Reader's own promises are checked on each frame too: it
// never reads past its frame, a field it returns is the bytes at that place, lengths above their
// limit are refused, after one failure every read fails, and remaining() only ever falls.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include <vector>

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

// Little-endian, written here rather than taken from wire:: so the reference stands alone.
uint64_t le(const char* p, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// The reference decoding of one frame body: the request, or nullopt-like `ok = false`.
struct Reference {
  bool ok = false;
  wire::Request req;
};

Reference reference_frame(const char* p, size_t n) {
  Reference ref;
  size_t at = 0;
  auto num = [&](int width, uint64_t* v) {
    if (n - at < static_cast<size_t>(width)) return false;
    *v = le(p + at, width);
    at += static_cast<size_t>(width);
    return true;
  };
  auto field = [&](uint32_t max_len, std::string* out) {
    uint64_t len = 0;
    if (!num(4, &len) || len > max_len || n - at < len) return false;
    out->assign(p + at, static_cast<size_t>(len));
    at += static_cast<size_t>(len);
    return true;
  };
  if (n < 1) return ref;
  at = 1;
  wire::Request& r = ref.req;
  uint64_t v = 0;
  bool fields = false;
  switch (static_cast<uint8_t>(p[0])) {
    case 1:
      r.op = wire::Op::set;
      fields = field(kMaxKey, &r.key) && field(kMaxFrame, &r.value);
      break;
    case 2:
      r.op = wire::Op::get;
      fields = num(8, &r.timeout_ms) && field(kMaxKey, &r.key);
      break;
    case 3:
      r.op = wire::Op::add;
      fields = field(kMaxKey, &r.key) && num(8, &v);
      r.delta = static_cast<int64_t>(v);
      break;
    case 4: {
      r.op = wire::Op::wait;
      uint64_t count = 0;
      fields = num(8, &r.timeout_ms) && num(4, &count);
      for (uint64_t i = 0; fields && i < count; ++i) {
        r.keys.emplace_back();
        fields = field(kMaxKey, &r.keys.back());
      }
      break;
    }
    default:
      return ref;
  }
  ref.ok = fields && at == n;
  return ref;
}

bool same(const wire::Request& a, const wire::Request& b) {
  return a.op == b.op && a.key == b.key && a.value == b.value && a.timeout_ms == b.timeout_ms &&
         a.delta == b.delta && a.keys == b.keys;
}

// wire::Reader's promises over one frame, read in process_frame's order and limits.
void reader_walk(const char* p, size_t n) {
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
      if (count > c.r.remaining() / 4) break;  // process_frame refuses before reserving
      for (uint32_t i = 0; i < count && c.bytes(kMaxKey); ++i) {
      }
      break;
  }
}

const char kJobSecret[] = "job-secret";

// The handshake at the front of the stream, against two secrets: the one the input offers (so
// the fuzzer reaches "welcome" without guessing) and a fixed one. Returns the bytes it used, or
// 0 when the stream ends inside it or is refused.
size_t check_handshake(std::string_view in) {
  const bool magic = std::memcmp(in.data(), wire::kMagic, std::min(in.size(), sizeof(wire::kMagic))) == 0;
  const bool header = in.size() >= wire::kHandshakeHeader;
  const uint64_t version = header ? le(in.data() + 8, 4) : 0;
  const uint64_t secret_len = header ? le(in.data() + 12, 4) : 0;
  const bool whole = header && in.size() - wire::kHandshakeHeader >= secret_len;
  const std::string_view offered = whole ? in.substr(wire::kHandshakeHeader, secret_len) : std::string_view();
  for (const std::string_view secret : {offered, std::string_view(kJobSecret)}) {
    const wire::Step s = wire::next_step(in, /*authenticated=*/false, secret);
    using K = wire::Step::Kind;
    K want = K::need_more;
    if (in.empty()) {
      want = K::need_more;
    } else if (!magic) {
      want = K::refuse;
    } else if (!header) {
      want = K::need_more;
    } else if (version != wire::kProtocolVersion) {
      want = K::handshake;
    } else if (secret_len > wire::kMaxSecret) {
      want = K::refuse;
    } else {
      want = whole ? K::handshake : K::need_more;
    }
    if (s.kind != want) fuzz::broken("store_wire", "handshake step", s.error);
    if (s.kind == K::refuse && s.error.empty()) fuzz::broken("store_wire", "refusal without a reason", "");
    if (s.kind != K::handshake) continue;
    if (version != wire::kProtocolVersion) {
      if (s.answer != wire::HandshakeStatus::version_refused || s.consumed != wire::kHandshakeHeader) {
        fuzz::broken("store_wire", "version not refused", "");
      }
      continue;
    }
    const bool right = offered == secret;
    const auto want_answer = right ? wire::HandshakeStatus::welcome : wire::HandshakeStatus::secret_refused;
    if (s.answer != want_answer || s.consumed != wire::kHandshakeHeader + secret_len) {
      fuzz::broken("store_wire", "secret judged wrongly", std::string(offered));
    }
    // A refusal must not say more than "refused": the same words for every wrong secret.
    if (!right && s.error != "wrong job secret") fuzz::broken("store_wire", "refusal text", s.error);
  }
  if (wire::constant_time_equal(offered, kJobSecret) != (offered == kJobSecret)) {
    fuzz::broken("store_wire", "constant_time_equal", std::string(offered));
  }
  return magic && whole && version == wire::kProtocolVersion && secret_len <= wire::kMaxSecret
             ? wire::kHandshakeHeader + secret_len
             : 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  check_handshake(in);
  // The frames behind the handshake header, whether or not the magic matched (a fuzzer rarely
  // finds it, and the frames are what matter), as an authenticated connection's stream.
  if (in.size() < wire::kHandshakeHeader) return 0;
  const uint64_t secret_len = le(in.data() + 12, 4);
  if (secret_len > wire::kMaxSecret || in.size() - wire::kHandshakeHeader < secret_len) return 0;
  in.remove_prefix(wire::kHandshakeHeader + secret_len);
  for (;;) {
    const wire::Step s = wire::next_step(in, /*authenticated=*/true, kJobSecret);
    using K = wire::Step::Kind;
    const uint64_t len = in.size() >= 4 ? le(in.data(), 4) : 0;
    if (in.size() < 4) {
      if (s.kind != K::need_more || s.frame_length != 0) fuzz::broken("store_wire", "short header", "");
      return 0;
    }
    if (len == 0 || len > kMaxFrame) {
      if (s.kind != K::refuse || s.error.empty()) fuzz::broken("store_wire", "frame length not refused", "");
      return 0;
    }
    if (in.size() - 4 < len) {
      if (s.kind != K::need_more || s.frame_length != len) fuzz::broken("store_wire", "partial frame", "");
      return 0;
    }
    reader_walk(in.data() + 4, static_cast<size_t>(len));
    const Reference ref = reference_frame(in.data() + 4, static_cast<size_t>(len));
    if (!ref.ok) {
      if (s.kind != K::refuse || s.error.empty()) fuzz::broken("store_wire", "malformed frame accepted", "");
      return 0;
    }
    if (s.kind != K::request || s.consumed != 4 + len) fuzz::broken("store_wire", "frame refused", s.error);
    if (!same(s.request, ref.req)) fuzz::broken("store_wire", "request fields", "");
    in.remove_prefix(static_cast<size_t>(4 + len));
  }
}
