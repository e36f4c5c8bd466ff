/*
 * weft/training.h - training parallelism: gradient buckets (data parallel), ZeRO stages 0-3 with
 * a fused optimizer, and the communication of Megatron-style tensor, sequence and context
 * parallelism. Part of the C ABI of libweft.so; include <weft/weft.h>.
 *
 * weft does not run the model: the framework computes forward and backward and hands weft its
 * gradients; weft owns the communication, the sharding and the optimizer arithmetic on flat
 * buffers (as DeepSpeed's and FSDP's flat parameters do).
 *
 * Thread safety: a bucketer or a ZeRO handle is used by one thread at a time. It communicates
 * over its communicator (or its mesh's), in issue order with the other calls made on it, so every
 * rank must make the same sequence of communicating calls (mark_ready, grad_ready, gather,
 * step, ...) - the same rule as for collectives.
 */
#ifndef WEFT_TRAINING_H
#define WEFT_TRAINING_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "common.h"
#include "mesh.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ wire formats */

/*
 * How gradients travel between ranks.
 *   NATIVE: in their own dtype, reduced by the rules of weft_allreduce / weft_reduce_scatter
 *     (common.h: f16/bf16 are accumulated in float32 and rounded once).
 *   BF16 and FP8_E4M3: compressed. Each rank encodes its gradient, the encoded chunks are
 *     exchanged all-to-all, each rank decodes and sums its chunk in float32 in rank order
 *     (deterministic), and for an all-reduce the sum is encoded once more and all-gathered. The
 *     bytes on the wire per element: 2 (BF16) or 1 + 4/WEFT_WIRE_FP8_BLOCK (FP8_E4M3: one
 *     float32 scale, absmax / 448, per block of WEFT_WIRE_FP8_BLOCK elements).
 *
 * The error a compressed wire adds, for a reduced element S = sum over ranks of g_r (u = 2^-8
 * for BF16, 2^-4 for FP8_E4M3; s_r = the scale of g_r's block on rank r, s = the scale of S's
 * block; the E4M3 terms in s cover its subnormal range):
 *   all-reduce:     |result - S| <= u * (sum_r |g_r| + |S|) + 2^-10 * (sum_r s_r + s) + eps32
 *   reduce-scatter: |result - S| <= u * sum_r |g_r| + 2^-10 * sum_r s_r + eps32
 * (s terms for FP8_E4M3 only; eps32 = (nranks + 1) * 2^-24 * sum_r |g_r|, float32 accumulation
 * and the final rounding to a float32 gradient). tests/multiproc/test_bucketer.cpp checks these
 * bounds element by element and bench/bucketer_bench prints the measured error.
 */
typedef enum weft_wire_format {
  WEFT_WIRE_NATIVE = 0,
  WEFT_WIRE_BF16 = 1,
  WEFT_WIRE_FP8_E4M3 = 2
  /* WEFT_PLUGIN_ID_BASE and up: a gradient codec from a plugin (weft/plugin.h, CODEC_* entries;
     weft_plugin_entry's id). It travels like BF16 and FP8_E4M3: encode, all-to-all, decode and
     sum in float32 in rank order, and for an all-reduce encode once more and all-gather; float32
     gradients only, host memory only; its error is the codec's, and wire_bytes / comm_bytes count
     its bytes(chunk) per chunk. A nonzero return from its encode or decode fails the
     reduction with a message naming the codec and its plugin (the other ranks then fail at
     their deadline, as for any rank that leaves a collective). */
} weft_wire_format_t;

#define WEFT_WIRE_FP8_BLOCK 256

/* ------------------------------------------------------------------ gradient bucketer */

typedef struct weft_bucketer *weft_bucketer_t;

typedef enum weft_bucket_reduction {
  WEFT_BUCKET_ALLREDUCE = 0,     /* every rank gets the whole reduced gradient */
  WEFT_BUCKET_REDUCE_SCATTER = 1 /* each rank gets one chunk of each bucket (ZeRO-style) */
} weft_bucket_reduction_t;

