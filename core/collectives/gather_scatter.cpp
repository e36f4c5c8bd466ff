// gather and scatter: the root posts all n-1 transfers at once (linear); UCX overlaps them.
#include <cstring>

#include "core/collectives/arg_check.h"
#include "core/collectives/collectives.h"
#include "core/collectives/reducer.h"

namespace weft::coll {

void gather(Comm& comm, const void* send, void* recv, size_t count, DType dtype, int root) {
  Channel ch(comm, "gather", "linear");
  check_signature(ch, {"gather", static_cast<int>(dtype), -1, root, count});
  if (count == 0) return;
  const size_t elem = dtype_size(dtype), bytes = count * elem;
  if (comm.rank() != root) {
    ch.isend(root, 0, send, bytes);
    ch.wait();
    return;
  }
  for (int p = 0; p < comm.size(); ++p) {
    if (p != root) ch.irecv(p, 0, at(recv, count * static_cast<size_t>(p), elem), bytes);
  }
  char* own = at(recv, count * static_cast<size_t>(root), elem);
  if (send != own) std::memcpy(own, send, bytes);
  ch.wait();
}

void scatter(Comm& comm, const void* send, void* recv, size_t count, DType dtype, int root) {
  Channel ch(comm, "scatter", "linear");
  check_signature(ch, {"scatter", static_cast<int>(dtype), -1, root, count});
  if (count == 0) return;
  const size_t elem = dtype_size(dtype), bytes = count * elem;
  if (comm.rank() != root) {
    ch.irecv(root, 0, recv, bytes);
    ch.wait();
    return;
  }
  for (int p = 0; p < comm.size(); ++p) {
    if (p != root) ch.isend(p, 0, at(send, count * static_cast<size_t>(p), elem), bytes);
  }
  const char* own = at(send, count * static_cast<size_t>(root), elem);
  if (recv != own) std::memcpy(recv, own, bytes);
  ch.wait();
}

}  // namespace weft::coll
