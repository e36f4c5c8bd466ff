/*
 * weft/pipeline.h - pipeline parallelism: a schedule is plain data (per pipeline rank, an ordered
 * list of actions) that any language can generate, inspect, check, simulate, tune and run.
 * Part of the C ABI of libweft.so; include <weft/weft.h>.
 *
 * Words used below:
 *   p (ranks): the pipeline's ranks, 0..p-1 (the ranks of the communicator that runs it).
 *   S (stages): the model's pieces, 0..S-1, stage s feeding stage s+1. A rank holds S/p stages
 *     (v = S/p "virtual stages" per rank). Where they sit is the placement: stage_rank[s].
 *   m (microbatches): the step's batch split in m pieces, 0..m-1.
 *   An action {kind, stage, microbatch} is done by the rank that holds its stage:
 *     F(s, i)       forward of micro-batch i through stage s
 *     B(s, i)       the whole backward of (s, i)
 *     I(s, i)       backward for the inputs only (the gradient stage s-1 needs)
 *     W(s, i)       backward for the weights only; I then W together are one B
 *     SEND_F(s, i)  send stage s's output of i to stage s+1's rank
 *     RECV_F(s, i)  receive stage s's input of i from stage s-1's rank
 *     SEND_B(s, i)  send the gradient w.r.t. stage s's input of i to stage s-1's rank
 *     RECV_B(s, i)  receive the gradient w.r.t. stage s's output of i from stage s+1's rank
 *     REDUCE_GRAD(s) stage s's gradients are complete for the step (microbatch = -1): the
 *                   place for a data-parallel all-reduce of them
 *   Between two stages on the same rank (a V-shaped placement's turn, or p = 1) nothing is sent:
 *   the output is handed over in memory.
 *
 * torch.distributed.pipelining writes the same actions as strings: "0F0", "1SEND_F0",
 * "2I3", "3W3", "1REDUCE_GRAD" (stage, kind, micro-batch); weft_schedule_to_csv and
 * weft_schedule_from_csv move schedules between weft and torch in its CSV format (one row per
 * rank, one action string per cell).
 *
 * Thread safety: a schedule or a timeline is immutable after creation and may be read from any
 * number of threads. A pipeline (executor) is used by one thread at a time and communicates over
 * its communicator like any collective.
 */
#ifndef WEFT_PIPELINE_H
#define WEFT_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ schedules */

typedef struct weft_schedule *weft_schedule_t;

typedef enum weft_action_kind {
  WEFT_ACTION_F = 0,
  WEFT_ACTION_B = 1,
  WEFT_ACTION_I = 2,
  WEFT_ACTION_W = 3,
  WEFT_ACTION_SEND_F = 4,
  WEFT_ACTION_RECV_F = 5,
  WEFT_ACTION_SEND_B = 6,
  WEFT_ACTION_RECV_B = 7,
  WEFT_ACTION_REDUCE_GRAD = 8
} weft_action_kind_t;

/* An element of an array: its layout is frozen for WEFT_ABI_VERSION 1 (no struct_size), as
 * weft_p2p_op_t's. */
typedef struct weft_action {
  weft_action_kind_t kind;
  int32_t stage;
  int32_t microbatch; /* -1 for REDUCE_GRAD */
} weft_action_t;

/*
 * The generators. Each states the rule it needs (a violated rule is WEFT_ERR_INVALID_ARGUMENT
 * naming it). p >= 1 and m >= 1 always.
 *   GPIPE:            v = 1. All forwards, then all backwards (B). Any m.
 *   ONE_F_ONE_B:      v = 1. Rank r runs min(p-1-r, m) forwards, then one forward and one
 *                     backward in turn, then the remaining backwards. Any m, m < p included.
 *   INTERLEAVED_1F1B: v >= 1 stages per rank in a loop (stage s on rank s mod p), Megatron's
 *                     order in rounds of p micro-batches: m must be a multiple of p, or m <= p
 *                     (one round of m).
 *   ZB_H1:            v = 1. 1F1B with each B split into I and W, W delayed into the bubbles;
 *                     the same peak activations as 1F1B (p - r micro-batches on rank r). Any m.
 *   ZB_H2:            v = 1. Like ZB_H1 with up to 2(p - r) - 1 micro-batches in flight on rank
 *                     r, which fills the warm-up bubble. Any m.
 *   ZB_V:             v = 2 in a V (rank r holds stages r and 2p-1-r), I/W split; peak
 *                     activations those of 1F1B. Any m.
 *   DUALPIPE_V:       v = 2 in a V; DeepSeek's DualPipeV order (the forward of one micro-batch
 *                     interleaved with the backward of another, I/W split in the cool-down).
 *                     m >= 2p.
 */
