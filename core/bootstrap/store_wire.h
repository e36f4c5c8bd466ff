// Framing shared by the store server and client (see store.h for the protocol overview).
//
// Handshake, client -> server: "WEFTSTOR", u32 kProtocolVersion, u32 secret length
// (<= kMaxSecret), secret bytes. Server -> client: u32 HandshakeStatus.
//
// Requests (client -> server): u32 frame length, then the frame:
//   SET   u8 op, u32 key length, key, u32 value length, value
//   GET   u8 op, u64 timeout in ms, u32 key length, key
//   ADD   u8 op, u32 key length, key, i64 delta
//   WAIT  u8 op, u64 timeout in ms, u32 key count, then per key: u32 length, key
// Replies (server -> client): u32 frame length, then u8 ReplyStatus and
//   ok:       SET/WAIT nothing; GET u32 value length + value; ADD i64 new value
//   timeout:  u32 count, then per missing key: u32 length, key
//   error:    u32 message length, message
// GET and WAIT carry their timeout so the server answers "timeout" itself and the connection
// stays in step; the client only gives up on its own when the server falls silent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace weft::bootstrap::wire {

constexpr char kMagic[8] = {'W', 'E', 'F', 'T', 'S', 'T', 'O', 'R'};
constexpr uint32_t kProtocolVersion = 1;
constexpr uint32_t kMaxSecret = 1024;
constexpr size_t kHandshakeHeader = sizeof(kMagic) + 4 + 4;

enum class HandshakeStatus : uint32_t {
  welcome = 0,
  secret_refused = 1,
  version_refused = 2,
};

enum class Op : uint8_t {
  set = 1,
  get = 2,
  add = 3,
  wait = 4,
};

enum class ReplyStatus : uint8_t {
  ok = 0,
  timeout = 1,
  error = 2,
};

// Little-endian appenders.
void put_u8(std::string& out, uint8_t v);
void put_u32(std::string& out, uint32_t v);
void put_u64(std::string& out, uint64_t v);
// u32 length, then the bytes.
void put_bytes(std::string& out, std::string_view bytes);

uint32_t load_u32(const char* p);
uint64_t load_u64(const char* p);

// Bounds-checked reader over one received frame. Every read checks the remaining length
// before touching or allocating anything; after the first failure ok() is false and error()
// says what overran, and later reads fail too.
class Reader {
 public:
  Reader(const char* data, size_t size) : p_(data), left_(size) {}

  bool u8(uint8_t& v);
  bool u32(uint32_t& v);
  bool u64(uint64_t& v);
  // u32 length (<= max_len, else fails naming `what`), then that many bytes.
  bool bytes(std::string& out, uint32_t max_len, const char* what);

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  size_t remaining() const { return left_; }

 private:
  bool need(size_t n, const char* what);
  const char* p_;
  size_t left_;
  std::string error_;
};

// Compares every byte position up to max(kMaxSecret, both lengths), so for a secret of up to
// kMaxSecret bytes the time depends neither on where the bytes differ nor on either length: an
// attacker timing refusals learns nothing about the secret, not even its length.
bool constant_time_equal(std::string_view a, std::string_view b);

// One decoded request (the fields its op carries; the others stay empty/zero).
struct Request {
  Op op = Op::set;
  std::string key;                // SET, GET, ADD
  std::string value;              // SET
  uint64_t timeout_ms = 0;        // GET, WAIT
  int64_t delta = 0;              // ADD
  std::vector<std::string> keys;  // WAIT
};

// Decodes one request frame (the bytes after its u32 length) under the limits kMaxKey and
// kMaxFrame (store.h). Returns true and fills *out, or false with *error saying what is
// malformed (for the server's log; the peer only sees its connection closed). Pure: no sockets,
// nothing allocated for a length before that many bytes are known to be in the frame.
bool process_frame(std::string_view frame, Request* out, std::string* error);

// What the front of one connection's buffered input holds.
struct Step {
  enum class Kind {
    need_more,  // an incomplete handshake or frame: wait for more bytes
    handshake,  // a complete handshake: send `answer`; anything but welcome closes the connection
    request,    // a complete, well-formed request frame
    refuse,     // garbage: close the connection without an answer
  };
  Kind kind = Kind::need_more;
  size_t consumed = 0;  // bytes of the input this step used (handshake, request)
  HandshakeStatus answer = HandshakeStatus::welcome;
  Request request;
  std::string error;  // why it was refused (server log only)
  // need_more after a frame's length arrived: that length (sizes the frame's deadline).
  uint32_t frame_length = 0;
};

// The server's whole reading of a connection's input, socket-free: the handshake while
// !authenticated (checked against `secret` with constant_time_equal), else the next request
// frame (length 1..kMaxFrame, then process_frame). The server loop calls this on each
// connection's buffer, and tests/fuzz/fuzz_store_wire.cpp feeds it arbitrary bytes.
Step next_step(std::string_view in, bool authenticated, std::string_view secret);

}  // namespace weft::bootstrap::wire
