#include "plan_check.h"

#include <algorithm>
#include <cstdio>

#include "mp_common.h"

namespace mpt {

const char* step_kind_name(int kind) {
  switch (kind) {
    case WEFT_STEP_LOCAL: return "LOCAL";
    case WEFT_STEP_ALLGATHER: return "ALLGATHER";
    case WEFT_STEP_ALLREDUCE: return "ALLREDUCE";
    case WEFT_STEP_REDUCE_SCATTER: return "REDUCE_SCATTER";
    case WEFT_STEP_ALLTOALL: return "ALLTOALL";
    case WEFT_STEP_EXCHANGE: return "EXCHANGE";
  }
  return "bad-kind";
}

namespace {

std::string plan_text(const std::vector<weft_redistribute_step_t>& steps) {
  std::string s;
  for (const auto& st : steps) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s%s(dim %d, %s->%s, sent %llu, max %llu)", s.empty() ? "" : " ",
                  step_kind_name(st.kind), st.mesh_dim, shard::placement_name(st.from).c_str(),
                  shard::placement_name(st.to).c_str(), static_cast<unsigned long long>(st.bytes_sent),
                  static_cast<unsigned long long>(st.max_bytes_sent));
    s += buf;
  }
  return s.empty() ? "(no steps)" : s;
}

// The communicating step a change of one mesh dim from a to b must run (LOCAL = none).
int expected_kind(const weft_placement_t& a, const weft_placement_t& b) {
  if (a.kind == WEFT_REPLICATE) return WEFT_STEP_LOCAL;
  if (a.kind == WEFT_SHARD) {
    if (b.kind == WEFT_SHARD) return WEFT_STEP_ALLTOALL;
    return WEFT_STEP_ALLGATHER;  // to REPLICATE, or to PARTIAL through REPLICATE
  }
  if (b.kind == WEFT_SHARD) return WEFT_STEP_REDUCE_SCATTER;
  return WEFT_STEP_ALLREDUCE;  // to REPLICATE, or to another PARTIAL through REPLICATE
}

}  // namespace

