// The one place that waits for point-to-point operations: it drives the transport, backs off
// when nothing moves (ranks may outnumber cores), and turns every way a wait can end badly
// into an Error that names the operation and the peer: deadline (timeout), abort, a dead
// peer (remote), a size mismatch, a transport failure.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "transports/transport.h"

namespace weft {

class Comm;

struct WaitSubject {
  const char* operation;  // "allreduce", "send", ...
  const char* algorithm;  // "ring", or "" for point-to-point
  uint32_t sequence;      // collective sequence number (ignored for point-to-point)
};

// Waits until every op has finished and checks each one (receives must have received exactly
// their posted size). On failure: cancels what it can, hands still-pending ops to the world's
// graveyard (so late completions never touch freed memory), marks the communicator broken
// when the message stream is out of step, and throws.
void wait_ops(Comm& comm, const std::vector<transport::Op*>& ops, const WaitSubject& subject);

}  // namespace weft
