// alltoall(v): pairwise exchange, n-1 rounds, round s pairs rank with rank+s and rank-s so no
// rank receives from two peers at once.
#include <algorithm>
#include <cstring>

#include "core/collectives/arg_check.h"
#include "core/collectives/blocks.h"
#include "core/collectives/collectives.h"
#include "core/collectives/reducer.h"
#include "core/collectives/select.h"
#include "core/collectives/shm_algorithms.h"

namespace weft::coll {
namespace {

void pairwise(Channel& ch, const void* send, const Blocks& sb, void* recv, const Blocks& rb, size_t elem) {
  const int n = ch.size(), rank = ch.rank();
  const size_t me = static_cast<size_t>(rank);
  if (sb.length(me)) std::memcpy(at(recv, rb.offset(me), elem), at(send, sb.offset(me), elem), sb.length(me) * elem);
  for (int s = 1; s < n; ++s) {
    size_t to = static_cast<size_t>((rank + s) % n), from = static_cast<size_t>((rank - s + n) % n);
    ch.sendrecv(static_cast<int>(to), at(send, sb.offset(to), elem), sb.length(to) * elem, static_cast<int>(from),
                at(recv, rb.offset(from), elem), rb.length(from) * elem, static_cast<uint32_t>(s));
  }
}

// In place, the input is copied aside first: the exchange overwrites blocks still to be sent.
const void* input_for(Comm& comm, const void* send, const void* recv, const Blocks& sb, size_t elem) {
  if (send != recv) return send;
  size_t extent = 0;
  for (size_t i = 0; i < sb.size(); ++i) extent = std::max(extent, sb.offset(i) + sb.length(i));
  void* copy = comm.scratch().get(0, extent * elem);
  if (extent) std::memcpy(copy, send, extent * elem);
  return copy;
}

// alltoall with the input as one buffer (views NULL) or as one strided view per block. The two
// are one collective to the other ranks: a rank may pass views while its peers pass a buffer.
void alltoall_from(Comm& comm, const void* send, const kernels::StridedView* views, void* recv, size_t count,
                   DType dtype) {
  Channel ch(comm, "alltoall", "pairwise");
  check_signature(ch, {"alltoall", static_cast<int>(dtype), -1, -1, count});
  if (count == 0) return;
  const size_t elem = dtype_size(dtype);
  if (choose_alltoall(comm) == AlltoallAlgo::shm) {
    // The shared-memory path reads each input chunk before writing that chunk's outputs, so
    // it works in place without a copy.
    if (shm_alltoall(ch, send, views, recv, count * elem, elem)) return;
    choose_alltoall(comm, false);  // throws when shm was forced
    ch.set_algorithm("pairwise");
  }
  Blocks blocks = Blocks::uniform(count, comm.size());
  if (views) {
    // Point-to-point sends whole blocks: pack them once.
    char* packed = static_cast<char*>(comm.scratch().get(0, count * elem * static_cast<size_t>(comm.size())));
    for (int q = 0; q < comm.size(); ++q) {
      kernels::copy_range_out(views[q], 0, static_cast<int64_t>(count), packed + count * elem * static_cast<size_t>(q));
    }
    send = packed;
  }
  pairwise(ch, input_for(comm, send, recv, blocks, elem), blocks, recv, blocks, elem);
}

}  // namespace

void alltoall(Comm& comm, const void* send, void* recv, size_t count, DType dtype) {
  alltoall_from(comm, send, nullptr, recv, count, dtype);
}

void alltoall_views(Comm& comm, const kernels::StridedView* views, void* recv, size_t count, DType dtype) {
  alltoall_from(comm, nullptr, views, recv, count, dtype);
}

void alltoallv(Comm& comm, const void* send, const std::vector<size_t>& sendcounts,
               const std::vector<size_t>& sdispls, void* recv, const std::vector<size_t>& recvcounts,
               const std::vector<size_t>& rdispls, DType dtype) {
  Channel ch(comm, "alltoallv", "pairwise");
  CallSignature sig{"alltoallv", static_cast<int>(dtype), -1, -1, kNotCompared};
  sig.send_counts = &sendcounts;
  sig.recv_counts = &recvcounts;
  check_signature(ch, sig);
  const size_t elem = dtype_size(dtype);
  Blocks sb = Blocks::from(sendcounts, sdispls), rb = Blocks::from(recvcounts, rdispls);
  pairwise(ch, input_for(comm, send, recv, sb, elem), sb, recv, rb, elem);
}

}  // namespace weft::coll
