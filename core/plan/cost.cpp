// The cost model of weft/plan.h, alpha-beta throughout. Collectives inside a layer (TP, EP, CP,
// ZeRO-3 gathers) block its compute, so they are added to the stage's F and B times the
// simulator sees; the data-parallel reduction is priced per stage and added after the pipeline.
#include "core/plan/cost.h"

#include <algorithm>

namespace weft::plan {

Link link_for(const Cluster& c, long long span) {
  if (span <= c.ranks_per_host && c.ranks_per_host % span == 0) {
    return {c.intra_latency, c.intra_bandwidth, c.intra_collectives.empty() ? nullptr : &c.intra_collectives};
  }
  return {c.inter_latency, c.inter_bandwidth, nullptr};
}

namespace {

// A layer's share of its per-sample time on one rank of a tp x cp group: the tp ranks split a
// splittable layer's work, and an MoE layer's tokens, except its tp_replicated share, which each
// runs whole; cp splits the sequence of every layer. A non-splittable dense layer runs whole on
// each tp rank.
double work_share(const Layer& L, int tp, int cp) {
  if (L.experts == 0 && !L.tensor_parallel) return 1.0 / cp;
  return (L.tp_replicated + (1 - L.tp_replicated) / tp) / cp;
}

double ring_steps(Collective kind, int n) { return kind == Collective::allreduce ? 2.0 * (n - 1) : n - 1.0; }

// The consecutive ranks an ep group spans: ep is folded onto the dp x tp ranks (tp innermost),
// so a group of ep <= tp lies within a tp group, a larger one strides over the cp ranks.
long long ep_span(const Layout& x) {
  return x.ep <= x.tp ? x.ep : static_cast<long long>(x.tp) * x.cp * (x.ep / x.tp);
}

}  // namespace

double latency_term(const Link& l, Collective kind, int n, double steps) {
  if (!l.measured) return steps * l.latency;
  // The entry for n; else the largest size below n; else the smallest above it.
  const MeasuredCollective* pick = nullptr;
  auto better = [n](const MeasuredCollective& a, const MeasuredCollective* b) {
    if (!b) return true;
    if ((a.ranks <= n) != (b->ranks <= n)) return a.ranks <= n;
    return a.ranks <= n ? a.ranks > b->ranks : a.ranks < b->ranks;
  };
  for (const MeasuredCollective& m : *l.measured) {
    if (m.kind == kind && better(m, pick)) pick = &m;
  }
  if (!pick) return steps * l.latency;
  return pick->seconds / ring_steps(kind, pick->ranks) * steps;
}

Cost ring_allreduce(int n, double bytes, const Link& l) {
  if (n <= 1 || bytes <= 0) return {};
  const double sent = 2.0 * (n - 1) / n * bytes;
  return {latency_term(l, Collective::allreduce, n, 2.0 * (n - 1)) + sent / l.bandwidth, sent};
}

Cost ring_allgather(int n, double bytes, const Link& l) {
  if (n <= 1 || bytes <= 0) return {};
  const double sent = static_cast<double>(n - 1) / n * bytes;
  return {latency_term(l, Collective::allreduce, n, n - 1.0) + sent / l.bandwidth, sent};
}

Cost reduce_scatter(int n, double bytes, const Link& l) { return ring_allgather(n, bytes, l); }

Cost all_to_all(int n, double bytes_out, const Link& l) {
  if (n <= 1 || bytes_out <= 0) return {};
  const double sent = static_cast<double>(n - 1) / n * bytes_out;
  return {latency_term(l, Collective::alltoall, n, n - 1.0) + sent / l.bandwidth, sent};
}

Pricer::Pricer(const Options& o) : o_(o) {
  for (size_t k = 0; k < o.layers.size(); ++k) copies_.insert(copies_.end(), static_cast<size_t>(o.layers[k].count), static_cast<int>(k));
}

namespace {

// One layer kind under one layout: per sample and per micro-batch.
struct LayerPrice {
  double forward = 0, backward = 0;  // arithmetic, one micro-batch
  Cost comm_f, comm_b;               // collectives, one micro-batch
  double activation = 0;             // bytes kept per micro-batch
  double params = 0;                 // parameters on one rank (an MoE layer's experts' share)
  double shared = 0;                 // an MoE layer's parameters held whole on every rank
  bool expert = false;
};

LayerPrice price_layer(const Layer& L, const Options& o, const Layout& x, int mbs) {
  const Cluster& c = o.cluster;
  LayerPrice p;
  p.expert = L.experts > 0;
  const double f = L.forward_seconds > 0 ? L.forward_seconds : (L.forward_flops > 0 ? L.forward_flops / c.flops : 0);
  const double b = L.backward_seconds > 0 ? L.backward_seconds : 2 * f;
  const double share = work_share(L, x.tp, x.cp);
  p.forward = f * mbs * share;
  p.backward = b * mbs * share;
  const int split = (p.expert || L.tensor_parallel) ? x.tp * x.cp : x.cp;
  p.activation = L.activation_bytes * mbs / split;
  const double out = L.output_bytes * mbs / x.cp;  // one rank's share of the sequence
  if (p.expert) {
    p.params = (L.params - L.shared_params) / x.ep;
    p.shared = L.shared_params;
    if (x.tp > 1) {  // the tp ranks' token shares are gathered back (reduce-scattered in backward)
      p.comm_f += ring_allgather(x.tp, out, link_for(c, x.tp));
      p.comm_b += reduce_scatter(x.tp, out, link_for(c, x.tp));
    }
    if (x.ep > 1) {  // dispatch + combine, forward and backward
      const Cost a2a = all_to_all(x.ep, L.top_k * out / x.tp, link_for(c, ep_span(x)));
      p.comm_f += a2a;
      p.comm_f += a2a;
      p.comm_b += a2a;
      p.comm_b += a2a;
    }
  } else if (L.tensor_parallel) {
    p.params = L.params / x.tp;
    const Cost ar = ring_allreduce(x.tp, out, link_for(c, x.tp));
    const int n = L.tp_allreduces > 0 ? L.tp_allreduces : 2;  // 2: Megatron's block, attention + MLP
    for (int k = 0; k < n; ++k) {
      p.comm_f += ar;
      p.comm_b += ar;
    }
  } else {
    p.params = L.params;
  }
  if (x.cp > 1 && L.context_bytes > 0) {  // the K/V ring: in forward, and their gradients back
    const int heads = (p.expert || L.tensor_parallel) ? x.tp : 1;
    const Cost ring = ring_allgather(x.cp, L.context_bytes * mbs / heads, link_for(c, static_cast<long long>(x.tp) * x.cp));
    p.comm_f += ring;
    p.comm_b += ring;
    p.comm_b += ring;
  }
  return p;
}

// Per-rank bytes of `params` parameters under ZeRO `zero` sharded over n replicas.
double state_bytes(const Options& o, double params, int zero, int n) {
  return params * (o.weight_bytes / (zero >= 3 ? n : 1) + o.grad_bytes / (zero >= 2 ? n : 1) +
                   o.optimizer_bytes / (zero >= 1 ? n : 1));
}

// The step's reduction of one group's gradients (n replicas): the config's wider all-reduce
// first when it has one, then an all-reduce (ZeRO 0) or a reduce-scatter and, for ZeRO 1/2, the
// all-gather of the updated weights.
Cost reduce_gradients(const Options& o, double params, int zero, int n, const Link& l) {
  Cost c = ring_allreduce(n, params * o.grad_allreduce_bytes, l);  // nothing when 0 bytes
  if (zero == 0) {
    c += ring_allreduce(n, params * o.grad_bytes, l);
    return c;
  }
  c += reduce_scatter(n, params * o.grad_bytes, l);
  if (zero < 3) c += ring_allgather(n, params * o.weight_bytes, l);
  return c;
}

}  // namespace

namespace {

// Cuts w into S contiguous non-empty pieces, each of sum <= limit, taking as much as fits into
// each piece while leaving one item for every piece still to come; empty when it cannot.
std::vector<size_t> cut_at(const std::vector<double>& w, size_t S, double limit) {
  std::vector<size_t> cut{0};
  size_t i = 0;
  for (size_t piece = 0; piece < S; ++piece) {
    const size_t last_allowed = w.size() - (S - 1 - piece);  // leave one item per later piece
    double sum = w[i++];
    if (sum > limit) return {};
    while (i < last_allowed && (piece + 1 == S || sum + w[i] <= limit)) sum += w[i++];
    if (sum > limit) return {};
    cut.push_back(i);
  }
  return cut;
}

}  // namespace

const std::vector<size_t>& Pricer::bounds(int S, const Layout& x) const {
  std::vector<size_t>& cut = bounds_[{S, x.tp, x.cp}];
  if (!cut.empty()) return cut;
  // A copy's weight: its forward + backward per sample on one rank of this tp x cp.
  std::vector<double> w;
  double total = 0, most = 0;
  for (int k : copies_) {
    const Layer& L = o_.layers[static_cast<size_t>(k)];
    const double f = L.forward_seconds > 0 ? L.forward_seconds : (L.forward_flops > 0 ? L.forward_flops / o_.cluster.flops : 0);
    const double b = L.backward_seconds > 0 ? L.backward_seconds : 2 * f;
    w.push_back((f + b) * work_share(L, x.tp, x.cp));
    total += w.back();
    most = std::max(most, w.back());
  }
  // The smallest bottleneck that admits a cut: bisection between the heaviest copy and the
  // whole model (60 halvings reach the double's resolution); the even split by count when every
  // copy weighs nothing.
  double lo = most, hi = std::max(total, most);
  for (int it = 0; it < 60 && hi > lo; ++it) {
    const double mid = lo + (hi - lo) / 2;
    (cut_at(w, static_cast<size_t>(S), mid).empty() ? lo : hi) = mid;
  }
  cut = total > 0 ? cut_at(w, static_cast<size_t>(S), hi) : std::vector<size_t>{};
  if (cut.empty()) {
    for (int s = 0; s <= S; ++s) cut.push_back(static_cast<size_t>(s) * w.size() / static_cast<size_t>(S));
  }
  return cut;
}

StagePrices Pricer::stages(const Layout& x, int S, int mbs) const {
  const Cluster& c = o_.cluster;
  std::vector<LayerPrice> kinds;
  for (const Layer& layer : o_.layers) kinds.push_back(price_layer(layer, o_, x, mbs));
  // Gradient replicas: dense weights are copied over dp x cp, an expert over dp x tp / ep x cp.
  const int n_dense = x.dp * x.cp, n_expert = x.dp * x.tp / x.ep * x.cp;
  const Link replicas = link_for(c, static_cast<long long>(x.tp) * x.cp * x.dp);
  const std::vector<size_t>& cut = bounds(S, x);
  StagePrices sp;
  pipeline::Costs& k = sp.costs;
  for (int s = 0; s < S; ++s) {
    const size_t first = cut[static_cast<size_t>(s)], last = cut[static_cast<size_t>(s) + 1];
    double f = 0, b = 0, act = 0, dense = 0, expert = 0, shared = 0;
    Cost comm;
    double comm_f = 0, comm_b = 0;
    for (size_t i = first; i < last; ++i) {
      const LayerPrice& p = kinds[static_cast<size_t>(copies_[i])];
      f += p.forward;
      b += p.backward;
      comm_f += p.comm_f.seconds;
      comm_b += p.comm_b.seconds;
      comm.bytes += p.comm_f.bytes + p.comm_b.bytes;
      act += p.activation;
      (p.expert ? expert : dense) += p.params;
      shared += p.shared;
    }
    dense += shared;  // stored and reduced over dp x cp as dense parameters are
    double gathered = 0;
    if (x.zero == 3) {  // each stage gathers its weights before every forward and every backward
      const Cost g_dense = ring_allgather(n_dense, dense * o_.weight_bytes, replicas);
      const Cost g_expert = ring_allgather(n_expert, expert * o_.weight_bytes, replicas);
      comm_f += g_dense.seconds + g_expert.seconds;
      comm_b += g_dense.seconds + g_expert.seconds;
      comm.bytes += 2 * (g_dense.bytes + g_expert.bytes);
      gathered = (dense + expert) * o_.weight_bytes;
    }
    const double boundary = o_.layers[static_cast<size_t>(copies_[last - 1])].output_bytes * mbs / x.cp;
    k.forward.push_back(f + comm_f);
    k.backward.push_back(b + comm_b);
    k.backward_input.push_back((b + comm_b) / 2);
    k.backward_weight.push_back((b + comm_b) / 2);
    k.activation_bytes.push_back(act);
    k.weight_grad_bytes.push_back(act);
    k.boundary_bytes.push_back(boundary);
    k.reduce_grad.push_back(0);
    sp.compute.push_back(f + b);
    sp.comm_seconds.push_back(comm_f + comm_b);
    // A stage sends its output forward and its input's gradient back (the previous boundary).
    double sent = comm.bytes + (s + 1 < S ? boundary : 0);
    if (s > 0) sent += k.boundary_bytes[static_cast<size_t>(s - 1)];
    sp.comm_bytes.push_back(sent);
    sp.static_bytes.push_back(state_bytes(o_, dense, x.zero, n_dense) + state_bytes(o_, expert, x.zero, n_expert));
    sp.gathered_bytes.push_back(gathered);
    // Shared MoE parameters saw different tokens on each tp rank (an MoE layer's tokens are split
    // over tp): summed over the tp group first, then over dp x cp as dense ones.
    Cost dp = ring_allreduce(x.tp, shared * o_.grad_bytes, link_for(c, x.tp));
    dp += reduce_gradients(o_, dense, x.zero, n_dense, replicas);
    dp += reduce_gradients(o_, expert, x.zero, n_expert, replicas);
    sp.dp_seconds.push_back(dp.seconds);
    sp.dp_bytes.push_back(dp.bytes);
  }
  const Link pipe = link_for(c, static_cast<long long>(x.tp) * x.cp * x.dp * x.pp);
  k.latency = pipe.latency;
  k.bandwidth = pipe.bandwidth;
  k.overhead = o_.microbatch_overhead;
  k.microbatch_size = mbs;
  return sp;
}

std::shared_ptr<const pipeline::Timeline> Pricer::evaluate(std::shared_ptr<const pipeline::Schedule> schedule, int mbs,
                                                           Layout* out,
                                                           std::shared_ptr<const pipeline::Timeline> reuse) const {
  const int S = schedule->stages, m = schedule->microbatches, p = schedule->ranks;
  const StagePrices sp = stages(*out, S, mbs);
  // The search validated each schedule once when it generated it (search.cpp).
  if (!reuse) reuse = std::make_shared<const pipeline::Timeline>(pipeline::simulate(schedule, sp.costs, true));
  const pipeline::Timeline& t = *reuse;
  struct Rank {
    double compute = 0, comm = 0, bytes = 0, statics = 0, gathered = 0, dp = 0, dp_bytes = 0;
  };
  std::vector<Rank> ranks(static_cast<size_t>(p));
  for (int s = 0; s < S; ++s) {
    const int r = schedule->stage_rank[static_cast<size_t>(s)];
    if (r < 0) continue;
    Rank& R = ranks[static_cast<size_t>(r)];
    const size_t i = static_cast<size_t>(s);
    R.compute += sp.compute[i] * m;
    R.comm += sp.comm_seconds[i] * m;
    R.bytes += sp.comm_bytes[i] * m;
    R.statics += sp.static_bytes[i];
    R.gathered = std::max(R.gathered, sp.gathered_bytes[i]);
    R.dp += sp.dp_seconds[i];
    R.dp_bytes += sp.dp_bytes[i];
  }
  double dp = 0, busiest = -1, busiest_comm = 0, memory = -1;
  out->communication_bytes = 0;
  for (int r = 0; r < p; ++r) {
    const Rank& R = ranks[static_cast<size_t>(r)];
    dp = std::max(dp, R.dp);
    out->communication_bytes = std::max(out->communication_bytes, R.bytes + R.dp_bytes);
    if (R.compute + R.comm > busiest) {
      busiest = R.compute + R.comm;
      out->compute = R.compute;
      busiest_comm = R.comm;
    }
    const double act = t.stats[static_cast<size_t>(r)].peak_activation_bytes;
    if (R.statics + R.gathered + act > memory) {
      memory = R.statics + R.gathered + act;
      out->static_bytes = R.statics + R.gathered;
      out->activation_bytes = act;
    }
  }
  out->memory = memory;
  out->communication = busiest_comm + dp;
  out->step = t.makespan() + dp;
  out->bubble = t.bubble_fraction();
  out->microbatches = m;
  out->stages_per_rank = schedule->stages_per_rank();
  out->schedule = schedule->method;
  out->fits = out->memory <= o_.cluster.memory;
  return reuse;
}

}  // namespace weft::plan
