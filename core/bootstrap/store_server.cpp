// The store server: one background thread multiplexing every connection with poll() and
// non-blocking sockets. Decoding is wire::next_step (store_wire.h), a pure function of the
// buffered bytes; this file owns sockets, deadlines, limits and the key-value state.
//
// Each connection has its own input buffer, so frames may arrive in any number of pieces;
// nothing is parsed until a whole frame is buffered, and the frame length is checked against
// kMaxFrame before any of it is buffered past the header. GET and WAIT on missing keys park
// the connection on one missing key (no client polling); a SET or ADD of that key re-checks
// the parked request, and the request's own deadline answers "timeout". A parked connection
// reads nothing more until it is answered, so replies stay in request order.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <thread>
#include <unordered_map>
#include <vector>

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

// Longest wait a request may ask for (keeps deadline arithmetic far from overflow).
constexpr uint64_t kMaxRequestTimeoutMs = 7ull * 24 * 3600 * 1000;
// Read at most this much from one connection per poll round, so one sender cannot starve others.
constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kReadBudget = 1 << 20;
// Accept at most this many connections per poll round, so a connection flood cannot keep the
// thread in accept() while established clients wait.
constexpr int kAcceptBurst = 64;
// A frame's deadline grows by one second per MiB: large values get a floor of 1 MiB/s.
constexpr uint64_t kFrameBytesPerSecond = 1u << 20;

struct Conn {
  uint64_t id = 0;
  Fd fd;
  std::string peer;
  bool authenticated = false;
  Clock::time_point handshake_deadline;

  std::string in;          // received, not yet consumed
  bool frame_pending = false;  // authenticated, and part of a frame is in `in`
  Clock::time_point frame_started, frame_deadline;

  std::string out;         // queued reply bytes
  size_t out_sent = 0;     // bytes of `out` already written
  Clock::time_point write_progress;  // when `out` last shrank (or began to wait)
  bool close_after_flush = false;
  bool closed = false;

  // A GET or WAIT waiting for keys.
  bool parked = false;
  Op parked_op = Op::get;
  std::vector<std::string> parked_keys;
  std::string parked_on;   // the missing key it is registered under in waiters_
  Clock::time_point parked_deadline;

  size_t queued() const { return out.size() - out_sent; }
};

long long count_ms(std::chrono::milliseconds d) { return static_cast<long long>(d.count()); }

}  // namespace

struct StoreServer::Impl {
  std::string secret;
  StoreLimits limits;
  std::string where;  // "addr:port" for logs
  Fd listen_fd;
  Fd wake_read, wake_write;
  uint16_t port = 0;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> rejected{0};
  std::atomic<uint64_t> over_limit{0};
  std::atomic<size_t> open{0};
  std::thread thread;

  // Everything below is touched only by the server thread.
  std::map<uint64_t, Conn> conns;
  uint64_t next_id = 1;
  std::unordered_map<std::string, std::string> kv;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters;
  std::deque<uint64_t> runnable;  // connections unparked with input possibly still buffered
  Clock::time_point accept_paused_until{};
  bool limit_logged = false;

  void run();
  void loop();
  // Runs fn for connection c; an exception (out of memory for a large value, say) drops that
  // connection, never the server thread.
  template <typename Fn>
  void guarded(Conn& c, Fn&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      log(LogLevel::warn, "store %s: dropping connection from %s: %s", where.c_str(), c.peer.c_str(), e.what());
      close_conn(c);
    }
  }
  // Whether c's input is read now: not while it waits for keys (replies stay in order), is
  // closing, or has more reply bytes queued than max_queued_output (a client that reads
  // nothing cannot make the server buffer without bound).
  bool reading(const Conn& c) const {
    return !c.closed && !c.parked && !c.close_after_flush && c.queued() <= limits.max_queued_output;
  }
  void accept_some();
  void on_readable(Conn& c);
  void on_writable(Conn& c);
  void on_eof(Conn& c);
  void process_input(Conn& c);
  void note_partial(Conn& c, uint32_t frame_length);
  void answer_handshake(Conn& c, const wire::Step& step);
  void dispatch(Conn& c, wire::Request req);
  void handle_set(Conn& c, std::string key, std::string value);
  void handle_add(Conn& c, const std::string& key, int64_t delta);
  void handle_get(Conn& c, std::string key, uint64_t timeout_ms);
  void handle_wait(Conn& c, std::vector<std::string> keys, uint64_t timeout_ms);
  // Answers c's pending GET/WAIT (ok, or timeout once its deadline passed) and returns true,
  // or parks it on its first missing key and returns false.
  bool try_answer(Conn& c);
  void park(Conn& c, const std::string& missing_key);
  void unpark(Conn& c);
  void wake_waiters(const std::string& key);
  void expire_deadlines(Clock::time_point now);
  void reply(Conn& c, ReplyStatus status, const std::string& payload);
  void reply_timeout(Conn& c);
  void queue(Conn& c, const std::string& bytes);
  // Counts and logs the rejection, then sends `farewell` (if any) and closes the connection.
  void reject(Conn& c, const std::string& why, const std::string& farewell = std::string());
  void close_conn(Conn& c);
};

