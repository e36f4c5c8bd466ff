// Device collectives through NCCL, queued on the launch's stream.
//
// Reductions follow weft.h's rules, not NCCL's where they differ:
//  - f16/bf16/fp8 are widened to float32 in device scratch (kernels/cuda casts), reduced by
//    NCCL in float32 (partial sums travel as float32) and rounded once into the result. Cost:
//    one widening and one narrowing pass over the data and 4 bytes per element on the wire
//    (2x an f16 message, 4x an fp8 one). NCCL 2.28 can reduce f16/bf16/fp8 natively, but in the
//    narrow type, rounding at every step, which weft.h rules out.
//  - float MIN/MAX go through order keys (kernels/cuda/order_key.h) and NCCL's unsigned integer
//    MIN/MAX, because NCCL's float min/max drop NaN operands (weft.h: NaN wins) and -0/+0.
//  - AVG is ncclSum, then a division by nranks (in float32 for the widened types, truncating
//    toward zero for integers). Not ncclAvg: it scales every input by 1/nranks before summing,
//    so a sum that overflows gave a finite average where weft.h's SUM / n gives inf (found by
//    the emulated device tests against the independent reference).
// Data movement (broadcast, gathers, all-to-all) moves bytes (ncclInt8), so every dtype works
// on every GPU. alltoall(v), gather, scatter and allgatherv are grouped ncclSend/ncclRecv.
#include <optional>

#include "core/device/device_scratch.h"
#include "core/device/nccl_comm.h"
#include "core/device/paths.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/fill.h"
#include "kernels/cuda/order_key.h"
#include "kernels/cuda/reduce.h"

namespace weft::gpu::nccl_path {
namespace {

namespace kc = kernels::cuda;

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::f64: return ncclFloat64;
    case DType::f32: return ncclFloat32;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::f8e4m3: return ncclFloat8e4m3;
    case DType::f8e5m2: return ncclFloat8e5m2;
    case DType::i8: return ncclInt8;
    case DType::u8: return ncclUint8;
    case DType::i32: return ncclInt32;
    case DType::u32: return ncclUint32;
    case DType::i64: return ncclInt64;
    case DType::u64: return ncclUint64;
  }
  return ncclInt8;
}

// How a reduction travels: in its own type, widened to float32, or as order keys.
struct Wire {
  enum class Kind { native, widened, keys } kind;
  ncclDataType_t type;
  ncclRedOp_t op;
  size_t elem;
  bool divide_after;  // AVG: sum, then divide (the wire's buffer: widened ones in float32)
};

Wire wire_for(DType d, ReduceOp op) {
  if (dtype_is_float(d) && (op == ReduceOp::min || op == ReduceOp::max)) {
    return {Wire::Kind::keys, d == DType::f64 ? ncclUint64 : ncclUint32, op == ReduceOp::min ? ncclMin : ncclMax,
            kc::order_key_size(d), false};
  }
  ncclRedOp_t o = ncclSum;
  switch (op) {
    case ReduceOp::sum: o = ncclSum; break;
    case ReduceOp::prod: o = ncclProd; break;
    case ReduceOp::min: o = ncclMin; break;
    case ReduceOp::max: o = ncclMax; break;
    case ReduceOp::avg: o = ncclSum; break;
  }
  const bool avg = op == ReduceOp::avg;
  if (dtype_reduces_in_f32(d)) return {Wire::Kind::widened, ncclFloat32, o, sizeof(float), avg};
  return {Wire::Kind::native, nccl_type(d), o, dtype_size(d), avg};
}

void encode(const Wire& w, void* dst, const void* src, size_t count, DType d, ReduceOp op, cudaStream_t s) {
  if (w.kind == Wire::Kind::keys) {
    kc::to_order_key(dst, src, d, count, op, s);
  } else {
    kc::widen_to_f32(static_cast<float*>(dst), src, d, count, s);
  }
}

void decode(const Wire& w, void* dst, const void* src, size_t count, DType d, cudaStream_t s) {
  if (w.kind == Wire::Kind::keys) {
    kc::from_order_key(dst, d, src, count, s);
  } else {
    kc::narrow_from_f32(dst, d, static_cast<const float*>(src), count, s);
  }
}

