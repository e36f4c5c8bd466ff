// weft_schedule_generate, weft_schedule_simulate and weft_schedule_tune (weft/pipeline.h):
// argument checks, the defaults of weft_pipeline_costs_t's NULL arrays, and the conversions to
// core/pipeline/ (generate.cpp, simulator.cpp, tune.cpp). Plugin kinds and cost models
// (weft/plugin.h) are looked up here by id, so an unknown id is refused before any work.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "capi/src/pipeline_handles.h"
#include "capi/src/shim.h"
#include "capi/src/validate.h"
#include "core/pipeline/generators.h"
#include "core/pipeline/simulator.h"
#include "core/pipeline/tune.h"
#include "core/plugin/registry.h"

using namespace weft;
using namespace weft::capi;

namespace {

pipeline::Method read_kind(const weft_schedule_kind_t& kind, const char* arg) {
  const int k = enum_bits(kind);
  if (k >= WEFT_PLUGIN_ID_BASE) {
    plugin::get_schedule(k);  // throws naming the id when no SCHEDULE plugin has it
    return static_cast<pipeline::Method>(k);
  }
  if (k < WEFT_SCHEDULE_GPIPE || k >= WEFT_SCHEDULE_NUM_KINDS) {
    fail(Status::invalid_argument,
         "%s = %d; expected a generator, WEFT_SCHEDULE_GPIPE (0) .. WEFT_SCHEDULE_DUALPIPE_V (%d), or a SCHEDULE "
         "plugin's kind (>= %d)",
         arg, k, WEFT_SCHEDULE_NUM_KINDS - 1, WEFT_PLUGIN_ID_BASE);
  }
  return static_cast<pipeline::Method>(k);
}

// A COST_MODEL plugin's id (0 = none).
std::shared_ptr<const plugin::CostModel> read_cost_model(int id, const char* arg) {
  if (id == 0) return nullptr;
  if (id < WEFT_PLUGIN_ID_BASE) {
    fail(Status::invalid_argument, "%s = %d; expected 0 (no cost model) or a COST_MODEL plugin's id (>= %d)", arg, id,
         WEFT_PLUGIN_ID_BASE);
  }
  return plugin::get_cost_model(id);
}

// n entries of arr, or fallback(s) for each stage when arr is NULL.
template <class Fallback>
std::vector<double> per_stage(const double* arr, int n, Fallback fallback) {
  std::vector<double> out(static_cast<size_t>(n));
  for (int s = 0; s < n; ++s) out[static_cast<size_t>(s)] = arr ? arr[s] : fallback(s);
  return out;
}

pipeline::Costs read_costs(const weft_pipeline_costs_t* given, int stages) {
  const weft_pipeline_costs_t c =
      read_struct(given, weft_pipeline_costs_t(WEFT_PIPELINE_COSTS_INIT), "costs", "WEFT_PIPELINE_COSTS_INIT");
  if (c.nstages != stages) {
    fail(Status::invalid_argument, "costs->nstages = %d; the schedule has %d stages", c.nstages, stages);
  }
  pipeline::Costs out;
  out.model = read_cost_model(c.cost_model, "costs->cost_model");
  out.microbatch_size = c.microbatch_size;
  if (out.model) {
    // The plugin gives every compute time: the time arrays are not read (NULL allowed).
    if (c.microbatch_size < 1) {
      fail(Status::invalid_argument, "costs->microbatch_size = %d; expected >= 1", c.microbatch_size);
    }
    const auto zero = [](int) { return 0.0; };
    out.activation_bytes = per_stage(c.activation_bytes, stages, zero);
    out.weight_grad_bytes =
        per_stage(c.weight_grad_bytes, stages, [&](int s) { return out.activation_bytes[static_cast<size_t>(s)]; });
    out.boundary_bytes = per_stage(c.boundary_bytes, stages, zero);
    out.latency = c.latency;
    out.bandwidth = c.bandwidth;
    out.overhead = c.overhead;
    return out;
  }
  if (!c.forward) fail(Status::invalid_argument, "costs->forward is NULL; expected %d forward times", stages);
  if (!c.backward && (!c.backward_input || !c.backward_weight)) {
    fail(Status::invalid_argument,
         "costs->backward is NULL and backward_input or backward_weight is NULL; expected backward, or both halves");
  }
  const auto zero = [](int) { return 0.0; };
  out.forward = per_stage(c.forward, stages, zero);
  out.backward = per_stage(c.backward, stages, [&](int s) { return c.backward_input[s] + c.backward_weight[s]; });
  out.backward_input = per_stage(c.backward_input, stages, [&](int s) { return c.backward[s] / 2; });
  out.backward_weight = per_stage(c.backward_weight, stages, [&](int s) { return c.backward[s] / 2; });
  out.activation_bytes = per_stage(c.activation_bytes, stages, zero);
  out.weight_grad_bytes = per_stage(c.weight_grad_bytes, stages, [&](int s) { return out.activation_bytes[static_cast<size_t>(s)]; });
  out.boundary_bytes = per_stage(c.boundary_bytes, stages, zero);
  out.reduce_grad = per_stage(c.reduce_grad, stages, zero);
  out.latency = c.latency;
  out.bandwidth = c.bandwidth;
  out.overhead = c.overhead;
  return out;
}

pipeline::TuneConfig read_tune_config(const weft_tune_config_t* given) {
  const weft_tune_config_t c = read_struct(given, weft_tune_config_t(WEFT_TUNE_CONFIG_INIT), "config", "WEFT_TUNE_CONFIG_INIT");
  pipeline::TuneConfig t;
  t.model = read_cost_model(c.cost_model, "config->cost_model");
  // With a cost model the layer tables are optional (layers 0; if given, they split the bytes).
  if (c.layers < (t.model ? 0 : 1)) {
    fail(Status::invalid_argument, "config->layers = %d; expected >= %d", c.layers, t.model ? 0 : 1);
  }
  if (c.layers > 0 && (!c.layer_forward || !c.layer_backward)) {
    fail(Status::invalid_argument, "config->layer_forward or layer_backward is NULL; expected %d times each", c.layers);
  }
  t.ranks = c.ranks;
  if (c.layers > 0) {
    t.layer_forward.assign(c.layer_forward, c.layer_forward + c.layers);
    t.layer_backward.assign(c.layer_backward, c.layer_backward + c.layers);
  }
  t.global_batch = c.global_batch;
  t.microbatch_overhead = c.microbatch_overhead;
  t.activation_bytes_per_sample = c.activation_bytes_per_sample;
  t.boundary_bytes_per_sample = c.boundary_bytes_per_sample;
  t.latency = c.latency;
  t.bandwidth = c.bandwidth;
  t.memory_cap = c.memory_cap;
  t.static_bytes = c.static_bytes;
  if (c.kinds) {
    for (size_t k = 0; k < c.nkinds; ++k) {
      const std::string arg = std::string("config->kinds[").append(std::to_string(k)).append("]");
      t.kinds.push_back(read_kind(c.kinds[k], arg.c_str()));
    }
  }
  t.max_stages_per_rank = c.max_stages_per_rank;
  t.max_microbatches = c.max_microbatches;
  return t;
}

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_schedule_generate(weft_schedule_kind_t kind, const weft_schedule_config_t* config,
                                              weft_schedule_t* schedule) {
  return guarded(__func__, [&] {
    check_out(schedule, "schedule");
    *schedule = nullptr;
    const pipeline::Method method = read_kind(kind, "kind");
    weft_schedule_config_t c = WEFT_SCHEDULE_CONFIG_INIT;
    if (config) c = read_struct(config, c, "config", "WEFT_SCHEDULE_CONFIG_INIT");
    pipeline::GenerateOptions o;
    o.ranks = c.ranks;
    o.microbatches = c.microbatches;
    o.stages_per_rank = c.stages_per_rank;
    o.reduce_grad = c.reduce_grad != 0;
    *schedule = register_schedule(std::make_shared<const pipeline::Schedule>(pipeline::generate(method, o)));
  });
}

WEFT_API weft_status_t weft_schedule_simulate(weft_schedule_t schedule, const weft_pipeline_costs_t* costs,
                                              weft_timeline_t* timeline) {
  return guarded(__func__, [&] {
    const auto s = lookup_schedule(schedule, "schedule")->schedule;
    check_out(timeline, "timeline");
    *timeline = nullptr;
    *timeline = register_timeline(pipeline::simulate(s, read_costs(costs, s->stages)));
  });
}

WEFT_API weft_status_t weft_schedule_tune(const weft_tune_config_t* config, weft_tune_candidate_t* candidates,
                                          size_t capacity, size_t* count, int* best) {
  return guarded(__func__, [&] {
    check_out(count, "count");
    check_out(best, "best");
    const pipeline::TuneResult r = pipeline::tune(read_tune_config(config));
    *count = r.candidates.size();
    *best = r.best;
    if (!candidates) return;
    for (size_t k = 0; k < r.candidates.size() && k < capacity; ++k) {
      const pipeline::TuneCandidate& c = r.candidates[k];
      weft_tune_candidate_t& out = candidates[k];
      out.kind = static_cast<weft_schedule_kind_t>(static_cast<int>(c.kind));
      out.microbatches = c.microbatches;
      out.stages_per_rank = c.stages_per_rank;
      out.microbatch_size = c.microbatch_size;
      out.step_time = c.step_time;
      out.bubble_fraction = c.bubble_fraction;
      out.peak_bytes = c.peak_bytes;
      out.fits = c.fits ? 1 : 0;
    }
  });
}

}  // extern "C"
