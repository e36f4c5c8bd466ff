// The ring passes, pipelined: each block travels as chunks (chunking.h), so that while chunk
// c of a step is reduced, chunk c + 1 is still arriving and chunk c - 1 is already on its way
// to the next rank; a step's chunk leaves as soon as it is ready instead of after the whole
// block. Over a network link this keeps the link busy through the reductions and the
// step-to-step hand-offs (docs/performance.md, "Across two hosts").
#include "core/collectives/ring.h"

#include <algorithm>
#include <cstring>

#include "core/collectives/chunking.h"

namespace weft::coll {

using transport::Op;

void ring_reduce_scatter(Channel& ch, const void* in, void* out, const Blocks& blocks, const Reducer& red,
                         uint32_t step_base) {
  const int n = ch.size(), rank = ch.rank();
  const size_t e = red.elem;
  if (n == 1) {
    if (out != at(in, blocks.offset(0), e)) std::memcpy(out, at(in, blocks.offset(0), e), red.bytes(blocks.length(0)));
    return;
  }
  const int right = (rank + 1) % n, left = (rank + n - 1) % n, steps = n - 1;
  // Partial sums travel around the ring: at step s this rank forwards the partial for block
  // sent(s) = rank - s - 1 and receives the one for block got(s) = rank - s - 2, adds its own
  // input, and forwards that at step s + 1 (sent(s + 1) == got(s)). After n - 1 steps the
  // partial arriving is for block `rank`. Step s receives into buffer s % 2 and reduces there
  // in place; the chunk then goes out from there at step s + 1, so step s + 2 may only receive
  // chunk c into that buffer once that send of chunk c has completed.
  char* bufs[2] = {static_cast<char*>(ch.comm().scratch().get(2, red.bytes(blocks.max_length))),
                   static_cast<char*>(ch.comm().scratch().get(3, red.bytes(blocks.max_length)))};
  auto block_of = [&](int k) { return static_cast<size_t>(((k % n) + n) % n); };
  auto got = [&](int s) { return block_of(rank - s - 2); };
  auto sent = [&](int s) { return block_of(rank - s - 1); };
  auto tag = [&](int s) { return step_base + static_cast<uint32_t>(s); };
  const Chunking ck = Chunking::of(ch, e);
  const size_t max_chunks = ck.count(blocks.max_length);
  Op** table = Channel::op_table(4 * max_chunks);
  Op** recvs[2] = {table, table + max_chunks};  // [step % 2][chunk]
  Op** sends[2] = {table + 2 * max_chunks, table + 3 * max_chunks};
  {
    const size_t rlen = blocks.length(got(0)), slen = blocks.length(sent(0));
    const char* src = at(in, blocks.offset(sent(0)), e);
    for (size_t c = 0; c < ck.count(rlen); ++c) {
      recvs[0][c] = ch.irecv(left, tag(0), at(bufs[0], ck.offset(c), e), red.bytes(ck.length(rlen, c)));
    }
    for (size_t c = 0; c < ck.count(slen); ++c) {
      sends[0][c] = ch.isend(right, tag(0), at(src, ck.offset(c), e), red.bytes(ck.length(slen, c)));
    }
  }
  for (int s = 0; s < steps; ++s) {
    const int p = s & 1, q = p ^ 1;
    const bool more = s + 1 < steps;
    const size_t rlen = blocks.length(got(s)), nr = ck.count(rlen);
    const size_t next_len = more ? blocks.length(got(s + 1)) : 0, nnext = ck.count(next_len);
    const size_t nsent = ck.count(blocks.length(sent(s)));
    const char* own = at(in, blocks.offset(got(s)), e);
    char* dst_base = more ? bufs[p] : static_cast<char*>(out);
    for (size_t c = 0; c < std::max(nr, nnext); ++c) {
      if (c < nnext) {
        // Step 0 sends from the input, later steps from the buffer step s + 1 receives into.
        if (s >= 1 && c < nsent) ch.wait_for(sends[p][c]);
        recvs[q][c] = ch.irecv(left, tag(s + 1), at(bufs[q], ck.offset(c), e), red.bytes(ck.length(next_len, c)));
      }
      if (c < nr) {
        ch.wait_for(recvs[p][c]);
        const size_t off = ck.offset(c), len = ck.length(rlen, c);
        char* dst = at(dst_base, off, e);
        red.apply(dst, at(bufs[p], off, e), at(own, off, e), len);
        if (more) sends[q][c] = ch.isend(right, tag(s + 1), dst, red.bytes(len));
      }
    }
  }
  ch.wait();
}

void ring_allgather(Channel& ch, void* buf, const Blocks& blocks, size_t elem, uint32_t step_base) {
  const int n = ch.size(), rank = ch.rank();
  if (n == 1) return;
  const int right = (rank + 1) % n, left = (rank + n - 1) % n, steps = n - 1;
  // Step s forwards block rank - s and receives block rank - s - 1, which step s + 1 forwards:
  // every block lands in its final place, so all receives are posted at once and each chunk
  // is forwarded the moment it arrives.
  auto sent = [&](int s) { return static_cast<size_t>(((rank - s) % n + n) % n); };
  auto got = [&](int s) { return static_cast<size_t>(((rank - s - 1) % n + 2 * n) % n); };
  auto tag = [&](int s) { return step_base + static_cast<uint32_t>(s); };
  const Chunking ck = Chunking::of(ch, elem);
  const size_t max_chunks = ck.count(blocks.max_length);
  Op** recvs = Channel::op_table(static_cast<size_t>(steps) * max_chunks);
  for (int s = 0; s < steps; ++s) {
    const size_t len = blocks.length(got(s));
    char* base = at(buf, blocks.offset(got(s)), elem);
    for (size_t c = 0; c < ck.count(len); ++c) {
      recvs[static_cast<size_t>(s) * max_chunks + c] =
          ch.irecv(left, tag(s), at(base, ck.offset(c), elem), ck.length(len, c) * elem);
    }
  }
  {
    const size_t len = blocks.length(sent(0));
    const char* base = at(buf, blocks.offset(sent(0)), elem);
    for (size_t c = 0; c < ck.count(len); ++c) ch.isend(right, tag(0), at(base, ck.offset(c), elem), ck.length(len, c) * elem);
  }
  for (int s = 0; s < steps; ++s) {
    const size_t len = blocks.length(got(s));
    const char* base = at(buf, blocks.offset(got(s)), elem);
    for (size_t c = 0; c < ck.count(len); ++c) {
      ch.wait_for(recvs[static_cast<size_t>(s) * max_chunks + c]);
      if (s + 1 < steps) ch.isend(right, tag(s + 1), at(base, ck.offset(c), elem), ck.length(len, c) * elem);
    }
  }
  ch.wait();
}

}  // namespace weft::coll
