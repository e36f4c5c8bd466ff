// make_plan(): every (dp, tp, pp, cp, ep) that the rules allow, every ZeRO stage, and per
// layout every schedule / micro-batch count / stages-per-rank the pipeline generators allow,
// priced by cost.cpp through the pipeline simulator. Only the best schedule of each (dp, tp, pp,
// cp, ep, zero) is kept: the table should show different layouts, not the same one 40 times
// with another micro-batch count.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "core/common/status.h"
#include "core/pipeline/generators.h"
#include "core/plan/cost.h"

namespace weft::plan {

namespace {

using pipeline::Method;

constexpr long long kMaxPairs = 1 << 22;

// Ascending; O(sqrt n), since a global batch may be large.
std::vector<int> divisors(long long n) {
  std::vector<int> low, high;
  for (long long i = 1; i * i <= n; ++i) {
    if (n % i) continue;
    low.push_back(static_cast<int>(i));
    if (i * i != n) high.push_back(static_cast<int>(n / i));
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

// Fitting first, then faster, then smaller; the rest only so that the order is deterministic.
bool better(const Layout& a, const Layout& b) {
  if (a.fits != b.fits) return a.fits;
  if (a.step != b.step) return a.step < b.step;
  if (a.memory != b.memory) return a.memory < b.memory;
  return std::tie(a.pp, a.tp, a.cp, a.ep, a.zero, a.schedule, a.microbatches, a.stages_per_rank) <
         std::tie(b.pp, b.tp, b.cp, b.ep, b.zero, b.schedule, b.microbatches, b.stages_per_rank);
}

// The generators' rules (weft/pipeline.h) for the micro-batch count.
bool allowed(Method kind, int p, int m) {
  if (kind == Method::interleaved_1f1b) return m % p == 0 || m <= p;
  if (kind == Method::dualpipe_v) return m >= 2 * p;
  return true;
}

struct Search {
  const Options& o;
  Pricer pricer;
  std::map<std::tuple<int, int, int, int>, std::shared_ptr<const pipeline::Schedule>> schedules;
  size_t searched = 0, feasible = 0;

  explicit Search(const Options& options) : o(options), pricer(options) {}

  std::string refusal;  // the last generator's refusal, for a fixed layout nothing could run

  // Generated once per (kind, p, m, v): many layouts share a pipeline shape. NULL when the
  // generator refuses the combination (its limits, e.g. on m, are its own business).
  std::shared_ptr<const pipeline::Schedule> schedule(Method kind, int p, int m, int v) {
    auto& s = schedules[{static_cast<int>(kind), p, m, v}];
    if (!s) {
      pipeline::GenerateOptions g;
      g.ranks = p;
      g.microbatches = m;
      g.stages_per_rank = kind == Method::interleaved_1f1b ? v : 0;
      try {
        s = std::make_shared<const pipeline::Schedule>(pipeline::generate(kind, g));
        pipeline::validate(*s);  // once here: cost.cpp then simulates it without validating again
      } catch (const Error& e) {
        if (e.status() != Status::invalid_argument) throw;
        refusal = e.message();
      }
    }
    return s;
  }

  // The best (schedule, m, v) for one (dp, tp, pp, cp, ep) and each ZeRO stage into best[zero].
  void layout(const Layout& shape, std::vector<Layout>& best) {
    const int p = shape.pp, batch = o.global_batch / shape.dp, L = pricer.layers();
    std::vector<Method> kinds = o.kinds;
    if (o.fixed && o.layout.schedule != Method::custom) kinds = {o.layout.schedule};
    if (kinds.empty()) {
      for (int k = 0; k < pipeline::kNumMethods; ++k) kinds.push_back(static_cast<Method>(k));
    }
    // One pipeline rank: every schedule runs the same actions back to back, and 1F1B holds the
    // fewest activations (one micro-batch), so the others cannot win; pricing them only costs time.
    if (p == 1 && !o.fixed && std::count(kinds.begin(), kinds.end(), Method::one_f_one_b)) {
      kinds = {Method::one_f_one_b};
    }
    const int max_m = o.max_microbatches ? std::min(o.max_microbatches, batch) : batch;
    const std::vector<int> ms = divisors(batch);
    for (Method kind : kinds) {
      const bool v_shape = kind == Method::zb_v || kind == Method::dualpipe_v;
      // One pipeline rank and no 1F1B allowed: more stages than ranks add nothing but stages.
      if (p == 1 && !o.fixed && (v_shape || kind == Method::interleaved_1f1b)) continue;
      int vlo = v_shape ? 2 : 1, vhi = kind == Method::interleaved_1f1b ? 4 : vlo;
      if (kind == Method::interleaved_1f1b && !o.fixed) vlo = 2;  // v = 1 is 1F1B itself
      if (o.fixed && o.layout.stages_per_rank > 0) vlo = vhi = o.layout.stages_per_rank;
      for (int v = vlo; v <= vhi; ++v) {
        if (static_cast<long long>(v) * p > L) continue;  // a stage needs a layer
        for (int m : ms) {
          if (m > max_m || !allowed(kind, p, m)) continue;
          // A schedule of millions of actions takes seconds and gigabytes to simulate, and its
          // bubble is nil anyway: beyond this many (F, B) pairs the candidate is not tried.
          if (static_cast<long long>(p) * m * v > kMaxPairs) continue;
          if (o.fixed && o.layout.microbatches > 0 && m != o.layout.microbatches) continue;
          const auto s = schedule(kind, p, m, v);
          if (!s) continue;
          std::shared_ptr<const pipeline::Timeline> shared;  // ZeRO 0-2 time the pipeline alike
          for (int zero = 0; zero <= 3; ++zero) {
            if (o.fixed && zero != o.layout.zero) continue;
            Layout x = shape;
            x.zero = zero;
            const auto t = pricer.evaluate(s, batch / m, &x, zero < 3 ? shared : nullptr);
            if (zero < 3) shared = t;
            ++searched;
            if (x.fits) ++feasible;
            Layout& b = best[static_cast<size_t>(zero)];
            if (b.microbatches == 0 || better(x, b)) b = x;
          }
        }
      }
    }
  }
};

bool has_context(const Options& o) {
  for (const Layer& l : o.layers) {
    if (l.context_bytes > 0) return true;
  }
  return false;
}

std::vector<int> expert_counts(const Options& o) {
  std::vector<int> e;
  for (const Layer& l : o.layers) {
    if (l.experts > 0) e.push_back(l.experts);
  }
  return e;
}

}  // namespace

Plan make_plan(const Options& given) {
  Plan plan;
  plan.options = checked(given);
  const Options& o = plan.options;
  Search search(o);
  const int N = o.ranks, L = search.pricer.layers(), rph = o.cluster.ranks_per_host;
  const std::vector<int> experts = expert_counts(o);
  std::vector<Layout> all;
  for (int tp : divisors(N)) {
    if (o.fixed ? tp != o.layout.tp : ((!o.tp_across_hosts && tp > rph) || (o.max_tp && tp > o.max_tp))) continue;
    for (int cp : divisors(N / tp)) {
      // Without max_cp the K/V ring stays inside a host (tp x cp <= ranks_per_host): context
      // parallelism across hosts is rarely worth it and would multiply the search several times.
      const bool cp_ok = o.max_cp ? cp <= o.max_cp
                                  : (cp == 1 || (has_context(o) && (o.tp_across_hosts || tp * cp <= rph)));
      if (o.fixed ? cp != o.layout.cp : !cp_ok) continue;
      for (int pp : divisors(N / tp / cp)) {
        if (o.fixed ? pp != o.layout.pp : (pp > L || (o.max_pp && pp > o.max_pp))) continue;
        const int dp = N / tp / cp / pp;
        if (o.global_batch % dp) continue;
        for (int ep : divisors(static_cast<long long>(dp) * tp)) {
          bool ep_ok = experts.empty() ? ep == 1 : true;
          for (int e : experts) ep_ok = ep_ok && e % ep == 0;
          if (o.fixed ? ep != o.layout.ep : !ep_ok) continue;
          Layout shape;
          shape.dp = dp, shape.tp = tp, shape.pp = pp, shape.cp = cp, shape.ep = ep;
          std::vector<Layout> best(4);
          search.layout(shape, best);
          for (const Layout& b : best) {
            if (b.microbatches > 0) all.push_back(b);
          }
        }
      }
    }
  }
  if (o.fixed && all.empty()) {
    fail(Status::invalid_argument,
         "layout: no schedule can run it (schedule %d, microbatches %d, stages_per_rank %d with pp %d and %d layers; "
         "at most %lld micro-batch x stage pairs are simulated)%s%s",
         static_cast<int>(o.layout.schedule), o.layout.microbatches, o.layout.stages_per_rank, o.layout.pp, L,
         kMaxPairs, search.refusal.empty() ? "" : ": ", search.refusal.c_str());
  }
  std::sort(all.begin(), all.end(), better);
  for (const Layout& x : all) {
    if (static_cast<int>(plan.layouts.size()) >= o.top) break;
    if (x.fits || o.include_infeasible || o.fixed) plan.layouts.push_back(x);
  }
  plan.searched = search.searched;
  plan.feasible = search.feasible;
  return plan;
}

}  // namespace weft::plan
