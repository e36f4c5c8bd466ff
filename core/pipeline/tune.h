// Auto-tuning (weft_schedule_tune in weft/pipeline.h states the contract): every allowed
// (generator, micro-batch count, stages per rank) simulated with costs built from per-layer
// times (or a COST_MODEL plugin), the candidates sorted by step time with those that fit the
// memory cap first. SCHEDULE plugins listed in kinds are tried with v = 1 for every m that
// divides the batch; an (p, m) their function declines (returns nonzero) is skipped.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/pipeline/schedule.h"
#include "core/pipeline/simulator.h"

namespace weft::pipeline {

struct TuneConfig {
  int ranks = 1;
  std::vector<double> layer_forward, layer_backward;  // per layer, one sample (B; I and W half each)
  int global_batch = 1;
  double microbatch_overhead = 0;          // added to every compute action
  double activation_bytes_per_sample = 0;  // per layer
  double boundary_bytes_per_sample = 0;
  double latency = 0, bandwidth = 0;
  double memory_cap = 0;  // 0 = none
  double static_bytes = 0;
  std::vector<Method> kinds;     // empty = every generator
  int max_stages_per_rank = 0;   // INTERLEAVED_1F1B's largest v; 0 = 4
  int max_microbatches = 0;      // 0 = global_batch
  // A COST_MODEL plugin: stage times from it (microbatch_size = global_batch / m), and the layer
  // times are not needed (layer_forward may be empty: each stage then counts as one layer for
  // activation bytes, and any S is allowed; with layers given, S <= L as usual).
  std::shared_ptr<const plugin::CostModel> model;
};

struct TuneCandidate {
  Method kind = Method::gpipe;
  int microbatches = 0, stages_per_rank = 0, microbatch_size = 0;
  double step_time = 0, bubble_fraction = 0, peak_bytes = 0;
  bool fits = false;
};

struct TuneResult {
  std::vector<TuneCandidate> candidates;  // fitting first, then by step time
  int best = -1;                          // candidates[0] when it fits, else -1
};

// Throws invalid_argument naming the field for a config that cannot be tuned.
TuneResult tune(const TuneConfig& config);

// The per-stage costs of a candidate (stage s of S gets layers [s L / S, (s+1) L / S)).
// Exposed for the tests and the weft-schedule tool; S <= L is the caller's business.
Costs tune_costs(const TuneConfig& config, int stages, int microbatch_size);

// The candidates as a text table, one per line, the best marked with '*'.
std::string format_tune_table(const TuneResult& result);

}  // namespace weft::pipeline
