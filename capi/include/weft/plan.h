/*
 * weft/plan.h - the planner: from a model description, a cluster description and a global batch,
 * rank the parallel layouts (data, tensor, pipeline, expert and context parallelism, ZeRO stage,
 * pipeline schedule and micro-batch count) by predicted step time under the memory cap, and say
 * what parallelism buys (Amdahl and Gustafson). Nothing here communicates: a plan is arithmetic
 * on the descriptions plus the pipeline simulator of weft/pipeline.h. Part of the C ABI of
 * libweft.so; include <weft/weft.h>.
 *
 * Words: N ranks = dp * tp * pp * cp (ranks numbered with tp innermost, then cp, then dp, then
 * pp outermost, as Megatron-LM orders them). ep is not a factor of N: expert parallelism is
 * folded onto the dp * tp ranks that hold the same pipeline stage and context shard (ep must
 * divide dp * tp and every MoE layer's experts). A dense layer sees dp data-parallel replicas
 * of tp ranks each; an MoE layer spreads its experts over ep ranks, its tokens over all dp * tp
 * ranks, and keeps dp * tp / ep copies of each expert.
 *
 * The cost model (alpha-beta: a message of b bytes costs latency + b / bandwidth; a group uses
 * the intra-host link when all its ranks sit in one host, else the inter-host link):
 *   compute: forward_seconds per sample when > 0, else forward_flops / flops_per_rank;
 *     backward = backward_seconds, or 2 x forward when 0. Divided by tp for a splittable dense
 *     layer (tensor_parallel = 1; a non-splittable one runs whole on every tp rank), by tp for
 *     an MoE layer (the tp ranks split the tokens), and by cp for every layer. A layer split
 *     over tp keeps its tp_replicated share whole on every tp rank: its time on one rank is
 *     t x (tp_replicated + (1 - tp_replicated) / tp) / cp.
 *   Measured collectives: a cluster may give, per kind (all-reduce, all-to-all) and group size,
 *     the seconds one small collective took over that many ranks of one host while every rank
 *     of the host was computing between calls (weft-bench --cluster-file measures them). Ranks
 *     that outnumber cores, or share them with compute, wait on each other longer than a link's
 *     latency says, and differently per collective. Within a host such an entry replaces the
 *     latency term of that kind: the entry for the group's size, else the per-step cost
 *     (seconds / its ring steps: 2 (n - 1) for an all-reduce, n - 1 for an all-to-all) of the
 *     nearest smaller measured size (else the nearest larger) times the group's ring steps. An
 *     all-gather or a reduce-scatter is priced as half an all-reduce's latency term. The
 *     bandwidth term is unchanged.
 *   TP: tp_allreduces ring all-reduces in forward and as many in backward of output_bytes x
 *     samples per splittable layer (0 = 2, Megatron's transformer block: attention and MLP);
 *     an MoE layer with tp > 1 all-gathers its output over tp instead.
 *   EP: all-to-all dispatch and combine in forward and again in backward, each of
 *     top_k x output_bytes x samples x (ep - 1) / ep bytes per rank, with ep - 1 latencies.
 *   CP: a ring exchange of context_bytes x samples x (cp - 1) / cp per layer in forward and
 *     twice that in backward (K/V in, their gradients back), cp - 1 latencies each.
 *   ZeRO-3: each stage all-gathers its parameters before every forward and every backward.
 *   The above run inside a stage's compute (they block it); the pipeline's stages then go
 *   through the simulator (weft_schedule_simulate's model, stage boundaries at the pipeline
 *   link), which gives the step's makespan and each rank's activation peak.
 *   DP: after the pipeline (no overlap with backward: an upper bound), the gradients of a rank
 *     are reduced over their replicas (dp x cp for dense layers, dp x tp / ep x cp for experts):
 *     a ring all-reduce, 2 (n - 1) / n x bytes / bandwidth + 2 (n - 1) x latency; ZeRO 1/2 a
 *     reduce-scatter and an all-gather of the same total; ZeRO-3 the reduce-scatter only. Before
 *     it, a ring all-reduce of grad_allreduce_bytes per parameter when the config sets it, and
 *     an MoE layer's shared_params' all-reduce over the tp group.
 *   memory per rank: weights + gradients + optimizer state of the rank's parameters (ZeRO-1
 *     shards the optimizer state over the replicas, ZeRO-2 also the gradients, ZeRO-3 also the
 *     weights, plus one stage's gathered weights) + the simulator's activation peak.
 *
 * Text files (weft_plan_load; '#' starts a comment; blank lines are skipped; keys are
 * key=value, in any order; an unknown key, a repeated key, a bad number or a missing required
 * key fails with WEFT_ERR_INVALID_ARGUMENT naming file:line and the key):
 *   model file: one line per layer kind, in model order (count copies in a row),
 *     layer name=NAME count=C params=P flops=F fwd=S bwd=S act=B out=B experts=E topk=K tp=0|1 kv=B
 *           tp_rep=R tp_ar=A shared=P
 *     (name required, no spaces; count default 1; flops or fwd required; tp default 1; the rest
 *     default 0, topk 1 with experts > 0; tp_rep, tp_ar and shared are tp_replicated,
 *     tp_allreduces and shared_params), and at most one
 *     train global_batch=G weight_bytes=2 grad_bytes=2 optimizer_bytes=12 grad_allreduce_bytes=0
 *   cluster file: one or more lines (later ones set more keys; a key set twice is an error)
 *     cluster hosts=H ranks_per_host=R memory=BYTES flops=F intra_bw=B intra_lat=S inter_bw=B inter_lat=S
 *             intra_allreduce=N:S,N:S,... intra_alltoall=N:S,...
 *     (hosts default 1; ranks_per_host, memory, intra_bw required; inter_bw and inter_lat
 *     required when hosts > 1; bandwidths in bytes/s, latencies in seconds, flops per second;
 *     intra_allreduce / intra_alltoall: measured collectives, group size N : seconds, each N
 *     from 2 to ranks_per_host at most once).
 *   Numbers are decimal or scientific (1.2e9); every value must be finite and >= 0.
 *
 * Thread safety: a plan is immutable after creation and may be read from any number of threads.
 */