std::string check_plan(const PlanInput& in, weft_sharded_t src, weft_sharded_t dst) {
  std::string problems;
  auto bad = [&](const std::string& s) { problems += (problems.empty() ? "" : "; ") + s; };

  size_t n = 0;
  weft_status_t s = weft_redistribute_plan(src, dst, nullptr, 0, &n);
  if (s != WEFT_OK) return std::string("weft_redistribute_plan(count) returned ") + status_name(s) + ": " + last_error();
  std::vector<weft_redistribute_step_t> steps(n + 1);
  size_t n2 = 0;
  s = weft_redistribute_plan(src, dst, steps.data(), steps.size(), &n2);
  if (s != WEFT_OK) return std::string("weft_redistribute_plan returned ") + status_name(s) + ": " + last_error();
  if (n2 != n) bad("the count query said " + std::to_string(n) + " steps, the full call " + std::to_string(n2));
  steps.resize(std::min(n, n2));
  if (n >= 2) {
    // A short capacity writes the first `capacity` steps and still reports the total.
    std::vector<weft_redistribute_step_t> head(n - 1);
    size_t n3 = 0;
    s = weft_redistribute_plan(src, dst, head.data(), head.size(), &n3);
    if (s != WEFT_OK || n3 != n) {
      bad("capacity " + std::to_string(n - 1) + ": returned " + status_name(s) + ", nsteps " + std::to_string(n3));
    } else {
      for (size_t i = 0; i < head.size(); ++i)
        if (head[i].kind != steps[i].kind || head[i].mesh_dim != steps[i].mesh_dim ||
            head[i].bytes_sent != steps[i].bytes_sent)
          bad("capacity " + std::to_string(n - 1) + ": step " + std::to_string(i) + " differs from the full plan");
    }
  }

  int comm_steps = 0;
  for (const auto& st : steps) {
    if (st.kind < WEFT_STEP_LOCAL || st.kind > WEFT_STEP_EXCHANGE) bad("a step of kind " + std::to_string(st.kind));
    if (st.kind == WEFT_STEP_LOCAL && st.bytes_sent != 0) bad("a LOCAL step sends bytes");
    if (st.bytes_sent > st.max_bytes_sent) bad("bytes_sent > max_bytes_sent");
    if (st.kind == WEFT_STEP_EXCHANGE && st.mesh_dim != -1) bad("an EXCHANGE step with mesh_dim != -1");
    if (st.kind != WEFT_STEP_LOCAL) ++comm_steps;
  }
  const std::string text = plan_text(steps);
  const bool empty = shard::numel(*in.global) == 0;

  if (!in.same_mesh) {
    bool partial = false;
    for (const auto& p : *in.src) partial |= p.kind == WEFT_PARTIAL;
    int exchange = 0;
    for (const auto& st : steps) {
      exchange += st.kind == WEFT_STEP_EXCHANGE;
      if (!partial && st.kind != WEFT_STEP_LOCAL && st.kind != WEFT_STEP_EXCHANGE)
        bad(std::string("between meshes, a ") + step_kind_name(st.kind) + " step without a PARTIAL source");
    }
    if (!exchange && !empty) bad("between meshes, no EXCHANGE step");
    return problems.empty() ? "" : problems + " | plan: " + text;
  }

  std::vector<int> changed;
  for (size_t m = 0; m < in.src->size(); ++m)
    if (!shard::same_placement((*in.src)[m], (*in.dst)[m])) changed.push_back(static_cast<int>(m));
  if (changed.empty()) {
    if (comm_steps) bad("an unchanged layout communicates");
    return problems.empty() ? "" : problems + " | plan: " + text;
  }
  if (changed.size() != 1 || empty) return problems.empty() ? "" : problems + " | plan: " + text;

  const int m = changed[0];
  if (in.src_mesh->shape[m] == 1) return problems.empty() ? "" : problems + " | plan: " + text;
  const weft_placement_t& a = (*in.src)[m];
  const weft_placement_t& b = (*in.dst)[m];
  // A mesh dim right of m that shards the same tensor dim splits m's chunk (nesting): changing
  // m changes that dim's boxes too, a move no single-dim step makes (mesh.h: exchanged).
  for (size_t k = m + 1; k < in.src->size(); ++k) {
    const weft_placement_t& p = (*in.src)[k];
    if (p.kind == WEFT_SHARD && ((a.kind == WEFT_SHARD && a.dim == p.dim) || (b.kind == WEFT_SHARD && b.dim == p.dim)))
      return problems.empty() ? "" : problems + " | plan: " + text;
  }
  const int want = expected_kind(a, b);
  if (want == WEFT_STEP_LOCAL) {
    if (comm_steps) bad(shard::placement_name(a) + "->" + shard::placement_name(b) + " must not communicate");
    return problems.empty() ? "" : problems + " | plan: " + text;
  }
  if (comm_steps != 1) {
    bad("expected exactly one communicating step (" + std::string(step_kind_name(want)) + " on mesh dim " +
        std::to_string(m) + "), got " + std::to_string(comm_steps));
    return problems + " | plan: " + text;
  }
  for (const auto& st : steps) {
    if (st.kind == WEFT_STEP_LOCAL) continue;
    if (st.kind != want) bad(std::string("expected ") + step_kind_name(want) + ", got " + step_kind_name(st.kind));
    if (st.mesh_dim != m) bad("the step is on mesh dim " + std::to_string(st.mesh_dim) + ", not " + std::to_string(m));
    if (!shard::same_placement(st.from, a)) bad("step.from is " + shard::placement_name(st.from));
    const bool via_r = (a.kind == WEFT_SHARD && b.kind == WEFT_PARTIAL) || (a.kind == WEFT_PARTIAL && b.kind == WEFT_PARTIAL);
    if (!via_r && !shard::same_placement(st.to, b)) bad("step.to is " + shard::placement_name(st.to));
    if (via_r && st.to.kind != WEFT_REPLICATE && !shard::same_placement(st.to, b))
      bad("step.to is " + shard::placement_name(st.to));
    if (st.kind == WEFT_STEP_ALLGATHER || st.kind == WEFT_STEP_REDUCE_SCATTER || st.kind == WEFT_STEP_ALLTOALL) {
      if (via_r) continue;  // the gathered box is what REPLICATE holds: checked by the S->R cases
      const uint64_t mine = shard::single_dim_bytes(*in.src_mesh, *in.src, *in.dst, *in.global, in.dt, m, in.my_src_rank);
      uint64_t most = 0;
      for (int r = 0; r < in.src_mesh->size(); ++r)
        most = std::max(most, shard::single_dim_bytes(*in.src_mesh, *in.src, *in.dst, *in.global, in.dt, m, r));
      if (st.bytes_sent != mine) bad("bytes_sent " + std::to_string(st.bytes_sent) + ", reference " + std::to_string(mine));
      if (st.max_bytes_sent != most)
        bad("max_bytes_sent " + std::to_string(st.max_bytes_sent) + ", reference " + std::to_string(most));
    }
  }
  return problems.empty() ? "" : problems + " | plan: " + text;
}

}  // namespace mpt
