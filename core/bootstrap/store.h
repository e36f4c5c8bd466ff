// Rendezvous key-value store: a TCP server run by rank 0 (or the launcher) and a client per
// process. Used only at communicator creation, so it favours checking over speed.
//
// Wire protocol (all integers little-endian):
//   client -> server, once:   "WEFTSTOR" (8 bytes), u32 protocol version, u32 secret length,
//                             secret bytes.        server -> client: u32 status (0 = welcome).
//   then requests:            u32 frame length (bytes after this field, <= kMaxFrame), u8 op,
//                             op-specific fields with u32 lengths; replies likewise.
// Every length is checked against the frame and kMaxFrame before anything is allocated; a
// connection sending garbage, a wrong secret or a truncated frame is logged and closed, and
// never disturbs other clients.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace weft::bootstrap {

constexpr uint32_t kMaxFrame = 64u << 20;  // 64 MiB: far above any record weft exchanges
constexpr uint32_t kMaxKey = 4096;

class StoreServer {
 public:
  // Listens on bind_addr:port (bind_addr "" or "0.0.0.0" = all interfaces; port 0 = any free
  // port) and serves clients on a background thread until destroyed.
  StoreServer(const std::string& bind_addr, uint16_t port, std::string secret);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  uint16_t port() const;
  // Connections refused so far (bad magic, wrong secret, malformed frame): for tests and logs.
  uint64_t rejected_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class StoreClient {
 public:
  // Connects (retrying until `timeout`, since the server may start later) and authenticates.
  // Throws weft::Error: timeout naming host:port, or invalid_argument for a wrong secret.
  StoreClient(const std::string& host, uint16_t port, const std::string& secret,
              std::chrono::milliseconds timeout);
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  void set(const std::string& key, const std::string& value);
  // Blocks until key exists or timeout (Error timeout naming the key).
  std::string get(const std::string& key, std::chrono::milliseconds timeout);
  // Atomically adds delta to the integer stored at key (missing = 0); returns the new value.
  int64_t add(const std::string& key, int64_t delta);
  // Blocks until all keys exist or timeout (Error timeout naming the missing keys).
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::bootstrap
