#include "core/collectives/shm_algorithms.h"

#include <algorithm>
#include <cstring>

#include "core/collectives/blocks.h"
#include "core/comm/shm_context.h"

namespace weft::coll {
namespace {

// Up to this size a reduction is done whole by every rank after one barrier: cheaper than a
// second barrier when the data is this small.
constexpr size_t kReduceEverywhereBytes = 16 * 1024;

// out = in_0 op in_1 op ... op in_{n-1} over the same element range of every rank's slot.
// `out` may be this rank's own slot range: it is read first, then combined with the others.
void reduce_slots(ShmContext& ctx, int set, int self, size_t byte_offset, void* out, size_t count, const Reducer& red) {
  shm::Segment& seg = ctx.segment();
  const int n = seg.nranks();
  const char* own = seg.slot(set, self) + byte_offset;
  int first = self == 0 ? 1 : 0;
  red.apply(out, own, seg.slot(set, first) + byte_offset, count);
  for (int j = first + 1; j < n; ++j) {
    if (j != self) red.apply(out, out, seg.slot(set, j) + byte_offset, count);
  }
}

size_t chunk_elems(ShmContext& ctx, size_t elem, int parts) {
  return std::max<size_t>(1, ctx.segment().slot_bytes() / (elem * static_cast<size_t>(parts)));
}

// One chunk of allreduce/reduce: everyone copies in, reduces its part into its own slot, and
// the ranks in `copy_out` (all, or the root only) gather the parts.
void reduce_chunk(Channel& ch, ShmContext& ctx, const char* in, char* out, size_t len, const Reducer& red,
                  bool copy_out) {
  shm::Segment& seg = ctx.segment();
  const int n = ch.size(), rank = ch.rank();
  const int set = ctx.next_set();
  std::memcpy(seg.slot(set, rank), in, red.bytes(len));
  ctx.barrier(ch);
  Blocks parts = Blocks::even(len, n);
  const size_t mine = red.bytes(parts.offset[static_cast<size_t>(rank)]);
  reduce_slots(ctx, set, rank, mine, seg.slot(set, rank) + mine, parts.length[static_cast<size_t>(rank)], red);
  ctx.barrier(ch);
  if (!copy_out) return;
  for (int q = 0; q < n; ++q) {
    const size_t at_q = red.bytes(parts.offset[static_cast<size_t>(q)]);
    std::memcpy(out + at_q, seg.slot(set, q) + at_q, red.bytes(parts.length[static_cast<size_t>(q)]));
  }
}

// Small reductions: one barrier, then the ranks that want the result reduce all slots.
void reduce_small(Channel& ch, ShmContext& ctx, const void* send, void* recv, size_t count, const Reducer& red,
                  bool want_result) {
  shm::Segment& seg = ctx.segment();
  const int set = ctx.next_set();
  std::memcpy(seg.slot(set, ch.rank()), send, red.bytes(count));
  ctx.barrier(ch);
  if (!want_result) return;
  red.apply(recv, seg.slot(set, 0), seg.slot(set, 1), count);
  for (int j = 2; j < ch.size(); ++j) red.apply(recv, recv, seg.slot(set, j), count);
}

}  // namespace

bool shm_allreduce(Channel& ch, const void* send, void* recv, size_t count, const Reducer& red) {
  ShmContext* ctx = ch.comm().shm(ch);
  if (!ctx) return false;
  if (red.bytes(count) <= std::min(kReduceEverywhereBytes, ctx->segment().slot_bytes())) {
    reduce_small(ch, *ctx, send, recv, count, red, true);
    return true;
  }
  const size_t step = chunk_elems(*ctx, red.elem, 1);
  for (size_t off = 0; off < count; off += step) {
    size_t len = std::min(step, count - off);
    reduce_chunk(ch, *ctx, at(send, off, red.elem), at(recv, off, red.elem), len, red, true);
  }
  return true;
}

bool shm_reduce(Channel& ch, const void* send, void* recv, size_t count, const Reducer& red, int root) {
  ShmContext* ctx = ch.comm().shm(ch);
  if (!ctx) return false;
  const bool is_root = ch.rank() == root;
  if (red.bytes(count) <= std::min(kReduceEverywhereBytes, ctx->segment().slot_bytes())) {
    reduce_small(ch, *ctx, send, recv, count, red, is_root);
    return true;
  }
  const size_t step = chunk_elems(*ctx, red.elem, 1);
  for (size_t off = 0; off < count; off += step) {
    size_t len = std::min(step, count - off);
    reduce_chunk(ch, *ctx, at(send, off, red.elem), is_root ? at(recv, off, red.elem) : nullptr, len, red, is_root);
  }
  return true;
}

bool shm_broadcast(Channel& ch, void* buf, size_t bytes, int root) {
  ShmContext* ctx = ch.comm().shm(ch);
  if (!ctx) return false;
  shm::Segment& seg = ctx->segment();
  const size_t step = seg.slot_bytes();
  for (size_t off = 0; off < bytes; off += step) {
    size_t len = std::min(step, bytes - off);
    const int set = ctx->next_set();
    if (ch.rank() == root) std::memcpy(seg.slot(set, root), static_cast<char*>(buf) + off, len);
    ctx->barrier(ch);
    if (ch.rank() != root) std::memcpy(static_cast<char*>(buf) + off, seg.slot(set, root), len);
  }
  return true;
}

bool shm_allgather(Channel& ch, const void* send, void* recv, size_t block_bytes) {
  ShmContext* ctx = ch.comm().shm(ch);
  if (!ctx) return false;
  shm::Segment& seg = ctx->segment();
  const int n = ch.size(), rank = ch.rank();
  char* own = static_cast<char*>(recv) + block_bytes * static_cast<size_t>(rank);
  if (send != own) std::memcpy(own, send, block_bytes);
  const size_t step = seg.slot_bytes();
  for (size_t off = 0; off < block_bytes; off += step) {
    size_t len = std::min(step, block_bytes - off);
    const int set = ctx->next_set();
    std::memcpy(seg.slot(set, rank), own + off, len);
    ctx->barrier(ch);
    for (int q = 0; q < n; ++q) {
      if (q != rank) std::memcpy(static_cast<char*>(recv) + block_bytes * static_cast<size_t>(q) + off, seg.slot(set, q), len);
    }
  }
  return true;
}

bool shm_reduce_scatter(Channel& ch, const void* send, void* recv, size_t recvcount, const Reducer& red) {
  ShmContext* ctx = ch.comm().shm(ch);
  if (!ctx) return false;
  shm::Segment& seg = ctx->segment();
  const int n = ch.size(), rank = ch.rank();
  // A slot holds one sub-chunk per destination rank.
  const size_t step = chunk_elems(*ctx, red.elem, n);
  for (size_t off = 0; off < recvcount; off += step) {
    size_t len = std::min(step, recvcount - off);
    const int set = ctx->next_set();
    for (int q = 0; q < n; ++q) {
      std::memcpy(seg.slot(set, rank) + red.bytes(len * static_cast<size_t>(q)),
                  at(send, recvcount * static_cast<size_t>(q) + off, red.elem), red.bytes(len));
    }
    ctx->barrier(ch);
    const size_t mine = red.bytes(len * static_cast<size_t>(rank));
    char* out = at(recv, off, red.elem);
    red.apply(out, seg.slot(set, 0) + mine, seg.slot(set, 1) + mine, len);
    for (int j = 2; j < n; ++j) red.apply(out, out, seg.slot(set, j) + mine, len);
  }
  return true;
}

bool shm_alltoall(Channel& ch, const void* send, void* recv, size_t block_bytes) {
  ShmContext* ctx = ch.comm().shm(ch);
  if (!ctx) return false;
  shm::Segment& seg = ctx->segment();
  const int n = ch.size(), rank = ch.rank();
  const size_t step = std::max<size_t>(1, seg.slot_bytes() / static_cast<size_t>(n));
  for (size_t off = 0; off < block_bytes; off += step) {
    size_t len = std::min(step, block_bytes - off);
    const int set = ctx->next_set();
    for (int q = 0; q < n; ++q) {
      std::memcpy(seg.slot(set, rank) + len * static_cast<size_t>(q),
                  static_cast<const char*>(send) + block_bytes * static_cast<size_t>(q) + off, len);
    }
    ctx->barrier(ch);
    for (int q = 0; q < n; ++q) {
      std::memcpy(static_cast<char*>(recv) + block_bytes * static_cast<size_t>(q) + off,
                  seg.slot(set, q) + len * static_cast<size_t>(rank), len);
    }
  }
  return true;
}

bool shm_barrier(Channel& ch) {
  ShmContext* ctx = ch.comm().shm(ch);
  if (!ctx) return false;
  ctx->barrier(ch);
  return true;
}

}  // namespace weft::coll
