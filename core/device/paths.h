// Private to core/device: the two ways a device collective runs. device_collectives.cpp
// picks one per call: NCCL when the communicator has it, else staging through pinned host
// memory and the host algorithms. Signatures mirror device_api.h.
#pragma once

#include <cstddef>
#include <vector>

#include "core/common/dtype.h"
#include "core/device/launch.h"

namespace weft::gpu {

// nccl_collectives.cpp (NCCL builds only).
namespace nccl_path {
void allreduce(Launch& l, const void* send, void* recv, size_t count, DType dtype, ReduceOp op);
void broadcast(Launch& l, void* buf, size_t count, DType dtype, int root);
void reduce(Launch& l, const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root);
void allgather(Launch& l, const void* send, void* recv, size_t count, DType dtype);
void allgatherv(Launch& l, const void* send, size_t sendcount, void* recv, const std::vector<size_t>& counts,
                const std::vector<size_t>& displs, DType dtype);
void reduce_scatter(Launch& l, const void* send, void* recv, size_t recvcount, DType dtype, ReduceOp op);
void alltoall(Launch& l, const void* send, void* recv, size_t count, DType dtype);
void alltoallv(Launch& l, const void* send, const std::vector<size_t>& sendcounts, const std::vector<size_t>& sdispls,
               void* recv, const std::vector<size_t>& recvcounts, const std::vector<size_t>& rdispls, DType dtype);
void gather(Launch& l, const void* send, void* recv, size_t count, DType dtype, int root);
void scatter(Launch& l, const void* send, void* recv, size_t count, DType dtype, int root);
void barrier(Launch& l);
// One group of ncclSend/ncclRecv for `ops` (none to the rank itself); zero-byte ones skipped.
void p2p(Launch& l, const std::vector<P2POp>& ops);
}  // namespace nccl_path

// staged_collectives.cpp.
namespace staged {
void allreduce(Launch& l, const void* send, void* recv, size_t count, DType dtype, ReduceOp op);
void broadcast(Launch& l, void* buf, size_t count, DType dtype, int root);
void reduce(Launch& l, const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root);
void allgather(Launch& l, const void* send, void* recv, size_t count, DType dtype);
void allgatherv(Launch& l, const void* send, size_t sendcount, void* recv, const std::vector<size_t>& counts,
                const std::vector<size_t>& displs, DType dtype);
void reduce_scatter(Launch& l, const void* send, void* recv, size_t recvcount, DType dtype, ReduceOp op);
void alltoall(Launch& l, const void* send, void* recv, size_t count, DType dtype);
void alltoallv(Launch& l, const void* send, const std::vector<size_t>& sendcounts, const std::vector<size_t>& sdispls,
               void* recv, const std::vector<size_t>& recvcounts, const std::vector<size_t>& rdispls, DType dtype);
void gather(Launch& l, const void* send, void* recv, size_t count, DType dtype, int root);
void scatter(Launch& l, const void* send, void* recv, size_t count, DType dtype, int root);
void barrier(Launch& l);
}  // namespace staged

}  // namespace weft::gpu