StoreServer::StoreServer(const std::string& bind_addr, uint16_t port, std::string secret)
    : StoreServer(bind_addr, port, std::move(secret), StoreLimits::from_env()) {}

StoreServer::StoreServer(const std::string& bind_addr, uint16_t port, std::string secret, const StoreLimits& limits)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.secret = std::move(secret);
  s.limits = limits;
  if (s.limits.max_connections == 0) fail(Status::invalid_argument, "store: max_connections must be at least 1");
  if (s.secret.size() > wire::kMaxSecret) {
    fail(Status::invalid_argument, "store secret is %zu bytes; the limit is %u", s.secret.size(),
         wire::kMaxSecret);
  }
  std::string host = bind_addr == "0.0.0.0" ? std::string() : bind_addr;
  std::vector<sockaddr_in> addrs;
  std::string err;
  if (!resolve_ipv4(host, port, /*passive=*/true, &addrs, &err)) {
    fail(Status::invalid_argument, "cannot resolve store bind address '%s': %s", bind_addr.c_str(),
         err.c_str());
  }
  const sockaddr_in& addr = addrs.front();
  s.listen_fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.listen_fd.valid()) fail(Status::transport, "store: socket() failed: %s", std::strerror(errno));
  int one = 1;
  ::setsockopt(s.listen_fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(s.listen_fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    fail(Status::transport, "store cannot bind %s: %s", address_string(addr).c_str(),
         std::strerror(errno));
  }
  if (::listen(s.listen_fd.get(), SOMAXCONN) != 0) {
    fail(Status::transport, "store cannot listen on %s: %s", address_string(addr).c_str(),
         std::strerror(errno));
  }
  sockaddr_in bound{};
  socklen_t len = sizeof(bound);
  if (::getsockname(s.listen_fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    fail(Status::transport, "store: getsockname failed: %s", std::strerror(errno));
  }
  s.port = ntohs(bound.sin_port);
  s.where = address_string(bound);

  int pipefd[2];
  if (::pipe2(pipefd, O_NONBLOCK | O_CLOEXEC) != 0) {
    fail(Status::transport, "store: pipe2 failed: %s", std::strerror(errno));
  }
  s.wake_read.reset(pipefd[0]);
  s.wake_write.reset(pipefd[1]);
  s.thread = std::thread([&s] { s.run(); });
  log(LogLevel::info, "store: listening on %s (at most %zu connections)", s.where.c_str(), s.limits.max_connections);
}

StoreServer::~StoreServer() {
  Impl& s = *impl_;
  s.stop.store(true);
  char byte = 1;
  ssize_t n = ::write(s.wake_write.get(), &byte, 1);
  (void)n;  // a full pipe already wakes the thread
  // The thread closes every client socket as it exits: waiting clients see EOF at once.
  if (s.thread.joinable()) s.thread.join();
  log(LogLevel::info, "store: %s shut down", s.where.c_str());
}

uint16_t StoreServer::port() const { return impl_->port; }

uint64_t StoreServer::rejected_connections() const { return impl_->rejected.load(); }

uint64_t StoreServer::refused_over_limit() const { return impl_->over_limit.load(); }

size_t StoreServer::open_connections() const { return impl_->open.load(); }

const StoreLimits& StoreServer::limits() const { return impl_->limits; }

void StoreServer::Impl::run() {
  try {
    loop();
  } catch (const std::exception& e) {
    log(LogLevel::warn, "store %s: server thread failed (%s); closing every connection", where.c_str(), e.what());
  }
  // Waiting clients see the connection close at once instead of running into their deadlines.
  conns.clear();
  open.store(0);
  listen_fd.reset();
}

void StoreServer::Impl::loop() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  while (!stop.load()) {
    Clock::time_point now = Clock::now();
    fds.clear();
    ids.clear();
    fds.push_back({wake_read.get(), POLLIN, 0});
    bool accepting = now >= accept_paused_until;
    fds.push_back({accepting ? listen_fd.get() : -1, POLLIN, 0});
    Clock::time_point next_deadline = now + std::chrono::hours(24);
    if (!accepting) next_deadline = std::min(next_deadline, accept_paused_until);
    for (auto& [id, c] : conns) {
      short events = POLLRDHUP;
      if (reading(c)) events |= POLLIN;
      if (c.queued() > 0) {
        events |= POLLOUT;
        next_deadline = std::min(next_deadline, c.write_progress + limits.write_timeout);
      }
      fds.push_back({c.fd.get(), events, 0});
      ids.push_back(id);
      if (!c.authenticated) next_deadline = std::min(next_deadline, c.handshake_deadline);
      // A frame's deadline runs only while its connection is read.
      if (c.frame_pending && reading(c)) next_deadline = std::min(next_deadline, c.frame_deadline);
      if (c.parked) next_deadline = std::min(next_deadline, c.parked_deadline);
    }
    int rc = ::poll(fds.data(), fds.size(), poll_timeout_ms(next_deadline));
    if (rc < 0) {
      if (errno == EINTR) continue;
      log(LogLevel::warn, "store %s: poll failed: %s; shutting down", where.c_str(), std::strerror(errno));
      break;
    }
    if (fds[0].revents) {
      char buf[64];
      while (::read(wake_read.get(), buf, sizeof(buf)) > 0) {
      }
      if (stop.load()) break;
    }
    if (fds[1].fd >= 0 && (fds[1].revents & POLLIN)) accept_some();
    for (size_t i = 0; i < ids.size(); ++i) {
      short re = fds[i + 2].revents;
      if (!re) continue;
      auto it = conns.find(ids[i]);
      if (it == conns.end()) continue;
      Conn& c = it->second;
      guarded(c, [&] {
        const bool was_reading = (fds[i + 2].events & POLLIN) != 0;
        if (re & POLLOUT) on_writable(c);
        if (c.closed) return;
        // Output drained below max_queued_output: requests it sent meanwhile may be buffered.
        if (!was_reading && reading(c) && !c.in.empty()) runnable.push_back(c.id);
        if (was_reading && reading(c) && (re & (POLLIN | POLLHUP | POLLERR | POLLRDHUP))) {
          on_readable(c);
        } else if (!reading(c) && (re & (POLLHUP | POLLERR | POLLRDHUP))) {
          // Parked, closing or backed up, and the peer hung up: it will never read the answer.
          log(LogLevel::trace, "store %s: %s hung up while not being read", where.c_str(), c.peer.c_str());
          close_conn(c);
        }
      });
    }
    expire_deadlines(Clock::now());
    while (!runnable.empty()) {
      uint64_t id = runnable.front();
      runnable.pop_front();
      auto it = conns.find(id);
      if (it != conns.end() && reading(it->second)) {
        guarded(it->second, [&] { process_input(it->second); });
      }
    }
    for (auto it = conns.begin(); it != conns.end();) {
      if (it->second.closed) {
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
  }
}

void StoreServer::Impl::accept_some() {
  for (int n = 0; n < kAcceptBurst; ++n) {
    sockaddr_in addr{};
    socklen_t len = sizeof(addr);
    int fd = ::accept4(listen_fd.get(), reinterpret_cast<sockaddr*>(&addr), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        log(LogLevel::warn, "store %s: cannot accept more connections: %s", where.c_str(),
            std::strerror(errno));
        accept_paused_until = Clock::now() + std::chrono::milliseconds(100);
      }
      return;  // EAGAIN: accepted everything pending
    }
    if (open.load() >= limits.max_connections) {
      // Closed before a byte is read: the client sees the connection end during its
      // handshake and retries until its deadline, while the clients already in are served.
      // Counted first, so whoever sees the connection end also sees it counted.
      over_limit.fetch_add(1);
      ::close(fd);
      log(limit_logged ? LogLevel::trace : LogLevel::info,
          "store %s: %zu connections open, the limit (WEFT_STORE_MAX_CONNECTIONS); closing %s and every further "
          "connection until some end (logged once; later ones at trace)",
          where.c_str(), limits.max_connections, address_string(addr).c_str());
      limit_logged = true;
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    uint64_t id = next_id++;
    Conn& c = conns[id];
    c.id = id;
    c.fd.reset(fd);
    c.peer = address_string(addr);
    c.handshake_deadline = Clock::now() + limits.handshake_timeout;
    open.fetch_add(1);
    log(LogLevel::trace, "store %s: connection from %s", where.c_str(), c.peer.c_str());
  }
}

void StoreServer::Impl::on_readable(Conn& c) {
  size_t budget = kReadBudget;
  char buf[kReadChunk];
  while (budget > 0 && reading(c)) {
    ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), 0);
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
      budget -= std::min(budget, static_cast<size_t>(n));
      process_input(c);
      continue;
    }
    if (n == 0) {
      on_eof(c);
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    log(LogLevel::info, "store %s: connection from %s failed: %s", where.c_str(), c.peer.c_str(),
        std::strerror(errno));
    close_conn(c);
    return;
  }
}

