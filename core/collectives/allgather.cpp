// allgather: Bruck (ceil(log2 n) rounds, any n) for small totals, ring for large ones;
// allgatherv: ring over the caller's blocks.
#include <cstring>

#include "core/collectives/arg_check.h"
#include "core/collectives/collectives.h"
#include "core/collectives/ring.h"
#include "core/collectives/select.h"
#include "core/collectives/shm_algorithms.h"

namespace weft::coll {
namespace {

void bruck(Channel& ch, const void* mine, void* recv, size_t block_bytes) {
  const int n = ch.size(), rank = ch.rank();
  // Work in rotated order (own block first), then rotate into place.
  char* tmp = static_cast<char*>(ch.comm().scratch().get(2, block_bytes * static_cast<size_t>(n)));
  std::memcpy(tmp, mine, block_bytes);
  uint32_t step = 0;
  for (int k = 1; k < n; k <<= 1, ++step) {
    int blocks = k < n - k ? k : n - k;
    ch.sendrecv((rank - k + n) % n, tmp, block_bytes * static_cast<size_t>(blocks), (rank + k) % n,
                tmp + block_bytes * static_cast<size_t>(k), block_bytes * static_cast<size_t>(blocks), step);
  }
  for (int i = 0; i < n; ++i) {
    std::memcpy(static_cast<char*>(recv) + block_bytes * static_cast<size_t>((rank + i) % n),
                tmp + block_bytes * static_cast<size_t>(i), block_bytes);
  }
}

}  // namespace

void allgather(Comm& comm, const void* send, void* recv, size_t count, DType dtype) {
  Channel ch(comm, "allgather", "");
  check_signature(ch, {"allgather", static_cast<int>(dtype), -1, -1, count});
  if (count == 0) return;
  const size_t elem = dtype_size(dtype), block = count * elem;
  char* own = static_cast<char*>(recv) + block * static_cast<size_t>(comm.rank());
  AllgatherAlgo algo = choose_allgather(comm, block * static_cast<size_t>(comm.size()));
  if (algo == AllgatherAlgo::shm) {
    if (shm_allgather(ch, send, recv, block)) return;
    algo = choose_allgather(comm, block * static_cast<size_t>(comm.size()), false);
  }
  ch.set_algorithm(algo_name(algo));
  if (algo == AllgatherAlgo::bruck && comm.size() > 1) {
    bruck(ch, send, recv, block);
    return;
  }
  if (send != own) std::memcpy(own, send, block);
  ring_allgather(ch, recv, Blocks::uniform(count, comm.size()), elem, 0);
}

void allgatherv(Comm& comm, const void* send, size_t sendcount, void* recv, const std::vector<size_t>& counts,
                const std::vector<size_t>& displs, DType dtype) {
  Channel ch(comm, "allgatherv", "ring");
  check_signature(ch, {"allgatherv", static_cast<int>(dtype), -1, -1, kNotCompared, hash_sizes(counts, displs)});
  const size_t elem = dtype_size(dtype);
  char* own = static_cast<char*>(recv) + displs[static_cast<size_t>(comm.rank())] * elem;
  if (sendcount && send != own) std::memcpy(own, send, sendcount * elem);
  ring_allgather(ch, recv, Blocks::from(counts, displs), elem, 0);
}

}  // namespace weft::coll
