// Device collectives without NCCL (no NCCL library, WEFT_NCCL=0, or ranks sharing a GPU, which
// NCCL refuses): staged through pinned host memory and run by the host algorithms
// (core/collectives), whose results and rules they therefore share exactly. Debian's UCX has
// no CUDA support, so the device buffers themselves never reach UCX.
//
// Reductions are staged in chunks (WEFT_STAGING_CHUNK_BYTES, default 4 MiB; the same on every
// rank), each chunk an independent host collective, with two pinned buffers: while the host
// reduces chunk i, the copy engine brings chunk i+1 from the device and takes chunk i-1 back
// (events order each buffer's reuse). reduce_scatter stages the same element range of every
// rank's block per chunk (a strided copy). The other collectives stage whole buffers: they do no
// arithmetic, so there is little to overlap, and it keeps their in-place forms simple.
//
// Every call is synchronous: it returns when the results are back in device memory. That is
// stream-ordered too (later work on the stream sees the results), and it lets the pinned
// buffers be reused at once.
#include <algorithm>

#include "core/collectives/collectives.h"
#include "core/device/mirror.h"
#include "core/device/paths.h"
#include "core/device/watchdog.h"

namespace weft::gpu::staged {
namespace {

constexpr size_t kMaxCopyPitch = (size_t{1} << 31) - 1;

// The copy engine's view of one chunked reduction: per chunk, a (possibly strided) copy from
// the device into a pinned slot, the host collective on the slot, a copy back.
struct ChunkPlan {
  size_t chunks;
  size_t elems;  // per chunk (the last may be shorter)
  size_t total;  // elements to cover
  size_t len(size_t c) const { return c + 1 < chunks ? elems : total - c * elems; }
};

ChunkPlan plan_chunks(const Launch& l, size_t total, size_t bytes_per_elem) {
  size_t elems = l.ctx().staging_chunk() / bytes_per_elem;
  if (elems == 0) elems = 1;
  return {(total + elems - 1) / elems, elems, total};
}

// Two pinned slots with their events: d2h[s] fires when slot s holds its chunk, h2d[s] when
// the slot's copy back has left it (so it may be refilled).
class DoubleBuffer {
 public:
  DoubleBuffer(Launch& l, size_t slot_bytes) : l_(l) {
    for (int s = 0; s < 2; ++s) {
      slot_[s] = l.ctx().pinned().take(slot_bytes);
      d2h_[s] = l.ctx().events().take();
      h2d_[s] = l.ctx().events().take();
    }
  }
  ~DoubleBuffer() {
    // The copies were waited for (or the communicator is broken and will not reuse them).
    for (int s = 0; s < 2; ++s) {
      l_.ctx().pinned().give(std::move(slot_[s]));
      l_.ctx().events().give(d2h_[s]);
      l_.ctx().events().give(h2d_[s]);
    }
  }
  DoubleBuffer(const DoubleBuffer&) = delete;
  DoubleBuffer& operator=(const DoubleBuffer&) = delete;

  char* slot(size_t c) const { return slot_[c % 2].data(); }
  // Queues the copy into chunk c's slot; `copy` issues cudaMemcpy(2D)Async on the stream.
  template <class Copy>
  void fill(size_t c, Copy&& copy) {
    const int s = static_cast<int>(c % 2);
    if (c >= 2) cuda_check(cudaStreamWaitEvent(l_.stream(), h2d_[s], 0), "cudaStreamWaitEvent");
    cuda_check(copy(slot_[s].data(), l_.stream()), "staging: copy from the device");
    cuda_check(cudaEventRecord(d2h_[s], l_.stream()), "cudaEventRecord");
  }
  void wait_filled(size_t c) { wait_event(l_.comm(), l_.ctx(), d2h_[c % 2], l_.subject()); }
  // Queues chunk c's copy back to the device.
  template <class Copy>
  void drain(size_t c, Copy&& copy) {
    const int s = static_cast<int>(c % 2);
    cuda_check(copy(slot_[s].data(), l_.stream()), "staging: copy to the device");
    cuda_check(cudaEventRecord(h2d_[s], l_.stream()), "cudaEventRecord");
  }
  void wait_all() { wait_stream(l_.comm(), l_.ctx(), l_.stream(), l_.subject()); }