void StoreServer::Impl::on_eof(Conn& c) {
  if (!c.authenticated && !c.in.empty()) {
    reject(c, format("closed the connection during the handshake after %zu bytes", c.in.size()));
  } else if (!c.in.empty()) {
    reject(c, format("closed the connection in the middle of a frame (%zu bytes of it received)",
                     c.in.size()));
  } else {
    // Includes a peer that left without sending anything (a port probe): not an attack.
    log(LogLevel::trace, "store %s: %s disconnected", where.c_str(), c.peer.c_str());
    close_conn(c);
  }
}

void StoreServer::Impl::on_writable(Conn& c) {
  while (c.out_sent < c.out.size()) {
    ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_sent += static_cast<size_t>(n);
      c.write_progress = Clock::now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    log(LogLevel::info, "store %s: cannot send to %s: %s", where.c_str(), c.peer.c_str(),
        n < 0 ? std::strerror(errno) : "connection closed");
    close_conn(c);
    return;
  }
  c.out.clear();
  c.out_sent = 0;
  if (c.close_after_flush) close_conn(c);
}

void StoreServer::Impl::queue(Conn& c, const std::string& bytes) {
  if (c.closed) return;
  if (c.queued() == 0) {
    c.write_progress = Clock::now();  // the write deadline starts with the first waiting byte
  } else if (c.out_sent > 0) {
    c.out.erase(0, c.out_sent);  // keep only unsent bytes: a slow reader cannot grow `out`
    c.out_sent = 0;
  }
  c.out += bytes;
  on_writable(c);  // usually goes out at once; otherwise POLLOUT finishes it
}

