// The store client: one blocking TCP connection, every read and write bounded by a deadline.
// A client serves one request at a time (a mutex serialises threads sharing it); a thread that
// blocks in get()/wait() holds it until answered, so give each waiting thread its own client.
// After any I/O failure the connection is closed and later calls fail with Status::transport.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/bootstrap/socket_util.h"
#include "core/bootstrap/store.h"
#include "core/bootstrap/store_wire.h"
#include "core/common/log.h"
#include "core/common/status.h"

namespace weft::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;
using wire::Op;
using wire::ReplyStatus;

constexpr auto kFirstBackoff = std::chrono::milliseconds(10);
constexpr auto kMaxBackoff = std::chrono::milliseconds(500);
// Extra time granted to the server's own answer to a GET/WAIT before the client gives up.
constexpr auto kMinReplyGrace = std::chrono::seconds(1);

enum class Io { ok, timeout, closed, error };

// Writes all of data before deadline. *err gets errno on Io::error.
Io send_all(int fd, const char* data, size_t size, Clock::time_point deadline, int* err) {
  while (size > 0) {
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      *err = errno;
      return errno == EPIPE || errno == ECONNRESET ? Io::closed : Io::error;
    }
    pollfd p{fd, POLLOUT, 0};
    int rc = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (rc == 0) return Io::timeout;
    if (rc < 0 && errno != EINTR) {
      *err = errno;
      return Io::error;
    }
  }
  return Io::ok;
}

// Reads exactly size bytes before deadline.
Io recv_exact(int fd, char* data, size_t size, Clock::time_point deadline, int* err) {
  while (size > 0) {
    ssize_t n = ::recv(fd, data, size, 0);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Io::closed;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      *err = errno;
      return errno == ECONNRESET ? Io::closed : Io::error;
    }
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (rc == 0) return Io::timeout;
    if (rc < 0 && errno != EINTR) {
      *err = errno;
      return Io::error;
    }
  }
  return Io::ok;
}

long long ms(std::chrono::milliseconds d) { return static_cast<long long>(d.count()); }

// Connects one non-blocking socket to addr before deadline; returns an invalid Fd and sets
// *error on failure.
Fd connect_once(const sockaddr_in& addr, Clock::time_point deadline, std::string* error) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    *error = format("socket(): %s", std::strerror(errno));
    return Fd();
  }
  int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  if (rc != 0 && errno != EINPROGRESS && errno != EINTR) {
    *error = std::strerror(errno);
    return Fd();
  }
  if (rc != 0) {
    pollfd p{fd.get(), POLLOUT, 0};
    int prc;
    do {
      prc = ::poll(&p, 1, poll_timeout_ms(deadline));
    } while (prc < 0 && errno == EINTR);
    if (prc == 0) {
      *error = "connect timed out";
      return Fd();
    }
    int soerr = 0;
    socklen_t len = sizeof(soerr);
    if (prc < 0 || ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) {
      *error = std::strerror(errno);
      return Fd();
    }
    if (soerr != 0) {
      *error = std::strerror(soerr);
      return Fd();
    }
  }
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

std::string quoted_keys(const std::vector<std::string>& keys, size_t limit = 8) {
  std::string out;
  for (size_t i = 0; i < keys.size() && i < limit; ++i) {
    if (i) out += ", ";
    out += "'" + keys[i] + "'";
  }
  if (keys.size() > limit) out += format(" and %zu more", keys.size() - limit);
  return out;
}

}  // namespace

struct StoreClient::Impl {
  std::string where;  // "host:port" as the caller named it
  std::chrono::milliseconds io_timeout;
  std::mutex mu;
  Fd fd;
  std::string broken;  // why the connection was dropped; empty while healthy

  void check_usable() const {
    if (!fd.valid()) {
      fail(Status::transport, "the connection to the store at %s is closed after an earlier error (%s)",
           where.c_str(), broken.c_str());
    }
  }

  [[noreturn]] void io_failed(Io io, int err, const std::string& doing, Status timeout_status,
                              const std::string& timeout_msg) {
    std::string why;
    Status st = Status::transport;
    switch (io) {
      case Io::timeout:
        st = timeout_status;
        why = timeout_msg;
        break;
      case Io::closed:
        why = format("the connection to the store at %s was lost while %s%s%s", where.c_str(), doing.c_str(),
                     err ? ": " : "", err ? std::strerror(err) : "");
        break;
      default:
        why = format("I/O error talking to the store at %s while %s: %s", where.c_str(), doing.c_str(),
                     std::strerror(err));
        break;
    }
    broken = why;
    fd.reset();
    throw Error(st, why);
  }

