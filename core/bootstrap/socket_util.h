// Small POSIX socket helpers for the rendezvous store: an owning descriptor, IPv4 name
// resolution and printable addresses.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <string>
#include <vector>

namespace weft::bootstrap {

// Owns one file descriptor; closes it on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = other.release();
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// IPv4 addresses of host (a name or dotted address) with port filled in. host "" means any
// address when passive (binding), else loopback. Returns false and sets *error (getaddrinfo's words) when it fails.
bool resolve_ipv4(const std::string& host, uint16_t port, bool passive,
                  std::vector<sockaddr_in>* out, std::string* error);

// The address a rank-0-hosted store binds for master address host: "127.0.0.1" when host is
// "" (weft's default), "localhost" or a dotted 127.x.y.z literal, so a job on one machine is not
// reachable from the network; otherwise "0.0.0.0" (all interfaces). A host NAME that resolves to
// loopback on rank 0 still gets all interfaces: Debian maps its own host name to 127.0.1.1, while
// the other hosts of a job resolve that name to the real address and must reach the store.
std::string store_bind_address(const std::string& host);

// "a.b.c.d:port".
std::string address_string(const sockaddr_in& addr);
// The peer of a connected socket as "a.b.c.d:port", or "unknown peer".
std::string peer_string(int fd);

bool set_nonblocking(int fd);

// Milliseconds left until deadline, clamped to [0, INT_MAX] for poll().
int poll_timeout_ms(std::chrono::steady_clock::time_point deadline);

}  // namespace weft::bootstrap