void StoreServer::Impl::close_conn(Conn& c) {
  if (c.closed) return;
  if (c.parked) unpark(c);
  c.closed = true;
  c.fd.reset();
  c.in.clear();
  c.out.clear();
  c.out_sent = 0;
  c.frame_pending = false;
  open.fetch_sub(1);
}

void StoreServer::Impl::reject(Conn& c, const std::string& why, const std::string& farewell) {
  // Counted before the farewell goes out, so a peer that reads it sees the count already.
  rejected.fetch_add(1);
  log(LogLevel::warn, "store %s: rejecting connection from %s: %s", where.c_str(), c.peer.c_str(),
      why.c_str());
  c.in.clear();
  c.frame_pending = false;
  if (!farewell.empty()) {
    c.close_after_flush = true;
    queue(c, farewell);  // closes the connection once written
    if (c.closed || c.queued() > 0) return;
  }
  close_conn(c);
}

void StoreServer::Impl::process_input(Conn& c) {
  while (reading(c)) {
    wire::Step step = wire::next_step(c.in, c.authenticated, secret);
    switch (step.kind) {
      case wire::Step::Kind::need_more:
        note_partial(c, step.frame_length);
        return;
      case wire::Step::Kind::refuse:
        reject(c, step.error);
        return;
      case wire::Step::Kind::handshake:
        c.in.erase(0, step.consumed);
        answer_handshake(c, step);
        break;
      case wire::Step::Kind::request:
        c.in.erase(0, step.consumed);
        c.frame_pending = false;  // the next frame's deadline starts with its first byte
        dispatch(c, std::move(step.request));
        break;
    }
  }
}

