// The planner as core/ sees it (weft/plan.h states the contract and the cost model): a model and
// a cluster description in, the parallel layouts ranked by predicted step time out. Plain data
// and free functions: files.cpp reads the text formats, cost.cpp prices one layout, search.cpp
// enumerates and ranks, scaling.cpp answers Amdahl and Gustafson, format.cpp writes the tables.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/pipeline/schedule.h"

namespace weft::plan {

// One layer kind (count identical copies in a row); the fields of weft_plan_layer_t.
struct Layer {
  std::string name;
  int count = 1;
  int experts = 0;  // 0 = dense
  int top_k = 1;
  bool tensor_parallel = true;
  double params = 0, forward_flops = 0, forward_seconds = 0, backward_seconds = 0;
  double activation_bytes = 0, output_bytes = 0, context_bytes = 0;
  double tp_replicated = 0;  // share of a tp-split layer's time every tp rank runs whole
  int tp_allreduces = 0;     // per direction and micro-batch of a splittable layer; 0 = 2
  double shared_params = 0;  // of an MoE layer: held whole on every ep rank (router, shared experts)
};

// A small collective measured within one host while every rank computed (weft_plan_collective_t).
enum class Collective { allreduce = 0, alltoall = 1 };
struct MeasuredCollective {
  Collective kind = Collective::allreduce;
  int ranks = 0;
  double seconds = 0;
};

struct Cluster {
  int hosts = 1, ranks_per_host = 1;
  double memory = 0, flops = 0;
  double intra_bandwidth = 0, intra_latency = 0, inter_bandwidth = 0, inter_latency = 0;
  std::vector<MeasuredCollective> intra_collectives;  // empty = priced from intra_latency
};

// A layout and what it is predicted to cost (weft_plan_layout_t's fields).
struct Layout {
  int dp = 1, tp = 1, pp = 1, ep = 1, cp = 1, zero = 0;
  pipeline::Method schedule = pipeline::Method::custom;  // as input: custom = try every one
  int microbatches = 0, stages_per_rank = 0;            // as input: 0 = try every one
  bool fits = false;
  double step = 0, compute = 0, communication = 0, bubble = 0;
  double memory = 0, static_bytes = 0, activation_bytes = 0, communication_bytes = 0;
};

struct Options {
  std::vector<Layer> layers;
  Cluster cluster;
  int global_batch = 0;
  int ranks = 0;  // 0 = every rank of the cluster
  double weight_bytes = 2, grad_bytes = 2, optimizer_bytes = 12;
  double grad_allreduce_bytes = 0;  // a wider all-reduce of the gradients before the DP reduction
  double microbatch_overhead = 0;
  int top = 10;
  bool include_infeasible = false;
  int max_pp = 0, max_tp = 0, max_cp = 0;
  bool tp_across_hosts = false;
  std::vector<pipeline::Method> kinds;  // empty = every built-in generator
  int max_microbatches = 0;
  bool fixed = false;  // predict `layout` only
  Layout layout;
};

struct Scaling {
  int ranks = 0;
  double one_rank = 0, step = 0, speedup = 0, efficiency = 0, serial_fraction = 0, gustafson = 0;
  struct Point {
    int ranks = 0, weak_batch = 0;
    bool fits = false;
    double strong = 0, strong_speedup = 0, amdahl = 0, weak = 0, weak_speedup = 0, gustafson = 0;
  };
  std::vector<Point> points;
};

struct Plan {
  Options options;  // as checked, with defaults resolved (ranks, top)
  std::vector<Layout> layouts;  // kept, best first
  size_t searched = 0, feasible = 0;
};

// Throws invalid_argument naming the field (layers[i].params, cluster.memory_per_rank, ...) for a
// description that cannot be planned; resolves ranks = 0 and top = 0.
Options checked(Options o);

// Ranks the layouts (search.cpp). Throws invalid_argument for bad options or a fixed layout
// that breaks a rule (naming the rule).
Plan make_plan(const Options& options);

// The Amdahl/Gustafson numbers of the plan's best layout (scaling.cpp); throws when the plan
// has no layout.
Scaling scaling(const Plan& plan);

// format.cpp
std::string format_table(const Plan& plan);
std::string format_report(const Plan& plan, const Scaling& s);
std::string format_json(const Plan& plan, const Scaling* s);  // s NULL: "scaling": null

// files.cpp. Read the model / cluster text formats of weft/plan.h into o; errors name
// path:line and the key. `text` variants parse a string (`path` only names it in messages).
struct ModelFile {
  std::vector<Layer> layers;
  int global_batch = 0;                                  // 0 = no train line
  double weight_bytes = 0, grad_bytes = 0, optimizer_bytes = 0;  // 0 = not given
  double grad_allreduce_bytes = 0;                               // 0 = not given (= none)
};
ModelFile parse_model(const std::string& text, const std::string& path);
Cluster parse_cluster(const std::string& text, const std::string& path);
std::string read_text_file(const std::string& path);  // throws naming the path and errno's text

}  // namespace weft::plan
