// Collectives over point-to-point (DESIGN.md: core/collectives). Each entry point runs on the
// calling thread; the communicator's executor decides which thread that is. Arguments are
// already validated by the C shims (ranges, overlap, overflow). Every entry point draws one
// sequence number on every rank, even when it moves no data, so ranks stay in step.
#pragma once

#include <cstddef>
#include <vector>

#include "core/comm/comm.h"
#include "core/common/dtype.h"
#include "kernels/cpu/strided_copy.h"

namespace weft::coll {

void allreduce(Comm& comm, const void* send, void* recv, size_t count, DType dtype, ReduceOp op);
void broadcast(Comm& comm, void* buf, size_t count, DType dtype, int root);
void reduce(Comm& comm, const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root);
void allgather(Comm& comm, const void* send, void* recv, size_t count, DType dtype);
void allgatherv(Comm& comm, const void* send, size_t sendcount, void* recv, const std::vector<size_t>& counts,
                const std::vector<size_t>& displs, DType dtype);
void reduce_scatter(Comm& comm, const void* send, void* recv, size_t recvcount, DType dtype, ReduceOp op);
void alltoall(Comm& comm, const void* send, void* recv, size_t count, DType dtype);
// alltoall whose block q (count elements) is the row-major elements of views[q], each view on
// its own memory: the shared-memory path reads them straight into its segment, so a strided
// block (a column block of a matrix) needs no packed copy. Matches other ranks' alltoall.
void alltoall_views(Comm& comm, const kernels::StridedView* views, void* recv, size_t count, DType dtype);
void alltoallv(Comm& comm, const void* send, const std::vector<size_t>& sendcounts,
               const std::vector<size_t>& sdispls, void* recv, const std::vector<size_t>& recvcounts,
               const std::vector<size_t>& rdispls, DType dtype);
void gather(Comm& comm, const void* send, void* recv, size_t count, DType dtype, int root);
void scatter(Comm& comm, const void* send, void* recv, size_t count, DType dtype, int root);
void barrier(Comm& comm);

}  // namespace weft::coll
