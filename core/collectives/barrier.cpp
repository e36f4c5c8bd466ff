// barrier: dissemination, ceil(log2 n) rounds of one-byte messages (zero-byte transfers are
// skipped by Channel, so a byte is sent).
#include "core/collectives/arg_check.h"
#include "core/collectives/collectives.h"
#include "core/collectives/select.h"
#include "core/collectives/shm_algorithms.h"

namespace weft::coll {

void barrier(Comm& comm) {
  Channel ch(comm, "barrier", "dissemination");
  check_signature(ch, {"barrier", -1, -1, -1, 0});
  if (choose_barrier(comm) == BarrierAlgo::shm) {
    if (shm_barrier(ch)) return;
    choose_barrier(comm, false);  // throws when shm was forced
    ch.set_algorithm("dissemination");
  }
  const int n = comm.size(), rank = comm.rank();
  char out = 1, in = 0;
  uint32_t step = 0;
  for (int k = 1; k < n; k <<= 1, ++step) ch.sendrecv((rank + k) % n, &out, 1, (rank - k + n) % n, &in, 1, step);
}

}  // namespace weft::coll
