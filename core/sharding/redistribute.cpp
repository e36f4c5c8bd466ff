#include "core/sharding/redistribute.h"

#include <cstring>
#include <memory>
#include <vector>

#include "core/collectives/collectives.h"
#include "core/comm/user_p2p.h"
#include "core/sharding/exchange.h"

namespace weft::shard {
namespace {

using kernels::StridedView;

// A piece of data on this rank: a view, and the storage behind it when weft owns it.
struct Piece {
  StridedView view;
  std::vector<char> storage;
};

std::unique_ptr<Piece> temp_piece(const Box& box, size_t elem) {
  auto p = std::make_unique<Piece>();
  p->storage.resize(static_cast<size_t>(box.numel()) * elem);
  p->view = StridedView::contiguous(p->storage.data(), elem, static_cast<int>(box.shape.size()), box.shape.data());
  return p;
}

// The part `part` of a view that holds `whole`.
StridedView box_view(const StridedView& v, const Box& whole, const Box& part) {
  int64_t rel[kernels::kMaxViewDims] = {};
  for (size_t d = 0; d < whole.shape.size(); ++d) rel[d] = part.offset[d] - whole.offset[d];
  return v.sub(rel, part.shape.data());
}

StridedView contiguous_at(void* base, size_t elem, const Box& box) {
  return StridedView::contiguous(base, elem, static_cast<int>(box.shape.size()), box.shape.data());
}

// The pieces of `whole` split along tensor dim d are consecutive row-major slabs of it when
// every dim before d has extent 1 (or the box is empty).
bool slabs(const Box& whole, int d) {
  if (whole.numel() == 0) return true;
  for (int k = 0; k < d; ++k) {
    if (whole.shape[static_cast<size_t>(k)] != 1) return false;
  }
  return true;
}

// A contiguous buffer holding the pieces of `whole` (in `v`) split along d over k, in order:
// v itself when it already is one, else a packed copy in `scratch`.
const char* packed_pieces(const StridedView& v, const Box& whole, int d, int k, size_t elem,
                          std::vector<char>& scratch) {
  if (kernels::is_contiguous(v) && slabs(whole, d)) return v.base;
  scratch.resize(static_cast<size_t>(whole.numel()) * elem);
  size_t at = 0;
  for (int j = 0; j < k; ++j) {
    const Box piece = split_box(whole, d, k, j);
    kernels::strided_copy(contiguous_at(scratch.data() + at, elem, piece), box_view(v, whole, piece));
    at += static_cast<size_t>(piece.numel()) * elem;
  }
  return scratch.data();
}

// Writes a buffer of pieces (as packed_pieces made them) into `out`, which holds `whole`.
void unpack_pieces(const char* buf, const StridedView& out, const Box& whole, int d, int k, size_t elem) {
  size_t at = 0;
  for (int j = 0; j < k; ++j) {
    const Box piece = split_box(whole, d, k, j);
    kernels::strided_copy(box_view(out, whole, piece), contiguous_at(const_cast<char*>(buf) + at, elem, piece));
    at += static_cast<size_t>(piece.numel()) * elem;
  }
}

void counts_of(const Box& whole, int d, int k, std::vector<size_t>& counts, std::vector<size_t>& displs) {
  counts.assign(static_cast<size_t>(k), 0);
  displs.assign(static_cast<size_t>(k), 0);
  size_t at = 0;
  for (int j = 0; j < k; ++j) {
    counts[static_cast<size_t>(j)] = static_cast<size_t>(split_box(whole, d, k, j).numel());
    displs[static_cast<size_t>(j)] = at;
    at += counts[static_cast<size_t>(j)];
  }
}

// One step's context: the mesh dim's group and this rank's boxes before and after.
struct StepRun {
  const Sharded& t;  // for dtype, global shape and mesh
  const Step& s;
  Comm& group;
  int k;
  int c;
  Box before;
  Box after;
  size_t elem;
};

void run_allgather(const StepRun& r, const StridedView& in, const StridedView& out) {
  const int d = r.s.from.dim;
  std::vector<size_t> counts, displs;
  counts_of(r.after, d, r.k, counts, displs);
  std::vector<char> send_scratch;
  const char* send = packed_pieces(in, r.before, d, 1, r.elem, send_scratch);
  const bool direct = kernels::is_contiguous(out) && slabs(r.after, d);
  std::vector<char> recv_scratch;
  if (!direct) recv_scratch.resize(static_cast<size_t>(r.after.numel()) * r.elem);
  char* recv = direct ? out.base : recv_scratch.data();
  coll::allgatherv(r.group, send, counts[static_cast<size_t>(r.c)], recv, counts, displs, r.t.dtype);
  if (!direct) unpack_pieces(recv, out, r.after, d, r.k, r.elem);
}

void run_allreduce(const StepRun& r, const StridedView& in, const StridedView& out) {
  const size_t n = static_cast<size_t>(r.before.numel());
  std::vector<char> scratch;
  const bool out_direct = kernels::is_contiguous(out);
  if (!out_direct) scratch.resize(n * r.elem);
  char* recv = out_direct ? out.base : scratch.data();
  if (kernels::is_contiguous(in)) {
    coll::allreduce(r.group, in.base, recv, n, r.t.dtype, r.s.from.op);
  } else {
    kernels::strided_copy(contiguous_at(recv, r.elem, r.before), in);
    coll::allreduce(r.group, recv, recv, n, r.t.dtype, r.s.from.op);
  }
  if (!out_direct) kernels::strided_copy(out, contiguous_at(recv, r.elem, r.before));
}

void run_reduce_scatter(const StepRun& r, const StridedView& in, const StridedView& out) {
  const int d = r.s.to.dim;
  std::vector<size_t> counts, displs;
  counts_of(r.before, d, r.k, counts, displs);
  std::vector<char> send_scratch;
  const char* send = packed_pieces(in, r.before, d, r.k, r.elem, send_scratch);
  const bool out_direct = kernels::is_contiguous(out);
  std::vector<char> recv_scratch;
  if (!out_direct) recv_scratch.resize(static_cast<size_t>(r.after.numel()) * r.elem);
  char* recv = out_direct ? out.base : recv_scratch.data();
  bool even = true;
  for (size_t x : counts) even = even && x == counts[0];
  if (even) {
    coll::reduce_scatter(r.group, send, recv, counts[0], r.t.dtype, r.s.from.op);
  } else {
    // Uneven parts: one reduce per part, rooted at its owner, so no rank sends padding.
    for (int j = 0; j < r.k; ++j) {
      const auto ju = static_cast<size_t>(j);
      coll::reduce(r.group, send + displs[ju] * r.elem, j == r.c ? recv : nullptr, counts[ju], r.t.dtype,
                   r.s.from.op, j);
    }
  }
  if (!out_direct) kernels::strided_copy(out, contiguous_at(recv, r.elem, r.after));
}

void run_alltoall(const StepRun& r, const StridedView& in, const StridedView& out) {
  const int a = r.s.from.dim;
  const int b = r.s.to.dim;
  std::vector<size_t> sc, sd, rc, rd;
  counts_of(r.before, b, r.k, sc, sd);
  counts_of(r.after, a, r.k, rc, rd);
  std::vector<char> send_scratch;
  const char* send = packed_pieces(in, r.before, b, r.k, r.elem, send_scratch);
  const bool direct = kernels::is_contiguous(out) && slabs(r.after, a);
  std::vector<char> recv_scratch;
  if (!direct) recv_scratch.resize(static_cast<size_t>(r.after.numel()) * r.elem);
  char* recv = direct ? out.base : recv_scratch.data();
  coll::alltoallv(r.group, send, sc, sd, recv, rc, rd, r.t.dtype);
  if (!direct) unpack_pieces(recv, out, r.after, a, r.k, r.elem);
}

// R -> S (a slice) and R -> P (the value, or zeros off coordinate 0 for SUM).
void run_local(const StepRun& r, const StridedView& in, const StridedView& out) {
  if (r.s.to.is_partial() && r.s.to.op == ReduceOp::sum && r.c != 0) {
    static const uint64_t zero = 0;  // every dtype's zero is all-zero bits
    StridedView z = out;
    z.base = reinterpret_cast<char*>(const_cast<uint64_t*>(&zero));
    for (int k = 0; k < z.ndim; ++k) z.strides[k] = 0;
    kernels::strided_copy(out, z);
    return;
  }
  kernels::strided_copy(out, box_view(in, r.before, r.after));
}

void run_single(const Sharded& t, const Step& s, const StridedView& in, const StridedView& out) {
  const mesh::Mesh& mesh = *t.mesh;
  const auto m = static_cast<size_t>(s.mesh_dim);
  StepRun r{t,
            s,
            *mesh.group(1u << m),
            mesh.shape()[m],
            mesh.coords()[m],
            mesh.box_of(mesh.position(), t.global, s.before),
            mesh.box_of(mesh.position(), t.global, s.after),
            dtype_size(t.dtype)};
  switch (s.kind) {
    case StepKind::allgather: return run_allgather(r, in, out);
    case StepKind::allreduce: return run_allreduce(r, in, out);
    case StepKind::reduce_scatter: return run_reduce_scatter(r, in, out);
    case StepKind::alltoall: return run_alltoall(r, in, out);
    case StepKind::local: return run_local(r, in, out);
    case StepKind::exchange: break;
  }
  fail(Status::internal, "redistribute: step %s is not a single-dim step", step_name(s.kind));
}

// Exchange: post every send and receive of this rank at once, copy self-transfers directly.
void run_exchange(const Sharded& src, const Sharded& dst, const Step& s, const StridedView* in,
                  const StridedView* out) {
  const mesh::Mesh& A = *src.mesh;
  const mesh::Mesh& B = *dst.mesh;
  const bool same = &A == &B;
  Comm& comm = same ? *A.whole() : *A.parent();
  auto rank_in_a = [&](int p) { return same ? p : A.parent_rank(p); };
  auto rank_in_b = [&](int q) { return same ? q : B.parent_rank(q); };
  const size_t elem = dtype_size(src.dtype);
  const int me_a = A.position();
  const int me_b = B.position();
  const Box mine_before = me_a >= 0 ? A.box_of(me_a, src.global, s.before) : Box{};
  const Box mine_after = me_b >= 0 ? B.box_of(me_b, dst.global, s.after) : Box{};

  const std::vector<Transfer> routes = route_exchange(src, s.before, dst, s.after);
  // One buffer per message; an operation points at its buffer's heap block, which growing the
  // outer vector moves along without changing.
  std::vector<std::vector<char>> buffers;
  std::vector<std::pair<const Transfer*, size_t>> receives;  // (route, buffer index)
  OwnedOps ops;
  try {
    for (const Transfer& t : routes) {
      const bool i_send = t.src_pos == me_a;
      const bool i_recv = t.dst_pos == me_b;
      if (!i_send && !i_recv) continue;
      if (i_send && i_recv) {  // both ends in this process: a copy
        kernels::strided_copy(box_view(*out, mine_after, t.box), box_view(*in, mine_before, t.box));
        continue;
      }
      const size_t bytes = static_cast<size_t>(t.box.numel()) * elem;
      buffers.emplace_back(bytes);
      char* buf = buffers.back().data();
      auto op = std::make_unique<transport::Op>();
      if (i_send) {
        kernels::strided_copy(contiguous_at(buf, elem, t.box), box_view(*in, mine_before, t.box));
        post_user_p2p(comm, *op, true, rank_in_b(t.dst_pos), buf, bytes);
      } else {
        post_user_p2p(comm, *op, false, rank_in_a(t.src_pos), buf, bytes);
        receives.emplace_back(&t, buffers.size() - 1);
      }
      ops.push_back(std::move(op));
    }
    wait_owned(comm, ops, "redistribute");
  } catch (...) {
    bury_unfinished(comm, ops);
    throw;
  }
  for (const auto& [t, bi] : receives) {
    kernels::strided_copy(box_view(*out, mine_after, t->box), contiguous_at(buffers[bi].data(), elem, t->box));
  }
}

}  // namespace

void redistribute(const Sharded& src, const Sharded& dst, const Plan& plan) {
  const size_t elem = dtype_size(src.dtype);
  const bool a_member = src.mesh->member();
  const bool b_member = dst.mesh->member();
  // The data as it moves: src's view first, then weft's buffers, the last step writing dst's.
  std::unique_ptr<Piece> held;
  StridedView cur = src.local;
  if (plan.steps.empty()) {
    if (b_member) kernels::strided_copy(dst.local, src.local);
    return;
  }
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    const bool last = i + 1 == plan.steps.size();
    const Sharded& side = s.on_dst_mesh ? dst : src;
    if (s.kind == StepKind::exchange) {
      std::unique_ptr<Piece> next;
      StridedView out{};
      if (b_member) {
        if (last) {
          out = dst.local;
        } else {
          next = temp_piece(dst.mesh->box_of(dst.mesh->position(), dst.global, s.after), elem);
          out = next->view;
        }
      }
      run_exchange(src, dst, s, a_member ? &cur : nullptr, b_member ? &out : nullptr);
      cur = out;
      held = std::move(next);
      continue;
    }
    if (!side.mesh->member()) continue;
    std::unique_ptr<Piece> next;
    StridedView out;
    if (last) {
      out = dst.local;
    } else {
      next = temp_piece(side.mesh->box_of(side.mesh->position(), side.global, s.after), elem);
      out = next->view;
    }
    run_single(side, s, cur, out);
    cur = out;
    held = std::move(next);
  }
}

void redistribute(const Sharded& src, const Sharded& dst) { redistribute(src, dst, make_plan(src, dst)); }

}  // namespace weft::shard
