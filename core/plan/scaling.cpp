// Amdahl and Gustafson from the planner's own predictions: the best layout on N ranks against
// the same model on one rank gives a speedup, and Amdahl's law solved for the serial fraction
// turns that speedup into the one number that says what parallelism can still buy. The curves
// re-run the search at n = 1, 2, 4, ... N so that each point uses the layout best for n ranks.
#include <algorithm>
#include <cmath>

#include "core/common/status.h"
#include "core/plan/plan.h"

namespace weft::plan {

namespace {

// The best layout on n ranks at `batch`: the fastest that fits, else the fastest.
Layout best_on(const Options& base, int n, int batch) {
  Options o = base;
  o.ranks = n;
  o.cluster.hosts = (n + o.cluster.ranks_per_host - 1) / o.cluster.ranks_per_host;
  o.global_batch = batch;
  o.fixed = false;
  o.include_infeasible = true;
  o.top = 1;
  const Plan p = make_plan(o);
  if (p.layouts.empty()) {
    fail(Status::invalid_argument, "scaling: no layout of %d ranks runs a batch of %d (no dp divides it)", n, batch);
  }
  return p.layouts.front();
}

}  // namespace

Scaling scaling(const Plan& plan) {
  if (plan.layouts.empty()) fail(Status::invalid_argument, "scaling: the plan has no layout (none fits the memory)");
  const Options& o = plan.options;
  const int N = o.ranks, G = o.global_batch;
  Scaling s;
  s.ranks = N;
  s.step = plan.layouts.front().step;
  const Layout one = best_on(o, 1, G);
  s.one_rank = one.step;
  s.speedup = s.one_rank / s.step;
  s.efficiency = s.speedup / N;
  s.serial_fraction = N > 1 ? (1 / s.speedup - 1.0 / N) / (1 - 1.0 / N) : 0;
  s.gustafson = N - s.serial_fraction * (N - 1);
  auto weak_batch = [&](int n) { return std::max(1, static_cast<int>(std::lround(static_cast<double>(G) * n / N))); };
  const int b1 = weak_batch(1);
  const double weak_one = b1 == G ? s.one_rank : best_on(o, 1, b1).step;
  for (int n = 1;; n = n * 2 < N ? n * 2 : N) {
    Scaling::Point p;
    p.ranks = n;
    const Layout strong = n == N ? plan.layouts.front() : (n == 1 ? one : best_on(o, n, G));
    p.fits = strong.fits;
    p.strong = strong.step;
    p.strong_speedup = s.one_rank / p.strong;
    p.amdahl = 1 / (s.serial_fraction + (1 - s.serial_fraction) / n);
    p.weak_batch = weak_batch(n);
    if (n == 1) p.weak = weak_one;
    else if (n == N && p.weak_batch == G) p.weak = plan.layouts.front().step;
    else p.weak = best_on(o, n, p.weak_batch).step;
    p.weak_speedup = static_cast<double>(p.weak_batch) / b1 * weak_one / p.weak;
    p.gustafson = n - s.serial_fraction * (n - 1);
    s.points.push_back(p);
    if (n == N) break;
  }
  return s;
}

}  // namespace weft::plan
