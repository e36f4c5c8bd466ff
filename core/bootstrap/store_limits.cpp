// StoreLimits::from_env: the store's connection cap from WEFT_STORE_MAX_CONNECTIONS or the
// process's open-file limit.
#include <sys/resource.h>

#include <cerrno>
#include <cstdlib>

#include "core/bootstrap/store.h"
#include "core/common/status.h"

namespace weft::bootstrap {
namespace {

constexpr size_t kConnectionCeiling = 65536;  // keeps one poll() set over all clients cheap
constexpr size_t kConnectionFloor = 16;       // even under a tiny open-file limit

size_t default_max_connections() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return kConnectionCeiling;
  // The hosting process is a rank too: its transports, shared memory and files keep a quarter.
  const size_t three_quarters = static_cast<size_t>(rl.rlim_cur / 4 * 3);
  if (three_quarters < kConnectionFloor) return kConnectionFloor;
  return three_quarters < kConnectionCeiling ? three_quarters : kConnectionCeiling;
}

}  // namespace

StoreLimits StoreLimits::from_env() {
  StoreLimits limits;
  limits.max_connections = default_max_connections();
  const char* text = std::getenv("WEFT_STORE_MAX_CONNECTIONS");
  if (text && *text) {
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || text[0] == '-' || v == 0 || v > (1ull << 24)) {
      fail(Status::invalid_argument,
           "WEFT_STORE_MAX_CONNECTIONS='%s' is not a number of connections from 1 to %llu (each rank holds one)",
           text, 1ull << 24);
    }
    limits.max_connections = static_cast<size_t>(v);
  }
  return limits;
}

}  // namespace weft::bootstrap