/*
 * Bucketer options; initialise with WEFT_BUCKETER_CONFIG_INIT. NULL = all defaults.
 *   bucket_bytes: a bucket is closed when adding the next gradient would exceed this many
 *     bytes (a gradient larger than it gets a bucket of its own); 0 = 25 MiB (DDP's default).
 *     A new bucket also starts where the dtype or the memory kind changes.
 *   bucket_of: optional, ngrads bucket indices (0, 1, ... without gaps, each gradient's
 *     bucket) instead of bucket_bytes; one bucket must hold one dtype and one kind of memory.
 *   op: WEFT_SUM or WEFT_AVG (the mean over the communicator's ranks).
 *   wire: how the buckets travel (above). BF16 and FP8_E4M3 take float32 gradients only.
 *   reduction: all-reduce or reduce-scatter.
 *   names: optional, ngrads names used in error messages ("grad[i]" otherwise).
 *   error_feedback: nonzero (compressed wires only) = error feedback: each rank keeps, per
 *     gradient element, what its encoding lost (residual = g + residual - decode(encode(g +
 *     residual))) and adds it to the next step's gradient before encoding, so a lossy codec
 *     (top-k, FP8) loses nothing in the long run. The residuals are float32, one per element
 *     (allocated once, at creation). Only each rank's own encode of its gradient (the first
 *     encode of a compressed reduction) gets feedback: an all-reduce's second encode, of the
 *     reduced sum, has none, so what it drops is lost (reduce-scatter has no second encode). An
 *     element whose residual would not be finite (an inf/NaN gradient) keeps 0. With the NATIVE
 *     wire: WEFT_ERR_INVALID_ARGUMENT naming error_feedback.
 */
typedef struct weft_bucketer_config {
  size_t struct_size;
  size_t bucket_bytes;
  const size_t *bucket_of;
  weft_op_t op;
  weft_wire_format_t wire;
  weft_bucket_reduction_t reduction;
  const char *const *names;
  int error_feedback;
} weft_bucketer_config_t;

#define WEFT_BUCKETER_CONFIG_INIT \
  { sizeof(weft_bucketer_config_t), 0, NULL, WEFT_AVG, WEFT_WIRE_NATIVE, WEFT_BUCKET_ALLREDUCE, NULL, 0 }

/*
 * Collective over comm. Registers ngrads (>= 1) gradient tensors: contiguous, floating point,
 * host memory or device memory of comm's GPU (a bucket holds one kind; device buckets move
 * through NCCL or staging like the collectives, and take the NATIVE wire only); the memory
 * stays the caller's and must stay at the same address for the bucketer's life. Between
 * mark_ready and finish the caller must not write a marked gradient: weft copies it in then. List them in the order backward produces them
 * (for a sequential model: the last layer's first): buckets are formed in list order and
 * launched in bucket order, as DDP does. Every rank must register the same shapes and dtypes
 * (checked: WEFT_ERR_MISMATCH names the first rank and gradient that differ).
 */
weft_status_t weft_bucketer_create(weft_comm_t comm, const weft_tensor_t *grads, size_t ngrads,
                                   const weft_bucketer_config_t *config, weft_bucketer_t *bucketer);
weft_status_t weft_bucketer_destroy(weft_bucketer_t bucketer);

weft_status_t weft_bucketer_num_buckets(weft_bucketer_t bucketer, size_t *nbuckets);
/* The bucket of gradient `grad` and the element offset where it starts in that bucket. */
weft_status_t weft_bucketer_bucket_of(weft_bucketer_t bucketer, size_t grad, size_t *bucket,
                                      size_t *offset);

/*
 * Gradient `grad` holds its final value for this step. `data` is its address now (it must be
 * the registered one: a framework that reallocates gradients between steps is told so, not
 * silently reduced from stale memory). When this completes the earliest unlaunched buckets,
 * they are copied into weft's bucket buffers and their reductions start asynchronously, in
 * bucket order; the call then returns (device gradients: the copies are queued on `stream`,
 * NULL = the communicator's stream, after the work the caller queued there). Marking a gradient
 * twice in a step is WEFT_ERR_INVALID_ARGUMENT naming it.
 */