typedef enum weft_schedule_kind {
  WEFT_SCHEDULE_CUSTOM = -1, /* made by weft_schedule_create / from_csv (a loaded file keeps the kind it was saved with) */
  WEFT_SCHEDULE_GPIPE = 0,
  WEFT_SCHEDULE_ONE_F_ONE_B = 1,
  WEFT_SCHEDULE_INTERLEAVED_1F1B = 2,
  WEFT_SCHEDULE_ZB_H1 = 3,
  WEFT_SCHEDULE_ZB_H2 = 4,
  WEFT_SCHEDULE_ZB_V = 5,
  WEFT_SCHEDULE_DUALPIPE_V = 6,
  WEFT_SCHEDULE_NUM_KINDS = 7
  /* WEFT_PLUGIN_ID_BASE and up: a SCHEDULE plugin's generator (weft/plugin.h). */
} weft_schedule_kind_t;

/*
 * Generator options; initialise with WEFT_SCHEDULE_CONFIG_INIT.
 *   ranks, microbatches: p and m (>= 1).
 *   stages_per_rank: v; 0 = the method's own (2 for ZB_V and DUALPIPE_V, else 1). Only
 *     INTERLEAVED_1F1B takes other values.
 *   reduce_grad: nonzero = each rank ends with REDUCE_GRAD for each of its stages, placed right
 *     after the stage's last backward piece.
 */
typedef struct weft_schedule_config {
  size_t struct_size;
  int ranks;
  int microbatches;
  int stages_per_rank;
  int reduce_grad;
} weft_schedule_config_t;

#define WEFT_SCHEDULE_CONFIG_INIT { sizeof(weft_schedule_config_t), 1, 1, 0, 0 }

/* Generates a schedule with its SEND/RECV actions (a RECV right before the compute that needs
 * the data, a SEND right after the compute that made it; consecutive SEND/RECV actions form one
 * exchange, see the executor). With several stages per rank (INTERLEAVED_1F1B with v > 1, ZB_V,
 * DUALPIPE_V) two ranks send both ways, and a RECV comes earlier where needed so that every
 * rank's messages follow one global order (the send times of a run with B = 2F): no two ranks
 * wait on each other. The result passes weft_schedule_validate. */
weft_status_t weft_schedule_generate(weft_schedule_kind_t kind, const weft_schedule_config_t *config,
                                     weft_schedule_t *schedule);

/*
 * A schedule from caller-given action lists: actions[r][0..counts[r]) for rank r of nranks.
 * The lists are copied. The stages and micro-batches are 0..max+1 of those named; stage s sits
 * on the rank whose list holds F(s, .) first (a rank that names a stage it does not hold is the
 * validator's business, not this call's). If the lists hold no SEND/RECV action at all
 * (torch's "compute only" form), weft inserts them as weft_schedule_generate does. Refused
 * here: a kind out of range, a negative stage or micro-batch (but REDUCE_GRAD's -1), and lists
 * with no F at all. Everything else is checked by weft_schedule_validate, so that a broken
 * schedule can still be built, inspected and drawn.
 */
weft_status_t weft_schedule_create(int nranks, const weft_action_t *const *actions, const size_t *counts,
                                   weft_schedule_t *schedule);
weft_status_t weft_schedule_destroy(weft_schedule_t schedule);

typedef struct weft_schedule_info {
  size_t struct_size;
  weft_schedule_kind_t kind; /* the generator, or WEFT_SCHEDULE_CUSTOM */
  int ranks;                 /* p */
  int stages;                /* S */
  int microbatches;          /* m */
  int stages_per_rank;       /* the most stages any rank holds */
} weft_schedule_info_t;

#define WEFT_SCHEDULE_INFO_INIT { sizeof(weft_schedule_info_t), WEFT_SCHEDULE_CUSTOM, 0, 0, 0, 0 }

