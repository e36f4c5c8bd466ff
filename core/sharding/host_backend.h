// The redistribution backend for host memory: the host collectives of core/collectives, UCX or
// shared-memory point-to-point, and kernels/cpu's strided copy. Runs on the calling thread.
#pragma once

#include <vector>

#include "core/sharding/backend.h"

namespace weft::shard {

class HostBackend final : public Backend {
 public:
  char* temp(size_t bytes) override;
  void copy(const kernels::StridedView& dst, const kernels::StridedView& src) override;
  void zero(const kernels::StridedView& dst) override;
  void allgatherv(const std::shared_ptr<Comm>& comm, const void* send, size_t sendcount, void* recv,
                  const std::vector<size_t>& counts, const std::vector<size_t>& displs, DType dtype) override;
  void allreduce(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t count, DType dtype,
                 ReduceOp op) override;
  void reduce_scatter(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t recvcount, DType dtype,
                      ReduceOp op) override;
  void reduce(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
              int root) override;
  void alltoallv(const std::shared_ptr<Comm>& comm, const void* send, const std::vector<size_t>& sendcounts,
                 const std::vector<size_t>& sdispls, void* recv, const std::vector<size_t>& recvcounts,
                 const std::vector<size_t>& rdispls, DType dtype) override;
  void exchange(const std::shared_ptr<Comm>& comm, const std::vector<Message>& messages) override;

 private:
  std::vector<std::vector<char>> temps_;
};

}  // namespace weft::shard
