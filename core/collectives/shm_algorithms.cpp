#include "core/collectives/shm_algorithms.h"

#include <algorithm>
#include <cstring>

#include "core/collectives/blocks.h"
#include "core/comm/shm_context.h"
#include "kernels/cpu/copy.h"

namespace weft::coll {
namespace {

// Up to this size a reduction is done whole by every rank after one barrier: cheaper than a
// second barrier when the data is this small.
constexpr size_t kReduceEverywhereBytes = 16 * 1024;

size_t chunk_elems(ShmContext& ctx, size_t elem, int parts) {
  return std::max<size_t>(1, ctx.segment().slot_bytes() / (elem * static_cast<size_t>(parts)));
}

// Copy-out of a chunk: streaming stores when the whole result is larger than the cache, so
// writing it does not first read it from memory.
class CopyOut {
 public:
  explicit CopyOut(size_t total_bytes) : streaming_(total_bytes >= kernels::kStreamingCopyBytes) {}
  ~CopyOut() {
    if (streaming_) kernels::store_fence();
  }
  void operator()(void* dst, const void* src, size_t bytes) const {
    if (streaming_) {
      kernels::copy_streaming(dst, src, bytes);
    } else {
      std::memcpy(dst, src, bytes);
    }
  }

 private:
  bool streaming_;
};

// One chunk of allreduce/reduce. The chunk is cut into one part per rank; rank q reduces part
// q. Each rank copies into its slot only the parts others reduce (its own part it reads from
// its input directly), reduces its part into its slot (where the others fetch it) and, when it
// wants the result, copies it to its output while it is still in cache; after the second
// barrier the ranks in `copy_out` (all, or the root only) fetch the other parts.
void reduce_chunk(Channel& ch, ShmContext& ctx, const char* in, char* out, size_t len, const Reducer& red,
                  bool copy_out, const CopyOut& copy) {
  shm::Segment& seg = ctx.segment();
  const int n = ch.size(), rank = ch.rank();
  const int set = ctx.next_set();
  Blocks parts = Blocks::even(len, n);
  auto part_at = [&](int q) { return red.bytes(parts.offset(static_cast<size_t>(q))); };
  auto part_bytes = [&](int q) { return red.bytes(parts.length(static_cast<size_t>(q))); };
  char* own_slot = seg.slot(set, rank);
  for (int q = 0; q < n; ++q) {
    if (q != rank) std::memcpy(own_slot + part_at(q), in + part_at(q), part_bytes(q));
  }
  ctx.barrier(ch);
  const size_t mine = part_at(rank), count = parts.length(static_cast<size_t>(rank));
  char* result = own_slot + mine;
  int first = rank == 0 ? 1 : 0;
  red.apply(result, in + mine, seg.slot(set, first) + mine, count);
  for (int j = first + 1; j < n; ++j) {
    if (j != rank) red.apply(result, result, seg.slot(set, j) + mine, count);
  }
  if (copy_out) copy(out + mine, result, part_bytes(rank));
  ctx.barrier(ch);
  if (!copy_out) return;
  for (int q = 0; q < n; ++q) {
    if (q != rank) copy(out + part_at(q), seg.slot(set, q) + part_at(q), part_bytes(q));
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
  ch.set_algorithm("shm");  // only now: a declined shm path must not be reported as run
  if (red.bytes(count) <= std::min(kReduceEverywhereBytes, ctx->segment().slot_bytes())) {
    reduce_small(ch, *ctx, send, recv, count, red, true);
    return true;
  }
  const size_t step = chunk_elems(*ctx, red.elem, 1);
  CopyOut copy(red.bytes(count));
  for (size_t off = 0; off < count; off += step) {
    size_t len = std::min(step, count - off);
    reduce_chunk(ch, *ctx, at(send, off, red.elem), at(recv, off, red.elem), len, red, true, copy);
  }
  return true;
}

bool shm_reduce(Channel& ch, const void* send, void* recv, size_t count, const Reducer& red, int root) {
  ShmContext* ctx = ch.comm().shm(ch);
  if (!ctx) return false;
  ch.set_algorithm("shm");  // only now: a declined shm path must not be reported as run
  const bool is_root = ch.rank() == root;
  if (red.bytes(count) <= std::min(kReduceEverywhereBytes, ctx->segment().slot_bytes())) {
    reduce_small(ch, *ctx, send, recv, count, red, is_root);
    return true;
  }
  const size_t step = chunk_elems(*ctx, red.elem, 1);
  CopyOut copy(red.bytes(count));
  for (size_t off = 0; off < count; off += step) {
    size_t len = std::min(step, count - off);
    reduce_chunk(ch, *ctx, at(send, off, red.elem), is_root ? at(recv, off, red.elem) : nullptr, len, red, is_root,
                 copy);
  }
  return true;
}

bool shm_broadcast(Channel& ch, void* buf, size_t bytes, int root) {
  ShmContext* ctx = ch.comm().shm(ch);
  if (!ctx) return false;
  ch.set_algorithm("shm");  // only now: a declined shm path must not be reported as run
  shm::Segment& seg = ctx->segment();
  const size_t step = seg.slot_bytes();
  CopyOut copy(bytes);
  for (size_t off = 0; off < bytes; off += step) {
    size_t len = std::min(step, bytes - off);
    const int set = ctx->next_set();
    if (ch.rank() == root) std::memcpy(seg.slot(set, root), static_cast<char*>(buf) + off, len);
    ctx->barrier(ch);
    if (ch.rank() != root) copy(static_cast<char*>(buf) + off, seg.slot(set, root), len);
  }
  return true;
}

bool shm_allgather(Channel& ch, const void* send, void* recv, size_t block_bytes) {
  ShmContext* ctx = ch.comm().shm(ch);
  if (!ctx) return false;
  ch.set_algorithm("shm");  // only now: a declined shm path must not be reported as run
  shm::Segment& seg = ctx->segment();
  const int n = ch.size(), rank = ch.rank();
  char* own = static_cast<char*>(recv) + block_bytes * static_cast<size_t>(rank);
  if (send != own) std::memcpy(own, send, block_bytes);
  const size_t step = seg.slot_bytes();
  CopyOut copy(block_bytes * static_cast<size_t>(n));
  for (size_t off = 0; off < block_bytes; off += step) {
    size_t len = std::min(step, block_bytes - off);
    const int set = ctx->next_set();
    std::memcpy(seg.slot(set, rank), own + off, len);
    ctx->barrier(ch);
    for (int q = 0; q < n; ++q) {
      if (q != rank) copy(static_cast<char*>(recv) + block_bytes * static_cast<size_t>(q) + off, seg.slot(set, q), len);
    }
  }
  return true;
}

bool shm_reduce_scatter(Channel& ch, const void* send, void* recv, size_t recvcount, const Reducer& red) {
  ShmContext* ctx = ch.comm().shm(ch);
  if (!ctx) return false;
  ch.set_algorithm("shm");  // only now: a declined shm path must not be reported as run
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

bool shm_alltoall(Channel& ch, const void* send, const kernels::StridedView* views, void* recv, size_t block_bytes,
                  size_t elem) {
  ShmContext* ctx = ch.comm().shm(ch);
  if (!ctx) return false;
  ch.set_algorithm("shm");  // only now: a declined shm path must not be reported as run
  shm::Segment& seg = ctx->segment();
  const int n = ch.size(), rank = ch.rank();
  const size_t step = std::max<size_t>(elem, seg.slot_bytes() / static_cast<size_t>(n) / elem * elem);
  CopyOut copy(block_bytes * static_cast<size_t>(n));
  for (size_t off = 0; off < block_bytes; off += step) {
    size_t len = std::min(step, block_bytes - off);
    const int set = ctx->next_set();
    for (int q = 0; q < n; ++q) {
      char* to = seg.slot(set, rank) + len * static_cast<size_t>(q);
      if (views) {
        kernels::copy_range_out(views[q], static_cast<int64_t>(off / elem), static_cast<int64_t>(len / elem), to);
      } else {
        std::memcpy(to, static_cast<const char*>(send) + block_bytes * static_cast<size_t>(q) + off, len);
      }
    }
    ctx->barrier(ch);
    for (int q = 0; q < n; ++q) {
      copy(static_cast<char*>(recv) + block_bytes * static_cast<size_t>(q) + off,
                  seg.slot(set, q) + len * static_cast<size_t>(rank), len);
    }
  }
  return true;
}

bool shm_barrier(Channel& ch) {
  ShmContext* ctx = ch.comm().shm(ch);
  if (!ctx) return false;
  ch.set_algorithm("shm");  // only now: a declined shm path must not be reported as run
  ctx->barrier(ch);
  return true;
}

}  // namespace weft::coll
