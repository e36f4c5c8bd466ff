// UCX engine: one UCP context and worker per world (a communicator created by init and all
// communicators split or dup'ed from it share it), endpoints to every world rank, tagged
// send/recv. UCX picks shared memory, CMA, TCP or InfiniBand per peer.
#pragma once

#include <ucp/api/ucp.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "transports/transport.h"

namespace weft::transport {

class UcxTransport final : public Transport {
 public:
  UcxTransport();
  ~UcxTransport() override;
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  std::string local_address() override;
  void connect(const std::vector<std::string>& addresses, int self_index,
               const std::vector<bool>& same_host) override;
  void send(Op& op, int peer, Tag tag, const void* buf, size_t bytes) override;
  void recv(Op& op, int peer, Tag tag, void* buf, size_t bytes) override;
  void recv_any_sender(Op& op, Tag tag, void* buf, size_t bytes) override;
  void cancel(Op& op) override;
  bool progress() override;
  void wait_for_activity(int max_us) override;
  bool peer_failed(int peer) const override;
  bool addresses_cuda_memory() const override { return cuda_memory_; }
  std::string describe() const override;

 private:
  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  void post_recv(Op& op, int peer, Tag tag, Tag mask, void* buf, size_t bytes);
  void close_endpoints();

  // UCX is created in serialized mode: this mutex makes every worker call single-threaded, so
  // per-communicator executor threads and user threads can share one worker.
  mutable std::mutex mutex_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<ucp_ep_h> endpoints_;
  std::unordered_map<ucp_ep_h, int> peer_of_ep_;
  std::unique_ptr<std::atomic<bool>[]> peer_failed_;
  int npeers_ = 0;
  int same_host_peers_ = 0;
  bool cuda_memory_ = false;  // UCX lists CUDA among its memory types (a CUDA-enabled build)
};

}  // namespace weft::transport
