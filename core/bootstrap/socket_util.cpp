#include "core/bootstrap/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>
#include <cstring>

#include "core/common/status.h"

namespace weft::bootstrap {

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

bool resolve_ipv4(const std::string& host, uint16_t port, bool passive,
                  std::vector<sockaddr_in>* out, std::string* error) {
  out->clear();
  if (host.empty()) {
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(passive ? INADDR_ANY : INADDR_LOOPBACK);
    any.sin_port = htons(port);
    out->push_back(any);
    return true;
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0) {
    *error = rc == EAI_SYSTEM ? std::string(std::strerror(errno)) : std::string(gai_strerror(rc));
    return false;
  }
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET || ai->ai_addrlen < sizeof(sockaddr_in)) continue;
    sockaddr_in addr;
    std::memcpy(&addr, ai->ai_addr, sizeof(addr));
    addr.sin_port = htons(port);
    bool seen = false;
    for (const sockaddr_in& a : *out) seen = seen || a.sin_addr.s_addr == addr.sin_addr.s_addr;
    if (!seen) out->push_back(addr);
  }
  ::freeaddrinfo(res);
  if (out->empty()) {
    *error = "no IPv4 address";
    return false;
  }
  return true;
}

std::string store_bind_address(const std::string& host) {
  if (host.empty() || host == "localhost") return "127.0.0.1";
  in_addr literal{};
  if (inet_pton(AF_INET, host.c_str(), &literal) == 1 && (ntohl(literal.s_addr) >> 24) == 127) return "127.0.0.1";
  return "0.0.0.0";
}

std::string address_string(const sockaddr_in& addr) {
  char ip[INET_ADDRSTRLEN] = {0};
  if (!::inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof(ip))) return "unknown address";
  return format("%s:%u", ip, static_cast<unsigned>(ntohs(addr.sin_port)));
}

std::string peer_string(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || addr.sin_family != AF_INET) {
    return "unknown peer";
  }
  return address_string(addr);
}

bool set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

int poll_timeout_ms(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return 0;
  if (left.count() > INT_MAX) return INT_MAX;
  return static_cast<int>(left.count());
}

}  // namespace weft::bootstrap
