#include "core/sharding/redistribute.h"

#include <vector>

#include "core/sharding/exchange.h"
#include "core/sharding/host_backend.h"

namespace weft::shard {
namespace {

using kernels::StridedView;

StridedView contiguous_at(void* base, size_t elem, const Box& box) {
  return StridedView::contiguous(base, elem, static_cast<int>(box.shape.size()), box.shape.data());
}

// The part `part` of a view that holds `whole`.
StridedView box_view(const StridedView& v, const Box& whole, const Box& part) {
  int64_t rel[kernels::kMaxViewDims] = {};
  for (size_t d = 0; d < whole.shape.size(); ++d) rel[d] = part.offset[d] - whole.offset[d];
  return v.sub(rel, part.shape.data());
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

// One single-dim step being run: the mesh dim's group and this rank's boxes before and after.
struct StepRun {
  Backend& b;
  const Sharded& t;
  const Step& s;
  const std::shared_ptr<Comm>& group;
  int k;
  int c;
  Box before;
  Box after;
  size_t elem;

  // A contiguous buffer holding the pieces of `whole` (in view v) split along d, in order: v
  // itself when it already is one, else a packed copy.
  const char* packed(const StridedView& v, const Box& whole, int d, int parts) const {
    if (kernels::is_contiguous(v) && (parts == 1 || slabs(whole, d))) return v.base;
    char* buf = b.temp(static_cast<size_t>(whole.numel()) * elem);
    size_t at = 0;
    for (int j = 0; j < parts; ++j) {
      const Box piece = split_box(whole, d, parts, j);
      b.copy(contiguous_at(buf + at, elem, piece), box_view(v, whole, piece));
      at += static_cast<size_t>(piece.numel()) * elem;
    }
    return buf;
  }
  // Writes a buffer of pieces (as packed() lays them out) into `out`, which holds `whole`.
  void unpack(const char* buf, const StridedView& out, const Box& whole, int d, int parts) const {
    size_t at = 0;
    for (int j = 0; j < parts; ++j) {
      const Box piece = split_box(whole, d, parts, j);
      b.copy(box_view(out, whole, piece), contiguous_at(const_cast<char*>(buf) + at, elem, piece));
      at += static_cast<size_t>(piece.numel()) * elem;
    }
  }
  // Where a collective writes a result for `out` (holding box): out itself when contiguous.
  char* landing(const StridedView& out, const Box& box, bool direct) const {
    return direct ? out.base : b.temp(static_cast<size_t>(box.numel()) * elem);
  }
};

void run_allgather(const StepRun& r, const StridedView& in, const StridedView& out) {
  const int d = r.s.from.dim;
  std::vector<size_t> counts, displs;
  counts_of(r.after, d, r.k, counts, displs);
  const char* send = r.packed(in, r.before, d, 1);
  const bool direct = kernels::is_contiguous(out) && slabs(r.after, d);
  char* recv = r.landing(out, r.after, direct);
  // Every member holds a piece of the same joined extent: when it divides evenly, all pieces are
  // equal on every member alike, and the plain all-gather serves.
  if (r.after.shape[static_cast<size_t>(d)] % r.k == 0) {
    r.b.allgather(r.group, send, recv, counts[0], r.t.dtype);
  } else {
    r.b.allgatherv(r.group, send, counts[static_cast<size_t>(r.c)], recv, counts, displs, r.t.dtype);
  }
  if (!direct) r.unpack(recv, out, r.after, d, r.k);
}

void run_allreduce(const StepRun& r, const StridedView& in, const StridedView& out) {
  const size_t n = static_cast<size_t>(r.before.numel());
  const bool direct = kernels::is_contiguous(out);
  char* recv = r.landing(out, r.before, direct);
  if (kernels::is_contiguous(in)) {
    r.b.allreduce(r.group, in.base, recv, n, r.t.dtype, r.s.from.op);
  } else {
    r.b.copy(contiguous_at(recv, r.elem, r.before), in);
    r.b.allreduce(r.group, recv, recv, n, r.t.dtype, r.s.from.op);
  }
  if (!direct) r.b.copy(out, contiguous_at(recv, r.elem, r.before));
}

void run_reduce_scatter(const StepRun& r, const StridedView& in, const StridedView& out) {
  const int d = r.s.to.dim;
  std::vector<size_t> counts, displs;
  counts_of(r.before, d, r.k, counts, displs);
  const char* send = r.packed(in, r.before, d, r.k);
  const bool direct = kernels::is_contiguous(out);
  char* recv = r.landing(out, r.after, direct);
  bool even = true;
  for (size_t x : counts) even = even && x == counts[0];
  if (even) {
    r.b.reduce_scatter(r.group, send, recv, counts[0], r.t.dtype, r.s.from.op);
  } else {
    // Uneven parts: one reduce per part, rooted at its owner, so no rank sends padding.
    for (int j = 0; j < r.k; ++j) {
      const auto ju = static_cast<size_t>(j);
      r.b.reduce(r.group, send + displs[ju] * r.elem, j == r.c ? recv : nullptr, counts[ju], r.t.dtype, r.s.from.op,
                 j);
    }
  }
  if (!direct) r.b.copy(out, contiguous_at(recv, r.elem, r.after));
}

void run_alltoall(const StepRun& r, const StridedView& in, const StridedView& out) {
  const int a = r.s.from.dim;
  const int b = r.s.to.dim;
  std::vector<size_t> sc, sd, rc, rd;
  counts_of(r.before, b, r.k, sc, sd);
  counts_of(r.after, a, r.k, rc, rd);
  const bool direct = kernels::is_contiguous(out) && slabs(r.after, a);
  char* recv = r.landing(out, r.after, direct);
  // The joined extents of a (after) and b (before) are the same on every member of the group:
  // when both divide evenly every block is equal everywhere, and the plain all-to-all serves,
  // reading strided blocks in place where the backend can.
  if (r.after.shape[static_cast<size_t>(a)] % r.k == 0 && r.before.shape[static_cast<size_t>(b)] % r.k == 0) {
    if (kernels::is_contiguous(in) && slabs(r.before, b)) {
      r.b.alltoall(r.group, in.base, recv, sc[0], r.t.dtype);
    } else {
      std::vector<StridedView> blocks;
      for (int j = 0; j < r.k; ++j) blocks.push_back(box_view(in, r.before, split_box(r.before, b, r.k, j)));
      r.b.alltoall_views(r.group, blocks.data(), recv, sc[0], r.t.dtype);
    }
  } else {
    r.b.alltoallv(r.group, r.packed(in, r.before, b, r.k), sc, sd, recv, rc, rd, r.t.dtype);
  }
  if (!direct) r.unpack(recv, out, r.after, a, r.k);
}

// R -> S (a slice) and R -> P (the value, or zeros off coordinate 0 for SUM).
void run_local(const StepRun& r, const StridedView& in, const StridedView& out) {
  if (r.s.to.is_partial() && r.s.to.op == ReduceOp::sum && r.c != 0) return r.b.zero(out);
  r.b.copy(out, box_view(in, r.before, r.after));
}

void run_single(Backend& b, const Sharded& t, const Step& s, const StridedView& in, const StridedView& out) {
  const mesh::Mesh& mesh = *t.mesh;
  const auto m = static_cast<size_t>(s.mesh_dim);
  const StepRun r{b,
                  t,
                  s,
                  mesh.group(1u << m),
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

// Exchange: every send and receive of this rank posted at once; transfers within this process
// are copies. `in` is NULL off the source mesh, `out` off the destination mesh.
void run_exchange(Backend& b, const Sharded& src, const Sharded& dst, const Step& s, const StridedView* in,
                  const StridedView* out) {
  const mesh::Mesh& A = *src.mesh;
  const mesh::Mesh& B = *dst.mesh;
  const bool same = &A == &B;
  const std::shared_ptr<Comm>& comm = same ? A.whole() : A.parent();
  auto rank_in_a = [&](int p) { return same ? p : A.parent_rank(p); };
  auto rank_in_b = [&](int q) { return same ? q : B.parent_rank(q); };
  const size_t elem = dtype_size(src.dtype);
  const int me_a = A.position();
  const int me_b = B.position();
  const Box mine_before = me_a >= 0 ? A.box_of(me_a, src.global, s.before) : Box{};
  const Box mine_after = me_b >= 0 ? B.box_of(me_b, dst.global, s.after) : Box{};

  std::vector<Backend::Message> messages;
  std::vector<std::pair<const Transfer*, char*>> receives;
  const std::vector<Transfer> routes = route_exchange(src, s.before, dst, s.after);
  for (const Transfer& t : routes) {
    const bool i_send = t.src_pos == me_a;
    const bool i_recv = t.dst_pos == me_b;
    if (!i_send && !i_recv) continue;
    if (i_send && i_recv) {  // both ends in this process
      b.copy(box_view(*out, mine_after, t.box), box_view(*in, mine_before, t.box));
      continue;
    }
    const size_t bytes = static_cast<size_t>(t.box.numel()) * elem;
    char* buf = b.temp(bytes);
    if (i_send) {
      b.copy(contiguous_at(buf, elem, t.box), box_view(*in, mine_before, t.box));
      messages.push_back({true, buf, bytes, rank_in_b(t.dst_pos)});
    } else {
      messages.push_back({false, buf, bytes, rank_in_a(t.src_pos)});
      receives.emplace_back(&t, buf);
    }
  }
  b.exchange(comm, messages);
  for (const auto& [t, buf] : receives) b.copy(box_view(*out, mine_after, t->box), contiguous_at(buf, elem, t->box));
}

}  // namespace

void redistribute(const Sharded& src, const Sharded& dst, const Plan& plan, Backend& backend) {
  const size_t elem = dtype_size(src.dtype);
  const bool a_member = src.mesh->member();
  const bool b_member = dst.mesh->member();
  if (plan.steps.empty()) {
    if (b_member) backend.copy(dst.local, src.local);
    return;
  }
  // The data as it moves: src's view first, then backend buffers, the last step writing dst's.
  StridedView cur = src.local;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    const bool last = i + 1 == plan.steps.size();
    const bool exchange = s.kind == StepKind::exchange;
    const Sharded& side = exchange || s.on_dst_mesh ? dst : src;
    if (!side.mesh->member() && !exchange) continue;
    StridedView out{};
    if (side.mesh->member()) {
      const Box box = side.mesh->box_of(side.mesh->position(), side.global, s.after);
      out = last ? dst.local : contiguous_at(backend.temp(static_cast<size_t>(box.numel()) * elem), elem, box);
    }
    if (exchange) {
      run_exchange(backend, src, dst, s, a_member ? &cur : nullptr, b_member ? &out : nullptr);
    } else {
      run_single(backend, side, s, cur, out);
    }
    cur = out;
  }
}

void redistribute(const Sharded& src, const Sharded& dst) {
  HostBackend host;
  redistribute(src, dst, make_plan(src, dst), host);
}

}  // namespace weft::shard