weft_status_t weft_schedule_info(weft_schedule_t schedule, weft_schedule_info_t *info);
/* Rank `rank`'s actions in order: a view of the schedule's memory, valid until it is destroyed. */
weft_status_t weft_schedule_actions(weft_schedule_t schedule, int rank, const weft_action_t **actions,
                                    size_t *count);
/* The rank that holds `stage` (-1 when no rank runs its forward). */
weft_status_t weft_schedule_stage_rank(weft_schedule_t schedule, int stage, int *rank);

/*
 * WEFT_OK, or WEFT_ERR_INVALID_ARGUMENT with weft_last_error() naming the rank, the action index,
 * the action (torch's string) and the rule broken. The rules:
 *   placement:  every action of stage s is on the rank that holds s;
 *   complete:   every (stage, micro-batch) runs F once and its backward once: B, or I and W;
 *   order:      on its rank F(s, i) comes after its input is there (RECV_F(s, i), or F(s-1, i)
 *               on the same rank), B/I(s, i) after F(s, i) and after the output gradient is there
 *               (RECV_B(s, i), or B/I(s+1, i) on the same rank; nothing on the last stage),
 *               W(s, i) after I(s, i), SEND_F(s, i) after F(s, i), SEND_B(s, i) after B/I(s, i),
 *               REDUCE_GRAD(s) after every backward piece of s and at most once;
 *   transfers:  a SEND_F(s, i) exactly when stage s+1 is on another rank, with one RECV_F(s+1, i)
 *               on that rank; likewise SEND_B(s, i) and RECV_B(s-1, i); none between stages on
 *               one rank; the k-th message from rank a to rank b is the k-th that b receives
 *               from a (messages between two ranks match in issue order);
 *   no deadlock: a simulation in which every exchange (a run of consecutive SEND/RECV actions)
 *               is posted at once and completes only when each of its messages meets its
 *               partner's posted exchange (the strictest blocking model, NCCL's) runs to the end;
 *               otherwise the message names every rank's waiting action.
 */
weft_status_t weft_schedule_validate(weft_schedule_t schedule);

typedef enum weft_csv_format {
  WEFT_CSV_COMPUTE_COMMS = 0, /* every action (torch's "compute_comms") */
  WEFT_CSV_COMPUTE_ONLY = 1   /* F, B, I, W only (torch's "compute_only") */
} weft_csv_format_t;

/*
 * torch's CSV: one row per rank, one action string per cell ("0F0,0SEND_F0,..."), rows ended by
 * "\r\n" as Python's csv.writer writes them. Writes at most `capacity` bytes (NUL-terminated when
 * room is left) and the length without the NUL to *length; text = NULL asks for the length.
 * WEFT_ERR_INVALID_ARGUMENT when capacity is too small (*length still says what is needed).
 */
weft_status_t weft_schedule_to_csv(weft_schedule_t schedule, weft_csv_format_t format, char *text,
                                   size_t capacity, size_t *length);
/* Parses torch's CSV (either form; empty cells and "None" are idle steps and skipped; "\n" or
 * "\r\n" rows), then as weft_schedule_create. Errors name the row, the cell and the text. */
weft_status_t weft_schedule_from_csv(const char *text, size_t length, weft_schedule_t *schedule);

/* A schedule as a FlatBuffers file (core/schema/schedule.fbs); load verifies the buffer before
 * reading it and refuses another major format version. */
weft_status_t weft_schedule_save(weft_schedule_t schedule, const char *path);
weft_status_t weft_schedule_load(const char *path, weft_schedule_t *schedule);

/* ------------------------------------------------------------------ timelines */

/*
 * What happened, or would happen, on each rank: one start and end time (seconds from the step's
 * start) per action of the rank's list, and per-rank totals. Made by weft_schedule_simulate or
 * by a pipeline run (weft_pipeline_run). For a SEND/RECV, start is when it was posted and end
 * when it completed.
 */
typedef struct weft_timeline *weft_timeline_t;

typedef struct weft_timeline_info {
  size_t struct_size;
  int ranks;
  double makespan;        /* the latest end over all ranks */
  double bubble_fraction; /* idle / (ranks * makespan), idle = makespan minus compute time */
} weft_timeline_info_t;

