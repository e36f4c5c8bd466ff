// The device collectives of device_api.h: NCCL when the communicator has it, else staging.
// A custom reduction operator (weft/plugin.h) is host code: it runs on the staged path (the host
// algorithms reduce in pinned host memory through coll::Reducer) and is refused over NCCL, which
// reduces on the GPU with its own operators.
#include "core/collectives/custom_op.h"
#include "core/device/device_api.h"
#include "core/device/paths.h"

#if WEFT_HAVE_NCCL
#define WEFT_ROUTE(call)                      \
  do {                                        \
    if (l.nccl()) return nccl_path::call;     \
    return staged::call;                      \
  } while (0)
#define WEFT_ROUTE_REDUCTION(op, call)                                                                       \
  do {                                                                                                      \
    if (l.nccl()) {                                                                                         \
      coll::refuse_custom_op(op, "this communicator reduces device memory with NCCL, which runs only its "   \
                                 "built-in operators on the GPU; use host memory, or a communicator without " \
                                 "NCCL (WEFT_NCCL=0), whose device collectives stage through host memory");   \
      return nccl_path::call;                                                                               \
    }                                                                                                       \
    return staged::call;                                                                                    \
  } while (0)
#else
#define WEFT_ROUTE(call) return staged::call
#define WEFT_ROUTE_REDUCTION(op, call) return staged::call
#endif

namespace weft::gpu {

void allreduce(Launch& l, const void* send, void* recv, size_t count, DType dtype, ReduceOp op) {
  WEFT_ROUTE_REDUCTION(op, allreduce(l, send, recv, count, dtype, op));
}
void broadcast(Launch& l, void* buf, size_t count, DType dtype, int root) {
  WEFT_ROUTE(broadcast(l, buf, count, dtype, root));
}
void reduce(Launch& l, const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root) {
  WEFT_ROUTE_REDUCTION(op, reduce(l, send, recv, count, dtype, op, root));
}
void allgather(Launch& l, const void* send, void* recv, size_t count, DType dtype) {
  WEFT_ROUTE(allgather(l, send, recv, count, dtype));
}
void allgatherv(Launch& l, const void* send, size_t sendcount, void* recv, const std::vector<size_t>& counts,
                const std::vector<size_t>& displs, DType dtype) {
  WEFT_ROUTE(allgatherv(l, send, sendcount, recv, counts, displs, dtype));
}
void reduce_scatter(Launch& l, const void* send, void* recv, size_t recvcount, DType dtype, ReduceOp op) {
  WEFT_ROUTE_REDUCTION(op, reduce_scatter(l, send, recv, recvcount, dtype, op));
}
void alltoall(Launch& l, const void* send, void* recv, size_t count, DType dtype) {
  WEFT_ROUTE(alltoall(l, send, recv, count, dtype));
}
void alltoallv(Launch& l, const void* send, const std::vector<size_t>& sendcounts, const std::vector<size_t>& sdispls,
               void* recv, const std::vector<size_t>& recvcounts, const std::vector<size_t>& rdispls, DType dtype) {
  WEFT_ROUTE(alltoallv(l, send, sendcounts, sdispls, recv, recvcounts, rdispls, dtype));
}
void gather(Launch& l, const void* send, void* recv, size_t count, DType dtype, int root) {
  WEFT_ROUTE(gather(l, send, recv, count, dtype, root));
}
void scatter(Launch& l, const void* send, void* recv, size_t count, DType dtype, int root) {
  WEFT_ROUTE(scatter(l, send, recv, count, dtype, root));
}
void barrier(Launch& l) { WEFT_ROUTE(barrier(l)); }

}  // namespace weft::gpu