  // Sends one request frame and returns the reply frame (status byte first).
  std::string roundtrip(const std::string& frame, Clock::time_point deadline, const std::string& doing,
                        const std::string& timeout_msg) {
    check_usable();
    int err = 0;
    Io io = send_all(fd.get(), frame.data(), frame.size(), deadline, &err);
    if (io != Io::ok) io_failed(io, err, doing, Status::timeout, timeout_msg);
    char hdr[4];
    io = recv_exact(fd.get(), hdr, sizeof(hdr), deadline, &err);
    if (io != Io::ok) io_failed(io, err, doing, Status::timeout, timeout_msg);
    uint32_t len = wire::load_u32(hdr);
    if (len == 0 || len > kMaxFrame) {
      broken = format("the store at %s sent a malformed reply (frame length %u)", where.c_str(), len);
      fd.reset();
      throw Error(Status::transport, broken);
    }
    std::string reply(len, '\0');  // len is checked against kMaxFrame above
    io = recv_exact(fd.get(), reply.data(), len, deadline, &err);
    if (io != Io::ok) io_failed(io, err, doing, Status::timeout, timeout_msg);
    return reply;
  }

  [[noreturn]] void malformed(const std::string& doing, const std::string& detail) {
    broken = format("the store at %s sent a malformed reply while %s: %s", where.c_str(), doing.c_str(),
                    detail.c_str());
    fd.reset();
    throw Error(Status::transport, broken);
  }

  // Reads the status byte: throws for error replies, returns ok or timeout.
  ReplyStatus status_of(wire::Reader& r, const std::string& doing) {
    uint8_t st = 0;
    r.u8(st);
    if (st == static_cast<uint8_t>(ReplyStatus::error)) {
      std::string msg;
      if (!r.bytes(msg, kMaxFrame, "error message")) malformed(doing, r.error());
      fail(Status::invalid_argument, "the store at %s refused %s: %s", where.c_str(), doing.c_str(), msg.c_str());
    }
    if (st != static_cast<uint8_t>(ReplyStatus::ok) && st != static_cast<uint8_t>(ReplyStatus::timeout)) {
      malformed(doing, format("unknown reply status %u", st));
    }
    return static_cast<ReplyStatus>(st);
  }

  // Authenticates on fd. Returns false, with *closed_why set and fd closed, when the server
  // ends the connection before answering: a store at its connection limit closes new
  // connections at once, so the caller connects again until its deadline. Throws for a refusal,
  // a timeout or another I/O error.
  bool handshake(const std::string& secret, Clock::time_point deadline, std::string* closed_why) {
    std::string hello(wire::kMagic, sizeof(wire::kMagic));
    wire::put_u32(hello, wire::kProtocolVersion);
    wire::put_bytes(hello, secret);
    int err = 0;
    std::string timeout_msg =
        format("the store at %s accepted the connection but did not answer the handshake in time", where.c_str());
    Io io = send_all(fd.get(), hello.data(), hello.size(), deadline, &err);
    char answer[4];
    if (io == Io::ok) io = recv_exact(fd.get(), answer, sizeof(answer), deadline, &err);
    if (io == Io::closed) {
      *closed_why = format("the store closed the connection before answering the handshake%s%s (at its "
                           "connection limit, WEFT_STORE_MAX_CONNECTIONS?)",
                           err ? ": " : "", err ? std::strerror(err) : "");
      fd.reset();
      return false;
    }
    if (io != Io::ok) io_failed(io, err, "authenticating", Status::timeout, timeout_msg);
    uint32_t st = wire::load_u32(answer);
    if (st == static_cast<uint32_t>(wire::HandshakeStatus::welcome)) return true;
    fd.reset();
    if (st == static_cast<uint32_t>(wire::HandshakeStatus::secret_refused)) {
      broken = format("job secret refused by the store at %s", where.c_str());
      fail(Status::invalid_argument,
           "job secret refused by the store at %s (every rank must use the same WEFT_JOB_SECRET / unique id)",
           where.c_str());
    }
    if (st == static_cast<uint32_t>(wire::HandshakeStatus::version_refused)) {
      broken = format("store protocol version refused by %s", where.c_str());
      fail(Status::mismatch, "the store at %s speaks another store protocol than version %u (mixed weft versions?)",
           where.c_str(), wire::kProtocolVersion);
    }
    broken = format("unknown handshake answer %u", st);
    fail(Status::transport, "the store at %s answered the handshake with unknown status %u", where.c_str(), st);
  }
};