#define WEFT_TIMELINE_INFO_INIT { sizeof(weft_timeline_info_t), 0, 0.0, 0.0 }

typedef struct weft_rank_stats {
  size_t struct_size;
  double busy;                  /* time in F, B, I, W, REDUCE_GRAD */
  double idle;                  /* makespan - busy */
  int peak_activations;         /* most micro-batch activations held at once (F done, backward not) */
  double peak_activation_bytes; /* the same in bytes (simulation: from the costs; run: 0) */
} weft_rank_stats_t;

#define WEFT_RANK_STATS_INIT { sizeof(weft_rank_stats_t), 0.0, 0.0, 0, 0.0 }

weft_status_t weft_timeline_info(weft_timeline_t timeline, weft_timeline_info_t *info);
/* Rank `rank`'s times, one per action of the schedule's list for that rank (views valid until
 * the timeline is destroyed); stats may be NULL. */
weft_status_t weft_timeline_rank(weft_timeline_t timeline, int rank, const double **start, const double **end,
                                 size_t *count, weft_rank_stats_t *stats);

typedef enum weft_timeline_format {
  WEFT_TIMELINE_SVG = 0,         /* ranks as rows, actions as boxes labelled with the micro-batch */
  WEFT_TIMELINE_CHROME_TRACE = 1 /* JSON for chrome://tracing and Perfetto */
} weft_timeline_format_t;

weft_status_t weft_timeline_write(weft_timeline_t timeline, weft_timeline_format_t format, const char *path);
weft_status_t weft_timeline_destroy(weft_timeline_t timeline);

/* ------------------------------------------------------------------ simulation and tuning */

/*
 * Costs for the simulator; initialise with WEFT_PIPELINE_COSTS_INIT. Arrays have one entry per
 * stage (nstages = the schedule's S). Times in any unit (the timeline reports the same unit).
 *   forward: required. backward: the time of B; NULL = backward_input + backward_weight.
 *   backward_input, backward_weight: the times of I and W; NULL = half of backward each.
 *     (backward and both halves NULL: WEFT_ERR_INVALID_ARGUMENT.)
 *   activation_bytes: what F(s, i) keeps until its backward is done (NULL = 0 bytes); of it,
 *     weight_grad_bytes (NULL = all of it) is still kept after I until W.
 *   boundary_bytes: the bytes of stage s's output (and of the gradient sent back); NULL = 0.
 *   latency, bandwidth: a message takes latency + bytes / bandwidth (bandwidth 0 = infinite).
 *   overhead: added to every compute action (the executor's own cost per action).
 *   reduce_grad: the time of REDUCE_GRAD (per stage, NULL = 0).
 *   cost_model: 0 = the arrays above; a COST_MODEL plugin's id (weft/plugin.h) = every compute
 *     action's time is cost(kind, stage, nstages, microbatch, microbatch_size) (forward and the
 *     backward arrays may then be NULL; overhead is still added).
 *   microbatch_size: passed to the cost model (samples per micro-batch; default 1).
 * The model is the executor's on host memory: a rank runs its actions in list order; SEND and
 * RECV cost the rank nothing (receives are posted ahead, sends complete in the background); a
 * message arrives latency + bytes/bandwidth after its SEND was reached; a compute action starts
 * when the rank is free and the message carrying its input (if another rank made it) has
 * arrived. A RECV's end in the timeline is that arrival. (On device memory the transfers are
 * stream-ordered, so a receive may hold up the stream earlier than this model says.)
 */
typedef struct weft_pipeline_costs {
  size_t struct_size;
  int nstages;
  const double *forward;
  const double *backward;
  const double *backward_input;
  const double *backward_weight;
  const double *activation_bytes;
  const double *weight_grad_bytes;
  const double *boundary_bytes;
  double latency;
  double bandwidth;
  double overhead;
  const double *reduce_grad;
  int cost_model;
  int microbatch_size;
} weft_pipeline_costs_t;

#define WEFT_PIPELINE_COSTS_INIT \
  { sizeof(weft_pipeline_costs_t), 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0.0, 0.0, 0.0, NULL, 0, 1 }

