// broadcast: binomial tree (log n rounds, whole message per round) for small messages;
// scatter + ring allgather (each link carries ~2x the message once) for large ones.
#include "core/collectives/arg_check.h"
#include "core/collectives/collectives.h"
#include "core/collectives/ring.h"
#include "core/collectives/select.h"
#include "core/collectives/shm_algorithms.h"

namespace weft::coll {
namespace {

void binomial(Channel& ch, void* buf, size_t bytes, int root) {
  const int n = ch.size(), rank = ch.rank();
  const int vr = (rank - root + n) % n;
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      ch.irecv((rank - mask + n) % n, 0, buf, bytes);
      ch.wait();
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < n) ch.isend((rank + mask) % n, 0, buf, bytes);
  }
  ch.wait();
}

void scatter_allgather(Channel& ch, void* buf, size_t count, size_t elem, int root) {
  const int n = ch.size(), rank = ch.rank();
  Blocks blocks = Blocks::even(count, n);
  if (rank == root) {
    for (int p = 0; p < n; ++p) {
      if (p != root) ch.isend(p, 0, at(buf, blocks.offset(p), elem), blocks.length(p) * elem);
    }
  } else {
    ch.irecv(root, 0, at(buf, blocks.offset(rank), elem), blocks.length(rank) * elem);
  }
  ch.wait();
  ring_allgather(ch, buf, blocks, elem, 1);
}

}  // namespace

void broadcast(Comm& comm, void* buf, size_t count, DType dtype, int root) {
  Channel ch(comm, "broadcast", "");
  check_signature(ch, {"broadcast", static_cast<int>(dtype), -1, root, count});
  if (count == 0 || comm.size() == 1) return;
  const size_t elem = dtype_size(dtype);
  BroadcastAlgo algo = choose_broadcast(comm, count * elem, count);
  if (algo == BroadcastAlgo::shm) {
    if (shm_broadcast(ch, buf, count * elem, root)) return;
    algo = choose_broadcast(comm, count * elem, count, false);
  }
  ch.set_algorithm(algo_name(algo));
  if (algo == BroadcastAlgo::scatter_allgather) {
    scatter_allgather(ch, buf, count, elem, root);
  } else {
    binomial(ch, buf, count * elem, root);
  }
}

}  // namespace weft::coll
