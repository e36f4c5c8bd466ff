// User point-to-point (weft_send, weft_recv, weft_p2p_batch) as core/ sees it: the one place
// that decides how such a message is tagged, and helpers for the operations a call or request
// owns. Host memory (capi/) and staged device memory (core/device/p2p.cpp) both post here,
// which is what lets a host-memory send pair with a staged device receive and vice versa.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "transports/transport.h"

namespace weft {

class Comm;

// Posts `op` to or from `peer` (a rank of comm). Every message of one sender on a communicator
// carries the same tag, so messages between two ranks match in posting order per direction.
void post_user_p2p(Comm& comm, transport::Op& op, bool is_send, int peer, void* buf, size_t bytes);

using OwnedOps = std::vector<std::unique_ptr<transport::Op>>;


bool all_finished(const OwnedOps& ops);
// wait_ops (progress.h) over owned operations.
void wait_owned(Comm& comm, const OwnedOps& ops, const char* operation);
// Unfinished operations go to the world's graveyard (the transport may still use them and
// their buffers), finished ones back to this thread's pool; the list is emptied.
void bury_unfinished(Comm& comm, OwnedOps& ops);

}  // namespace weft
