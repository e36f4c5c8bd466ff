// weft/plan.h's structs into core/plan/'s types and back, and the plan handles' registry.
// Callers' structs are read by struct_size (older callers pass fewer fields) and their enums
// by their bits (shim.h: a C int outside an enum's range is UB to load in C++).
#include <cstddef>
#include <cstring>

#include "capi/src/plan_convert.h"
#include "capi/src/registry.h"
#include "capi/src/shim.h"
#include "capi/src/validate.h"

namespace weft::capi {

// weft_plan_layer_t grows only at its end; the first release's stride (config->layer_size 0).
constexpr size_t kFirstLayerSize = offsetof(weft_plan_layer_t, context_bytes) + sizeof(double);
static_assert(kFirstLayerSize == 80, "the first release's weft_plan_layer_t was 80 bytes");
static_assert(sizeof(weft_plan_layer_t) == 104, "weft_plan_layer_t's fields are only ever appended");

namespace {

auto& plans() {
  static auto* r = new Registry<weft_plan, kPlanMagic>("a plan from weft_plan_create or weft_plan_load",
                                                       "a live plan", "destroyed");
  return *r;
}

}  // namespace

weft_plan_config_t plan_config(const weft_plan_config_t* given) {
  weft_plan_config_t d = WEFT_PLAN_CONFIG_INIT;
  if (!given) return d;
  d.layer_size = 0;  // a config too short to have the field comes from a caller of the first layout
  return read_struct(given, d, "config", "WEFT_PLAN_CONFIG_INIT");
}

plan::Options plan_options(const weft_plan_config_t& c) {
  plan::Options o;
  o.global_batch = c.global_batch;
  o.ranks = c.ranks;
  // 0 = the default (the caller may then put a model file's values in first).
  if (c.weight_bytes != 0) o.weight_bytes = c.weight_bytes;
  if (c.grad_bytes != 0) o.grad_bytes = c.grad_bytes;
  if (c.optimizer_bytes != 0) o.optimizer_bytes = c.optimizer_bytes;
  o.microbatch_overhead = c.microbatch_overhead;
  o.grad_allreduce_bytes = c.grad_allreduce_bytes;
  o.top = c.top;
  o.include_infeasible = c.include_infeasible != 0;
  o.max_pp = c.max_pp;
  o.max_tp = c.max_tp;
  o.max_cp = c.max_cp;
  o.tp_across_hosts = c.tp_across_hosts != 0;
  if (c.nkinds > 0 && !c.kinds) fail(Status::invalid_argument, "config->kinds is NULL with nkinds = %zu", c.nkinds);
  for (size_t k = 0; k < c.nkinds; ++k) {
    o.kinds.push_back(static_cast<pipeline::Method>(enum_bits(c.kinds[k])));  // checked() judges the range
  }
  o.max_microbatches = c.max_microbatches;
  if (c.layout) {
    const weft_plan_layout_t l =
        read_struct(c.layout, weft_plan_layout_t(WEFT_PLAN_LAYOUT_INIT), "config->layout", "WEFT_PLAN_LAYOUT_INIT");
    o.fixed = true;
    o.layout.dp = l.dp;
    o.layout.tp = l.tp;
    o.layout.pp = l.pp;
    o.layout.ep = l.ep;
    o.layout.cp = l.cp;
    o.layout.zero = l.zero_stage;
    o.layout.schedule = static_cast<pipeline::Method>(enum_bits(l.schedule));
    o.layout.microbatches = l.microbatches;
    o.layout.stages_per_rank = l.stages_per_rank;
  }
  return o;
}

std::vector<plan::Layer> plan_layers(const weft_plan_layer_t* layers, size_t count, size_t layer_size) {
  if (count > 0 && !layers) fail(Status::invalid_argument, "config->layers is NULL with num_layers = %zu", count);
  const size_t stride = layer_size == 0 ? kFirstLayerSize : layer_size;
  if (stride != kFirstLayerSize && stride != sizeof(weft_plan_layer_t)) {  // the sizes weft/plan.h ever had
    fail(Status::invalid_argument,
         "config->layer_size = %zu; expected sizeof(weft_plan_layer_t) = %zu (WEFT_PLAN_CONFIG_INIT sets it) or a "
         "size of an earlier release (%zu; 0 means that one)",
         layer_size, sizeof(weft_plan_layer_t), kFirstLayerSize);
  }
  std::vector<plan::Layer> out;
  for (size_t i = 0; i < count; ++i) {
    weft_plan_layer_t l{};  // fields past the caller's stride keep their zero defaults
    std::memcpy(&l, reinterpret_cast<const char*>(layers) + i * stride, stride);
    plan::Layer x;
    if (l.name) x.name = l.name;
    x.count = l.count;
    x.experts = l.experts;
    x.top_k = l.top_k;
    if (l.tensor_parallel != 0 && l.tensor_parallel != 1) {
      fail(Status::invalid_argument, "config->layers[%zu].tensor_parallel = %d; expected 0 or 1", i, l.tensor_parallel);
    }
    x.tensor_parallel = l.tensor_parallel == 1;
    x.params = l.params;
    x.forward_flops = l.forward_flops;
    x.forward_seconds = l.forward_seconds;
    x.backward_seconds = l.backward_seconds;
    x.activation_bytes = l.activation_bytes;
    x.output_bytes = l.output_bytes;
    x.context_bytes = l.context_bytes;
    x.tp_replicated = l.tp_replicated;  // core/plan/check.cpp judges both
    x.tp_allreduces = l.tp_allreduces;
    x.shared_params = l.shared_params;
    out.push_back(std::move(x));
  }
  return out;
}

plan::Cluster plan_cluster(const weft_plan_cluster_t* given) {
  const weft_plan_cluster_t c =
      read_struct(given, weft_plan_cluster_t(WEFT_PLAN_CLUSTER_INIT), "config->cluster", "WEFT_PLAN_CLUSTER_INIT");
  plan::Cluster k;
  k.hosts = c.hosts;
  k.ranks_per_host = c.ranks_per_host;
  k.memory = c.memory_per_rank;
  k.flops = c.flops_per_rank;
  k.intra_bandwidth = c.intra_bandwidth;
  k.intra_latency = c.intra_latency;
  k.inter_bandwidth = c.inter_bandwidth;
  k.inter_latency = c.inter_latency;
  if (c.num_intra_collectives > 0 && !c.intra_collectives) {
    fail(Status::invalid_argument, "config->cluster->intra_collectives is NULL with num_intra_collectives = %zu",
         c.num_intra_collectives);
  }
  for (size_t i = 0; i < c.num_intra_collectives; ++i) {
    const weft_plan_collective_t& m = c.intra_collectives[i];
    k.intra_collectives.push_back({static_cast<plan::Collective>(enum_bits(m.kind)), m.ranks, m.seconds});  // checked() judges the kind
  }
  return k;
}

weft_plan_layout_t plan_layout_out(const plan::Layout& x) {
  weft_plan_layout_t l = WEFT_PLAN_LAYOUT_INIT;
  l.dp = x.dp;
  l.tp = x.tp;
  l.pp = x.pp;
  l.ep = x.ep;
  l.cp = x.cp;
  l.zero_stage = x.zero;
  l.schedule = static_cast<weft_schedule_kind_t>(static_cast<int>(x.schedule));
  l.microbatches = x.microbatches;
  l.stages_per_rank = x.stages_per_rank;
  l.fits = x.fits ? 1 : 0;
  l.step_seconds = x.step;
  l.compute_seconds = x.compute;
  l.communication_seconds = x.communication;
  l.bubble_fraction = x.bubble;
  l.memory_per_rank = x.memory;
  l.static_bytes = x.static_bytes;
  l.activation_bytes = x.activation_bytes;
  l.communication_bytes = x.communication_bytes;
  return l;
}

weft_plan_t register_plan(plan::Plan p) {
  auto h = std::make_unique<weft_plan>();
  h->plan = std::move(p);
  return plans().add(std::move(h));
}
weft_plan* lookup_plan(weft_plan_t h, const char* arg) { return plans().find(h, arg); }
void unregister_plan(weft_plan_t h) { plans().remove(h); }

}  // namespace weft::capi