StoreClient::StoreClient(const std::string& host, uint16_t port, const std::string& secret,
                         std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.where = format("%s:%u", host.c_str(), static_cast<unsigned>(port));
  s.io_timeout = timeout;
  if (secret.size() > wire::kMaxSecret) {
    fail(Status::invalid_argument, "job secret is %zu bytes; the limit is %u", secret.size(), wire::kMaxSecret);
  }
  if (port == 0) fail(Status::invalid_argument, "store port 0 is not connectable (host %s)", host.c_str());
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + timeout;
  auto backoff = std::chrono::duration_cast<Clock::duration>(kFirstBackoff);
  std::string last_error = "no attempt made";
  int attempts = 0;
  for (;;) {
    std::vector<sockaddr_in> addrs;
    std::string err;
    if (resolve_ipv4(host, port, /*passive=*/false, &addrs, &err)) {
      for (const sockaddr_in& a : addrs) {
        ++attempts;
        Fd fd = connect_once(a, deadline, &err);
        if (fd.valid()) {
          s.fd = std::move(fd);
          break;
        }
        last_error = format("%s: %s", address_string(a).c_str(), err.c_str());
      }
    } else {
      ++attempts;
      last_error = format("cannot resolve '%s': %s", host.c_str(), err.c_str());
    }
    // A server that accepted the connection gets at least a second to answer the handshake,
    // even when the connection came just before the deadline.
    if (s.fd.valid() && s.handshake(secret, std::max(deadline, Clock::now() + std::chrono::seconds(1)), &last_error)) {
      break;
    }
    Clock::time_point now = Clock::now();
    if (now >= deadline) {
      fail(Status::timeout, "could not connect to the store at %s within %lld ms (%d attempts; last error: %s)",
           s.where.c_str(), ms(timeout), attempts, last_error.c_str());
    }
    std::this_thread::sleep_for(std::min(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::duration_cast<Clock::duration>(kMaxBackoff));
  }
  log(LogLevel::trace, "store client: connected to %s", s.where.c_str());
}

StoreClient::~StoreClient() = default;

void StoreClient::set(const std::string& key, const std::string& value) {
  Impl& s = *impl_;
  if (key.size() > kMaxKey) fail(Status::invalid_argument, "store key of %zu bytes exceeds the limit of %u", key.size(), kMaxKey);
  if (value.size() > kMaxFrame - 1 - 8 - key.size()) {
    fail(Status::invalid_argument, "store value for key '%s' is %zu bytes; the limit is about %u", key.c_str(),
         value.size(), kMaxFrame);
  }
  std::string frame;
  frame.reserve(4 + 1 + 8 + key.size() + value.size());
  wire::put_u32(frame, static_cast<uint32_t>(1 + 4 + key.size() + 4 + value.size()));
  wire::put_u8(frame, static_cast<uint8_t>(Op::set));
  wire::put_bytes(frame, key);
  wire::put_bytes(frame, value);
  std::lock_guard<std::mutex> lock(s.mu);
  std::string doing = format("setting key '%s'", key.c_str());
  std::string reply = s.roundtrip(frame, Clock::now() + s.io_timeout, doing,
                                  format("the store at %s did not acknowledge setting key '%s' within %lld ms",
                                         s.where.c_str(), key.c_str(), ms(s.io_timeout)));
  wire::Reader r(reply.data(), reply.size());
  if (s.status_of(r, doing) != ReplyStatus::ok || r.remaining() != 0) s.malformed(doing, "unexpected SET reply");
}

std::string StoreClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  if (key.size() > kMaxKey) fail(Status::invalid_argument, "store key of %zu bytes exceeds the limit of %u", key.size(), kMaxKey);
  if (timeout.count() < 0) timeout = std::chrono::milliseconds(0);
  std::string frame;
  wire::put_u32(frame, static_cast<uint32_t>(1 + 8 + 4 + key.size()));
  wire::put_u8(frame, static_cast<uint8_t>(Op::get));
  wire::put_u64(frame, static_cast<uint64_t>(timeout.count()));
  wire::put_bytes(frame, key);
  std::string timeout_msg =
      format("timed out after %lld ms waiting for key '%s' in the store at %s", ms(timeout), key.c_str(), s.where.c_str());
  std::lock_guard<std::mutex> lock(s.mu);
  std::string doing = format("waiting for key '%s'", key.c_str());
  auto grace = std::max<std::chrono::milliseconds>(s.io_timeout, kMinReplyGrace);
  std::string reply = s.roundtrip(frame, Clock::now() + timeout + grace, doing, timeout_msg);
  wire::Reader r(reply.data(), reply.size());
  ReplyStatus st = s.status_of(r, doing);
  if (st == ReplyStatus::timeout) throw Error(Status::timeout, timeout_msg);
  std::string value;
  if (!r.bytes(value, kMaxFrame, "value") || r.remaining() != 0) s.malformed(doing, r.ok() ? "trailing bytes" : r.error());
  return value;
}

