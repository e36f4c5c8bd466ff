// Private to kernels/: what the MoE router (weft/moe.h, kernels/cpu/moe_router.h) computes for
// one token, and the fixed order of its loss sums, shared by the host loops (moe_router.cpp) and
// the device kernels (kernels/cuda/moe_router.cu, compiled as __host__ __device__ through
// WEFT_HD), so that the two twins agree bit for bit. Both compile it without contraction of
// a*b+c into a fused multiply-add (nvcc --fmad=false; moe_router.cpp says how on the host).
//
// All per-token math is float32, each operation rounded on its own, in the order written.
// exp and log are computed here (router_exp, router_log) from + - * / and bit operations only:
// libm's expf and CUDA's expf differ in their last bits, so neither can be used by both twins.
// Both are within a few ulp of the true function, which is all the tests' tolerances assume.
//
// The sums that cross tokens are double: per block of kRouterLossBlock tokens, in token order,
// then the blocks' partial sums in block order (the device computes each partial in one thread).
#pragma once

#include <math.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/minifloat.h"

namespace weft::kernels::detail {

// The score modes and drop modes, numbered as weft_router_score_t / weft_router_drop_t.
constexpr int kRouterSoftmax = 0, kRouterTopkSoftmax = 1, kRouterSigmoid = 2;
constexpr int kDropNone = 0, kDropByProbability = 1, kDropByPosition = 2;

// Tokens per partial sum of the losses (see the file comment).
constexpr size_t kRouterLossBlock = 256;

// What a row needs from the configuration (checked before any row runs).
struct RouterRowConfig {
  int experts;
  int topk;
  int score;
  int normalize;
  int groups;       // 1 = no group limit
  int topk_groups;  // groups kept (== groups when there is no limit)
  int bf16;         // logits are bfloat16 (else float32)
};

// Per-token scratch: router_scratch_floats(E, k) floats and k int32 (the selection before
// dropping). After router_row_forward: s = scores, p = routing probabilities (the aux loss's),
// w = the k weights before dropping, state = {max logit, sum of exp(logit - max), logsumexp}.
WEFT_HD constexpr size_t router_scratch_floats(int experts, int topk) {
  return 5 * static_cast<size_t>(experts) + static_cast<size_t>(topk) + 3;
}
struct RouterScratch {
  float* s;      // [E] scores: softmax p (SOFTMAX), logits (TOPK_SOFTMAX), sigmoid (SIGMOID)
  float* p;      // [E] routing probabilities
  float* sel;    // [E] selection scores (scores + bias)
  float* gs;     // [E] group scores (first `groups` used), then flags: group kept
  float* taken;  // [E] 1 where the expert was selected
  float* w;      // [k] weights before dropping
  float* state;  // [3] max, sum of exp, logsumexp
  int32_t* idx;  // [k] experts before dropping
};
WEFT_HD inline RouterScratch router_scratch(float* f, int32_t* idx, int experts, int topk) {
  const size_t e = static_cast<size_t>(experts);
  return RouterScratch{f, f + e, f + 2 * e, f + 3 * e, f + 4 * e, f + 5 * e, f + 5 * e + static_cast<size_t>(topk), idx};
}

// ---------------------------------------------------------------- float32 exp and log

WEFT_HD inline float router_inf() { return f32_from_bits(kF32InfBits); }

// 2^n for n in [-126, 127], exact.
WEFT_HD inline float router_pow2(int n) { return f32_from_bits(static_cast<uint32_t>(n + 127) << 23); }

// e^x: x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, the first with 16 significant bits
// so that n * hi is exact), e^r by its Taylor polynomial to r^8/8! (Horner), times 2^n in two
// exact steps (so that results down to the subnormals are reached). Within 2 ulp.
WEFT_HD inline float router_exp(float x) {
  if (!(x == x)) return x;
  if (x > 88.72283935546875f) return router_inf();
  if (x < -103.97208404541015625f) return 0.0f;
  const float n = floorf(x * 1.44269502162933349609375f + 0.5f);
  const float r = (x - n * 0.693145751953125f) - n * 1.4286067653301870450377464294433594e-06f;
  float q = 2.4801587301587302e-05f;  // 1/8!
  q = q * r + 1.9841269841269841e-04f;
  q = q * r + 1.3888888888888889e-03f;
  q = q * r + 8.3333333333333332e-03f;
  q = q * r + 4.1666666666666664e-02f;
  q = q * r + 1.6666666666666666e-01f;
  q = q * r + 0.5f;
  q = q * r + 1.0f;
  q = q * r + 1.0f;
  const int ni = static_cast<int>(n);
  const int n1 = ni / 2;
  return q * router_pow2(n1) * router_pow2(ni - n1);
}

// ln y: y = m 2^e with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(u), u = (m-1)/(m+1), by its
// series to u^11. Within 2 ulp for every positive float.
WEFT_HD inline float router_log(float y) {
  if (!(y == y) || y == router_inf()) return y;
  if (y <= 0.0f) return y == 0.0f ? -router_inf() : f32_from_bits(0x7fc00000u);
  int e = 0;
  if (y < 1.17549435e-38f) {  // subnormal: scale into the normals (exact)
    y = y * 8388608.0f;
    e = -23;
  }
  const uint32_t b = f32_bits(y);
  e += static_cast<int>(b >> 23) - 127;
  float m = f32_from_bits((b & 0x007fffffu) | 0x3f800000u);
  if (m > 1.41421353816986083984375f) {
    m = m * 0.5f;
    e += 1;
  }
  const float u = (m - 1.0f) / (m + 1.0f);
  const float u2 = u * u;
  float t = 1.0f / 11.0f;
  t = t * u2 + 1.0f / 9.0f;
  t = t * u2 + 1.0f / 7.0f;
  t = t * u2 + 1.0f / 5.0f;
  t = t * u2 + 1.0f / 3.0f;
  const float two_u = u + u;
  const float lm = two_u + two_u * (u2 * t);
  const float fe = static_cast<float>(e);
  return fe * 0.693145751953125f + (fe * 1.4286067653301870450377464294433594e-06f + lm);
}

WEFT_HD inline float router_sigmoid(float x) { return 1.0f / (1.0f + router_exp(-x)); }

// ---------------------------------------------------------------- selection order

// NaN sorts below everything (as -inf, then by index), so that the order is total.
WEFT_HD inline float router_key(float v) { return v == v ? v : -router_inf(); }
// True when (a, ia) comes before (b, ib): the higher score, ties to the lower index.
WEFT_HD inline bool router_before(float a, int ia, float b, int ib) {
  a = router_key(a);
  b = router_key(b);
  return a > b || (a == b && ia < ib);
}

WEFT_HD inline float router_logit(const void* logits, int bf16, size_t i) {
  if (bf16) return f32_from_bits(static_cast<uint32_t>(static_cast<const uint16_t*>(logits)[i]) << 16);
  return static_cast<const float*>(logits)[i];
}

// ---------------------------------------------------------------- one token, forward

// The three parts of a token's forward, in the order router_row_forward runs them; a ROUTER
// plugin (moe_router.h's RouterSelector) replaces the middle one on the host.
// Scores, probabilities, logsumexp and selection scores of token row `x` (E logits) into r; bias
// NULL or E values.
WEFT_HD inline void router_row_scores(const RouterRowConfig& c, const void* x, const float* bias, RouterScratch r) {
  const int E = c.experts;
  // Softmax of the logits: max, exp(x - max) summed in expert order, logsumexp.
  float m = router_logit(x, c.bf16, 0);
  for (int e = 1; e < E; ++e) {
    const float v = router_logit(x, c.bf16, static_cast<size_t>(e));
    if (v > m) m = v;
  }
  float sum = 0.0f;
  for (int e = 0; e < E; ++e) {
    const float v = router_exp(router_logit(x, c.bf16, static_cast<size_t>(e)) - m);
    r.p[e] = v;
    sum = sum + v;
  }
  r.state[0] = m;
  r.state[1] = sum;
  r.state[2] = m + router_log(sum);
  if (c.score == kRouterSigmoid) {
    float total = 0.0f;
    for (int e = 0; e < E; ++e) {
      r.s[e] = router_sigmoid(router_logit(x, c.bf16, static_cast<size_t>(e)));
      total = total + r.s[e];
    }
    for (int e = 0; e < E; ++e) r.p[e] = r.s[e] / total;
  } else {
    for (int e = 0; e < E; ++e) r.p[e] = r.p[e] / sum;
    for (int e = 0; e < E; ++e) {
      r.s[e] = c.score == kRouterSoftmax ? r.p[e] : router_logit(x, c.bf16, static_cast<size_t>(e));
    }
  }
  // Selection scores with NaN already mapped to -inf (router_key), so that the top-k scan below
  // needs one comparison per expert.
  for (int e = 0; e < E; ++e) {
    r.sel[e] = router_key(bias ? r.s[e] + bias[e] : r.s[e]);
    r.taken[e] = 0.0f;
  }
}

// The group limit and the top k of r.sel into r.idx (best first); r.taken marks the chosen.
WEFT_HD inline void router_row_select(const RouterRowConfig& c, RouterScratch r) {
  const int E = c.experts, k = c.topk;
  // Group limit: a group's score is its two best selection scores summed (its one with one
  // expert); the topk_groups best groups stay selectable, marked 1 in gs (after their scores
  // have been compared, each group's mark is written at the end).
  const int per = E / c.groups;
  if (c.groups > 1) {
    for (int g = 0; g < c.groups; ++g) {
      int b1 = -1, b2 = -1;
      for (int e = g * per; e < (g + 1) * per; ++e) {
        if (b1 < 0 || router_before(r.sel[e], e, r.sel[b1], b1)) {
          b2 = b1;
          b1 = e;
        } else if (b2 < 0 || router_before(r.sel[e], e, r.sel[b2], b2)) {
          b2 = e;
        }
      }
      r.gs[g] = b2 < 0 ? r.sel[b1] : r.sel[b1] + r.sel[b2];
    }
    // taken[g] (per group for now) = 1 for the kept groups.
    for (int n = 0; n < c.topk_groups; ++n) {
      int best = -1;
      for (int g = 0; g < c.groups; ++g) {
        if (r.taken[g] != 0.0f) continue;
        if (best < 0 || router_before(r.gs[g], g, r.gs[best], best)) best = g;
      }
      r.taken[best] = 1.0f;
    }
    for (int g = 0; g < c.groups; ++g) {
      r.gs[g] = r.taken[g];
      r.taken[g] = 0.0f;
    }
  }
  // Top k among the selectable experts, best first: experts in increasing index, so a strict
  // ">" is router_before (ties stay with the lower index).
  for (int j = 0; j < k; ++j) {
    int best = -1;
    float top = 0.0f;
    for (int e = 0; e < E; ++e) {
      if (r.taken[e] != 0.0f || (c.groups > 1 && r.gs[e / per] == 0.0f)) continue;
      if (best < 0 || r.sel[e] > top) {
        best = e;
        top = r.sel[e];
      }
    }
    r.taken[best] = 1.0f;
    r.idx[j] = best;
  }
}

// The k weights of the experts in r.idx (after router_row_scores), never including the bias.
WEFT_HD inline void router_row_weights(const RouterRowConfig& c, RouterScratch r) {
  const int k = c.topk;
  if (c.score == kRouterTopkSoftmax) {
    float mk = r.s[r.idx[0]];
    for (int j = 1; j < k; ++j) {
      if (r.s[r.idx[j]] > mk) mk = r.s[r.idx[j]];
    }
    float z = 0.0f;
    for (int j = 0; j < k; ++j) {
      r.w[j] = router_exp(r.s[r.idx[j]] - mk);
      z = z + r.w[j];
    }
    for (int j = 0; j < k; ++j) r.w[j] = r.w[j] / z;
  } else {
    float z = 0.0f;
    for (int j = 0; j < k; ++j) {
      r.w[j] = r.s[r.idx[j]];
      z = z + r.w[j];
    }
    // SIGMOID always divides by the k scores' sum (weft/moe.h); SOFTMAX only when normalize.
    if (c.score == kRouterSigmoid || c.normalize) {
      for (int j = 0; j < k; ++j) r.w[j] = r.w[j] / z;
    }
  }
}

// Scores, probabilities, selection and weights of token row `x` (E logits) into r; bias NULL or
// E values. r.idx / r.w: the k slots in order (best first).
WEFT_HD inline void router_row_forward(const RouterRowConfig& c, const void* x, const float* bias, RouterScratch r) {
  router_row_scores(c, x, bias, r);
  router_row_select(c, r);
  router_row_weights(c, r);
}

// ---------------------------------------------------------------- one token, backward

// The gradient of token row x's logits into g (E floats), after router_row_forward(x) filled r:
// grad_w[j] the weights' gradient of slot j (NULL: none), kept[j] the slot's index as forward
// returned it (< 0: dropped, no weight gradient), q[e] the aux loss's gradient
// with respect to the routing probability p[e] (NULL: none), zl = d L / d logsumexp.
//   weights, SOFTMAX:      w_j = p_i (/ S, S = sum of the k p, when normalize): through S,
//                          d/dp_{i_j} = (gw_j - D) / S with D = sum_l gw_l w_l; then softmax's
//                          Jacobian: g_e = p_e (G_e - sum_f p_f G_f).
//   weights, TOPK_SOFTMAX: softmax over the k logits: g_{i_j} += w_j (gw_j - D).
//   weights, SIGMOID:      w_j = s_i / S: d/ds_{i_j} = (gw_j - D) / S, then s (1 - s).
//   aux: SOFTMAX, TOPK_SOFTMAX: p = softmax, so q goes through softmax's Jacobian with the rest;
//        SIGMOID: p = s / T_s (T_s = sum of all E s): d/ds_e = (q_e - sum_f p_f q_f) / T_s.
//   z: d logsumexp / d x_e = softmax_e, so g_e += zl softmax_e.
// Every sum is in expert (or slot) order, float32.
WEFT_HD inline void router_row_backward(const RouterRowConfig& c, const void* x, const float* grad_w,
                                        const int32_t* kept, const float* q, float zl, RouterScratch r, float* g) {
  const int E = c.experts, k = c.topk;
  // The weights' gradient, 0 for a dropped slot (kept[j] < 0) or without grad_w, in r.taken's
  // first k entries (forward's flags are no longer needed; k <= E).
  float* gw = r.taken;
  for (int j = 0; j < k; ++j) gw[j] = grad_w && kept[j] >= 0 ? grad_w[j] : 0.0f;
  float d = 0.0f;
  for (int j = 0; j < k; ++j) d = d + gw[j] * r.w[j];
  if (c.score == kRouterSigmoid) {
    float total = 0.0f;  // the scores' sum over all E, as forward had it
    for (int e = 0; e < E; ++e) total = total + r.s[e];
    float pq = 0.0f;
    if (q) {
      for (int e = 0; e < E; ++e) pq = pq + r.p[e] * q[e];
    }
    for (int e = 0; e < E; ++e) g[e] = q ? (q[e] - pq) / total : 0.0f;
    float sk = 0.0f;
    for (int j = 0; j < k; ++j) sk = sk + r.s[r.idx[j]];
    for (int j = 0; j < k; ++j) g[r.idx[j]] = g[r.idx[j]] + (gw[j] - d) / sk;
    const float m = r.state[0], sum = r.state[1];
    for (int e = 0; e < E; ++e) {
      const float s = r.s[e];
      const float soft = router_exp(router_logit(x, c.bf16, static_cast<size_t>(e)) - m) / sum;
      g[e] = g[e] * (s * (1.0f - s)) + zl * soft;
    }
    return;
  }
  // SOFTMAX and TOPK_SOFTMAX: G on the probabilities, then softmax's Jacobian (z folded in).
  for (int e = 0; e < E; ++e) g[e] = q ? q[e] : 0.0f;
  if (c.score == kRouterSoftmax) {
    if (c.normalize) {
      float sk = 0.0f;
      for (int j = 0; j < k; ++j) sk = sk + r.p[r.idx[j]];
      for (int j = 0; j < k; ++j) g[r.idx[j]] = g[r.idx[j]] + (gw[j] - d) / sk;
    } else {
      for (int j = 0; j < k; ++j) g[r.idx[j]] = g[r.idx[j]] + gw[j];
    }
  }
  float pg = 0.0f;
  for (int e = 0; e < E; ++e) pg = pg + r.p[e] * g[e];
  for (int e = 0; e < E; ++e) g[e] = r.p[e] * ((g[e] - pg) + zl);
  if (c.score == kRouterTopkSoftmax) {
    for (int j = 0; j < k; ++j) g[r.idx[j]] = g[r.idx[j]] + r.w[j] * (gw[j] - d);
  }
}

// ---------------------------------------------------------------- across tokens

// Capacity per expert: ceil(T * k / E * capacity_factor) in double, at most T (an expert gets at
// most one slot of a token).
WEFT_HD inline int64_t router_capacity(size_t tokens, int topk, int experts, double capacity_factor) {
  const double c = ceil(static_cast<double>(tokens) * static_cast<double>(topk) / static_cast<double>(experts) *
                        capacity_factor);
  if (!(c < static_cast<double>(tokens))) return static_cast<int64_t>(tokens);
  return c < 0.0 ? 0 : static_cast<int64_t>(c);
}

// Whether assignment (t, j) of expert e (weight w) is dropped: BY_POSITION, when `before` (the
// expert's assignments in earlier tokens) reaches the capacity; BY_PROBABILITY, when the number
// of the expert's assignments that outrank it (a higher weight, NaN lowest; equal weights: the
// lower token) reaches it. The host and the device count the same sets, so they agree.
WEFT_HD inline bool router_outranks(float wa, size_t ta, float wb, size_t tb) {
  wa = router_key(wa);
  wb = router_key(wb);
  return wa > wb || (wa == wb && ta < tb);
}

// The aux loss's gradient per routing probability: q_e = g_aux * coeff * E * f_e / T with
// f_e = selected_e / (T k), in double, rounded once.
WEFT_HD inline float router_aux_grad(float grad_aux, float coeff, int experts, int64_t selected, size_t tokens,
                                     int topk) {
  const double tk = static_cast<double>(tokens) * static_cast<double>(topk);
  return static_cast<float>(static_cast<double>(grad_aux) * static_cast<double>(coeff) *
                            static_cast<double>(experts) * (static_cast<double>(selected) / tk) /
                            static_cast<double>(tokens));
}

}  // namespace weft::kernels::detail
