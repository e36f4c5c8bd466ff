#include "core/comm/user_p2p.h"

#include "core/comm/channel.h"
#include "core/comm/comm.h"
#include "core/comm/op_pool.h"
#include "core/comm/progress.h"

namespace weft {

void post_user_p2p(Comm& comm, transport::Op& op, bool is_send, int peer, void* buf, size_t bytes) {
  transport::Transport& t = comm.world().transport();
  const int world_peer = comm.world_rank_of(peer);
  if (is_send) {
    t.send(op, world_peer, make_tag(comm.id(), comm.rank(), kP2PSequence, 0), buf, bytes);
  } else {
    t.recv(op, world_peer, make_tag(comm.id(), peer, kP2PSequence, 0), buf, bytes);
  }
}

bool all_finished(const OwnedOps& ops) {
  for (const auto& op : ops)
    if (!op->finished()) return false;
  return true;
}

void wait_owned(Comm& comm, const OwnedOps& ops, const char* operation) {
  // The list's storage is kept per thread: a blocking send or receive must not allocate.
  thread_local std::vector<transport::Op*> raw;
  raw.clear();
  for (const auto& op : ops) raw.push_back(op.get());
  wait_ops(comm, raw, {operation, "", 0});
}

void bury_unfinished(Comm& comm, OwnedOps& ops) {
  for (auto& op : ops) {
    if (op && !op->finished()) {
      comm.world().bury(std::move(op));
    } else {
      return_pooled_op(std::move(op));
    }
  }
  ops.clear();
}

}  // namespace weft