int64_t StoreClient::add(const std::string& key, int64_t delta) {
  Impl& s = *impl_;
  if (key.size() > kMaxKey) fail(Status::invalid_argument, "store key of %zu bytes exceeds the limit of %u", key.size(), kMaxKey);
  std::string frame;
  wire::put_u32(frame, static_cast<uint32_t>(1 + 4 + key.size() + 8));
  wire::put_u8(frame, static_cast<uint8_t>(Op::add));
  wire::put_bytes(frame, key);
  wire::put_u64(frame, static_cast<uint64_t>(delta));
  std::lock_guard<std::mutex> lock(s.mu);
  std::string doing = format("adding to key '%s'", key.c_str());
  std::string reply = s.roundtrip(frame, Clock::now() + s.io_timeout, doing,
                                  format("the store at %s did not answer adding to key '%s' within %lld ms",
                                         s.where.c_str(), key.c_str(), ms(s.io_timeout)));
  wire::Reader r(reply.data(), reply.size());
  uint64_t v = 0;
  if (s.status_of(r, doing) != ReplyStatus::ok || !r.u64(v) || r.remaining() != 0) {
    s.malformed(doing, "unexpected ADD reply");
  }
  return static_cast<int64_t>(v);
}

void StoreClient::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  if (timeout.count() < 0) timeout = std::chrono::milliseconds(0);
  size_t size = 1 + 8 + 4;
  for (const std::string& k : keys) {
    if (k.size() > kMaxKey) fail(Status::invalid_argument, "store key of %zu bytes exceeds the limit of %u", k.size(), kMaxKey);
    size += 4 + k.size();
  }
  if (size > kMaxFrame) fail(Status::invalid_argument, "waiting for %zu keys makes a request above the %u-byte limit", keys.size(), kMaxFrame);
  std::string frame;
  frame.reserve(4 + size);
  wire::put_u32(frame, static_cast<uint32_t>(size));
  wire::put_u8(frame, static_cast<uint8_t>(Op::wait));
  wire::put_u64(frame, static_cast<uint64_t>(timeout.count()));
  wire::put_u32(frame, static_cast<uint32_t>(keys.size()));
  for (const std::string& k : keys) wire::put_bytes(frame, k);
  std::string doing = format("waiting for keys %s", quoted_keys(keys).c_str());
  std::string timeout_msg = format("timed out after %lld ms waiting for keys %s in the store at %s", ms(timeout),
                                   quoted_keys(keys).c_str(), s.where.c_str());
  std::lock_guard<std::mutex> lock(s.mu);
  auto grace = std::max<std::chrono::milliseconds>(s.io_timeout, kMinReplyGrace);
  std::string reply = s.roundtrip(frame, Clock::now() + timeout + grace, doing, timeout_msg);
  wire::Reader r(reply.data(), reply.size());
  ReplyStatus st = s.status_of(r, doing);
  if (st == ReplyStatus::ok) {
    if (r.remaining() != 0) s.malformed(doing, "trailing bytes");
    return;
  }
  uint32_t count = 0;
  std::vector<std::string> missing;
  if (r.u32(count) && count <= r.remaining() / 4) {
    for (uint32_t i = 0; i < count && r.ok(); ++i) {
      missing.emplace_back();
      r.bytes(missing.back(), kMaxKey, "key");
    }
  }
  if (!r.ok() || missing.size() != count) s.malformed(doing, "bad list of missing keys");
  throw Error(Status::timeout, format("timed out after %lld ms waiting for keys in the store at %s; still missing: %s",
                                      ms(timeout), s.where.c_str(), quoted_keys(missing).c_str()));
}

}  // namespace weft::bootstrap
