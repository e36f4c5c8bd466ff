// reduce_scatter: the ring pass shared with allreduce (ring.h), which never writes the input.
#include "core/collectives/arg_check.h"
#include "core/collectives/collectives.h"
#include "core/collectives/ring.h"
#include "core/collectives/select.h"
#include "core/collectives/shm_algorithms.h"
#include "core/collectives/widen.h"

namespace weft::coll {

void reduce_scatter(Comm& comm, const void* send, void* recv, size_t recvcount, DType dtype, ReduceOp op) {
  Channel ch(comm, "reduce_scatter", "");
  check_signature(ch, {"reduce_scatter", static_cast<int>(dtype), static_cast<int>(op), -1, recvcount});
  if (recvcount == 0) return;
  const int n = comm.size();
  Blocks blocks = Blocks::uniform(recvcount, n);
  const bool shm = choose_reduce_scatter(comm) == ReduceScatterAlgo::shm;
  auto run = [&](const void* in, void* out, const Reducer& red) {
    if (shm) {
      if (shm_reduce_scatter(ch, in, out, recvcount, red)) return;
      choose_reduce_scatter(comm, false);  // throws when shm was forced
    }
    ch.set_algorithm("ring");
    ring_reduce_scatter(ch, in, out, blocks, red, 0);
  };
  if (dtype_reduces_in_f32(dtype)) {
    float* work = widened_copy(comm, send, recvcount * static_cast<size_t>(n), dtype);
    float* out = static_cast<float*>(comm.scratch().get(1, recvcount * sizeof(float)));
    run(work, out, Reducer(DType::f32, op));
    finish_widened(recv, out, recvcount, dtype, op, n);
    return;
  }
  run(send, recv, Reducer(dtype, op));
  if (op == ReduceOp::avg) kernels::divide_by(recv, recvcount, dtype, n);
}

}  // namespace weft::coll
