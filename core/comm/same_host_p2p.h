// Same-host point-to-point setup for World::create: every rank on a host creates its inbox of
// shared-memory rings (transports/shm/p2p_rings.h), publishes its name through the store, maps
// its local peers' inboxes, and the host's ranks agree through the store whether all of them
// succeeded; only then is any ring used, so no rank ever writes to a ring its peer does not read.
// Every inbox's name is removed as soon as the agreement is read, so /dev/shm keeps nothing
// even if a process dies later.
//
// WEFT_SHM_P2P=0 (on any rank of a host) keeps that host's point-to-point on UCX;
// WEFT_SHM_P2P_CHUNKS / WEFT_SHM_P2P_CHUNK_BYTES reshape the rings (the same on every rank).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/bootstrap/store.h"
#include "core/comm/deadline.h"
#include "transports/shm/p2p_rings.h"

namespace weft {

// Returns the rings, or nullptr when this rank has no local peer or the host's ranks did not
// all set theirs up (the reason is logged at WEFT_DEBUG=info). `cuda_memory`: the network
// engine takes device buffers directly, which the rings (plain memcpy) cannot, so they stay off.
std::unique_ptr<shm::P2pRings> setup_same_host_rings(bootstrap::StoreClient& store, const std::string& key_prefix,
                                                     int rank, const std::vector<bool>& same_host, bool cuda_memory,
                                                     const Deadline& deadline);

}  // namespace weft
