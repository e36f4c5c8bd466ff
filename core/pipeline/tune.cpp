// tune(): enumerate, generate, simulate, sort. Stage costs are sums of their layers' per-sample
// costs times the micro-batch size, plus microbatch_overhead per compute action (the
// simulator's overhead); memory is each rank's activation peak in bytes plus static_bytes.
#include "core/pipeline/tune.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <tuple>

#include "core/common/status.h"
#include "core/pipeline/generators.h"
#include "core/plugin/registry.h"

namespace weft::pipeline {

namespace {

void check_finite(double v, const char* name) {
  if (!(v >= 0) || !std::isfinite(v)) fail(Status::invalid_argument, "tune: %s = %g; expected a finite value >= 0", name, v);
}

void check_config(const TuneConfig& c) {
  if (c.ranks < 1) fail(Status::invalid_argument, "tune: ranks = %d; expected >= 1", c.ranks);
  if (c.layer_forward.empty() && !c.model) {
    fail(Status::invalid_argument, "tune: no layers; expected layers >= 1 (or a cost model)");
  }
  if (c.layer_backward.size() != c.layer_forward.size()) {
    fail(Status::invalid_argument, "tune: %zu forward and %zu backward layer costs; expected one of each per layer",
         c.layer_forward.size(), c.layer_backward.size());
  }
  for (size_t l = 0; l < c.layer_forward.size(); ++l) {
    if (!(c.layer_forward[l] >= 0) || !std::isfinite(c.layer_forward[l]) || !(c.layer_backward[l] >= 0) ||
        !std::isfinite(c.layer_backward[l])) {
      fail(Status::invalid_argument, "tune: layer %zu costs forward %g, backward %g; expected finite values >= 0", l,
           c.layer_forward[l], c.layer_backward[l]);
    }
  }
  if (c.global_batch < 1) fail(Status::invalid_argument, "tune: global_batch = %d; expected >= 1", c.global_batch);
  check_finite(c.microbatch_overhead, "microbatch_overhead");
  check_finite(c.activation_bytes_per_sample, "activation_bytes_per_sample");
  check_finite(c.boundary_bytes_per_sample, "boundary_bytes_per_sample");
  check_finite(c.latency, "latency");
  check_finite(c.bandwidth, "bandwidth");
  check_finite(c.memory_cap, "memory_cap");
  check_finite(c.static_bytes, "static_bytes");
  for (size_t k = 0; k < c.kinds.size(); ++k) {
    const int v = static_cast<int>(c.kinds[k]);
    if (is_plugin_method(c.kinds[k])) {
      plugin::get_schedule(v);  // throws naming the id when no plugin has it
    } else if (v < 0 || v >= kNumMethods) {
      fail(Status::invalid_argument, "tune: kinds[%zu] = %d is no generator (expected 0..%d or a plugin's >= %d)", k, v,
           kNumMethods - 1, plugin::kIdBase);
    }
  }
  if (c.max_stages_per_rank < 0) {
    fail(Status::invalid_argument, "tune: max_stages_per_rank = %d; expected >= 0 (0 = 4)", c.max_stages_per_rank);
  }
  if (c.max_microbatches < 0) {
    fail(Status::invalid_argument, "tune: max_microbatches = %d; expected >= 0 (0 = global_batch)", c.max_microbatches);
  }
}

// Whether generate() takes (kind, p, m, v); the rules of weft/pipeline.h.
bool allowed(Method kind, int p, int m) {
  if (kind == Method::interleaved_1f1b) return m % p == 0 || m <= p;
  if (kind == Method::dualpipe_v) return m >= 2 * p;
  return true;
}

}  // namespace

Costs tune_costs(const TuneConfig& c, int stages, int microbatch_size) {
  const size_t L = c.layer_forward.size(), S = static_cast<size_t>(stages);
  Costs costs;
  const double mb = microbatch_size;
  for (size_t s = 0; s < S; ++s) {
    double f = 0, b = 0;
    // Without layer tables (a cost model's times), each stage is one layer for the bytes.
    const size_t first = L ? s * L / S : 0, last = L ? (s + 1) * L / S : 1;
    for (size_t l = first; l < last && L > 0; ++l) {
      f += c.layer_forward[l];
      b += c.layer_backward[l];
    }
    const double layers = static_cast<double>(last - first);
    costs.forward.push_back(f * mb);
    costs.backward.push_back(b * mb);
    costs.backward_input.push_back(b * mb / 2);
    costs.backward_weight.push_back(b * mb / 2);
    costs.activation_bytes.push_back(layers * c.activation_bytes_per_sample * mb);
    costs.weight_grad_bytes.push_back(layers * c.activation_bytes_per_sample * mb);
    costs.boundary_bytes.push_back(c.boundary_bytes_per_sample * mb);
    costs.reduce_grad.push_back(0);
  }
  costs.latency = c.latency;
  costs.bandwidth = c.bandwidth;
  costs.overhead = c.microbatch_overhead;
  costs.model = c.model;
  costs.microbatch_size = microbatch_size;
  return costs;
}

TuneResult tune(const TuneConfig& c) {
  check_config(c);
  std::vector<Method> kinds = c.kinds;
  if (kinds.empty()) {
    for (int k = 0; k < kNumMethods; ++k) kinds.push_back(static_cast<Method>(k));
  }
  const int p = c.ranks, L = static_cast<int>(c.layer_forward.size());
  const int max_v = c.max_stages_per_rank ? c.max_stages_per_rank : 4;
  const int max_m = c.max_microbatches ? std::min(c.max_microbatches, c.global_batch) : c.global_batch;
  TuneResult result;
  for (Method kind : kinds) {
    const int vlo = kind == Method::interleaved_1f1b ? 1 : (kind == Method::zb_v || kind == Method::dualpipe_v ? 2 : 1);
    const int vhi = kind == Method::interleaved_1f1b ? max_v : vlo;
    for (int v = vlo; v <= vhi; ++v) {
      if (L > 0 && static_cast<long long>(v) * p > L) continue;  // a stage needs a layer
      for (int m = 1; m <= max_m; ++m) {
        if (c.global_batch % m != 0 || !allowed(kind, p, m)) continue;
        GenerateOptions o;
        o.ranks = p;
        o.microbatches = m;
        o.stages_per_rank = kind == Method::interleaved_1f1b ? v : 0;
        std::shared_ptr<const Schedule> s;
        if (is_plugin_method(kind)) {
          Schedule built;
          if (!try_generate_plugin(kind, o, &built, nullptr)) continue;  // the plugin declines this m
          s = std::make_shared<const Schedule>(std::move(built));
        } else {
          s = std::make_shared<const Schedule>(generate(kind, o));
        }
        const int mbs = c.global_batch / m;
        const Timeline t = simulate(s, tune_costs(c, s->stages, mbs));
        TuneCandidate cand;
        cand.kind = kind;
        cand.microbatches = m;
        cand.stages_per_rank = v;
        cand.microbatch_size = mbs;
        cand.step_time = t.makespan();
        cand.bubble_fraction = t.bubble_fraction();
        double peak = 0;
        for (const RankStats& st : t.stats) peak = std::max(peak, st.peak_activation_bytes);
        cand.peak_bytes = peak + c.static_bytes;
        cand.fits = c.memory_cap == 0 || cand.peak_bytes <= c.memory_cap;
        result.candidates.push_back(cand);
      }
    }
  }
  // Fitting first, then step time; ties by kind, m, v so that the order is deterministic.
  std::stable_sort(result.candidates.begin(), result.candidates.end(), [](const TuneCandidate& a, const TuneCandidate& b) {
    return std::make_tuple(!a.fits, a.step_time, static_cast<int>(a.kind), a.microbatches, a.stages_per_rank) <
           std::make_tuple(!b.fits, b.step_time, static_cast<int>(b.kind), b.microbatches, b.stages_per_rank);
  });
  result.best = !result.candidates.empty() && result.candidates[0].fits ? 0 : -1;
  return result;
}

std::string format_tune_table(const TuneResult& r) {
  std::string out = "  kind         m   v  mb_size   step_time  bubble  peak_bytes  fits\n";
  char line[160];
  for (size_t k = 0; k < r.candidates.size(); ++k) {
    const TuneCandidate& c = r.candidates[k];
    std::snprintf(line, sizeof line, "%c %-11s %3d %3d %8d %11.6g %7.4f %11.6g  %s\n",
                  static_cast<int>(k) == r.best ? '*' : ' ', method_name(c.kind), c.microbatches, c.stages_per_rank,
                  c.microbatch_size, c.step_time, c.bubble_fraction, c.peak_bytes, c.fits ? "yes" : "no");
    out += line;
  }
  return out;
}

}  // namespace weft::pipeline
