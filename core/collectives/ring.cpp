#include "core/collectives/ring.h"

#include <cstring>
#include <utility>

namespace weft::coll {

void ring_reduce_scatter(Channel& ch, const void* in, void* out, const Blocks& blocks, const Reducer& red,
                         uint32_t step_base) {
  const int n = ch.size(), rank = ch.rank();
  const size_t e = red.elem;
  if (n == 1) {
    if (out != at(in, blocks.offset(0), e)) std::memcpy(out, at(in, blocks.offset(0), e), red.bytes(blocks.length(0)));
    return;
  }
  const int right = (rank + 1) % n, left = (rank + n - 1) % n;
  // Partial sums travel around the ring: at step s this rank forwards the partial for block
  // (rank - s - 1) and receives the one for block (rank - s - 2), adds its own input, and
  // forwards that next. After n-1 steps the partial arriving is for block `rank`.
  void* incoming = ch.comm().scratch().get(2, red.bytes(blocks.max_length));
  void* outgoing = ch.comm().scratch().get(3, red.bytes(blocks.max_length));
  auto block_of = [&](int k) { return static_cast<size_t>(((k % n) + n) % n); };
  const void* send_ptr = at(in, blocks.offset(block_of(rank - 1)), e);
  for (int s = 0; s < n - 1; ++s) {
    size_t sb = block_of(rank - s - 1), rb = block_of(rank - s - 2);
    ch.irecv(left, step_base + static_cast<uint32_t>(s), incoming, red.bytes(blocks.length(rb)));
    ch.isend(right, step_base + static_cast<uint32_t>(s), send_ptr, red.bytes(blocks.length(sb)));
    ch.wait();
    void* dst = (s == n - 2) ? out : outgoing;
    red.apply(dst, incoming, at(in, blocks.offset(rb), e), blocks.length(rb));
    send_ptr = outgoing;
  }
}

void ring_allgather(Channel& ch, void* buf, const Blocks& blocks, size_t elem, uint32_t step_base) {
  const int n = ch.size(), rank = ch.rank();
  if (n == 1) return;
  const int right = (rank + 1) % n, left = (rank + n - 1) % n;
  for (int s = 0; s < n - 1; ++s) {
    size_t sb = static_cast<size_t>((rank - s + n) % n), rb = static_cast<size_t>((rank - s - 1 + 2 * n) % n);
    ch.sendrecv(right, at(buf, blocks.offset(sb), elem), blocks.length(sb) * elem, left,
                at(buf, blocks.offset(rb), elem), blocks.length(rb) * elem, step_base + static_cast<uint32_t>(s));
  }
}

}  // namespace weft::coll