template <class F>
void issue(Launch& l, F&& f) {
  l.nccl()->issue(l.comm(), l.subject(), std::forward<F>(f));
}

// ncclGroupStart; body(api, handle, note) with note(result) keeping the first failure;
// ncclGroupEnd (always, so the group stays balanced).
template <class Body>
void group(Launch& l, Body&& body) {
  issue(l, [&](const NcclApi& api, ncclComm_t c) {
    ncclResult_t first = api.GroupStart();
    if (first != ncclSuccess) return first;
    auto note = [&](ncclResult_t r) {
      if (first == ncclSuccess) first = r;
    };
    body(api, c, note);
    ncclResult_t end = api.GroupEnd();
    return first != ncclSuccess ? first : end;
  });
}

const char* at(const void* base, size_t bytes) { return static_cast<const char*>(base) + bytes; }
char* at(void* base, size_t bytes) { return static_cast<char*>(base) + bytes; }

}  // namespace

void allreduce(Launch& l, const void* send, void* recv, size_t count, DType d, ReduceOp op) {
  l.check({"allreduce", static_cast<int>(d), static_cast<int>(op), -1, count});
  if (count == 0) return;
  const Wire w = wire_for(d, op);
  cudaStream_t s = l.stream();
  if (w.kind == Wire::Kind::native) {
    issue(l, [&](const NcclApi& api, ncclComm_t c) { return api.AllReduce(send, recv, count, w.type, w.op, c, s); });
    if (w.divide_after) kc::divide_by(recv, count, d, l.comm().size(), s);
    return;
  }
  DeviceScratch tmp(l.ctx().scratch_pool(), count * w.elem, s);
  encode(w, tmp.data(), send, count, d, op, s);
  issue(l, [&](const NcclApi& api, ncclComm_t c) {
    return api.AllReduce(tmp.data(), tmp.data(), count, w.type, w.op, c, s);
  });
  if (w.divide_after) kc::divide_by(tmp.data(), count, DType::f32, l.comm().size(), s);
  decode(w, recv, tmp.data(), count, d, s);
}

void reduce(Launch& l, const void* send, void* recv, size_t count, DType d, ReduceOp op, int root) {
  l.check({"reduce", static_cast<int>(d), static_cast<int>(op), root, count});
  if (count == 0) return;
  const Wire w = wire_for(d, op);
  const bool is_root = l.comm().rank() == root;
  cudaStream_t s = l.stream();
  if (w.kind == Wire::Kind::native) {
    issue(l, [&](const NcclApi& api, ncclComm_t c) {
      return api.Reduce(send, is_root ? recv : nullptr, count, w.type, w.op, root, c, s);
    });
    if (w.divide_after && is_root) kc::divide_by(recv, count, d, l.comm().size(), s);
    return;
  }
  DeviceScratch tmp(l.ctx().scratch_pool(), count * w.elem, s);
  encode(w, tmp.data(), send, count, d, op, s);
  issue(l, [&](const NcclApi& api, ncclComm_t c) {
    return api.Reduce(tmp.data(), tmp.data(), count, w.type, w.op, root, c, s);
  });
  if (!is_root) return;
  if (w.divide_after) kc::divide_by(tmp.data(), count, DType::f32, l.comm().size(), s);
  decode(w, recv, tmp.data(), count, d, s);
}

void reduce_scatter(Launch& l, const void* send, void* recv, size_t recvcount, DType d, ReduceOp op) {
  l.check({"reduce_scatter", static_cast<int>(d), static_cast<int>(op), -1, recvcount});
  if (recvcount == 0) return;
  const Wire w = wire_for(d, op);
  cudaStream_t s = l.stream();
  if (w.kind == Wire::Kind::native) {
    issue(l, [&](const NcclApi& api, ncclComm_t c) {
      return api.ReduceScatter(send, recv, recvcount, w.type, w.op, c, s);
    });
    if (w.divide_after) kc::divide_by(recv, recvcount, d, l.comm().size(), s);
    return;
  }
  const size_t n = static_cast<size_t>(l.comm().size());
  DeviceScratch tmp(l.ctx().scratch_pool(), n * recvcount * w.elem, s);
  encode(w, tmp.data(), send, n * recvcount, d, op, s);
  char* mine = tmp.data() + static_cast<size_t>(l.comm().rank()) * recvcount * w.elem;
  issue(l, [&](const NcclApi& api, ncclComm_t c) {
    return api.ReduceScatter(tmp.data(), mine, recvcount, w.type, w.op, c, s);
  });
  if (w.divide_after) kc::divide_by(mine, recvcount, DType::f32, l.comm().size(), s);
  decode(w, recv, mine, recvcount, d, s);
}

