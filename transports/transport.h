// The one interface every engine implements (DESIGN.md: "Communicators and transports").
// Point-to-point only for now: tagged, matched by (peer, tag), completion by polling.
// Collectives are built on top of it in core/collectives/.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::transport {

using Tag = uint64_t;

// One posted send or receive. Lives at a stable address from post until complete (or until
// cancel() has completed it); the transport's callbacks write into it.
struct Op {
  enum class State : int { idle, pending, done, failed };
  std::atomic<State> state{State::idle};
  int peer = -1;            // peer's index in the transport's peer list
  bool is_recv = false;
  size_t bytes = 0;         // posted size
  size_t received = 0;      // receives: the size that arrived (valid when done)
  std::string error;        // when failed: what the transport said
  void* handle = nullptr;   // engine-private request

  // An engine accepting the operation: records what was posted and marks it pending (before
  // the engine can complete it from a callback or another thread).
  void begin(int to_peer, bool receive, size_t size) {
    peer = to_peer;
    is_recv = receive;
    bytes = size;
    received = 0;
    handle = nullptr;
    state.store(State::pending, std::memory_order_relaxed);
  }

  bool finished() const {
    State s = state.load(std::memory_order_acquire);
    return s == State::done || s == State::failed;
  }
};

class Transport {
 public:
  virtual ~Transport() = default;

  // This process's address for peers to connect to (exchanged through the store).
  virtual std::string local_address() = 0;
  // Connects to every peer; addresses[i] belongs to peer i, self_index is ours. Called once.
  // same_host[i]: peer i shares this machine (kernel and PID namespace), so its death is
  // detected by the caller's process check and the engine may use host-local paths for it.
  virtual void connect(const std::vector<std::string>& addresses, int self_index,
                       const std::vector<bool>& same_host) = 0;

  // Start an operation; it completes during a later progress() (or at once).
  virtual void send(Op& op, int peer, Tag tag, const void* buf, size_t bytes) = 0;
  virtual void recv(Op& op, int peer, Tag tag, void* buf, size_t bytes) = 0;
  // A receive matching `tag` from any peer: the sender field (bits 32..47) is not compared.
  virtual void recv_any_sender(Op& op, Tag tag, void* buf, size_t bytes) = 0;
  // Ask a pending op to stop; it still completes (failed) through progress(). After this the
  // engine no longer writes to a receive's buffer.
  virtual void cancel(Op& op) = 0;
  // Drives communication. Returns true if anything completed or moved.
  virtual bool progress() = 0;
  // Blocks up to `max_us` for network activity (or returns at once if unsupported), so that
  // ranks outnumbering cores sleep instead of spinning.
  virtual void wait_for_activity(int max_us) = 0;
  // True when the engine moves CUDA device memory itself (a CUDA-enabled UCX): device buffers
  // may then be handed to it directly instead of being staged through pinned host memory.
  virtual bool addresses_cuda_memory() const { return false; }
  // True once the engine has seen the connection to `peer` fail.
  virtual bool peer_failed(int peer) const = 0;
  // Human-readable engine name and details for WEFT_DEBUG=info.
  virtual std::string describe() const = 0;
};

}  // namespace weft::transport
