// A hand-driven TCP connection to the rendezvous store that speaks (or mangles) its wire
// protocol byte by byte, and the little-endian helpers to build frames, shared by the store
// tests (test_store.cpp: protocol errors; test_store_hardening.cpp: hostile and broken peers).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>

namespace store_test {

inline void le32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline void le64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// The client's opening: magic, protocol version, secret length, secret.
inline std::string hello(const std::string& secret) {
  std::string s = "WEFTSTOR";
  le32(s, 1);
  le32(s, static_cast<uint32_t>(secret.size()));
  return s + secret;
}

// A frame: u32 length, then the body.
inline std::string framed(const std::string& body) {
  std::string f;
  le32(f, static_cast<uint32_t>(body.size()));
  return f + body;
}

class RawStoreConn {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RawStoreConn(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~RawStoreConn() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawStoreConn(const RawStoreConn&) = delete;
  RawStoreConn& operator=(const RawStoreConn&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  void send(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;  // the server may already have closed: the tests check that
      off += static_cast<size_t>(n);
    }
  }
  // Up to n bytes, stopping early at EOF or after the timeout.
  std::string recv_upto(size_t n, std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
    std::string out;
    const auto deadline = Clock::now() + timeout;
    while (out.size() < n) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, left_ms(deadline)) <= 0) break;
      char buf[4096];
      const ssize_t r = ::recv(fd_, buf, std::min(sizeof(buf), n - out.size()), 0);
      if (r <= 0) break;
      out.append(buf, static_cast<size_t>(r));
    }
    return out;
  }
  // Exactly n bytes, or an empty string on EOF or timeout.
  std::string recv_exact(size_t n, std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
    std::string out = recv_upto(n, timeout);
    return out.size() == n ? out : std::string();
  }
  // True when the server ends the connection within the timeout (bytes before EOF skipped).
  bool closed_by_server(std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      const int left = left_ms(deadline);
      pollfd p{fd_, POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, left) <= 0) return false;
      char buf[65536];
      const ssize_t r = ::recv(fd_, buf, sizeof(buf), 0);
      if (r == 0 || (r < 0 && errno == ECONNRESET)) return true;
    }
  }
  // Authenticates; true when welcomed (four zero bytes).
  bool login(const std::string& secret) {
    send(hello(secret));
    return recv_upto(4) == std::string(4, '\0');
  }
  void close_write() { ::shutdown(fd_, SHUT_WR); }
  void close() {
    ::close(fd_);
    fd_ = -1;
  }

 private:
  static int left_ms(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left > 0 ? static_cast<int>(left) : 0;
  }
  int fd_ = -1;
  bool connected_ = false;
};

}  // namespace store_test