weft_status_t weft_bucketer_mark_ready(weft_bucketer_t bucketer, size_t grad, const void *data,
                                       void *stream);

/*
 * Waits for every bucket's reduction and writes the results: ALLREDUCE into the registered
 * gradients; REDUCE_SCATTER into the bucketer's shards (weft_bucketer_shard). Returns when every
 * result is written (device buckets: their work is waited for, within the communicator's
 * deadline), so later work on any stream sees them; `stream` must be NULL or a stream of the
 * communicator's GPU and is not waited on. Resets the bucketer for the next step. A gradient
 * never marked is WEFT_ERR_INVALID_ARGUMENT naming it (nothing is launched for its bucket on any
 * rank that has not marked it; the others wait for it and fail at their deadline).
 */
weft_status_t weft_bucketer_finish(weft_bucketer_t bucketer, void *stream);

/*
 * REDUCE_SCATTER mode: this rank's reduced chunk of bucket `bucket` after finish(): a 1-d view
 * of weft-owned memory (valid until the next finish or destroy) holding elements
 * [*offset, *offset + count) of the bucket, where the bucket is its gradients' elements
 * concatenated in list order and the chunks follow torch.chunk's rule over the communicator's
 * ranks (chunk = ceil(n / nranks); the last chunks may be short or empty).
 */
weft_status_t weft_bucketer_shard(weft_bucketer_t bucketer, size_t bucket, weft_tensor_t *shard, size_t *offset);

typedef struct weft_bucketer_stats {
  size_t struct_size;
  uint64_t steps;           /* finish() calls so far */
  uint64_t wire_bytes;      /* last step: bytes this rank's reductions moved (see below) */
  uint64_t exposed_ns;      /* last step: time finish() waited for communication */
  uint64_t launched_late;   /* last step: buckets ready before an earlier bucket (waited for it) */
} weft_bucketer_stats_t;

#define WEFT_BUCKETER_STATS_INIT { sizeof(weft_bucketer_stats_t), 0, 0, 0, 0 }

/* wire_bytes counts, per collective this rank joined, the bytes of its whole operand in the wire
 * format: an all-reduce of n bytes counts 2n (a reduce-scatter plus an all-gather, ZeRO's count),
 * a reduce-scatter or an all-gather n, an all-to-all n. */
weft_status_t weft_bucketer_stats(weft_bucketer_t bucketer, weft_bucketer_stats_t *stats);

/* ------------------------------------------------------------------ ZeRO */

typedef struct weft_zero *weft_zero_t;

typedef enum weft_optimizer_kind {
  WEFT_OPTIMIZER_SGD = 0,  /* torch.optim.SGD: momentum, dampening 0, weight decay added to the gradient */
  WEFT_OPTIMIZER_ADAM = 1, /* torch.optim.Adam: L2 weight decay added to the gradient */
  WEFT_OPTIMIZER_ADAMW = 2 /* torch.optim.AdamW: decoupled weight decay */
} weft_optimizer_kind_t;

/*
 * The optimizer's arithmetic is torch.optim's (foreach=False) in float32, per element:
 *   SGD:   g += wd*p; b = momentum ? (step == 1 ? g : momentum*b + g) : g; p -= lr*b
 *   Adam:  g += wd*p; m += (1-b1)*(g-m) (torch's lerp); v = b2*v + (1-b2)*g*g;
 *          p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)   (t = the step count, from 1)
 *   AdamW: p *= 1 - lr*wd; then Adam without the L2 term.
 * State: SGD with momentum keeps one float32 buffer, Adam/AdamW two (m, v); with f16/bf16
 * parameters also a float32 master copy of them.
 */
typedef struct weft_optimizer_config {
  size_t struct_size;
  weft_optimizer_kind_t kind;
  float lr;
  float momentum; /* SGD */
  float beta1;    /* Adam, AdamW */
  float beta2;
  float eps;
  float weight_decay;
} weft_optimizer_config_t;

#define WEFT_OPTIMIZER_CONFIG_INIT \
  { sizeof(weft_optimizer_config_t), WEFT_OPTIMIZER_ADAMW, 1e-3f, 0.0f, 0.9f, 0.999f, 1e-8f, 0.01f }

