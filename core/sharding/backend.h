// What running a redistribution needs from the memory the tensors live in: temporary buffers,
// strided copies, and the collectives and point-to-point exchange over a mesh's communicators.
// core/sharding/redistribute.cpp holds the algorithm once; host memory (host_backend.h) and
// device memory (core/device/redistribute_device.h) each implement this interface. Every call
// is ordered after the previous ones (host: it has finished; device: queued on one stream).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "core/comm/comm.h"
#include "core/common/dtype.h"
#include "kernels/cpu/strided_copy.h"

namespace weft::shard {

class Backend {
 public:
  virtual ~Backend() = default;

  // A contiguous buffer of `bytes` in the tensors' memory, valid until the backend is destroyed.
  virtual char* temp(size_t bytes) = 0;
  // dst[i] = src[i] over the views' common shape (StridedView's rules; addresses in the
  // tensors' memory).
  virtual void copy(const kernels::StridedView& dst, const kernels::StridedView& src) = 0;
  // Every element of dst becomes all-zero bits (zero in every dtype).
  virtual void zero(const kernels::StridedView& dst) = 0;

  // The collectives of core/collectives/collectives.h over `comm` (a mesh group).
  // Equal pieces: the plain collectives, which may take paths (shared memory, NCCL) the
  // v-collectives cannot.
  virtual void allgather(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t count,
                         DType dtype) = 0;
  virtual void alltoall(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t count,
                        DType dtype) = 0;
  // alltoall with block q the row-major elements of views[q] (comm's size of them): a backend
  // that can read strided blocks directly saves packing them.
  virtual void alltoall_views(const std::shared_ptr<Comm>& comm, const kernels::StridedView* views, void* recv,
                              size_t count, DType dtype) = 0;
  virtual void allgatherv(const std::shared_ptr<Comm>& comm, const void* send, size_t sendcount, void* recv,
                          const std::vector<size_t>& counts, const std::vector<size_t>& displs, DType dtype) = 0;
  virtual void allreduce(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t count, DType dtype,
                         ReduceOp op) = 0;
  virtual void reduce_scatter(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t recvcount,
                              DType dtype, ReduceOp op) = 0;
  // recv is used at the root only (may be NULL elsewhere).
  virtual void reduce(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t count, DType dtype,
                      ReduceOp op, int root) = 0;
  virtual void alltoallv(const std::shared_ptr<Comm>& comm, const void* send, const std::vector<size_t>& sendcounts,
                         const std::vector<size_t>& sdispls, void* recv, const std::vector<size_t>& recvcounts,
                         const std::vector<size_t>& rdispls, DType dtype) = 0;

  // Point-to-point messages over `comm`, all posted together, complete when the call returns
  // (host) or when the stream reaches this point (device). Between two ranks, messages pair in
  // the order of the list.
  struct Message {
    bool is_send;
    void* buf;
    size_t bytes;
    int peer;  // rank in comm
  };
  virtual void exchange(const std::shared_ptr<Comm>& comm, const std::vector<Message>& messages) = 0;
};

}  // namespace weft::shard
