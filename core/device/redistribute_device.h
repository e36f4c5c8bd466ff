// Private to core/device: the redistribution backend for CUDA device memory (core/sharding's
// Backend; the algorithm is core/sharding/redistribute.cpp). Everything it does is queued on
// one stream, in call order: temporary buffers (stream-ordered allocations), strided copies and
// zero fills (kernels/cuda/strided_copy.h), and the collectives and point-to-point exchange
// through launch() and p2p() (NCCL on that stream, or staging, which copies on that stream and
// returns when done). device_api.h's redistribute() drives it and waits for the stream.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "core/device/device_api.h"
#include "core/device/device_context.h"
#include "core/sharding/backend.h"

namespace weft::gpu {

class DeviceBackend final : public shard::Backend {
 public:
  // `ctx`: the context whose device is current for the backend's whole life (the caller holds a
  // DeviceGuard) and whose scratch pool gives the temporary buffers. `stream` (never NULL):
  // where every call is queued; passed explicitly to every launch(), which would otherwise use
  // each communicator's own stream and lose the order between steps on different groups.
  DeviceBackend(DeviceContext& ctx, cudaStream_t stream);
  // Frees the temporary buffers with cudaFreeAsync on the stream: after the work queued there.
  ~DeviceBackend() override;
  DeviceBackend(const DeviceBackend&) = delete;
  DeviceBackend& operator=(const DeviceBackend&) = delete;

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

  // The communicators the calls so far communicated over (each once, in first-use order), for
  // the watchdog of the final wait: a stuck NCCL collective on any of them must be aborted.
  struct Used {
    std::shared_ptr<Comm> comm;
    DeviceContext* ctx;
  };
  const std::vector<Used>& used() const { return used_; }

 private:
  void note(const std::shared_ptr<Comm>& comm);
  void collective(const std::shared_ptr<Comm>& comm, DeviceWork work);

  DeviceContext& ctx_;
  cudaStream_t stream_;
  std::vector<void*> temps_;
  std::vector<Used> used_;
};

}  // namespace weft::gpu