#ifndef WEFT_PLAN_H
#define WEFT_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_plan *weft_plan_t;

/*
 * One layer kind of the model: an element of the config's `layers` array, whose stride is the
 * config's layer_size (WEFT_PLAN_CONFIG_INIT sets sizeof(weft_plan_layer_t); a config without
 * that field, or 0 there, means the first release's 80-byte layout, the fields up to
 * context_bytes). New fields are only ever appended. Zero-initialise one (= {0}) and set what
 * you know. All per-sample quantities are for one sample (one sequence) of the global batch.
 *   name: for messages and the tables (copied; NULL = "layer<i>").
 *   count: identical copies in a row (e.g. 96 transformer blocks); >= 1.
 *   experts: 0 = dense; > 0 = an MoE layer of that many experts (params counts all experts,
 *     flops and times are per sample through its top_k experts).
 *   top_k: experts per token of an MoE layer (1 <= top_k <= experts); ignored when dense.
 *   tensor_parallel: 1 = Megatron-splittable over tp; 0 = replicated on every tp rank.
 *   params: parameters (elements).
 *   forward_flops: floating-point operations of the forward, per sample.
 *   forward_seconds: measured forward time per sample on one rank; > 0 overrides flops.
 *   backward_seconds: per sample; 0 = 2 x forward.
 *   activation_bytes: what the forward keeps until the backward, per sample.
 *   output_bytes: the layer's output per sample (pipeline boundary, TP reduction, EP token size).
 *   context_bytes: K/V bytes per sample a context-parallel rank needs from the others (0 = no
 *     dependency across the sequence: cp only splits the work).
 *   tp_replicated: of a layer split over tp (tensor_parallel = 1, or an MoE layer), the share
 *     (0..1) of its forward and backward time that every tp rank runs whole: norms, residual
 *     adds, a projection outside the split (Megatron without sequence parallelism); 0 = none.
 *   tp_allreduces: all-reduces over tp per micro-batch in each direction of a splittable dense
 *     layer (0 = 2: a transformer block; 1: an MLP or attention block alone).
 *   shared_params: of an MoE layer's params, those every rank holds whole (the router, shared
 *     experts, a head fused into the layer; 0..params, 0 for a dense layer). An MoE layer's
 *     tokens are split over tp, so the tp ranks' gradients of these differ: they are
 *     all-reduced over the tp group once a step (grad_bytes each), then stored and reduced over
 *     dp x cp as a dense layer's parameters are. The rest (params - shared_params) are the
 *     experts, sharded over ep.
 */
typedef struct weft_plan_layer {
  const char *name;
  int count;
  int experts;
  int top_k;
  int tensor_parallel;
  double params;
  double forward_flops;
  double forward_seconds;
  double backward_seconds;
  double activation_bytes;
  double output_bytes;
  double context_bytes;
  double tp_replicated;
  int tp_allreduces;
  double shared_params;
} weft_plan_layer_t;

