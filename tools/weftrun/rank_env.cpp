#include "tools/weftrun/rank_env.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/common/status.h"

namespace weftrun {

std::vector<std::string> rank_environment(const char* const* base, const JobInfo& job, int rank) {
  // Single host: local rank == rank, local size == world size.
  const std::vector<std::pair<std::string, std::string>> vars = {
      {"WEFT_RANK", std::to_string(rank)},
      {"WEFT_WORLD_SIZE", std::to_string(job.world_size)},
      {"WEFT_LOCAL_RANK", std::to_string(rank)},
      {"WEFT_LOCAL_SIZE", std::to_string(job.world_size)},
      {"WEFT_MASTER_ADDR", job.master_addr},
      {"WEFT_MASTER_PORT", std::to_string(job.store_port)},
      {"WEFT_JOB_SECRET", job.secret},
      {"WEFT_STORE_HOSTED", "1"},
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(job.world_size)},
      {"LOCAL_RANK", std::to_string(rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(job.world_size)},
      {"MASTER_ADDR", job.master_addr},
      {"MASTER_PORT", std::to_string(job.torch_port)},
  };
  std::vector<std::string> env;
  for (const char* const* e = base; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    std::string name = eq ? std::string(*e, eq) : std::string(*e);
    bool ours = false;
    for (const auto& [k, v] : vars) ours = ours || k == name;
    if (!ours) env.emplace_back(*e);
  }
  for (const auto& [k, v] : vars) env.push_back(k + "=" + v);
  return env;
}

uint16_t pick_free_port(const std::string& addr) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) weft::fail(weft::Status::internal, "socket: %s", std::strerror(errno));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = 0;
  if (::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) {
    ::close(fd);
    weft::fail(weft::Status::invalid_argument, "not an IPv4 address: '%s'", addr.c_str());
  }
  socklen_t len = sizeof sa;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    int err = errno;
    ::close(fd);
    weft::fail(weft::Status::internal, "cannot find a free port on %s: %s", addr.c_str(),
               std::strerror(err));
  }
  ::close(fd);
  return ntohs(sa.sin_port);
}

}  // namespace weftrun
