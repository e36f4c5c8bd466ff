// Making communicators: the root of a tree (from a store address and rank) and children by
// split/dup of an existing one.
#pragma once

#include <memory>

#include "core/comm/comm.h"
#include "core/comm/world.h"

namespace weft {

// Collective over all `setup.size` ranks.
std::shared_ptr<Comm> create_root_comm(const WorldSetup& setup, CommConfig config);

// Collective over `parent` (run it where parent's collectives run: its executor). Ranks with
// the same color >= 0 form a communicator ordered by (key, parent rank); color < 0 returns
// nullptr. The child's id is agreed so that it is unique among this world's live
// communicators in every member process, even with splits running concurrently on threads.
std::shared_ptr<Comm> split_comm(Comm& parent, int color, int key, CommConfig config);

}  // namespace weft
