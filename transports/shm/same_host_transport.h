// The transport a world uses when some of its peers share this host: messages to those peers go
// through weft's own shared-memory rings (P2pRings), everything else through the network engine
// (UCX), which keeps every peer's endpoint either way.
//
// Routing is per (peer, tag space), never per message size, so the order of messages with one
// (peer, tag) cannot change. Receives from any sender (transport.h: recv_any_sender) cannot be
// served by per-peer rings, so the one tag space received that way (World's failure notices)
// stays on the network engine for every peer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transports/shm/p2p_rings.h"
#include "transports/transport.h"

namespace weft::transport {

class SameHostTransport final : public Transport {
 public:
  // Tags whose top 16 bits equal `any_sender_space` travel over `network` only.
  SameHostTransport(std::unique_ptr<Transport> network, uint16_t any_sender_space);
  ~SameHostTransport() override;

  // Hands over the rings once every local peer has mapped them (World::create); until then,
  // and for good when setup fails, all traffic goes to the network engine.
  void use_rings(std::unique_ptr<shm::P2pRings> rings);
  Transport& network() { return *network_; }

  std::string local_address() override { return network_->local_address(); }
  void connect(const std::vector<std::string>& addresses, int self_index, const std::vector<bool>& same_host) override {
    network_->connect(addresses, self_index, same_host);
  }
  void send(Op& op, int peer, Tag tag, const void* buf, size_t bytes) override;
  void recv(Op& op, int peer, Tag tag, void* buf, size_t bytes) override;
  void recv_any_sender(Op& op, Tag tag, void* buf, size_t bytes) override { network_->recv_any_sender(op, tag, buf, bytes); }
  void cancel(Op& op) override;
  bool progress() override;
  void wait_for_activity(int max_us) override;
  bool addresses_cuda_memory() const override { return network_->addresses_cuda_memory(); }
  bool peer_failed(int peer) const override { return network_->peer_failed(peer); }
  std::string describe() const override;

 private:
  bool on_rings(int peer, Tag tag) const {
    return rings_ && static_cast<uint16_t>(tag >> 48) != any_sender_space_ && rings_->reaches(peer);
  }

  std::unique_ptr<Transport> network_;
  std::unique_ptr<shm::P2pRings> rings_;
  uint16_t any_sender_space_;
};

}  // namespace weft::transport