/* The kinds of collective a cluster description may give measured costs for. */
typedef enum weft_plan_collective_kind {
  WEFT_PLAN_ALLREDUCE = 0,
  WEFT_PLAN_ALLTOALL = 1
} weft_plan_collective_kind_t;

/*
 * One measured collective (an array element: this layout is frozen): one small collective of
 * `kind` over `ranks` ranks of one host (2 <= ranks <= ranks_per_host) took `seconds` (>= 0)
 * while every rank of the host computed between calls.
 */
typedef struct weft_plan_collective {
  weft_plan_collective_kind_t kind;
  int ranks;
  double seconds;
} weft_plan_collective_t;

/*
 * The machines; initialise with WEFT_PLAN_CLUSTER_INIT.
 *   hosts, ranks_per_host: the ranks are hosts x ranks_per_host (>= 1 each).
 *   memory_per_rank: bytes a rank may use (> 0).
 *   flops_per_rank: sustained floating-point operations per second (needed when a layer gives
 *     flops without forward_seconds).
 *   intra_bandwidth, intra_latency: between ranks of one host, per rank (bytes/s > 0, s).
 *   inter_bandwidth, inter_latency: between hosts, per rank (needed when hosts > 1).
 *   intra_collectives, num_intra_collectives: measured small collectives within one host (the
 *     cost model above); NULL and 0 = none, every collective priced from intra_latency. The
 *     array is read during weft_plan_create and not kept.
 */
typedef struct weft_plan_cluster {
  size_t struct_size;
  int hosts;
  int ranks_per_host;
  double memory_per_rank;
  double flops_per_rank;
  double intra_bandwidth;
  double intra_latency;
  double inter_bandwidth;
  double inter_latency;
  const weft_plan_collective_t *intra_collectives;
  size_t num_intra_collectives;
} weft_plan_cluster_t;

#define WEFT_PLAN_CLUSTER_INIT { sizeof(weft_plan_cluster_t), 1, 1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, NULL, 0 }

/*
 * One layout and its prediction; initialise with WEFT_PLAN_LAYOUT_INIT. As input (the config's
 * `layout`): dp, tp, pp, ep, cp, zero_stage as given; schedule WEFT_SCHEDULE_CUSTOM = try every
 * generator; microbatches 0 = try every count; stages_per_rank 0 = every allowed one. As output
 * (weft_plan_layout) every field is set.
 *   dp, tp, pp, cp: the factors of the ranks; ep: expert parallelism over dp * tp (1 = none).
 *   zero_stage: 0..3. schedule, microbatches, stages_per_rank: the pipeline's (pipeline.h).
 *   step_seconds: the predicted step: the pipeline's makespan + the exposed data-parallel time.
 *   compute_seconds: arithmetic per step on the busiest pipeline rank (no communication).
 *   communication_seconds: communication on the critical path: TP, EP, CP and ZeRO-3 time
 *     inside the busiest rank's stages, plus the data-parallel time after the pipeline.
 *   bubble_fraction: the simulator's idle / (ranks x makespan) of the pipeline (pipeline
 *     transfers waited for count as idle).
 *   memory_per_rank: the largest rank's bytes (static_bytes + activation_bytes of that rank).
 *   static_bytes: weights + gradients + optimizer state on the largest rank.
 *   activation_bytes: the simulator's activation peak on the rank with the largest total.
 *   communication_bytes: bytes one rank sends per step (all kinds together, the busiest rank).
 *   fits: memory_per_rank <= the cluster's memory_per_rank.
 */
typedef struct weft_plan_layout {
  size_t struct_size;
  int dp;
  int tp;
  int pp;
  int ep;
  int cp;
  int zero_stage;
  weft_schedule_kind_t schedule;
  int microbatches;
  int stages_per_rank;
  int fits;
  double step_seconds;
  double compute_seconds;
  double communication_seconds;
  double bubble_fraction;
  double memory_per_rank;
  double static_bytes;
  double activation_bytes;
  double communication_bytes;
} weft_plan_layout_t;

#define WEFT_PLAN_LAYOUT_INIT \
  { sizeof(weft_plan_layout_t), 1, 1, 1, 1, 1, 0, WEFT_SCHEDULE_CUSTOM, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0 }

