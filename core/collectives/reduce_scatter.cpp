// reduce_scatter: the ring pass shared with allreduce (ring.h), which never writes the input.
#include "core/collectives/arg_check.h"
#include "core/collectives/collectives.h"
#include "core/collectives/ring.h"
#include "core/collectives/widen.h"

namespace weft::coll {

void reduce_scatter(Comm& comm, const void* send, void* recv, size_t recvcount, DType dtype, ReduceOp op) {
  Channel ch(comm, "reduce_scatter", "ring");
  check_signature(ch, {"reduce_scatter", static_cast<int>(dtype), static_cast<int>(op), -1, recvcount});
  if (recvcount == 0) return;
  const int n = comm.size();
  Blocks blocks = Blocks::uniform(recvcount, n);
  if (dtype_reduces_in_f32(dtype)) {
    float* work = widened_copy(comm, send, recvcount * static_cast<size_t>(n), dtype);
    float* out = static_cast<float*>(comm.scratch().get(1, recvcount * sizeof(float)));
    ring_reduce_scatter(ch, work, out, blocks, Reducer(DType::f32, op), 0);
    finish_widened(recv, out, recvcount, dtype, op, n);
    return;
  }
  ring_reduce_scatter(ch, send, recv, blocks, Reducer(dtype, op), 0);
  if (op == ReduceOp::avg) kernels::divide_by(recv, recvcount, dtype, n);
}

}  // namespace weft::coll
