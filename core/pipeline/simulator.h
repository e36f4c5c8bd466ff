// The simulator: a schedule and per-stage costs -> a timeline (weft/pipeline.h,
// weft_pipeline_costs_t, states the model). Exact arithmetic on the given numbers: with uniform
// costs the makespan equals the closed forms (tests/unit/test_pipeline_simulator.cpp).
#pragma once

#include <memory>
#include <vector>

#include "core/pipeline/timeline.h"

namespace weft::plugin {
struct CostModel;
}

namespace weft::pipeline {

// Per stage, every array complete (capi/ resolves weft_pipeline_costs_t's NULL defaults).
struct Costs {
  std::vector<double> forward, backward, backward_input, backward_weight;
  std::vector<double> activation_bytes, weight_grad_bytes, boundary_bytes, reduce_grad;
  double latency = 0, bandwidth = 0, overhead = 0;
  // A COST_MODEL plugin (weft/plugin.h): when set, every compute action's time is
  // model->cost(kind, stage, stages, microbatch, microbatch_size) + overhead (REDUCE_GRAD with
  // micro-batch -1), and forward, backward, backward_input, backward_weight and reduce_grad are
  // not read (they may be empty). A negative or non-finite time fails naming the plugin, the rank
  // and the action.
  std::shared_ptr<const plugin::CostModel> model;
  int microbatch_size = 1;
};

// Costs with every stage taking f, b (I and W b/2 each), no bytes.
Costs uniform_costs(int stages, double f, double b);

// Validates s first (throws as validate()); throws invalid_argument when costs do not have
// s.stages entries. prevalidated: the caller validated s already (the planner simulates each
// schedule it generates thousands of times, and validating costs as much as simulating).
Timeline simulate(std::shared_ptr<const Schedule> s, const Costs& costs, bool prevalidated = false);

}  // namespace weft::pipeline