/*
 * What to plan; initialise with WEFT_PLAN_CONFIG_INIT.
 *   layers, num_layers: the model, in order (weft_plan_create; weft_plan_load reads them from
 *     the model file and ignores these two and `cluster`).
 *   cluster: the machines (weft_plan_create: required).
 *   global_batch: samples per step (weft_plan_load: 0 = the model file's train line).
 *   ranks: how many ranks to use, <= hosts x ranks_per_host (0 = all of them).
 *   weight_bytes, grad_bytes, optimizer_bytes: bytes per parameter (0 = the model file's train
 *     line, else 2, 2 and 12: bf16 weights and gradients, Adam with fp32 master weights).
 *   microbatch_overhead: seconds added to every compute action (kernel launches, framework).
 *   top: how many layouts the plan keeps, best first (0 = 10).
 *   include_infeasible: nonzero = layouts over the memory cap are kept too (fits = 0, after
 *     every feasible one); 0 = only those that fit.
 *   max_pp, max_tp, max_cp: the largest factors tried (0 = no limit beyond the rules: tp <=
 *     ranks_per_host unless tp_across_hosts, pp <= the model's layers, cp = 1 unless a layer
 *     has context_bytes > 0, and then tp x cp <= ranks_per_host unless tp_across_hosts; a
 *     nonzero max_cp lifts that last rule).
 *   tp_across_hosts: nonzero = tp may exceed ranks_per_host.
 *   kinds, nkinds: the schedules tried (NULL = every built-in generator).
 *   max_microbatches: the largest micro-batch count tried (0 = the replica's batch); only counts
 *     that divide the replica's batch (global_batch / dp) are tried.
 *   layout: NULL = search every layout; else predict this one layout only (its CUSTOM schedule
 *     and 0 micro-batches still pick the best), kept even when it does not fit.
 *   scaling: nonzero = compute the scaling curves (weft_plan_scaling) during creation.
 *   layer_size: the stride of `layers` in bytes (sizeof(weft_plan_layer_t) from the INIT macro;
 *     80 or 0: the first release's layout; any other size is refused).
 *   grad_allreduce_bytes: bytes per parameter of an all-reduce of every gradient over its
 *     replicas (dp x cp; experts dp x tp / ep x cp) before the DP reduction above: a framework
 *     that sums gradients in a wider type for a reproducible result and hands the rounded sum
 *     to ZeRO pays it (the moe_digits demo: 8, float64). 0 = none (weft_plan_load: the model
 *     file's train line).
 * The search tries every (dp, tp, pp, cp) with dp tp pp cp = ranks and dp dividing the batch,
 * every ep that divides dp tp and every MoE layer's experts, ZeRO 0..3, and per (dp, tp, pp,
 * cp, ep) every allowed schedule and micro-batch count (pipeline.h's rules; a schedule with
 * more than 2^22 micro-batch x stage pairs is not simulated). The S stages get
 * contiguous runs of the layer copies, cut so that the slowest stage's compute (per sample, on
 * one tp x cp rank) is as small as possible. Of each (dp, tp, pp, cp, ep, zero) the best
 * schedule is kept; layouts are sorted by fits (first), then step_seconds, then memory_per_rank.
 */
typedef struct weft_plan_config {
  size_t struct_size;
  const weft_plan_layer_t *layers;
  size_t num_layers;
  const weft_plan_cluster_t *cluster;
  int global_batch;
  int ranks;
  double weight_bytes;
  double grad_bytes;
  double optimizer_bytes;
  double microbatch_overhead;
  int top;
  int include_infeasible;
  int max_pp;
  int max_tp;
  int max_cp;
  int tp_across_hosts;
  const weft_schedule_kind_t *kinds;
  size_t nkinds;
  int max_microbatches;
  const weft_plan_layout_t *layout;
  int scaling;
  size_t layer_size;
  double grad_allreduce_bytes;
} weft_plan_config_t;

#define WEFT_PLAN_CONFIG_INIT \
  { sizeof(weft_plan_config_t), NULL, 0, NULL, 0, 0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0, 0, 0, 0, NULL, 0, 0, NULL, 0, \
    sizeof(weft_plan_layer_t), 0.0 }

/* Ranks the layouts (or predicts config->layout). WEFT_ERR_INVALID_ARGUMENT naming the field for
 * a bad description; a plan with count 0 when nothing fits (and include_infeasible is 0). */
weft_status_t weft_plan_create(const weft_plan_config_t *config, weft_plan_t *plan);

/* As weft_plan_create with the model and the cluster read from the text files above; config may
 * be NULL (all defaults) and its nonzero fields override the files' values. Errors name
 * file:line and the key. */
weft_status_t weft_plan_load(const char *model_path, const char *cluster_path, const weft_plan_config_t *config,
                             weft_plan_t *plan);

weft_status_t weft_plan_destroy(weft_plan_t plan);

typedef struct weft_plan_info {
  size_t struct_size;
  int ranks;          /* the ranks planned for */
  int global_batch;
  size_t count;       /* layouts kept (weft_plan_layout's 0..count-1) */
  size_t searched;    /* layouts predicted in all */
  size_t feasible;    /* of them, those that fit */
} weft_plan_info_t;

