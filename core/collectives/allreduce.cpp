// allreduce: recursive doubling (latency-bound sizes), ring reduce-scatter + allgather
// (bandwidth-optimal), and Rabenseifner's halving/doubling (bandwidth-optimal with log n
// rounds). Every algorithm leaves bitwise-identical results on all ranks: each element's
// final value is computed in one place, or by both partners from the same two operands
// (IEEE addition and multiplication are commutative).
#include <cstring>

#include "core/collectives/arg_check.h"
#include "core/collectives/chunking.h"
#include "core/collectives/collectives.h"
#include "core/collectives/fold.h"
#include "core/collectives/ring.h"
#include "core/collectives/select.h"
#include "core/collectives/shm_algorithms.h"
#include "core/collectives/widen.h"

namespace weft::coll {
namespace {

constexpr uint32_t kFoldStep = 0;
constexpr uint32_t kMainStep = 1;      // up to 2 * 16 rounds
constexpr uint32_t kUnfoldStep = 63;

void fold_in(Channel& ch, const Fold& f, void* buf, void* tmp, size_t count, const Reducer& red) {
  const int rank = ch.rank();
  if (!f.has_partner(rank)) return;
  if (f.sits_out(rank)) {
    ch.isend(rank + 1, kFoldStep, buf, red.bytes(count));
  } else {
    ch.irecv(rank - 1, kFoldStep, tmp, red.bytes(count));
  }
  ch.wait();
  if (!f.sits_out(rank)) red.apply(buf, tmp, buf, count);
}

void fold_out(Channel& ch, const Fold& f, void* buf, size_t bytes) {
  const int rank = ch.rank();
  if (!f.has_partner(rank)) return;
  if (f.sits_out(rank)) {
    ch.irecv(rank + 1, kUnfoldStep, buf, bytes);
  } else {
    ch.isend(rank - 1, kUnfoldStep, buf, bytes);
  }
  ch.wait();
}

// One step of recursive halving: send the half the partner keeps, receive the partner's copy
// of the half kept here into tmp, and add it in, chunk by chunk as the chunks arrive, so the
// reduction overlaps the transfer (chunking.h).
void halving_step(Channel& ch, int peer, uint32_t step, char* keep, size_t keep_len, const char* give,
                  size_t give_len, void* tmp, const Reducer& red) {
  const Chunking ck = Chunking::of(ch, red.elem);
  transport::Op** recvs = Channel::op_table(ck.count(keep_len));
  for (size_t c = 0; c < ck.count(keep_len); ++c) {
    recvs[c] = ch.irecv(peer, step, at(tmp, ck.offset(c), red.elem), red.bytes(ck.length(keep_len, c)));
  }
  for (size_t c = 0; c < ck.count(give_len); ++c) {
    ch.isend(peer, step, at(give, ck.offset(c), red.elem), red.bytes(ck.length(give_len, c)));
  }
  for (size_t c = 0; c < ck.count(keep_len); ++c) {
    ch.wait_for(recvs[c]);
    char* dst = at(keep, ck.offset(c), red.elem);
    red.apply(dst, dst, at(tmp, ck.offset(c), red.elem), ck.length(keep_len, c));
  }
  ch.wait();
}

void recursive_doubling(Channel& ch, void* buf, size_t count, const Reducer& red) {
  Fold f(ch.rank(), ch.size());
  void* tmp = ch.comm().scratch().get(2, red.bytes(count));
  fold_in(ch, f, buf, tmp, count, red);
  if (f.newrank >= 0) {
    uint32_t step = kMainStep;
    for (int mask = 1; mask < f.pof2; mask <<= 1, ++step) {
      int peer = f.real(f.newrank ^ mask);
      ch.sendrecv(peer, buf, red.bytes(count), peer, tmp, red.bytes(count), step);
      red.apply(buf, buf, tmp, count);
    }
  }
  fold_out(ch, f, buf, red.bytes(count));
}

void ring(Channel& ch, const void* send, void* recv, size_t count, const Reducer& red) {
  Blocks blocks = Blocks::even(count, ch.size());
  const size_t own = blocks.offset(static_cast<size_t>(ch.rank()));
  ring_reduce_scatter(ch, send, at(recv, own, red.elem), blocks, red, kMainStep);
  ring_allgather(ch, recv, blocks, red.elem, kMainStep + static_cast<uint32_t>(ch.size()));
}

void rabenseifner(Channel& ch, void* buf, size_t count, const Reducer& red) {
  Fold f(ch.rank(), ch.size());
  void* tmp = ch.comm().scratch().get(2, red.bytes(count));
  fold_in(ch, f, buf, tmp, count, red);
  if (f.newrank >= 0) {
    Blocks b = Blocks::even(count, f.pof2);
    auto span_elems = [&](int lo, int hi) { return b.offset(hi - 1) + b.length(hi - 1) - b.offset(lo); };
    uint32_t step = kMainStep;
    int lo = 0, hi = f.pof2;
    // Recursive halving reduce-scatter: keep half the range, send the other half.
    for (int mask = f.pof2 / 2; mask >= 1; mask >>= 1, ++step) {
      int partner = f.newrank ^ mask, peer = f.real(partner), mid = lo + (hi - lo) / 2;
      int keep_lo = f.newrank < partner ? lo : mid, keep_hi = f.newrank < partner ? mid : hi;
      int give_lo = f.newrank < partner ? mid : lo, give_hi = f.newrank < partner ? hi : mid;
      halving_step(ch, peer, step, at(buf, b.offset(keep_lo), red.elem), span_elems(keep_lo, keep_hi),
                   at(buf, b.offset(give_lo), red.elem), span_elems(give_lo, give_hi), tmp, red);
      lo = keep_lo;
      hi = keep_hi;
    }
    // Recursive doubling allgather of the reduced blocks.
    for (int mask = 1; mask < f.pof2; mask <<= 1, ++step) {
      int partner = f.newrank ^ mask, peer = f.real(partner);
      int plo = (f.newrank & mask) ? lo - mask : hi, phi = plo + mask;
      ch.sendrecv(peer, at(buf, b.offset(lo), red.elem), red.bytes(span_elems(lo, hi)), peer,
                  at(buf, b.offset(plo), red.elem), red.bytes(span_elems(plo, phi)), step);
      lo = lo < plo ? lo : plo;
      hi = hi > phi ? hi : phi;
    }
  }
  fold_out(ch, f, buf, red.bytes(count));
}

void allreduce_native(Channel& ch, const void* send, void* recv, size_t count, const Reducer& red) {
  AllreduceAlgo algo = choose_allreduce(ch.comm(), red.bytes(count), count);
  if (algo == AllreduceAlgo::shm) {
    if (shm_allreduce(ch, send, recv, count, red)) return;
    algo = choose_allreduce(ch.comm(), red.bytes(count), count, false);
  }
  ch.set_algorithm(algo_name(algo));
  if (ch.size() == 1 || algo != AllreduceAlgo::ring) {
    if (send != recv) std::memcpy(recv, send, red.bytes(count));
    if (ch.size() == 1) return;
  }
  switch (algo) {
    case AllreduceAlgo::ring: ring(ch, send, recv, count, red); break;
    case AllreduceAlgo::rabenseifner: rabenseifner(ch, recv, count, red); break;
    case AllreduceAlgo::recursive_doubling:
    case AllreduceAlgo::automatic:
    case AllreduceAlgo::shm: recursive_doubling(ch, recv, count, red); break;
  }
}

}  // namespace

void allreduce(Comm& comm, const void* send, void* recv, size_t count, DType dtype, ReduceOp op) {
  Channel ch(comm, "allreduce", "");
  check_signature(ch, {"allreduce", static_cast<int>(dtype), static_cast<int>(op), -1, count});
  if (count == 0) return;
  if (dtype_reduces_in_f32(dtype)) {
    float* work = widened_copy(comm, send, count, dtype);
    allreduce_native(ch, work, work, count, Reducer(DType::f32, op));
    finish_widened(recv, work, count, dtype, op, comm.size());
    return;
  }
  allreduce_native(ch, send, recv, count, Reducer(dtype, op));
  if (op == ReduceOp::avg) kernels::divide_by(recv, count, dtype, comm.size());
}

}  // namespace weft::coll
