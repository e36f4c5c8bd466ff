#include "core/sharding/host_backend.h"

#include <algorithm>
#include <memory>

#include "core/collectives/collectives.h"
#include "core/comm/user_p2p.h"

namespace weft::shard {

namespace {

// Per thread (a communicator's operations run on one thread at a time): the buffers of earlier
// redistributions, kept for the next one. Bounded, so a one-off huge call does not pin memory
// forever: at most kKeep buffers and kKeepBytes in all, the largest that fit kept.
constexpr size_t kKeep = 8;
constexpr size_t kKeepBytes = size_t{1} << 30;
thread_local std::vector<HostBackend::Buffer> pool;

}  // namespace

HostBackend::~HostBackend() {
  for (Buffer& b : temps_) pool.push_back(std::move(b));
  if (pool.size() > kKeep) {
    std::sort(pool.begin(), pool.end(), [](const Buffer& x, const Buffer& y) { return x.bytes > y.bytes; });
    pool.resize(kKeep);
  }
  size_t total = 0;
  std::erase_if(pool, [&](const Buffer& b) { return (total += b.bytes) > kKeepBytes; });
}

char* HostBackend::temp(size_t bytes) {
  // The smallest pooled buffer that fits, else a new one (not zeroed).
  auto best = pool.end();
  for (auto it = pool.begin(); it != pool.end(); ++it) {
    if (it->bytes >= bytes && (best == pool.end() || it->bytes < best->bytes)) best = it;
  }
  if (best != pool.end()) {
    temps_.push_back(std::move(*best));
    pool.erase(best);
  } else {
    temps_.push_back({std::make_unique_for_overwrite<char[]>(bytes ? bytes : 1), bytes});
  }
  return temps_.back().data.get();
}

void HostBackend::copy(const kernels::StridedView& dst, const kernels::StridedView& src) {
  kernels::strided_copy(dst, src);
}

void HostBackend::zero(const kernels::StridedView& dst) {
  static const uint64_t zeros = 0;
  kernels::StridedView z = dst;  // one zero element, read with stride 0 everywhere
  z.base = reinterpret_cast<char*>(const_cast<uint64_t*>(&zeros));
  for (int k = 0; k < z.ndim; ++k) z.strides[k] = 0;
  kernels::strided_copy(dst, z);
}

void HostBackend::allgather(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t count,
                            DType dtype) {
  coll::allgather(*comm, send, recv, count, dtype);
}

void HostBackend::alltoall(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t count, DType dtype) {
  coll::alltoall(*comm, send, recv, count, dtype);
}

void HostBackend::alltoall_views(const std::shared_ptr<Comm>& comm, const kernels::StridedView* views, void* recv,
                                 size_t count, DType dtype) {
  coll::alltoall_views(*comm, views, recv, count, dtype);
}

void HostBackend::allgatherv(const std::shared_ptr<Comm>& comm, const void* send, size_t sendcount, void* recv,
                             const std::vector<size_t>& counts, const std::vector<size_t>& displs, DType dtype) {
  coll::allgatherv(*comm, send, sendcount, recv, counts, displs, dtype);
}

void HostBackend::allreduce(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t count, DType dtype,
                            ReduceOp op) {
  coll::allreduce(*comm, send, recv, count, dtype, op);
}

void HostBackend::reduce_scatter(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t recvcount,
                                 DType dtype, ReduceOp op) {
  coll::reduce_scatter(*comm, send, recv, recvcount, dtype, op);
}

void HostBackend::reduce(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t count, DType dtype,
                         ReduceOp op, int root) {
  coll::reduce(*comm, send, recv, count, dtype, op, root);
}

void HostBackend::alltoallv(const std::shared_ptr<Comm>& comm, const void* send, const std::vector<size_t>& sendcounts,
                            const std::vector<size_t>& sdispls, void* recv, const std::vector<size_t>& recvcounts,
                            const std::vector<size_t>& rdispls, DType dtype) {
  coll::alltoallv(*comm, send, sendcounts, sdispls, recv, recvcounts, rdispls, dtype);
}

void HostBackend::exchange(const std::shared_ptr<Comm>& comm, const std::vector<Message>& messages) {
  OwnedOps ops;
  ops.reserve(messages.size());
  try {
    for (const Message& m : messages) {
      auto op = std::make_unique<transport::Op>();
      post_user_p2p(*comm, *op, m.is_send, m.peer, m.buf, m.bytes);
      ops.push_back(std::move(op));
    }
    wait_owned(*comm, ops, "redistribute");
  } catch (...) {
    bury_unfinished(*comm, ops);
    throw;
  }
}

}  // namespace weft::shard