void StoreServer::Impl::note_partial(Conn& c, uint32_t frame_length) {
  // Before authentication the handshake deadline covers a partial handshake.
  if (!c.authenticated || c.in.empty()) {
    c.frame_pending = false;
    return;
  }
  if (!c.frame_pending) {
    c.frame_pending = true;
    c.frame_started = Clock::now();
    c.frame_deadline = c.frame_started + limits.frame_timeout;
  }
  if (frame_length > 0) {
    c.frame_deadline = c.frame_started + limits.frame_timeout +
                       std::chrono::seconds(frame_length / kFrameBytesPerSecond);
  }
}

void StoreServer::Impl::answer_handshake(Conn& c, const wire::Step& step) {
  std::string r;
  wire::put_u32(r, static_cast<uint32_t>(step.answer));
  if (step.answer != wire::HandshakeStatus::welcome) {
    reject(c, step.error, r);
    return;
  }
  c.authenticated = true;
  queue(c, r);
  log(LogLevel::trace, "store %s: %s authenticated", where.c_str(), c.peer.c_str());
}

void StoreServer::Impl::dispatch(Conn& c, wire::Request req) {
  switch (req.op) {
    case Op::set: handle_set(c, std::move(req.key), std::move(req.value)); return;
    case Op::get: handle_get(c, std::move(req.key), req.timeout_ms); return;
    case Op::add: handle_add(c, req.key, req.delta); return;
    case Op::wait: handle_wait(c, std::move(req.keys), req.timeout_ms); return;
  }
}

void StoreServer::Impl::reply(Conn& c, ReplyStatus status, const std::string& payload) {
  std::string out;
  out.reserve(5 + payload.size());
  wire::put_u32(out, static_cast<uint32_t>(1 + payload.size()));
  wire::put_u8(out, static_cast<uint8_t>(status));
  out += payload;
  queue(c, out);
}

void StoreServer::Impl::handle_set(Conn& c, std::string key, std::string value) {
  kv[key] = std::move(value);
  reply(c, ReplyStatus::ok, std::string());
  wake_waiters(key);
}

namespace {

bool parse_int64(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  size_t i = 0;
  bool neg = false;
  if (s[0] == '-' || s[0] == '+') {
    neg = s[0] == '-';
    i = 1;
    if (s.size() == 1) return false;
  }
  int64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    int d = s[i] - '0';
    if (__builtin_mul_overflow(v, int64_t{10}, &v)) return false;
    if (__builtin_add_overflow(v, neg ? -d : d, &v)) return false;
  }
  *out = v;
  return true;
}

}  // namespace

void StoreServer::Impl::handle_add(Conn& c, const std::string& key, int64_t delta) {
  int64_t current = 0;
  auto it = kv.find(key);
  if (it != kv.end() && !parse_int64(it->second, &current)) {
    std::string msg;
    wire::put_bytes(msg, format("key '%s' holds a value that is not a decimal integer", key.c_str()));
    reply(c, ReplyStatus::error, msg);
    return;
  }
  int64_t result = 0;
  if (__builtin_add_overflow(current, delta, &result)) {
    std::string msg;
    wire::put_bytes(msg, format("adding %lld to key '%s' (%lld) overflows int64", static_cast<long long>(delta),
                                key.c_str(), static_cast<long long>(current)));
    reply(c, ReplyStatus::error, msg);
    return;
  }
  kv[key] = std::to_string(result);
  std::string payload;
  wire::put_u64(payload, static_cast<uint64_t>(result));
  reply(c, ReplyStatus::ok, payload);
  wake_waiters(key);
}

void StoreServer::Impl::handle_get(Conn& c, std::string key, uint64_t timeout_ms) {
  c.parked_op = Op::get;
  c.parked_keys.clear();
  c.parked_keys.push_back(std::move(key));
  c.parked_deadline = Clock::now() + std::chrono::milliseconds(std::min(timeout_ms, kMaxRequestTimeoutMs));
  try_answer(c);
}