/* Simulates a valid schedule (it is validated first). */
weft_status_t weft_schedule_simulate(weft_schedule_t schedule, const weft_pipeline_costs_t *costs,
                                     weft_timeline_t *timeline);

/*
 * Auto-tuning input; initialise with WEFT_TUNE_CONFIG_INIT.
 *   ranks: p. layers: L, with layer_forward[l] and layer_backward[l] the time of layer l for one
 *     sample (B; I and W are taken as half each).
 *   global_batch: samples per step; a candidate's m must divide it (micro-batch size = batch / m).
 *   microbatch_overhead: time added to every compute action (launches, Python): it makes more
 *     micro-batches cost more, so the best m sits inside the range, not at its end.
 *   activation_bytes_per_sample: per layer, what a forward keeps until its backward.
 *   boundary_bytes_per_sample, latency, bandwidth: messages between stages.
 *   memory_cap: bytes of activations a rank may hold (0 = no cap); static_bytes: added to each
 *     rank's peak (parameters, optimizer state).
 *   cost_model: 0 = the layer tables; a COST_MODEL plugin's id = stage times from the plugin
 *     (cost(kind, stage, S, microbatch, batch / m)); layers, layer_forward and layer_backward are
 *     then not used (layers 0 allowed).
 *   kinds, nkinds: the generators to try (NULL = all; a SCHEDULE plugin's kind may be listed). max_stages_per_rank: the largest v tried
 *     for INTERLEAVED_1F1B (0 = 4); max_microbatches: the largest m tried (0 = global_batch).
 * Stages get contiguous layers: stage s of S gets layers [s*L/S, (s+1)*L/S) (integer division),
 * so L >= S is needed for a candidate to be tried.
 */
typedef struct weft_tune_config {
  size_t struct_size;
  int ranks;
  int layers;
  const double *layer_forward;
  const double *layer_backward;
  int global_batch;
  double microbatch_overhead;
  double activation_bytes_per_sample;
  double boundary_bytes_per_sample;
  double latency;
  double bandwidth;
  double memory_cap;
  double static_bytes;
  const weft_schedule_kind_t *kinds;
  size_t nkinds;
  int max_stages_per_rank;
  int max_microbatches;
  int cost_model;
} weft_tune_config_t;

#define WEFT_TUNE_CONFIG_INIT \
  { sizeof(weft_tune_config_t), 1, 0, NULL, NULL, 1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, NULL, 0, 0, 0, 0 }

/* One candidate: an element of an array, layout frozen (no struct_size). */
typedef struct weft_tune_candidate {
  weft_schedule_kind_t kind;
  int microbatches;
  int stages_per_rank;
  int microbatch_size;
  double step_time;       /* simulated makespan */
  double bubble_fraction;
  double peak_bytes;      /* the largest rank's activation peak + static_bytes */
  int fits;               /* peak_bytes <= memory_cap (or no cap) */
} weft_tune_candidate_t;

/*
 * Simulates every allowed (kind, m, v) and returns the candidates sorted by step time (those that
 * fit first): candidates[0..min(capacity, *count)), *count = how many there are (candidates =
 * NULL asks for the count). *best is the index of the fastest that fits, or -1 when none fits.
 * The schedule of the best is weft_schedule_generate(kind, {ranks, microbatches, stages_per_rank}).
 */
weft_status_t weft_schedule_tune(const weft_tune_config_t *config, weft_tune_candidate_t *candidates,
                                 size_t capacity, size_t *count, int *best);

/* ------------------------------------------------------------------ the executor */

typedef struct weft_pipeline *weft_pipeline_t;

/*
 * What a stage callback is given. For kind:
 *   F:  input = stage s's input for the micro-batch (NULL on stage 0: the framework feeds its own
 *       data); output = where to write stage s's output (NULL on the last stage, which computes
 *       the loss itself).
 *   B, I: input = the gradient w.r.t. stage s's output (NULL on the last stage: the loss);
 *       output = where to write the gradient w.r.t. stage s's input (NULL on stage 0).
 *   W:  input = output = NULL (the framework kept what it needs from I).
 *   REDUCE_GRAD: microbatch = -1, input = output = NULL.
 * The views point at weft-owned buffers with the declared boundary shape and dtype. An F input
 * stays valid (unchanged) until the backward of the same (stage, micro-batch) has returned (B,
 * or I), so a framework may keep it without a copy; every other view only during the call.
 */
