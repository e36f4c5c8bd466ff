/*
 * weft/moe.h - expert parallelism: routing (top-k gating with capacity, losses and their
 * gradients), the dispatch layout, and dispatch / combine of tokens between the ranks of an
 * expert-parallel communicator through a reusable handle. Part of the C ABI of libweft.so;
 * include <weft/weft.h>.
 *
 * Words: T tokens on this rank, hidden size H, E experts, k slots per token (top-k), N ranks.
 * indices[t*k + j] is the expert of token t's slot j, or WEFT_MOE_DROPPED; weights[t*k + j] its
 * weight (float32). Expert e sits on rank expert_rank[e]; by default experts are split in
 * contiguous blocks by torch.chunk's rule (c = ceil(E / N); rank r holds [r*c, min((r+1)*c, E)),
 * so E need not be a multiple of N and the last ranks may hold fewer or none).
 *
 * Determinism: every result is a function of the inputs alone, never of message arrival order,
 * and it is the same for every N (1, 2, 3, ... 8 ranks) given the same tokens and experts: the
 * router is per token; combine sums a token's k contributions in float32 in slot order and
 * rounds once, on the token's own rank.
 *
 * Thread safety: a weft_moe_t and its handles are used by one thread at a time and communicate
 * over their communicator like collectives (every rank makes the same sequence of calls).
 */
#ifndef WEFT_MOE_H
#define WEFT_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_MOE_DROPPED (-1) /* the expert index of a dropped slot */

/* ------------------------------------------------------------------ router */

typedef enum weft_router_score {
  WEFT_ROUTER_SOFTMAX = 0,      /* p = softmax(logits) over all E; the k largest p; weights = p
                                   (renormalised to sum 1 over the k when config.normalize) */
  WEFT_ROUTER_TOPK_SOFTMAX = 1, /* the k largest logits; weights = softmax over those k (normalize has no effect) */
  WEFT_ROUTER_SIGMOID = 2       /* s = sigmoid(logits); the k largest s; weights = s / sum of the k */
} weft_router_score_t;

typedef enum weft_router_drop {
  WEFT_DROP_NONE = 0,           /* dropless: no capacity */
  WEFT_DROP_BY_PROBABILITY = 1, /* each expert keeps its C assignments of highest weight (ties: lower token) */
  WEFT_DROP_BY_POSITION = 2     /* each expert keeps its first C assignments in token order */
} weft_router_drop_t;

/*
 * Router options; initialise with WEFT_ROUTER_CONFIG_INIT.
 *   experts, topk: E and k (1 <= k <= E).
 *   score, normalize: above.
 *   groups, topk_groups: group-limited routing (DeepSeek-V3): the E experts form `groups` equal
 *     groups (groups must divide E); a group's score is the sum of its two highest selection
 *     scores (its one highest when a group has one expert); only experts of the topk_groups best
 *     groups are selectable. groups <= 1 = off.
 *   bias: NULL, or E values added to the scores for selection only (auxiliary-loss-free
 *     balancing, weft_router_update_bias); the weights never include it.
 *   drop, capacity_factor: C = min(T, ceil(T * k / E * capacity_factor)) per expert (computed in
 *     double); slots beyond it are dropped (index WEFT_MOE_DROPPED, weight 0); the kept slots
 *     keep their weights (no renormalisation after dropping). With device logits BY_PROBABILITY
 *     ranks each expert's assignments by direct comparison, O((T k)^2 / E) work: fine for the
 *     token counts of one micro-batch, slow beyond ~10^5 assignments.
 *   aux_loss_coeff: Switch's load-balancing loss, coeff * E * sum_e f_e * P_e, with f_e the
 *     fraction of the T*k selections (before dropping) that chose e and P_e the mean over tokens
 *     of the routing probability of e (softmax of the logits for SOFTMAX and TOPK_SOFTMAX, the
 *     sigmoid scores normalised over all E for SIGMOID).
 *   z_loss_coeff: coeff * mean_t (logsumexp_e logits[t, e])^2.
 *   selector: 0 = the built-in top-k selection; a ROUTER plugin's id (weft/plugin.h) = that
 *     plugin chooses each token's k experts from the selection scores (the score function's
 *     values plus bias, float32) instead; groups must then be <= 1. Host logits only (device
 *     logits: WEFT_ERR_UNSUPPORTED). Weights, capacity, dropping and losses are as for top-k.
 * Ties between experts (equal scores, equal group scores) go to the lower index, always.
 */
typedef struct weft_router_config {
  size_t struct_size;
  int experts;
  int topk;
  weft_router_score_t score;
  int normalize;
  int groups;
  int topk_groups;
  const float *bias;
  weft_router_drop_t drop;
  double capacity_factor;
  float aux_loss_coeff;
  float z_loss_coeff;
  int selector;
} weft_router_config_t;

