#include "core/comm/same_host_p2p.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "core/common/log.h"
#include "core/common/status.h"

namespace weft {
namespace {

std::string key(const std::string& prefix, const char* kind, int rank) {
  std::string k(prefix);
  k.append(kind);
  k.append(std::to_string(rank));
  return k;
}

long env_number(const char* var, long fallback, long lo, long hi) {
  const char* v = std::getenv(var);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*end || n < lo || n > hi) fail(Status::invalid_argument, "%s='%s'; expected a whole number from %ld to %ld", var, v, lo, hi);
  return n;
}

// Measured on 2 local ranks (docs/performance.md, same-host point-to-point): 8 chunks of
// 256 KiB keep both copies of a 1 MiB or 16 MiB message overlapped; smaller chunks add
// per-chunk handshakes, more chunks only add memory (2 MiB per ordered pair of local ranks).
shm::RingShape ring_shape() {
  shm::RingShape shape;
  shape.chunks = static_cast<int>(env_number("WEFT_SHM_P2P_CHUNKS", shape.chunks, 2, 1024));
  shape.chunk_bytes = static_cast<size_t>(env_number("WEFT_SHM_P2P_CHUNK_BYTES", static_cast<long>(shape.chunk_bytes),
                                                     4096, 64L << 20));
  if (shape.chunk_bytes % 64 != 0) fail(Status::invalid_argument, "WEFT_SHM_P2P_CHUNK_BYTES=%zu is not a multiple of 64", shape.chunk_bytes);
  return shape;
}

}  // namespace

std::unique_ptr<shm::P2pRings> setup_same_host_rings(bootstrap::StoreClient& store, const std::string& key_prefix,
                                                     int rank, const std::vector<bool>& same_host, bool cuda_memory,
                                                     const Deadline& deadline) {
  std::vector<int> local;
  for (int r = 0; r < static_cast<int>(same_host.size()); ++r) {
    if (r == rank || same_host[static_cast<size_t>(r)]) local.push_back(r);
  }
  if (local.size() < 2) return nullptr;

  // Phase 1: create and publish this rank's inbox ("" = this rank does not take part).
  const char* off = std::getenv("WEFT_SHM_P2P");
  if (off && *off && std::strcmp(off, "0") != 0 && std::strcmp(off, "1") != 0) {
    fail(Status::invalid_argument, "WEFT_SHM_P2P='%s'; expected 0 or 1", off);
  }
  std::unique_ptr<shm::P2pRings> rings;
  std::string why_not;
  if (off && std::strcmp(off, "0") == 0) {
    why_not = "WEFT_SHM_P2P=0";
  } else if (cuda_memory) {
    why_not = "UCX takes device buffers directly";
  } else {
    std::random_device rd;
    char name[64];
    std::snprintf(name, sizeof(name), "/weft-p2p-%d-%08x%08x", static_cast<int>(getpid()), rd(), rd());
    try {
      rings = shm::P2pRings::create(name, rank, local, static_cast<int>(same_host.size()), ring_shape());
    } catch (const Error& e) {
      why_not = e.what();
    }
  }
  store.set(key(key_prefix, "p2p-inbox/", rank), rings ? rings->inbox_name() : std::string());

  // Phase 2: map the peers' inboxes and say whether that worked.
  if (rings) {
    std::vector<std::string> names;
    for (int r : local) names.push_back(store.get(key(key_prefix, "p2p-inbox/", r), deadline.remaining()));
    for (size_t i = 0; i < names.size() && why_not.empty(); ++i) {
      if (names[i].empty()) why_not = format("rank %d on this host has no inbox", local[i]);
    }
    if (why_not.empty()) {
      try {
        rings->attach(names);
      } catch (const Error& e) {
        why_not = e.what();
      }
    }
  }
  store.set(key(key_prefix, "p2p-mapped/", rank), why_not.empty() ? "1" : "0");

  // Phase 3: every local rank has tried to map every inbox; all or none use them.
  for (int r : local) {
    if (store.get(key(key_prefix, "p2p-mapped/", r), deadline.remaining()) != "1" && why_not.empty()) {
      why_not = format("rank %d on this host could not set its rings up", r);
    }
  }
  if (rings) rings->unlink_inbox();
  if (!why_not.empty()) {
    log(LogLevel::info, "rank %d: same-host point-to-point stays on UCX: %s", rank, why_not.c_str());
    return nullptr;
  }
  return rings;
}

}  // namespace weft
