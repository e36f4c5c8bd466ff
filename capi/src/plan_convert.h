// The planner's C structs <-> core/plan/ types (plan_convert.cpp), and its handle. The handle
// keeps the scaling curves once computed, behind a mutex, so that a plan stays safe to read from
// several threads while weft_plan_scaling fills them on first use.
#pragma once

#include <memory>
#include <mutex>

#include "core/plan/plan.h"
#include "weft/weft.h"

struct weft_plan {
  uint64_t magic;
  weft::plan::Plan plan;
  std::mutex mutex;  // guards scaling
  std::unique_ptr<weft::plan::Scaling> scaling;
};

namespace weft::capi {

constexpr uint64_t kPlanMagic = 0x6e616c5074666577ull;  // "weftPlan"

// The caller's config read by its struct_size over WEFT_PLAN_CONFIG_INIT (NULL = the defaults).
weft_plan_config_t plan_config(const weft_plan_config_t* given);
// The options of a full config: everything but layers and cluster, which the caller sets (from
// the arrays or from the files). Throws naming the field.
plan::Options plan_options(const weft_plan_config_t& c);
std::vector<plan::Layer> plan_layers(const weft_plan_layer_t* layers, size_t count, size_t layer_size);
plan::Cluster plan_cluster(const weft_plan_cluster_t* cluster);
weft_plan_layout_t plan_layout_out(const plan::Layout& x);

weft_plan_t register_plan(plan::Plan p);
weft_plan* lookup_plan(weft_plan_t h, const char* arg);
void unregister_plan(weft_plan_t h);

}  // namespace weft::capi