#define WEFT_ROUTER_CONFIG_INIT \
  { sizeof(weft_router_config_t), 0, 1, WEFT_ROUTER_SOFTMAX, 0, 0, 0, NULL, WEFT_DROP_NONE, 1.0, 0.0f, 0.0f, 0 }

/*
 * Where the router writes; initialise with WEFT_ROUTER_RESULT_INIT. Arrays are the caller's, in
 * the logits' memory (host, or CUDA memory of the same device): indices and weights [T, k];
 * tokens_per_expert [E] (optional, NULL): assignments kept after dropping; selected_per_expert
 * [E] (optional): before dropping. aux_loss and z_loss are written to host memory (with device
 * logits this waits for the stream).
 */
typedef struct weft_router_result {
  size_t struct_size;
  int32_t *indices;
  float *weights;
  int64_t *tokens_per_expert;
  int64_t *selected_per_expert;
  float aux_loss;
  float z_loss;
} weft_router_result_t;

#define WEFT_ROUTER_RESULT_INIT { sizeof(weft_router_result_t), NULL, NULL, NULL, NULL, 0.0f, 0.0f }

/* logits: [T, E] contiguous, FLOAT32 or BFLOAT16, host or CUDA memory (CUDA kernels; the CPU
 * code is their twin and defines the result bit for bit). stream: for device logits. */
weft_status_t weft_router_forward(const weft_tensor_t *logits, const weft_router_config_t *config,
                                  weft_router_result_t *result, void *stream);

/*
 * The gradient of L = sum_{t,j} grad_weights[t*k+j] * weights[t*k+j] + grad_aux * aux_loss +
 * grad_z * z_loss with respect to the logits, the selection held fixed: grad_logits [T, E]
 * float32, same memory as logits. The selection before dropping is recomputed from the logits
 * (a dropped expert still counts in a renormalisation's denominator, and indices no longer name
 * it); indices, as forward returned them, say which slots were kept (host memory: a kept index
 * that differs from the recomputed one is WEFT_ERR_INVALID_ARGUMENT naming it). Dropped slots
 * carry no weight gradient. grad_weights may be NULL only when T = 0.
 */
weft_status_t weft_router_backward(const weft_tensor_t *logits, const weft_router_config_t *config,
                                   const int32_t *indices, const float *grad_weights, float grad_aux,
                                   float grad_z, const weft_tensor_t *grad_logits, void *stream);

/* Auxiliary-loss-free balancing (DeepSeek-V3): bias[e] += rate * sign(mean - load[e]) with
 * load = tokens_per_expert (host arrays of E entries) and mean its average; sign(0) = 0. */
weft_status_t weft_router_update_bias(float *bias, const int64_t *tokens_per_expert, int experts, float rate);

/* ------------------------------------------------------------------ layout */

/*
 * DeepEP's get_dispatch_layout, host memory: from indices [T, k] (WEFT_MOE_DROPPED allowed) and
 * the placement (expert_rank [E], NULL = contiguous blocks over nranks):
 *   tokens_per_rank [nranks]: tokens with at least one kept slot on the rank (a token goes to a
 *     rank once, however many of its experts the rank holds);
 *   tokens_per_expert [E]: kept slots per expert;
 *   token_in_rank [T * nranks]: 1 where token t goes to rank r, else 0.
 * Any output may be NULL.
 */
weft_status_t weft_moe_layout(const int32_t *indices, size_t tokens, int topk, int experts, int nranks,
                              const int32_t *expert_rank, int64_t *tokens_per_rank, int64_t *tokens_per_expert,
                              uint8_t *token_in_rank);

/* ------------------------------------------------------------------ dispatch and combine */

typedef struct weft_moe *weft_moe_t;
typedef struct weft_moe_handle *weft_moe_handle_t;

/*
 * Options; initialise with WEFT_MOE_CONFIG_INIT.
 *   experts, hidden, dtype: E, H and the token dtype (FLOAT32, BFLOAT16 or FLOAT16).
 *   expert_rank: NULL = contiguous blocks; else E ranks (copied).
 *   expert_alignment: each local expert's rows are padded (zeros) to a multiple of it (0 or 1 =
 *     no padding), for grouped GEMMs.
 *   fp8_dispatch: tokens travel as FP8 E4M3 with one float32 scale per token (absmax / 448) and
 *     are decoded to dtype on arrival: each element within 2^-4 of its magnitude plus 2^-10 of the
 *     token's scale (E4M3's rounding, and its subnormal step); combine is never compressed.
 *   device: 0 = host memory; 1 = CUDA memory of the communicator's GPU (NCCL or staged transfers,
 *     CUDA permute kernels), stream-ordered.
 */