typedef struct weft_stage_call {
  weft_action_kind_t kind;
  int stage;
  int microbatch;
  const weft_tensor_t *input;
  const weft_tensor_t *output;
} weft_stage_call_t;

/* A stage callback; anything but WEFT_OK stops the run, which returns that status naming the
 * action, with the text the callback gave weft_pipeline_set_error (a binding passes its
 * exception's message there). Callbacks run on the thread that called weft_pipeline_run and
 * must not call weft_pipeline_run themselves. */
typedef weft_status_t (*weft_stage_fn)(const weft_stage_call_t *call, void *user_data);

/*
 * Executor options; initialise with WEFT_PIPELINE_CONFIG_INIT.
 *   forward: required. backward: needed when the schedule has B actions; backward_input and
 *     backward_weight when it has I and W; reduce_grad when it has REDUCE_GRAD (NULL there =
 *     nothing to do). user_data: passed to each.
 *   boundaries: nboundaries = S - 1 tensors; boundaries[s] is stage s's output = stage s+1's
 *     input (and the shape of the gradient sent back): its dtype, ndim, shape and device are
 *     used, its data is ignored. Device memory (WEFT_DEVICE_CUDA of the communicator's GPU):
 *     transfers go through the device path (NCCL or staging) on `stream`.
 *   stream: for device boundaries: the stream the callbacks' work is queued on (NULL = the
 *     communicator's); weft orders its transfers on it.
 *   record: nonzero = every run records start and end times of each action and gathers them
 *     to every rank (one small all-gather at the end of the run; set it on all ranks or none).
 */
typedef struct weft_pipeline_config {
  size_t struct_size;
  weft_stage_fn forward;
  weft_stage_fn backward;
  weft_stage_fn backward_input;
  weft_stage_fn backward_weight;
  weft_stage_fn reduce_grad;
  void *user_data;
  const weft_tensor_t *boundaries;
  size_t nboundaries;
  void *stream;
  int record;
} weft_pipeline_config_t;

#define WEFT_PIPELINE_CONFIG_INIT \
  { sizeof(weft_pipeline_config_t), NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, 0 }

/*
 * Collective over comm (comm's size must equal the schedule's ranks; rank r runs the list of
 * rank r). The schedule is validated, and the pipeline keeps its own reference to it (the handle
 * may be destroyed after this call). The ranks compare a fingerprint of the schedule, the record
 * flag and every boundary's shape, dtype and memory kind: ranks that disagree all get
 * WEFT_ERR_MISMATCH naming what differs.
 */
weft_status_t weft_pipeline_create(weft_comm_t comm, weft_schedule_t schedule, const weft_pipeline_config_t *config,
                                   weft_pipeline_t *pipeline);

/*
 * Runs one step: this rank's actions in order. Compute actions call the callbacks. Host memory:
 * every receive up to the compute after the next one is posted when a compute starts (so
 * transfers overlap the compute before them), a compute waits only for the receive it needs,
 * and sends complete in the background and are waited for before the run returns. Device memory:
 * each run of consecutive SEND/RECV actions is one point-to-point batch (as weft_p2p_batch),
 * queued on the stream at its place in the list (an earlier receive would hold up the stream in
 * front of the compute that makes what the peer waits for). Every wait has the communicator's deadline; a failed
 * callback or transfer stops the run with its status, naming the action ("rank 1, action 7
 * (2RECV_F3)"). A failed run leaves the communicator unusable (messages of the step may still
 * be in flight; its peers fail at their deadline naming this rank), so run pipelines on a
 * communicator of their own (weft_comm_dup or weft_comm_split) when the rest must survive. record: optional;
 * with config.record set, a new timeline of this step for all ranks (the caller destroys it).
 */
weft_status_t weft_pipeline_run(weft_pipeline_t pipeline, weft_timeline_t *record);
weft_status_t weft_pipeline_destroy(weft_pipeline_t pipeline);

/* For a callback written in another language: sets the text weft_pipeline_run reports for the
 * failed callback (copied; call it before returning the failure status). */
weft_status_t weft_pipeline_set_error(const char *message);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_PIPELINE_H */