/*
 * ZeRO options; initialise with WEFT_ZERO_CONFIG_INIT.
 *   stage: 0 = plain data parallel (gradients all-reduced, every rank keeps everything);
 *     1 = optimizer state sharded; 2 = + gradients sharded (reduce-scattered as they become
 *     ready); 3 = + parameters sharded (gathered per group before use, released after).
 *   param_dtype: FLOAT32, BFLOAT16 or FLOAT16: the parameters and gradients weft holds.
 *     With BFLOAT16/FLOAT16 weft also keeps float32 master weights; the optimizer runs on them
 *     and rounds the parameters once per step.
 *   groups: optional, nparams group indices (0, 1, ... without gaps, non-decreasing). A group's
 *     parameters are one flat buffer: reduced together (the bucket), partitioned together, and
 *     gathered together at stage 3 (an FSDP unit). NULL = consecutive parameters up to
 *     group_bytes each (0 = 25 MiB).
 *   names: optional, parameter names for messages and the saved state ("param[i]" otherwise).
 *   grad_op: WEFT_AVG (the mean over the data-parallel ranks) or WEFT_SUM.
 *   wire: the gradients' wire format (float32 parameters only for BF16/FP8_E4M3).
 *   max_grad_norm: clip the unscaled gradients to this global L2 norm (0 = no clipping). The
 *     norm (and the inf/NaN decision) is taken over every rank of the mesh: each data-parallel
 *     group's shards once, and the other dims' coordinates as distinct parameters (tensor-parallel
 *     shards); a parameter replicated over another dim counts once per copy, so give such a
 *     mesh only parameters that differ across its other dims, or clip in the framework.
 *   loss_scale: the factor the caller multiplied its loss by (1 = none). Gradients are divided by
 *     it before the step. If any gradient element on any rank is inf or NaN, every rank skips
 *     the step (one decision, all-reduced). dynamic_loss_scale != 0: torch.amp.GradScaler's
 *     rule - a skipped step multiplies the scale by backoff (0.5), growth_interval clean steps
 *     in a row multiply it by growth (2).
 *   error_feedback: as the bucketer's (compressed wires only). The residuals (4 bytes per
 *     parameter element, counted in weft_zero_memory's optimizer) are in loss-scaled units:
 *     they are multiplied by growth when the scale grows, cleared by a skipped step and by
 *     weft_zero_load (checkpoints do not hold them).
 */
typedef struct weft_zero_config {
  size_t struct_size;
  int stage;
  weft_dtype_t param_dtype;
  weft_optimizer_config_t optimizer;
  const int *groups;
  size_t group_bytes;
  const char *const *names;
  weft_op_t grad_op;
  weft_wire_format_t wire;
  float max_grad_norm;
  float loss_scale;
  int dynamic_loss_scale;
  float growth;
  float backoff;
  int growth_interval;
  int error_feedback;
} weft_zero_config_t;

#define WEFT_ZERO_CONFIG_INIT                                                                        \
  {                                                                                                  \
    sizeof(weft_zero_config_t), 2, WEFT_FLOAT32, WEFT_OPTIMIZER_CONFIG_INIT, NULL, 0, NULL, WEFT_AVG, \
        WEFT_WIRE_NATIVE, 0.0f, 1.0f, 0, 2.0f, 0.5f, 2000, 0                                          \
  }

/*
 * Collective over the members of `mesh` (host memory; the partitions are over the mesh dim
 * named dp_dim, every other dim keeps its own copy, e.g. its own tensor-parallel shard).
 * params[0..nparams): the initial values (contiguous host tensors of param_dtype or FLOAT32,
 * read during the call); the values of the dp coordinate 0 are broadcast to the others, as DDP
 * does. Every rank of a dp group must pass the same shapes (WEFT_ERR_MISMATCH names the rank).
 * weft allocates the parameters, gradients, optimizer state and master weights.
 */
weft_status_t weft_zero_create(weft_mesh_t mesh, const char *dp_dim, const weft_tensor_t *params, size_t nparams,
                               const weft_zero_config_t *config, weft_zero_t *zero);