typedef struct weft_moe_config {
  size_t struct_size;
  int experts;
  size_t hidden;
  weft_dtype_t dtype;
  const int32_t *expert_rank;
  size_t expert_alignment;
  int fp8_dispatch;
  int device;
} weft_moe_config_t;

#define WEFT_MOE_CONFIG_INIT { sizeof(weft_moe_config_t), 0, 0, WEFT_FLOAT32, NULL, 0, 0, 0 }

/* Collective over comm: every rank must pass the same config (else WEFT_ERR_MISMATCH naming the
 * field and the first rank that differs). */
weft_status_t weft_moe_create(weft_comm_t comm, const weft_moe_config_t *config, weft_moe_t *moe);
weft_status_t weft_moe_destroy(weft_moe_t moe);

/*
 * Dispatch, collective: x [T, H] (dtype, contiguous, host or device per config), indices and
 * weights [T, k] (same memory as x; T and k may differ between ranks, T may be 0). Each token
 * travels once to each rank that holds one of its kept experts; each rank then holds the rows it
 * received, one per (token, local expert), grouped by local expert (expert-major; within an
 * expert by source rank, then token, then slot), padded per expert_alignment. Makes a handle that
 * keeps the layout for combine and the backward passes (weft_moe_handle_destroy frees it; it
 * may be kept across any number of uses). Bad input, refused before anything is sent, with the
 * rank and token named: an index outside [0, E) other than WEFT_MOE_DROPPED, k > E, a NaN
 * weight, a shape that is not [T, H].
 */
weft_status_t weft_moe_dispatch(weft_moe_t moe, const weft_tensor_t *x, const int32_t *indices, const float *weights,
                                size_t tokens, int topk, void *stream, weft_moe_handle_t *handle);
weft_status_t weft_moe_handle_destroy(weft_moe_handle_t handle);

/*
 * What dispatch delivered on this rank (views of weft-owned memory, valid until the handle is
 * destroyed): tokens [rows, H]; local experts L (the experts this rank holds, in index order,
 * experts[0..L)); expert j's rows are [offsets[j], offsets[j] + counts[j]) (offsets[L] = rows;
 * padding rows follow counts[j] up to offsets[j+1]); per row its global expert (-1 on padding)
 * and weight (0 on padding), its source rank and source token index.
 */
typedef struct weft_moe_received {
  size_t struct_size;
  weft_tensor_t tokens;
  size_t rows;
  int local_experts;
  const int32_t *experts;
  const int64_t *counts;
  const int64_t *offsets;
  const int32_t *row_expert;
  const float *row_weight;
  const int32_t *row_source_rank;
  const int64_t *row_source_token;
} weft_moe_received_t;

#define WEFT_MOE_RECEIVED_INIT \
  { sizeof(weft_moe_received_t), {NULL, WEFT_DEVICE_CPU, 0, 0, WEFT_FLOAT32, NULL, NULL, 0}, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL }

/* Host memory arrays always (row_* and counts/offsets); tokens in the config's memory. */
weft_status_t weft_moe_handle_received(weft_moe_handle_t handle, weft_moe_received_t *received);

/*
 * Combine, collective: expert_out [rows, H] (dtype, the received layout; padding rows ignored)
 * goes back to each row's source rank, where out [T, H] (caller memory, dtype) becomes, per
 * token, the sum over its kept slots j in order of weights[t*k+j] * expert_out[row of (t, j)],
 * accumulated in float32 and rounded once; a token with no kept slot gets zeros. With
 * weighted = 0 the weights are taken as 1 (that is the backward of dispatch: the gradient of x
 * from the gradient of the received rows).
 */
weft_status_t weft_moe_combine(weft_moe_t moe, weft_moe_handle_t handle, const weft_tensor_t *expert_out,
                               int weighted, const weft_tensor_t *out, void *stream);

/*
 * The backward of a weighted combine, collective: from grad_out [T, H] (dtype) gives
 * grad_expert_out [rows, H] (caller memory, the received layout: row of (t, j) = weights[t*k+j]
 * * grad_out[t], rounded once; padding rows zero) by sending grad_out once per destination rank
 * as dispatch did, and grad_weights [T, k] float32 (caller memory, same as x's): the float32 dot
 * product of grad_out[t] with the expert output of (t, j), in element order (0 for dropped
 * slots). The expert outputs are those of the last weighted combine on this handle (an unweighted
 * one, dispatch's backward, carries gradients, not expert outputs).
 */
weft_status_t weft_moe_combine_backward(weft_moe_t moe, weft_moe_handle_t handle, const weft_tensor_t *grad_out,
                                        const weft_tensor_t *grad_expert_out, float *grad_weights, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_MOE_H */
