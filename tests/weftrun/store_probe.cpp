// Run under weftrun: proves a rank can reach the store weftrun hosts with the address and
// secret weftrun put in its environment. Each rank sets "rank<i>" and waits for every rank's
// key, so the run only succeeds if all ranks share one working store.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/bootstrap/store.h"
#include "core/common/status.h"

namespace {

std::string need(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) weft::fail(weft::Status::invalid_argument, "%s is not set", name);
  return v;
}

int need_int(const char* name) {
  std::string v = need(name);
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (*end != '\0' || n < 0 || n > 65535)
    weft::fail(weft::Status::invalid_argument, "%s='%s' is not a small integer", name, v.c_str());
  return static_cast<int>(n);
}

}  // namespace

int main() {
  using namespace std::chrono_literals;
  try {
    const int rank = need_int("WEFT_RANK");
    const int size = need_int("WEFT_WORLD_SIZE");
    const std::string host = need("WEFT_MASTER_ADDR");
    const auto port = static_cast<uint16_t>(need_int("WEFT_MASTER_PORT"));
    const std::string secret = need("WEFT_JOB_SECRET");
    if (need("WEFT_STORE_HOSTED") != "1")
      weft::fail(weft::Status::invalid_argument, "WEFT_STORE_HOSTED is not 1");

    weft::bootstrap::StoreClient client(host, port, secret, 10s);
    client.set("rank" + std::to_string(rank), "hello from " + std::to_string(rank));
    std::vector<std::string> keys;
    for (int i = 0; i < size; ++i) keys.push_back("rank" + std::to_string(i));
    client.wait(keys, 10s);
    for (int i = 0; i < size; ++i) {
      std::string v = client.get(keys[i], 1s);
      if (v != "hello from " + std::to_string(i))
        weft::fail(weft::Status::mismatch, "%s holds '%s'", keys[i].c_str(), v.c_str());
    }
    // Every rank counts itself in once: the last to add sees exactly `size`.
    int64_t arrived = client.add("arrived", 1);
    if (arrived < 1 || arrived > size)
      weft::fail(weft::Status::mismatch, "counter reads %lld with %d ranks",
                 static_cast<long long>(arrived), size);
    std::printf("store_probe: rank %d saw all %d keys\n", rank, size);
    return 0;
  } catch (const weft::Error& e) {
    std::fprintf(stderr, "store_probe: %s: %s\n", weft::status_name(e.status()), e.what());
    return 1;
  }
}
