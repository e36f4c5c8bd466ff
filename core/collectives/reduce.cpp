// reduce: binomial tree for small messages; ring reduce-scatter then gather of the blocks to
// the root for large ones (each rank sends ~2x the message instead of log n times it).
#include <cstring>

#include "core/collectives/arg_check.h"
#include "core/collectives/collectives.h"
#include "core/collectives/ring.h"
#include "core/collectives/select.h"
#include "core/collectives/shm_algorithms.h"
#include "core/collectives/widen.h"

namespace weft::coll {
namespace {

// acc holds this rank's input on entry and, at the root, the result on return.
void binomial(Channel& ch, void* acc, size_t count, const Reducer& red, int root) {
  const int n = ch.size(), rank = ch.rank();
  const int vr = (rank - root + n) % n;
  void* tmp = ch.comm().scratch().get(2, red.bytes(count));
  for (int mask = 1; mask < n; mask <<= 1) {
    if (vr & mask) {
      ch.isend(((vr & ~mask) + root) % n, 0, acc, red.bytes(count));
      ch.wait();
      return;
    }
    if ((vr | mask) < n) {
      ch.irecv(((vr | mask) + root) % n, 0, tmp, red.bytes(count));
      ch.wait();
      red.apply(acc, acc, tmp, count);
    }
  }
}

// `in` is this rank's input; at the root `out` receives the result.
void reduce_scatter_gather(Channel& ch, const void* in, void* out, void* own_block, size_t count,
                           const Reducer& red, int root) {
  const int n = ch.size(), rank = ch.rank();
  Blocks blocks = Blocks::even(count, n);
  ring_reduce_scatter(ch, in, own_block, blocks, red, 1);
  if (rank == root) {
    for (int p = 0; p < n; ++p) {
      if (p != root) ch.irecv(p, 0, at(out, blocks.offset(p), red.elem), red.bytes(blocks.length(p)));
    }
  } else {
    ch.isend(root, 0, own_block, red.bytes(blocks.length(rank)));
  }
  ch.wait();
}

// Runs the chosen algorithm; at the root `recv` gets the (not yet averaged) result.
void reduce_native(Channel& ch, const void* send, void* recv, size_t count, const Reducer& red, int root) {
  Comm& comm = ch.comm();
  const int rank = ch.rank();
  ReduceAlgo algo = choose_reduce(comm, red.bytes(count), count);
  if (algo == ReduceAlgo::shm) {
    if (shm_reduce(ch, send, recv, count, red, root)) return;
    algo = choose_reduce(comm, red.bytes(count), count, false);
  }
  ch.set_algorithm(algo_name(algo));
  if (algo == ReduceAlgo::reduce_scatter_gather && comm.size() > 1) {
    Blocks blocks = Blocks::even(count, comm.size());
    void* own = rank == root ? at(recv, blocks.offset(rank), red.elem)
                             : comm.scratch().get(1, red.bytes(blocks.length(rank)));
    reduce_scatter_gather(ch, send, recv, own, count, red, root);
    return;
  }
  void* acc = rank == root ? recv : comm.scratch().get(1, red.bytes(count));
  if (acc != send) std::memcpy(acc, send, red.bytes(count));
  if (comm.size() > 1) binomial(ch, acc, count, red, root);
}

}  // namespace

void reduce(Comm& comm, const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root) {
  Channel ch(comm, "reduce", "");
  check_signature(ch, {"reduce", static_cast<int>(dtype), static_cast<int>(op), root, count});
  if (count == 0) return;
  const bool is_root = comm.rank() == root;
  if (dtype_reduces_in_f32(dtype)) {
    float* work = widened_copy(comm, send, count, dtype);
    // Slot 1 is the non-root accumulator; the root's float32 result lands in place in slot 0.
    reduce_native(ch, work, work, count, Reducer(DType::f32, op), root);
    if (is_root) finish_widened(recv, work, count, dtype, op, comm.size());
    return;
  }
  reduce_native(ch, send, recv, count, Reducer(dtype, op), root);
  if (is_root && op == ReduceOp::avg) kernels::divide_by(recv, count, dtype, comm.size());
}

}  // namespace weft::coll