 private:
  Launch& l_;
  PinnedBuffer slot_[2];
  cudaEvent_t d2h_[2] = {nullptr, nullptr};
  cudaEvent_t h2d_[2] = {nullptr, nullptr};
};

const char* at(const void* base, size_t bytes) { return static_cast<const char*>(base) + bytes; }
char* at(void* base, size_t bytes) { return static_cast<char*>(base) + bytes; }

// allreduce and reduce: element range by element range. `collective` runs on one slot in place;
// results come back only where `copy_back`.
template <class Collective>
void chunked(Launch& l, const void* send, void* recv, size_t count, DType d, bool copy_back, Collective&& collective) {
  const size_t elem = dtype_size(d);
  const ChunkPlan plan = plan_chunks(l, count, elem);
  DoubleBuffer db(l, plan.elems * elem);
  auto fill = [&](size_t c) {
    db.fill(c, [&](char* slot, cudaStream_t s) {
      return cudaMemcpyAsync(slot, at(send, c * plan.elems * elem), plan.len(c) * elem, cudaMemcpyDeviceToHost, s);
    });
  };
  fill(0);
  for (size_t c = 0; c < plan.chunks; ++c) {
    if (c + 1 < plan.chunks) fill(c + 1);
    db.wait_filled(c);
    collective(db.slot(c), plan.len(c));
    if (copy_back) {
      db.drain(c, [&](char* slot, cudaStream_t s) {
        return cudaMemcpyAsync(at(recv, c * plan.elems * elem), slot, plan.len(c) * elem, cudaMemcpyHostToDevice, s);
      });
    }
  }
  db.wait_all();
}

}  // namespace

void allreduce(Launch& l, const void* send, void* recv, size_t count, DType d, ReduceOp op) {
  if (count == 0) {
    coll::allreduce(l.comm(), nullptr, nullptr, 0, d, op);  // the sequence number and the check
    return;
  }
  chunked(l, send, recv, count, d, true,
          [&](char* slot, size_t n) { coll::allreduce(l.comm(), slot, slot, n, d, op); });
}

void reduce(Launch& l, const void* send, void* recv, size_t count, DType d, ReduceOp op, int root) {
  const bool is_root = l.comm().rank() == root;
  if (count == 0) {
    coll::reduce(l.comm(), nullptr, nullptr, 0, d, op, root);
    return;
  }
  chunked(l, send, recv, count, d, is_root,
          [&](char* slot, size_t n) { coll::reduce(l.comm(), slot, is_root ? slot : nullptr, n, d, op, root); });
}

void reduce_scatter(Launch& l, const void* send, void* recv, size_t recvcount, DType d, ReduceOp op) {
  if (recvcount == 0) {
    coll::reduce_scatter(l.comm(), nullptr, nullptr, 0, d, op);
    return;
  }
  const size_t elem = dtype_size(d), n = static_cast<size_t>(l.comm().size());
  const size_t rank = static_cast<size_t>(l.comm().rank());
  const ChunkPlan plan = plan_chunks(l, recvcount, elem * n);
  DoubleBuffer db(l, plan.elems * elem * n);
  // Chunk c: elements [c * elems, + len) of every rank's block, packed block after block.
  auto fill = [&](size_t c) {
    db.fill(c, [&](char* slot, cudaStream_t s) {
      const size_t len = plan.len(c) * elem, pitch = recvcount * elem;
      const char* first = at(send, c * plan.elems * elem);
      // A 2D copy's pitch is limited (cudaDevAttrMaxPitch, 2^31 - 1 bytes on current GPUs):
      // blocks of 2 GiB and more are copied one by one.
      if (pitch <= kMaxCopyPitch) return cudaMemcpy2DAsync(slot, len, first, pitch, len, n, cudaMemcpyDeviceToHost, s);
      for (size_t b = 0; b < n; ++b) {
        cudaError_t err = cudaMemcpyAsync(slot + b * len, first + b * pitch, len, cudaMemcpyDeviceToHost, s);
        if (err != cudaSuccess) return err;
      }
      return cudaSuccess;
    });
  };
  fill(0);
  for (size_t c = 0; c < plan.chunks; ++c) {
    if (c + 1 < plan.chunks) fill(c + 1);
    db.wait_filled(c);
    const size_t len = plan.len(c);
    char* slot = db.slot(c);
    char* mine = slot + rank * len * elem;
    coll::reduce_scatter(l.comm(), slot, mine, len, d, op);
    db.drain(c, [&](char*, cudaStream_t s) {
      return cudaMemcpyAsync(at(recv, c * plan.elems * elem), mine, len * elem, cudaMemcpyHostToDevice, s);
    });
  }
  db.wait_all();
}

void broadcast(Launch& l, void* buf, size_t count, DType d, int root) {
  const bool is_root = l.comm().rank() == root;
  Mirror m(l, {{buf, count * dtype_size(d), is_root, !is_root}});
  coll::broadcast(l.comm(), m.host(buf), count, d, root);
  m.finish();
}

void allgather(Launch& l, const void* send, void* recv, size_t count, DType d) {
  const size_t bytes = count * dtype_size(d), n = static_cast<size_t>(l.comm().size());
  Mirror m(l, {{send, bytes, true, false}, {recv, n * bytes, false, true}});
  coll::allgather(l.comm(), m.host(send), m.host(recv), count, d);
  m.finish();
}

void allgatherv(Launch& l, const void* send, size_t sendcount, void* recv, const std::vector<size_t>& counts,
                const std::vector<size_t>& displs, DType d) {
  const size_t elem = dtype_size(d);
  size_t extent = 0;
  for (size_t p = 0; p < counts.size(); ++p) extent = std::max(extent, (counts[p] + displs[p]) * elem);
  Mirror m(l, {{send, sendcount * elem, true, false}, {recv, extent, false, true}});
  coll::allgatherv(l.comm(), m.host(send), sendcount, m.host(recv), counts, displs, d);
  m.finish();
}

void alltoall(Launch& l, const void* send, void* recv, size_t count, DType d) {
  const size_t total = count * dtype_size(d) * static_cast<size_t>(l.comm().size());
  Mirror m(l, {{send, total, true, false}, {recv, total, false, true}});
  coll::alltoall(l.comm(), m.host(send), m.host(recv), count, d);
  m.finish();
}

void alltoallv(Launch& l, const void* send, const std::vector<size_t>& sendcounts, const std::vector<size_t>& sdispls,
               void* recv, const std::vector<size_t>& recvcounts, const std::vector<size_t>& rdispls, DType d) {
  const size_t elem = dtype_size(d);
  size_t sext = 0, rext = 0;
  for (size_t p = 0; p < sendcounts.size(); ++p) {
    sext = std::max(sext, (sendcounts[p] + sdispls[p]) * elem);
    rext = std::max(rext, (recvcounts[p] + rdispls[p]) * elem);
  }
  Mirror m(l, {{send, sext, true, false}, {recv, rext, false, true}});
  coll::alltoallv(l.comm(), m.host(send), sendcounts, sdispls, m.host(recv), recvcounts, rdispls, d);
  m.finish();
}

void gather(Launch& l, const void* send, void* recv, size_t count, DType d, int root) {
  const bool is_root = l.comm().rank() == root;
  const size_t bytes = count * dtype_size(d), n = static_cast<size_t>(l.comm().size());
  Mirror m(l, {{send, bytes, true, false}, {is_root ? recv : nullptr, n * bytes, false, true}});
  coll::gather(l.comm(), m.host(send), is_root ? m.host(recv) : nullptr, count, d, root);
  m.finish();
}

void scatter(Launch& l, const void* send, void* recv, size_t count, DType d, int root) {
  const bool is_root = l.comm().rank() == root;
  const size_t bytes = count * dtype_size(d), n = static_cast<size_t>(l.comm().size());
  Mirror m(l, {{is_root ? send : nullptr, n * bytes, true, false}, {recv, bytes, false, true}});
  coll::scatter(l.comm(), is_root ? m.host(send) : nullptr, m.host(recv), count, d, root);
  m.finish();
}

void barrier(Launch& l) {
  // Stream-ordered: everything queued on the stream before is done on this rank first.
  wait_stream(l.comm(), l.ctx(), l.stream(), l.subject());
  coll::barrier(l.comm());
}

}  // namespace weft::gpu::staged
