// The redistribution backend for host memory: the host collectives of core/collectives, UCX or
// shared-memory point-to-point, and kernels/cpu's strided copy. Runs on the calling thread.
#pragma once

#include <memory>
#include <vector>

#include "core/sharding/backend.h"

namespace weft::shard {

class HostBackend final : public Backend {
 public:
  HostBackend() = default;
  // Gives the temporary buffers back to this thread's pool for the next redistribution.
  ~HostBackend() override;
  HostBackend(const HostBackend&) = delete;
  HostBackend& operator=(const HostBackend&) = delete;

  char* temp(size_t bytes) override;
  void copy(const kernels::StridedView& dst, const kernels::StridedView& src) override;
  void zero(const kernels::StridedView& dst) override;
  void allgather(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t count,
                 DType dtype) override;
  void alltoall(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t count, DType dtype) override;
  void alltoall_views(const std::shared_ptr<Comm>& comm, const kernels::StridedView* views, void* recv, size_t count,
                      DType dtype) override;
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

  // A buffer of the pool: reused across calls, never zero-filled (every byte is written before
  // it is read). Fresh large allocations would be fresh mmaps whose every page faults.
  struct Buffer {
    std::unique_ptr<char[]> data;
    size_t bytes = 0;
  };

 private:
  std::vector<Buffer> temps_;
};

}  // namespace weft::shard
