// Saving a distributed checkpoint (weft/mesh.h, weft_checkpoint_save). Collective over a
// communicator; the steps and why they are safe:
//  1. every rank checks its tensors and makes the directory; the ranks agree (all fail or none);
//  2. rank 0 draws a save id and broadcasts it: this save's files cannot collide with any other;
//  3. PARTIAL tensors are reduced (redistribute into REPLICATE, into a temporary host buffer);
//  4. each rank writes the shards it is the one writer of (coordinate 0 on every mesh dim that
//     does not shard the tensor: one writer per box) to its own data-<id>-r<rank>.bin, fsyncs
//     it, and the ranks agree;
//  5. the shard lists go to rank 0, which checks that each name has one dtype and shape across
//     ranks and that each tensor is covered exactly, writes index.weft through a temporary name
//     (fsync, rename, fsync of the directory), then removes the files no longer named;
//  6. rank 0's outcome is broadcast: no rank returns OK unless the index is in place.
// Until the rename in 5 nothing of the previous checkpoint is touched; a rank killed at any
// point leaves it loadable (tests/multiproc/test_checkpoint_kill.cpp).
// Every member of a tensor's mesh must pass it (rank 0 refuses a tensor its shards do not
// cover); for a PARTIAL tensor a member that does not pass it leaves the others waiting in the
// reduction until their communicator's deadline. Tensors are taken in name order on every rank.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/comm/comm.h"
#include "core/common/status.h"
#include "core/sharding/sharded.h"

namespace weft::shard {

struct SaveOptions {
  bool fsync = true;  // weft_checkpoint_config_t.fsync
};

// Run it where comm's operations run (its executor). tensors[i] is saved as names[i].
// local_error: a problem the caller found on this rank first (a bad argument): it is shared in
// step 1, so the other ranks fail with its words instead of waiting for this rank.
void checkpoint_save(Comm& comm, const std::string& dir, const std::vector<std::string>& names,
                     const std::vector<std::shared_ptr<const Sharded>>& tensors, const SaveOptions& options,
                     const std::optional<Error>& local_error = std::nullopt);

}  // namespace weft::shard
