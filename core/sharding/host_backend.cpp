#include "core/sharding/host_backend.h"

#include <memory>

#include "core/collectives/collectives.h"
#include "core/comm/user_p2p.h"

namespace weft::shard {

char* HostBackend::temp(size_t bytes) {
  // A vector's heap block stays put when the outer vector grows and moves it.
  temps_.emplace_back(bytes);
  return temps_.back().data();
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