weft_status_t weft_zero_destroy(weft_zero_t zero);

weft_status_t weft_zero_num_groups(weft_zero_t zero, size_t *ngroups);
weft_status_t weft_zero_group_of(weft_zero_t zero, size_t param, size_t *group);

/*
 * The full value of parameter `param` in weft's memory (param_dtype, its shape): valid until the
 * next step (stages 0-2) or, at stage 3, from the moment its group's gather completes until the
 * group is released (otherwise WEFT_ERR_INVALID_ARGUMENT). The caller reads it for forward and
 * backward; it must not write it.
 */
weft_status_t weft_zero_param(weft_zero_t zero, size_t param, weft_tensor_t *view);

/*
 * Stage 3: all-gathers group `group`'s parameters from their shards. request NULL = blocking;
 * otherwise the gather runs while the caller computes (prefetch: gather group g + 1 while g's
 * forward runs) and the parameters are usable once weft_wait/weft_test reports completion.
 * Gathering a group that is already gathered returns at once (request set to NULL). Stages 0-2:
 * nothing to do (request set to NULL).
 */
weft_status_t weft_zero_gather(weft_zero_t zero, size_t group, weft_request_t *request);
/* Stage 3: frees group's gathered parameters (it must not have a gather in flight). Stages 0-2:
 * nothing to do. */
weft_status_t weft_zero_release(weft_zero_t zero, size_t group);

/*
 * Gradient of parameter `param` for this step (param_dtype, the parameter's shape, contiguous
 * host memory; copied during the call, so the caller may reuse its memory at once). When this
 * completes a group, its reduction starts (stage 0: all-reduce; 1-3: reduce-scatter) in
 * descending group order - backward's order - while the caller goes on. Twice in a step is
 * WEFT_ERR_INVALID_ARGUMENT naming the parameter.
 */
weft_status_t weft_zero_grad_ready(weft_zero_t zero, size_t param, const weft_tensor_t *grad);

typedef struct weft_zero_step_info {
  size_t struct_size;
  int skipped;             /* 1: an inf/NaN gradient on some rank; no parameter changed */
  float grad_norm;         /* global L2 norm of the unscaled gradient, before clipping */
  float loss_scale;        /* the scale to multiply the next step's loss by */
  uint64_t comm_elements;  /* elements this rank's collectives moved since the last step (below) */
  uint64_t comm_bytes;     /* the same in bytes, in the wire format */
} weft_zero_step_info_t;

#define WEFT_ZERO_STEP_INFO_INIT { sizeof(weft_zero_step_info_t), 0, 0.0f, 0.0f, 0, 0 }

/*
 * Collective over the mesh's members: waits for the gradient reductions, unscales, agrees on
 * skipping, clips, runs the optimizer on this rank's shard, and (stages 0-2) all-gathers the
 * new parameters. A parameter whose gradient was never given this step is
 * WEFT_ERR_INVALID_ARGUMENT naming it. info may be NULL.
 * comm_elements counts ZeRO's communication volume as the library issued it, per collective:
 * all-reduce of n elements 2n, reduce-scatter n (its input), all-gather n (its output) -
 * so 2P per step for stages 0-2 and 3P for stage 3 when each group is gathered once for forward
 * and once for backward (P = the parameter count, with each group padded to a multiple of the
 * data-parallel size).
 */
weft_status_t weft_zero_step(weft_zero_t zero, weft_zero_step_info_t *info);

typedef struct weft_zero_memory {
  size_t struct_size;
  uint64_t params;          /* parameters held (full or shard) */
  uint64_t grads;           /* gradients held between grad_ready and step (full or shard) */
  uint64_t optimizer;       /* float32 master weights and optimizer state (full or shard) */
  uint64_t buffers;         /* communication buffers now: buckets, gathered stage-3 groups, and
                               those kept for reuse (as many as were ever in use at once: the
                               next step needs them again) */
  uint64_t buffers_peak;    /* the most `buffers` has been */
} weft_zero_memory_t;

