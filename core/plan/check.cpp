// checked(): every field of a description the planner reads, judged before any arithmetic, so
// that a bad number is an error naming its field rather than a NaN in a table.
#include <cmath>
#include <map>
#include <utility>

#include "core/common/status.h"
#include "core/plan/plan.h"

namespace weft::plan {

namespace {

// Beyond these the search would run for hours: they are typos, not machines or models.
constexpr long long kMaxRanks = 1 << 20;
constexpr long long kMaxLayerCopies = 1 << 16;
constexpr int kMaxAllreduces = 64;  // per layer and direction

void finite(double v, const std::string& field) {
  if (!std::isfinite(v) || v < 0) fail(Status::invalid_argument, "%s = %g; expected a finite value >= 0", field.c_str(), v);
}

void positive(double v, const std::string& field) {
  if (!std::isfinite(v) || v <= 0) fail(Status::invalid_argument, "%s = %g; expected a finite value > 0", field.c_str(), v);
}

std::string at(const char* what, size_t i, const char* field) {
  return std::string(what).append("[").append(std::to_string(i)).append("].").append(field);
}

}  // namespace

Options checked(Options o) {
  const Cluster& c = o.cluster;
  if (c.hosts < 1) fail(Status::invalid_argument, "cluster.hosts = %d; expected >= 1", c.hosts);
  if (c.ranks_per_host < 1) fail(Status::invalid_argument, "cluster.ranks_per_host = %d; expected >= 1", c.ranks_per_host);
  const long long all = static_cast<long long>(c.hosts) * c.ranks_per_host;
  if (all > kMaxRanks) fail(Status::invalid_argument, "cluster: %lld ranks; expected at most %lld", all, kMaxRanks);
  positive(c.memory, "cluster.memory_per_rank");
  finite(c.flops, "cluster.flops_per_rank");
  positive(c.intra_bandwidth, "cluster.intra_bandwidth");
  finite(c.intra_latency, "cluster.intra_latency");
  finite(c.inter_latency, "cluster.inter_latency");
  if (c.hosts > 1) positive(c.inter_bandwidth, "cluster.inter_bandwidth (hosts > 1)");
  else finite(c.inter_bandwidth, "cluster.inter_bandwidth");
  if (o.cluster.inter_bandwidth == 0) o.cluster.inter_bandwidth = c.intra_bandwidth;  // one host: never used
  // (kind, ranks) -> the entry that gave it: a description may list many measurements, and a
  // pairwise scan for repeats would be quadratic in them.
  std::map<std::pair<int, int>, size_t> first_entry;
  for (size_t i = 0; i < c.intra_collectives.size(); ++i) {
    const MeasuredCollective& m = c.intra_collectives[i];
    if (m.kind != Collective::allreduce && m.kind != Collective::alltoall) {
      fail(Status::invalid_argument, "%s = %d; expected WEFT_PLAN_ALLREDUCE or WEFT_PLAN_ALLTOALL",
           at("cluster.intra_collectives", i, "kind").c_str(), static_cast<int>(m.kind));
    }
    if (m.ranks < 2 || m.ranks > c.ranks_per_host) {
      fail(Status::invalid_argument, "%s = %d; expected 2..ranks_per_host (%d)",
           at("cluster.intra_collectives", i, "ranks").c_str(), m.ranks, c.ranks_per_host);
    }
    finite(m.seconds, at("cluster.intra_collectives", i, "seconds"));
    auto [seen, fresh] = first_entry.emplace(std::make_pair(static_cast<int>(m.kind), m.ranks), i);
    if (!fresh) {
      fail(Status::invalid_argument, "%s: kind %d over %d ranks again (entry %zu has it); expected each once",
           at("cluster.intra_collectives", i, "ranks").c_str(), static_cast<int>(m.kind), m.ranks, seen->second);
    }
  }

  if (o.layers.empty()) fail(Status::invalid_argument, "layers: none; expected at least one layer");
  long long copies = 0;
  for (size_t i = 0; i < o.layers.size(); ++i) {
    Layer& l = o.layers[i];
    if (l.name.empty()) l.name = "layer" + std::to_string(i);
    if (l.count < 1) fail(Status::invalid_argument, "%s = %d; expected >= 1", at("layers", i, "count").c_str(), l.count);
    copies += l.count;
    if (copies > kMaxLayerCopies) {
      fail(Status::invalid_argument, "layers: more than %lld layer copies in all; expected fewer", kMaxLayerCopies);
    }
    if (l.experts < 0) fail(Status::invalid_argument, "%s = %d; expected >= 0", at("layers", i, "experts").c_str(), l.experts);
    if (l.experts > 0 && (l.top_k < 1 || l.top_k > l.experts)) {
      fail(Status::invalid_argument, "%s = %d; expected 1..experts (%d)", at("layers", i, "top_k").c_str(), l.top_k,
           l.experts);
    }
    finite(l.params, at("layers", i, "params"));
    finite(l.forward_flops, at("layers", i, "forward_flops"));
    finite(l.forward_seconds, at("layers", i, "forward_seconds"));
    finite(l.backward_seconds, at("layers", i, "backward_seconds"));
    finite(l.activation_bytes, at("layers", i, "activation_bytes"));
    finite(l.output_bytes, at("layers", i, "output_bytes"));
    finite(l.context_bytes, at("layers", i, "context_bytes"));
    finite(l.tp_replicated, at("layers", i, "tp_replicated"));
    if (l.tp_replicated > 1) {
      fail(Status::invalid_argument, "%s = %g; expected a share 0..1", at("layers", i, "tp_replicated").c_str(),
           l.tp_replicated);
    }
    if (l.tp_allreduces < 0 || l.tp_allreduces > kMaxAllreduces) {
      fail(Status::invalid_argument, "%s = %d; expected 0 (= 2) .. %d", at("layers", i, "tp_allreduces").c_str(),
           l.tp_allreduces, kMaxAllreduces);
    }
    finite(l.shared_params, at("layers", i, "shared_params"));
    if (l.shared_params > 0 && (l.experts == 0 || l.shared_params > l.params)) {
      fail(Status::invalid_argument, "%s = %g; expected 0..params (%g) of an MoE layer (experts > 0; it has %d)",
           at("layers", i, "shared_params").c_str(), l.shared_params, l.params, l.experts);
    }
    if (l.forward_seconds == 0 && l.forward_flops > 0 && !(c.flops > 0)) {
      fail(Status::invalid_argument, "%s = %g without forward_seconds needs cluster.flops_per_rank > 0 (it is %g)",
           at("layers", i, "forward_flops").c_str(), l.forward_flops, c.flops);
    }
  }

  if (o.global_batch < 1) fail(Status::invalid_argument, "global_batch = %d; expected >= 1", o.global_batch);
  if (o.ranks < 0 || o.ranks > all) {
    fail(Status::invalid_argument, "ranks = %d; expected 0 (all) .. hosts x ranks_per_host = %lld", o.ranks, all);
  }
  if (o.ranks == 0) o.ranks = static_cast<int>(all);
  finite(o.weight_bytes, "weight_bytes");
  finite(o.grad_bytes, "grad_bytes");
  finite(o.optimizer_bytes, "optimizer_bytes");
  finite(o.grad_allreduce_bytes, "grad_allreduce_bytes");
  finite(o.microbatch_overhead, "microbatch_overhead");
  if (o.top < 0) fail(Status::invalid_argument, "top = %d; expected >= 0 (0 = 10)", o.top);
  if (o.top == 0) o.top = 10;
  if (o.max_pp < 0 || o.max_tp < 0 || o.max_cp < 0 || o.max_microbatches < 0) {
    fail(Status::invalid_argument, "max_pp %d, max_tp %d, max_cp %d, max_microbatches %d; expected >= 0 (0 = no limit)",
         o.max_pp, o.max_tp, o.max_cp, o.max_microbatches);
  }
  for (size_t k = 0; k < o.kinds.size(); ++k) {
    const int v = static_cast<int>(o.kinds[k]);
    if (v < 0 || v >= pipeline::kNumMethods) {
      fail(Status::invalid_argument, "kinds[%zu] = %d; expected a built-in generator, 0..%d", k, v,
           pipeline::kNumMethods - 1);
    }
  }

  if (!o.fixed) return o;
  const Layout& x = o.layout;
  if (x.dp < 1 || x.tp < 1 || x.pp < 1 || x.ep < 1 || x.cp < 1) {
    fail(Status::invalid_argument, "layout: dp %d, tp %d, pp %d, ep %d, cp %d; expected each >= 1", x.dp, x.tp, x.pp,
         x.ep, x.cp);
  }
  if (static_cast<long long>(x.dp) * x.tp * x.pp * x.cp != o.ranks) {
    fail(Status::invalid_argument, "layout: dp %d x tp %d x pp %d x cp %d = %lld; expected the %d ranks planned for",
         x.dp, x.tp, x.pp, x.cp, static_cast<long long>(x.dp) * x.tp * x.pp * x.cp, o.ranks);
  }
  if (o.global_batch % x.dp) {
    fail(Status::invalid_argument, "layout: dp %d does not divide global_batch %d", x.dp, o.global_batch);
  }
  if ((x.dp * x.tp) % x.ep) fail(Status::invalid_argument, "layout: ep %d does not divide dp x tp = %d", x.ep, x.dp * x.tp);
  for (size_t i = 0; i < o.layers.size(); ++i) {
    const Layer& l = o.layers[i];
    if (x.ep > 1 && l.experts > 0 && l.experts % x.ep) {
      fail(Status::invalid_argument, "layout: ep %d does not divide the %d experts of layers[%zu] (%s)", x.ep,
           l.experts, i, l.name.c_str());
    }
  }
  if (x.pp > copies) fail(Status::invalid_argument, "layout: pp %d exceeds the model's %lld layers", x.pp, copies);
  if (x.zero < 0 || x.zero > 3) fail(Status::invalid_argument, "layout: zero_stage %d; expected 0..3", x.zero);
  const int sched = static_cast<int>(x.schedule);
  if (sched < -1 || sched >= pipeline::kNumMethods) {
    fail(Status::invalid_argument, "layout: schedule %d; expected WEFT_SCHEDULE_CUSTOM (any) or 0..%d", sched,
         pipeline::kNumMethods - 1);
  }
  const int batch = o.global_batch / x.dp;
  if (x.microbatches < 0 || (x.microbatches > 0 && batch % x.microbatches)) {
    fail(Status::invalid_argument, "layout: microbatches %d; expected 0 (any) or a divisor of the replica's batch %d",
         x.microbatches, batch);
  }
  if (x.stages_per_rank < 0) {
    fail(Status::invalid_argument, "layout: stages_per_rank %d; expected >= 0 (0 = any)", x.stages_per_rank);
  }
  return o;
}

}  // namespace weft::plan
