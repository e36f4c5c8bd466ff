#include "core/sharding/plan.h"

#include <algorithm>
#include <numeric>

#include "core/sharding/exchange.h"

namespace weft::shard {
namespace {

// Tensor dim d is split by mesh dim m last (no mesh dim to its right also shards d): then the
// members along m hold consecutive chunks of one box, which a single collective can join.
bool innermost(const Layout& L, int m, int d) {
  if (!(L[static_cast<size_t>(m)].is_shard() && L[static_cast<size_t>(m)].dim == d)) return false;
  for (size_t m2 = static_cast<size_t>(m) + 1; m2 < L.size(); ++m2) {
    if (L[m2].is_shard() && L[m2].dim == d) return false;
  }
  return true;
}

Placement replicate() { return Placement{}; }

// One single-dim step from `from` to `to` on mesh dim m of layout L, if a single collective or
// local operation can make it there; kind is set, before/after filled.
bool single_step(const Layout& L, int m, const Placement& to, Step& s) {
  const Placement& from = L[static_cast<size_t>(m)];
  Layout after = L;
  after[static_cast<size_t>(m)] = to;
  s.mesh_dim = m;
  s.from = from;
  s.to = to;
  s.before = L;
  s.after = after;
  switch (from.kind) {
    case Kind::replicate:
      s.kind = StepKind::local;
      return !to.is_shard() || innermost(after, m, to.dim);
    case Kind::shard:
      if (to.kind == Kind::replicate) {
        s.kind = StepKind::allgather;
        return innermost(L, m, from.dim);
      }
      if (to.is_shard()) {
        s.kind = StepKind::alltoall;
        return innermost(L, m, from.dim) && innermost(after, m, to.dim);
      }
      return false;  // S -> P goes through R
    case Kind::partial:
      if (to.kind == Kind::replicate) {
        s.kind = StepKind::allreduce;
        return true;
      }
      if (to.is_shard()) {
        s.kind = StepKind::reduce_scatter;
        return innermost(after, m, to.dim);
      }
      return false;  // P(a) -> P(b) goes through R
  }
  return false;
}

// The ways to change mesh dim m from its placement in L to `to`: one step, else two through R.
bool dim_steps(Layout& L, int m, const Placement& to, std::vector<Step>& out) {
  Step s;
  if (single_step(L, m, to, s)) {
    out.push_back(s);
    L = s.after;
    return true;
  }
  Step a, b;
  if (!single_step(L, m, replicate(), a)) return false;
  if (!single_step(a.after, m, to, b)) return false;
  out.push_back(a);
  out.push_back(b);
  L = b.after;
  return true;
}

uint64_t bytes_of(const Box& b, size_t elem) { return static_cast<uint64_t>(b.numel()) * elem; }

// The bytes mesh position p sends in a single-dim step (formulas in weft/mesh.h).
uint64_t position_bytes(const mesh::Mesh& mesh, const Shape& global, size_t elem, const Step& s, int p) {
  if (s.kind == StepKind::local || s.kind == StepKind::exchange) return 0;
  const uint64_t k = static_cast<uint64_t>(mesh.shape()[static_cast<size_t>(s.mesh_dim)]);
  const Box before = mesh.box_of(p, global, s.before);
  const Box after = mesh.box_of(p, global, s.after);
  switch (s.kind) {
    case StepKind::allgather: return bytes_of(before, elem) * (k - 1);
    case StepKind::allreduce: return 2 * (k - 1) * bytes_of(before, elem) / k;
    case StepKind::reduce_scatter: return bytes_of(before, elem) - bytes_of(after, elem);
    case StepKind::alltoall: return bytes_of(before, elem) - bytes_of(intersect(before, after), elem);
    default: return 0;
  }
}

// Sets bytes_sent (this rank's) and max_bytes_sent from per-position bytes; returns their sum.
uint64_t set_bytes(Step& s, const mesh::Mesh& mesh, const std::vector<uint64_t>& per_position) {
  s.bytes_sent = mesh.member() ? per_position[static_cast<size_t>(mesh.position())] : 0;
  s.max_bytes_sent = 0;
  uint64_t total = 0;
  for (uint64_t b : per_position) {
    s.max_bytes_sent = std::max(s.max_bytes_sent, b);
    total += b;
  }
  return total;
}

// Fills the byte counts of single-dim steps on `mesh`; returns the bytes all members send.
uint64_t count_steps(std::vector<Step>& steps, const mesh::Mesh& mesh, const Shape& global, size_t elem) {
  uint64_t total = 0;
  for (Step& s : steps) {
    if (s.kind == StepKind::exchange) continue;
    std::vector<uint64_t> per(static_cast<size_t>(mesh.size()));
    for (int p = 0; p < mesh.size(); ++p) per[static_cast<size_t>(p)] = position_bytes(mesh, global, elem, s, p);
    total += set_bytes(s, mesh, per);
  }
  return total;
}

// The best order of single-dim steps on one mesh, or false when no order works.
bool best_single_dim_order(const Sharded& src, const Sharded& dst, std::vector<Step>& best, uint64_t& best_cost) {
  std::vector<int> changed;
  for (size_t m = 0; m < src.layout.size(); ++m) {
    if (!(src.layout[m] == dst.layout[m])) changed.push_back(static_cast<int>(m));
  }
  const size_t elem = dtype_size(src.dtype);
  bool found = false;
  do {
    Layout L = src.layout;
    std::vector<Step> steps;
    bool ok = true;
    for (int m : changed) {
      if (!dim_steps(L, m, dst.layout[static_cast<size_t>(m)], steps)) {
        ok = false;
        break;
      }
    }
    if (!ok) continue;
    const uint64_t cost = count_steps(steps, *src.mesh, src.global, elem);
    if (!found || cost < best_cost) {
      found = true;
      best = std::move(steps);
      best_cost = cost;
    }
  } while (std::next_permutation(changed.begin(), changed.end()));
  return found;
}

// Resolve the source's partial dims (all-reduce), exchange boxes, then make the destination's
// partial dims locally. On one mesh, partial dims equal on both sides stay as they are.
std::vector<Step> exchange_plan(const Sharded& src, const Sharded& dst, bool same_mesh) {
  std::vector<Step> steps;
  Layout L = src.layout;
  for (size_t m = 0; m < L.size(); ++m) {
    const bool kept = same_mesh && L[m].is_partial() && L[m] == dst.layout[m];
    if (!L[m].is_partial() || kept) continue;
    Step s;
    single_step(L, static_cast<int>(m), replicate(), s);
    steps.push_back(s);
    L = s.after;
  }
  Layout target = dst.layout;
  for (size_t m = 0; m < target.size(); ++m) {
    const bool kept = same_mesh && target[m].is_partial() && src.layout[m] == target[m];
    if (target[m].is_partial() && !kept) target[m] = replicate();
  }
  Step x;
  x.kind = StepKind::exchange;
  x.mesh_dim = -1;
  x.before = L;
  x.after = target;
  steps.push_back(x);
  Layout D = target;
  for (size_t m = 0; m < D.size(); ++m) {
    if (D[m] == dst.layout[m]) continue;
    Step s;
    single_step(D, static_cast<int>(m), dst.layout[m], s);  // R -> P: local
    steps.push_back(s);
    D = s.after;
  }
  return steps;
}

}  // namespace

const char* step_name(StepKind k) {
  switch (k) {
    case StepKind::local: return "local";
    case StepKind::allgather: return "allgather";
    case StepKind::allreduce: return "allreduce";
    case StepKind::reduce_scatter: return "reduce_scatter";
    case StepKind::alltoall: return "alltoall";
    case StepKind::exchange: return "exchange";
  }
  return "?";
}

Box split_box(const Box& box, int d, int k, int c) {
  Box b = box;
  const auto dd = static_cast<size_t>(d);
  const Range r = chunk(box.shape[dd], k, c);
  b.offset[dd] += r.begin;
  b.shape[dd] = r.end - r.begin;
  return b;
}

Plan make_plan(const Sharded& src, const Sharded& dst) {
  Plan plan;
  const bool same_mesh = src.mesh == dst.mesh;
  plan.between_meshes = !same_mesh;
  const size_t elem = dtype_size(src.dtype);
  std::vector<Step> best;
  uint64_t best_cost = 0;
  const bool single = same_mesh && best_single_dim_order(src, dst, best, best_cost);

  std::vector<Step> x = exchange_plan(src, dst, same_mesh);
  size_t ex = 0;
  while (x[ex].kind != StepKind::exchange) ++ex;
  std::vector<Step> before(x.begin(), x.begin() + static_cast<long>(ex));
  std::vector<Step> after(x.begin() + static_cast<long>(ex) + 1, x.end());
  uint64_t x_cost = count_steps(before, *src.mesh, src.global, elem);
  count_steps(after, *dst.mesh, dst.global, elem);  // local steps: 0 bytes
  Step& xs = x[ex];
  x_cost += set_bytes(xs, *src.mesh, exchange_bytes(src, dst, route_exchange(src, xs.before, dst, xs.after)));
  // A rank outside the source mesh sends nothing in the exchange.
  if (!src.mesh->member()) xs.bytes_sent = 0;
  for (size_t i = 0; i < before.size(); ++i) x[i] = before[i];
  for (size_t i = 0; i < after.size(); ++i) {
    x[ex + 1 + i] = after[i];
    x[ex + 1 + i].on_dst_mesh = true;
  }
  // Ties go to the collectives: they are tuned per size; the exchange is the general fallback.
  plan.steps = single && best_cost <= x_cost ? std::move(best) : std::move(x);
  return plan;
}

}  // namespace weft::shard