void broadcast(Launch& l, void* buf, size_t count, DType d, int root) {
  l.check({"broadcast", static_cast<int>(d), -1, root, count});
  if (count == 0) return;
  const size_t bytes = count * dtype_size(d);
  cudaStream_t s = l.stream();
  issue(l, [&](const NcclApi& api, ncclComm_t c) { return api.Broadcast(buf, buf, bytes, ncclInt8, root, c, s); });
}

void allgather(Launch& l, const void* send, void* recv, size_t count, DType d) {
  l.check({"allgather", static_cast<int>(d), -1, -1, count});
  if (count == 0) return;
  const size_t bytes = count * dtype_size(d);
  cudaStream_t s = l.stream();
  issue(l, [&](const NcclApi& api, ncclComm_t c) { return api.AllGather(send, recv, bytes, ncclInt8, c, s); });
}

void allgatherv(Launch& l, const void* send, size_t sendcount, void* recv, const std::vector<size_t>& counts,
                const std::vector<size_t>& displs, DType d) {
  l.check({"allgatherv", static_cast<int>(d), -1, -1, coll::kNotCompared, coll::hash_sizes(counts, displs)});
  const size_t elem = dtype_size(d);
  const int n = l.comm().size(), rank = l.comm().rank();
  cudaStream_t s = l.stream();
  kc::copy(at(recv, displs[static_cast<size_t>(rank)] * elem), send, sendcount * elem, s);
  group(l, [&](const NcclApi& api, ncclComm_t c, auto note) {
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      if (sendcount) note(api.Send(send, sendcount * elem, ncclInt8, p, c, s));
      const size_t pc = counts[static_cast<size_t>(p)];
      if (pc) note(api.Recv(at(recv, displs[static_cast<size_t>(p)] * elem), pc * elem, ncclInt8, p, c, s));
    }
  });
}

namespace {

// Pairwise exchange: block p of send (sbytes[p] at soff[p]) to rank p, block p of recv from
// rank p; this rank's own block is a local copy. An in-place call reads from a copy of send.
void exchange(Launch& l, const void* send, const std::vector<size_t>& soff, const std::vector<size_t>& sbytes,
              void* recv, const std::vector<size_t>& roff, const std::vector<size_t>& rbytes, size_t send_extent) {
  const int n = l.comm().size(), rank = l.comm().rank();
  cudaStream_t s = l.stream();
  std::optional<DeviceScratch> copy;
  if (send == recv && send_extent) {
    copy.emplace(l.ctx().scratch_pool(), send_extent, s);
    kc::copy(copy->data(), send, send_extent, s);
    send = copy->data();
  }
  const size_t me = static_cast<size_t>(rank);
  kc::copy(at(recv, roff[me]), at(send, soff[me]), rbytes[me] < sbytes[me] ? rbytes[me] : sbytes[me], s);
  group(l, [&](const NcclApi& api, ncclComm_t c, auto note) {
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      const size_t q = static_cast<size_t>(p);
      if (sbytes[q]) note(api.Send(at(send, soff[q]), sbytes[q], ncclInt8, p, c, s));
      if (rbytes[q]) note(api.Recv(at(recv, roff[q]), rbytes[q], ncclInt8, p, c, s));
    }
  });
}

}  // namespace

