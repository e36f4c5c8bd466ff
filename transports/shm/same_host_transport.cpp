#include "transports/shm/same_host_transport.h"

#include <algorithm>

namespace weft::transport {
namespace {

// While ring operations are pending, a wait sleeps at most this long between polls: a ring has
// no wake-up to arm, it moves as soon as the peer copies, and a 200 us nap per chunk would cap
// a 256 KiB chunk at ~1.3 GB/s. Short naps still give the core away when ranks outnumber cores.
constexpr int kRingWaitUs = 20;

}  // namespace

SameHostTransport::SameHostTransport(std::unique_ptr<Transport> network, uint16_t any_sender_space)
    : network_(std::move(network)), any_sender_space_(any_sender_space) {}

// The rings go first: an operation buried in World's graveyard may still be queued in them, and
// must never be touched once the rings are gone (the network engine completes its own on close).
SameHostTransport::~SameHostTransport() { rings_.reset(); }

void SameHostTransport::use_rings(std::unique_ptr<shm::P2pRings> rings) { rings_ = std::move(rings); }

void SameHostTransport::send(Op& op, int peer, Tag tag, const void* buf, size_t bytes) {
  if (on_rings(peer, tag)) {
    rings_->send(op, peer, tag, buf, bytes);
  } else {
    network_->send(op, peer, tag, buf, bytes);
  }
}

void SameHostTransport::recv(Op& op, int peer, Tag tag, void* buf, size_t bytes) {
  if (on_rings(peer, tag)) {
    rings_->recv(op, peer, tag, buf, bytes);
  } else {
    network_->recv(op, peer, tag, buf, bytes);
  }
}

void SameHostTransport::cancel(Op& op) {
  // A ring operation has no network handle, so the network engine ignores it.
  if (!rings_ || !rings_->cancel(op)) network_->cancel(op);
}

bool SameHostTransport::progress() {
  const bool rings_moved = rings_ && rings_->progress();
  const bool network_moved = network_->progress();
  return rings_moved || network_moved;
}

void SameHostTransport::wait_for_activity(int max_us) {
  network_->wait_for_activity(rings_ && rings_->busy() ? std::min(max_us, kRingWaitUs) : max_us);
}

std::string SameHostTransport::describe() const {
  if (!rings_) return network_->describe() + "; same-host point-to-point through it too";
  return rings_->describe() + " for same-host point-to-point; " + network_->describe();
}

}  // namespace weft::transport