void StoreServer::Impl::handle_wait(Conn& c, std::vector<std::string> keys, uint64_t timeout_ms) {
  c.parked_op = Op::wait;
  c.parked_keys = std::move(keys);
  c.parked_deadline = Clock::now() + std::chrono::milliseconds(std::min(timeout_ms, kMaxRequestTimeoutMs));
  try_answer(c);
}

bool StoreServer::Impl::try_answer(Conn& c) {
  for (const std::string& k : c.parked_keys) {
    if (kv.find(k) != kv.end()) continue;
    if (Clock::now() >= c.parked_deadline) {
      reply_timeout(c);
      return true;
    }
    park(c, k);
    return false;
  }
  unpark(c);
  if (c.parked_op == Op::get) {
    std::string payload;
    wire::put_bytes(payload, kv[c.parked_keys.front()]);
    reply(c, ReplyStatus::ok, payload);
  } else {
    reply(c, ReplyStatus::ok, std::string());
  }
  c.parked_keys.clear();
  return true;
}

void StoreServer::Impl::park(Conn& c, const std::string& missing_key) {
  if (c.parked && c.parked_on == missing_key) return;
  unpark(c);
  c.parked = true;
  c.parked_on = missing_key;
  waiters[missing_key].push_back(c.id);
}

void StoreServer::Impl::unpark(Conn& c) {
  if (!c.parked) return;
  auto it = waiters.find(c.parked_on);
  if (it != waiters.end()) {
    auto& ids = it->second;
    ids.erase(std::remove(ids.begin(), ids.end(), c.id), ids.end());
    if (ids.empty()) waiters.erase(it);
  }
  c.parked = false;
  c.parked_on.clear();
}

void StoreServer::Impl::wake_waiters(const std::string& key) {
  auto it = waiters.find(key);
  if (it == waiters.end()) return;
  std::vector<uint64_t> ids = std::move(it->second);
  waiters.erase(it);
  for (uint64_t id : ids) {
    auto cit = conns.find(id);
    if (cit == conns.end()) continue;
    Conn& w = cit->second;
    if (w.closed || !w.parked || w.parked_on != key) continue;
    // Its registration under `key` left with `ids`; try_answer parks it afresh if needed.
    w.parked = false;
    w.parked_on.clear();
    if (try_answer(w)) runnable.push_back(w.id);  // it may have more requests buffered
  }
}

void StoreServer::Impl::reply_timeout(Conn& c) {
  std::vector<const std::string*> missing;
  for (const std::string& k : c.parked_keys) {
    if (kv.find(k) == kv.end()) missing.push_back(&k);
  }
  std::string payload;
  wire::put_u32(payload, static_cast<uint32_t>(missing.size()));
  for (const std::string* k : missing) wire::put_bytes(payload, *k);
  unpark(c);
  reply(c, ReplyStatus::timeout, payload);
  c.parked_keys.clear();
}

void StoreServer::Impl::expire_deadlines(Clock::time_point now) {
  for (auto& [id, c] : conns) {
    if (c.closed) continue;
    guarded(c, [&] {
      if (c.queued() > 0 && now >= c.write_progress + limits.write_timeout) {
        // It reads nothing: close_after_flush included, nothing more is owed to it.
        reject(c, format("took none of its %zu queued reply bytes for %lld ms", c.queued(),
                         count_ms(limits.write_timeout)));
      } else if (!c.authenticated && now >= c.handshake_deadline) {
        reject(c, format("sent no complete handshake within %lld ms (%zu bytes of it received)",
                         count_ms(limits.handshake_timeout), c.in.size()));
      } else if (c.frame_pending && reading(c) && now >= c.frame_deadline) {
        reject(c, format("sent %zu bytes of a frame and not the rest within %lld ms", c.in.size(),
                         static_cast<long long>(
                             std::chrono::duration_cast<std::chrono::milliseconds>(c.frame_deadline - c.frame_started)
                                 .count())));
      } else if (c.parked && now >= c.parked_deadline) {
        reply_timeout(c);
        runnable.push_back(c.id);
      }
    });
  }
}

}  // namespace weft::bootstrap