#define WEFT_ZERO_MEMORY_INIT { sizeof(weft_zero_memory_t), 0, 0, 0, 0, 0 }

/*
 * Bytes weft holds for this rank. With P parameters (padded as above), N data-parallel ranks,
 * 2-byte parameters and K bytes of optimizer state per parameter (12 for mixed-precision Adam:
 * master, m, v) params + grads + optimizer is ZeRO's (2+2+K)P at stage 0, 2P + 2P + KP/N at 1,
 * 2P + (2+K)P/N at 2 and (2+2+K)P/N at 3 - the counts are of the allocations, not a formula.
 */
weft_status_t weft_zero_memory(weft_zero_t zero, weft_zero_memory_t *memory);

/*
 * Collective over the mesh's members: writes the optimizer state (master weights, optimizer
 * buffers, step count, loss scale) as a weft checkpoint in directory `path` (weft_checkpoint_save's
 * rules). weft_zero_load reads one back into a ZeRO handle made with the same parameter shapes
 * and optimizer on any data-parallel size (other shapes: WEFT_ERR_MISMATCH naming the parameter)
 * and all-gathers the parameters.
 */
weft_status_t weft_zero_save(weft_zero_t zero, const char *path);
weft_status_t weft_zero_load(weft_zero_t zero, const char *path);

/* ------------------------------------------------------------------ tensor / sequence parallel */

/*
 * Megatron's region operations over one mesh dim (the tensor-parallel group). Each has a
 * forward and a backward (the backward of the forward's communication):
 *   COPY:            forward identity;                   backward all-reduce (sum)
 *   REDUCE:          forward all-reduce (sum);           backward identity
 *   SCATTER:         forward keep this rank's chunk;     backward all-gather
 *   GATHER:          forward all-gather;                 backward keep this rank's chunk
 *   SEQ_GATHER:      forward all-gather;                 backward reduce-scatter (sum)
 *   SEQ_REDUCE_SCATTER: forward reduce-scatter (sum);    backward all-gather
 * Chunks are along tensor dim `split_dim` and follow torch.chunk's rule over the dim's size
 * (chunk = ceil(n / size), the last ones may be short or empty): a gathered tensor has the whole
 * extent n, a chunk this rank's part of it.
 */
typedef enum weft_region {
  WEFT_REGION_COPY = 0,
  WEFT_REGION_REDUCE = 1,
  WEFT_REGION_SCATTER = 2,
  WEFT_REGION_GATHER = 3,
  WEFT_REGION_SEQ_GATHER = 4,
  WEFT_REGION_SEQ_REDUCE_SCATTER = 5
} weft_region_t;

/*
 * Collective over this rank's group along mesh dim `dim`. backward = 0 runs the region's
 * forward, 1 its backward. in and out are this rank's tensors (strided views allowed; out must
 * not overlap in except in == out for the identity and all-reduce cases); their shapes must be
 * what the operation makes (the whole extent or this rank's chunk along split_dim, the other
 * dims equal) and their dtypes equal. Host or device memory, with comm.h's rules for stream and
 * request.
 */
weft_status_t weft_region_apply(weft_mesh_t mesh, const char *dim, weft_region_t region, int backward,
                                int split_dim, const weft_tensor_t *in, const weft_tensor_t *out, void *stream,
                                weft_request_t *request);

/* ------------------------------------------------------------------ context parallel */

/*
 * One step of a ring over mesh dim `dim` (context parallelism's key/value rotation): sends
 * `send` to the rank `shift` places further along the dim (wrapping) and receives `recv` from the
 * rank `shift` places before, as one weft_p2p_batch. send and recv are contiguous, must not
 * overlap, and recv must be as large as what that rank sends. With a request the transfer runs
 * while the caller computes on the current block (ring attention's overlap). The all-gather
 * form of context parallelism is weft_region_apply(..., WEFT_REGION_SEQ_GATHER, ...).
 */
weft_status_t weft_ring_shift(weft_mesh_t mesh, const char *dim, int shift, const weft_tensor_t *send,
                              const weft_tensor_t *recv, void *stream, weft_request_t *request);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TRAINING_H */
