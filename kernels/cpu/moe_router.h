// The MoE router (weft/moe.h: weft_router_forward / _backward / _update_bias) on host memory.
// kernels/cuda/moe_router.h has the device twins; these define their results bit for bit (the
// per-token arithmetic and the loss sums' order are kernels/cpu/moe_router_ops.h, shared).
//
// Per token: scores (softmax / logits / sigmoid), selection scores = scores + bias, the group
// limit, the top k (ties to the lower index) or a plugin's choice (RouterSelector: it sees every
// token's selection scores at once, NaN given as -inf), the weights (never with the bias); then, across
// tokens, capacity dropping, the per-expert counts and the two losses:
//   aux = coeff * E * sum_e f_e P_e, f_e = selected_e / (T k), P_e = psum_e / T, where psum_e is
//         the double sum of the routing probabilities (moe_router_ops.h's blocked order); the
//         final sum over e is double in expert order, rounded to float once.
//   z   = coeff * zsum / T, zsum the double sum of lse_t^2 (lse_t float32, squared in double),
//         blocked likewise; rounded to float once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/common/dtype.h"

namespace weft::kernels {

// A ROUTER plugin's selection (weft/plugin.h's weft_plugin_router_fn), handed in by the C shim
// as a plain function so that kernels/ needs nothing of core/plugin: from the selection scores
// [T, E] it writes each token's k experts. The router calls it once per forward and once more
// per backward (which recomputes the selection), so it must be a deterministic function of its
// arguments. `name` says which plugin it is in messages ("router 'balanced_topk' (plugin ...)").
struct RouterSelector {
  using Fn = int32_t (*)(const float* scores, size_t tokens, int32_t experts, int32_t topk, int32_t* indices);
  Fn fn = nullptr;
  const char* name = nullptr;
};

struct RouterConfig {
  int experts = 0;
  int topk = 1;
  int score = 0;        // weft_router_score_t
  bool normalize = false;
  int groups = 1;       // <= 1: no group limit
  int topk_groups = 0;
  const float* bias = nullptr;  // E values or NULL (the logits' memory)
  int drop = 0;         // weft_router_drop_t
  double capacity_factor = 1.0;
  float aux_loss_coeff = 0.0f;
  float z_loss_coeff = 0.0f;
  RouterSelector selector;  // fn NULL: the built-in top k (host only; groups must be <= 1 with one)
};

struct RouterOutputs {
  int32_t* indices = nullptr;            // [T, k]
  float* weights = nullptr;              // [T, k]
  int64_t* tokens_per_expert = nullptr;  // [E] or NULL: kept
  int64_t* selected_per_expert = nullptr;  // [E] or NULL: before dropping
  float aux_loss = 0.0f;
  float z_loss = 0.0f;
};

// Throws weft::Error(invalid_argument) naming `what` and the field for a configuration the
// router cannot run: E < 1, k outside [1, E], an unknown score or drop mode, groups not
// dividing E, topk_groups outside [1, groups] or leaving fewer than k experts, capacity_factor
// not > 0 (finite) when dropping, logits that are neither FLOAT32 nor BFLOAT16, or a selector
// with groups > 1 (a plugin's choice cannot honour the group limit).
void check_router_config(const RouterConfig& c, DType logits_dtype, const char* what);

// logits [tokens, E] (FLOAT32 or BFLOAT16, contiguous): everything weft_router_forward writes.
void router_forward(const void* logits, DType dtype, size_t tokens, const RouterConfig& c, RouterOutputs& out);

// grad_logits [tokens, E] float32: the gradient of sum gw*w + grad_aux*aux + grad_z*z with the
// selection fixed. The selection before dropping is recomputed from the logits (it is a function
// of them and the config); `indices` says which slots were kept (WEFT_MOE_DROPPED: no weight
// gradient). A kept index that is not the recomputed expert throws invalid_argument.
void router_backward(const void* logits, DType dtype, size_t tokens, const RouterConfig& c, const int32_t* indices,
                     const float* grad_weights, float grad_aux, float grad_z, float* grad_logits);

// bias[e] += rate * sign(mean - load[e]), mean = sum(load) / E in double; sign(0) = 0.
void router_update_bias(float* bias, const int64_t* load, int experts, float rate);

// The final losses from the cross-token sums (host, both twins): selected [E], psum [E], zsum.
float router_aux_loss(const int64_t* selected, const double* psum, int experts, size_t tokens, int topk, float coeff);
float router_z_loss(double zsum, size_t tokens, float coeff);
// d L / d logsumexp_t = zscale * lse_t: zscale = grad_z * coeff * 2 / T in double, rounded once.
float router_z_grad_scale(float grad_z, float coeff, size_t tokens);

}  // namespace weft::kernels