void alltoall(Launch& l, const void* send, void* recv, size_t count, DType d) {
  l.check({"alltoall", static_cast<int>(d), -1, -1, count});
  if (count == 0) return;
  const size_t n = static_cast<size_t>(l.comm().size()), bytes = count * dtype_size(d);
  std::vector<size_t> off(n), len(n, bytes);
  for (size_t p = 0; p < n; ++p) off[p] = p * bytes;
  exchange(l, send, off, len, recv, off, len, n * bytes);
}

void alltoallv(Launch& l, const void* send, const std::vector<size_t>& sendcounts, const std::vector<size_t>& sdispls,
               void* recv, const std::vector<size_t>& recvcounts, const std::vector<size_t>& rdispls, DType d) {
  coll::CallSignature sig{"alltoallv", static_cast<int>(d), -1, -1, coll::kNotCompared};
  sig.send_counts = &sendcounts;
  sig.recv_counts = &recvcounts;
  l.check(sig);
  const size_t n = sendcounts.size(), elem = dtype_size(d);
  std::vector<size_t> so(n), sb(n), ro(n), rb(n);
  size_t extent = 0;
  for (size_t p = 0; p < n; ++p) {
    so[p] = sdispls[p] * elem;
    sb[p] = sendcounts[p] * elem;
    ro[p] = rdispls[p] * elem;
    rb[p] = recvcounts[p] * elem;
    if (so[p] + sb[p] > extent) extent = so[p] + sb[p];
  }
  exchange(l, send, so, sb, recv, ro, rb, extent);
}

void gather(Launch& l, const void* send, void* recv, size_t count, DType d, int root) {
  l.check({"gather", static_cast<int>(d), -1, root, count});
  if (count == 0) return;
  const size_t bytes = count * dtype_size(d);
  const int n = l.comm().size(), rank = l.comm().rank();
  cudaStream_t s = l.stream();
  if (rank == root) kc::copy(at(recv, static_cast<size_t>(root) * bytes), send, bytes, s);
  group(l, [&](const NcclApi& api, ncclComm_t c, auto note) {
    if (rank != root) {
      note(api.Send(send, bytes, ncclInt8, root, c, s));
      return;
    }
    for (int p = 0; p < n; ++p) {
      if (p != root) note(api.Recv(at(recv, static_cast<size_t>(p) * bytes), bytes, ncclInt8, p, c, s));
    }
  });
}

void scatter(Launch& l, const void* send, void* recv, size_t count, DType d, int root) {
  l.check({"scatter", static_cast<int>(d), -1, root, count});
  if (count == 0) return;
  const size_t bytes = count * dtype_size(d);
  const int n = l.comm().size(), rank = l.comm().rank();
  cudaStream_t s = l.stream();
  if (rank == root) kc::copy(recv, at(send, static_cast<size_t>(root) * bytes), bytes, s);
  group(l, [&](const NcclApi& api, ncclComm_t c, auto note) {
    if (rank != root) {
      note(api.Recv(recv, bytes, ncclInt8, root, c, s));
      return;
    }
    for (int p = 0; p < n; ++p) {
      if (p != root) note(api.Send(at(send, static_cast<size_t>(p) * bytes), bytes, ncclInt8, p, c, s));
    }
  });
}

void barrier(Launch& l) {
  l.check({"barrier", -1, -1, -1, 0});
  // NCCL has no barrier: a one-element all-reduce orders every rank's stream past this point.
  void* tiny = l.ctx().tiny_buffer();
  cudaStream_t s = l.stream();
  issue(l, [&](const NcclApi& api, ncclComm_t c) { return api.AllReduce(tiny, tiny, 1, ncclInt32, ncclSum, c, s); });
}

void p2p(Launch& l, const std::vector<P2POp>& ops) {
  bool any = false;
  for (const P2POp& o : ops) any = any || o.bytes != 0;
  if (!any) return;
  cudaStream_t s = l.stream();
  group(l, [&](const NcclApi& api, ncclComm_t c, auto note) {
    for (const P2POp& o : ops) {
      if (o.bytes == 0) continue;
      note(o.is_send ? api.Send(o.buf, o.bytes, ncclInt8, o.peer, c, s) : api.Recv(o.buf, o.bytes, ncclInt8, o.peer, c, s));
    }
  });
}

}  // namespace weft::gpu::nccl_path
