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
// never disturbs other clients. One thread serves every connection with non-blocking I/O under
// StoreLimits: a silent, half-sending or non-reading client costs one slot until its deadline,
// never the others' service.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace weft::bootstrap {

constexpr uint32_t kMaxFrame = 64u << 20;  // 64 MiB: far above any record weft exchanges
constexpr uint32_t kMaxKey = 4096;

// What one store server grants its clients.
struct StoreLimits {
  // Connections served at once; one more is accepted and closed at once (its client retries
  // until its deadline). Every rank holds one connection through communicator creation, so
  // this must be at least the number of ranks. Default (WEFT_STORE_MAX_CONNECTIONS overrides):
  // three quarters of the process's open-file limit, at most 65536 - the hosting process is a
  // rank too, and its transports and files need the remaining descriptors.
  size_t max_connections = 65536;
  // A connection must complete its handshake this long after connecting (a real client sends
  // it right after connect()); a silent or half-speaking peer is then dropped.
  std::chrono::milliseconds handshake_timeout{10000};
  // An authenticated client that starts a frame must finish it within this long plus one
  // second per MiB of the frame (a floor of 1 MiB/s for large values).
  std::chrono::milliseconds frame_timeout{30000};
  // Replies queued for a client that reads nothing: once more than max_queued_output bytes
  // wait, its requests are no longer read; when none of them is taken for write_timeout, the
  // connection is dropped. A connection thus buffers at most this plus one reply.
  size_t max_queued_output = 1u << 20;
  std::chrono::milliseconds write_timeout{60000};

  // The defaults above with WEFT_STORE_MAX_CONNECTIONS applied (a positive integer, else
  // Error invalid_argument naming the variable).
  static StoreLimits from_env();
};

class StoreServer {
 public:
  // Listens on bind_addr:port (bind_addr "" or "0.0.0.0" = all interfaces; port 0 = any free
  // port) and serves clients on a background thread until destroyed.
  StoreServer(const std::string& bind_addr, uint16_t port, std::string secret);  // StoreLimits::from_env()
  StoreServer(const std::string& bind_addr, uint16_t port, std::string secret, const StoreLimits& limits);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  uint16_t port() const;
  // Connections refused so far (bad magic, wrong secret, malformed or oversize frame, a
  // handshake, frame or reply deadline missed): for tests and logs.
  uint64_t rejected_connections() const;
  // Connections closed at once because max_connections were open (not counted above).
  uint64_t refused_over_limit() const;
  // Connections open now (authenticated or not).
  size_t open_connections() const;
  const StoreLimits& limits() const;

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