#define WEFT_PLAN_INFO_INIT { sizeof(weft_plan_info_t), 0, 0, 0, 0, 0 }

weft_status_t weft_plan_info(weft_plan_t plan, weft_plan_info_t *info);
/* The i-th kept layout, best first (index < count). */
weft_status_t weft_plan_layout(weft_plan_t plan, size_t index, weft_plan_layout_t *layout);

/*
 * What parallelism buys, from the best layout (index 0) at N = the plan's ranks.
 *   one_rank_seconds: the predicted step on one rank (the memory cap ignored: a time, not a
 *     promise that it fits); step_seconds: the best layout's.
 *   speedup = one_rank_seconds / step_seconds; efficiency = speedup / N.
 *   serial_fraction s = (1 / speedup - 1 / N) / (1 - 1 / N) (Amdahl's law solved for s; 0 when
 *     N = 1): the share of the one-rank time that behaves as if it did not parallelise
 *     (communication and bubbles included).
 *   gustafson_speedup = N - s (N - 1): the scaled speedup Gustafson's law predicts.
 */
typedef struct weft_plan_scaling {
  size_t struct_size;
  int ranks;
  double one_rank_seconds;
  double step_seconds;
  double speedup;
  double efficiency;
  double serial_fraction;
  double gustafson_speedup;
} weft_plan_scaling_t;

#define WEFT_PLAN_SCALING_INIT { sizeof(weft_plan_scaling_t), 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0 }

/*
 * One point of the scaling curves (an element of an array, layout frozen): at n ranks (1, 2, 4,
 * ... up to N, and N itself), the best layout found by the same search on n ranks: the fastest
 * that fits, or the fastest of all when none fits (fits says which).
 *   strong_seconds: the step at the plan's global batch; strong_speedup = one-rank step /
 *     strong_seconds; amdahl_speedup = 1 / (s + (1 - s) / n) with the plan's s.
 *   weak_batch = max(1, round(global_batch x n / N)) (the batch grows with the ranks);
 *     weak_seconds: the step at weak_batch on n ranks; weak_speedup = samples per second
 *     relative to one rank at weak_batch(1): (weak_batch / weak_batch(1)) x (the one-rank step
 *     at weak_batch(1)) / weak_seconds; gustafson_speedup = n - s (n - 1) beside it.
 */
typedef struct weft_plan_scaling_point {
  int ranks;
  int weak_batch;
  int fits;
  double strong_seconds;
  double strong_speedup;
  double amdahl_speedup;
  double weak_seconds;
  double weak_speedup;
  double gustafson_speedup;
} weft_plan_scaling_point_t;

/* The summary into *summary (may be NULL) and the curve into points[0..min(capacity, *count))
 * with *count = how many points there are (points = NULL asks for the count). Searches once per
 * point on the first call unless config.scaling computed it (seconds for thousands of ranks);
 * later calls reuse the result (the plan guards it: still safe from several threads).
 * WEFT_ERR_INVALID_ARGUMENT for a plan with no layout. */
weft_status_t weft_plan_scaling(weft_plan_t plan, weft_plan_scaling_t *summary, weft_plan_scaling_point_t *points,
                                size_t capacity, size_t *count);

typedef enum weft_plan_format_kind {
  WEFT_PLAN_FORMAT_TABLE = 0,  /* the kept layouts as a text table, one per line, best first */
  WEFT_PLAN_FORMAT_REPORT = 1, /* the Amdahl/Gustafson report with the strong and weak curves
                                  (computes them as weft_plan_scaling when needed) */
  WEFT_PLAN_FORMAT_JSON = 2    /* {"ranks", "global_batch", "searched", "feasible", "layouts": [...],
                                  "scaling"}: each layout with dp tp pp ep cp zero schedule (its
                                  name) microbatches stages_per_rank step_seconds compute_seconds
                                  communication_seconds bubble_fraction memory_bytes static_bytes
                                  activation_bytes communication_bytes fits; "scaling" (the summary
                                  and "points") only once computed (config.scaling or a
                                  weft_plan_scaling call), else null */
} weft_plan_format_kind_t;

/* Text as weft_schedule_to_csv: at most `capacity` bytes (NUL-terminated when room is left), the
 * length without the NUL in *length; text = NULL asks for the length; WEFT_ERR_INVALID_ARGUMENT
 * when capacity is too small (*length still says what is needed). */
weft_status_t weft_plan_format(weft_plan_t plan, weft_plan_format_kind_t what, char *text, size_t capacity,
                               size_t *length);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_PLAN_H */
