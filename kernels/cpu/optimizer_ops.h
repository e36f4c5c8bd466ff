// Private to kernels/: what one element of an optimizer step computes, and the fixed summation
// order of the gradient statistics, shared by the host loops (optimizer.cpp) and the device
// kernels (kernels/cuda/optimizer.cu, compiled as __host__ __device__ through WEFT_HD), so the
// arithmetic lives once and the two agree bit for bit. Both compile it without contraction of
// a*b+c into a fused multiply-add (nvcc --fmad=false; optimizer.cpp says how on the host).
//
// The order of operations is torch.optim's (foreach=False, torch 2.x) on CPU, per element:
//   g + wd*p                 grad.add(param, alpha=wd)             -> g + (wd * p)
//   b*momentum + g           buf.mul_(momentum).add_(grad)         -> (b * mom) + g
//   p + (-lr)*g              param.add_(grad, alpha=-lr)           -> p + (-lr * g)
//   p * (1 - lr*wd)          param.mul_(1 - lr * wd)               (AdamW)
//   lerp(m, g, w)            exp_avg.lerp_(grad, 1 - b1): |w| < 0.5 ? m + w*(g - m)
//                                                                 : g - (g - m)*(1 - w)
//   v*b2 + (1-b2)*g*g        exp_avg_sq.mul_(b2).addcmul_(g, g, value=1 - b2) -> v*b2 + ((1-b2)*g)*g
//   sqrt(v)/bc2 + eps        (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
//   p + (-step_size)*m/d     param.addcdiv_(exp_avg, denom, value=-step_size) -> p + ((-ss * m) / d)
// where the Python floats (1 - b1, 1 - b2, 1 - lr*wd, bias_correction2 ** 0.5, lr /
// bias_correction1) are computed in double and rounded to float where the tensor op takes them
// (optimizer_scalars() in optimizer.cpp).
#pragma once

#include <math.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/minifloat.h"
#include "kernels/cpu/optimizer.h"

namespace weft::kernels::detail {

// The per-call scalars, as float32 values the per-element code uses unchanged.
struct OptimizerScalars {
  float grad_scale = 1;
  float wd = 0;            // the L2 term's factor (SGD, Adam)
  float neg_lr = 0;        // SGD: -lr
  float momentum = 0;      // SGD
  uint32_t first = ~0u;    // SGD: all ones when step == 1 (the momentum buffer starts as g), else 0
  float decay = 1;         // AdamW: 1 - lr*wd
  float w = 0;             // Adam: the lerp weight 1 - b1
  float one_minus_w = 1;   // 1 - w, in float as inside torch's lerp
  uint32_t w_small = ~0u;  // all ones when |w| < 0.5 (torch's lerp takes its first form), else 0
  float beta2 = 0, one_minus_beta2 = 0;
  float bc2_sqrt = 1;       // (1 - b2^t) ** 0.5
  float eps = 0;
  float neg_step_size = 0;  // -(lr / (1 - b1^t))
};

// Host only (optimizer.cpp): the scalars of a step, and the argument checks both twins make
// (`what` names the entry point in the message).
OptimizerScalars optimizer_scalars(const OptimizerStep& s);
void check_optimizer_step(const OptimizerStep& s, const float* master, const void* grad, DType grad_dtype,
                          const float* state1, const float* state2, const void* param_out, DType param_dtype,
                          size_t n, const char* what);

// ---------------------------------------------------------------- per-element updates
// apply(c, g, p, s1, s2) returns the new p and updates the states it has (kStates of them).
// g is the scaled gradient. Flags that hold for a whole call are template parameters (no
// branch on them per element); first and w_small pick by bit masks, which vectorise where a
// select feeding float arithmetic can keep GCC from if-converting the loop.

// mask ? a : b for a mask of all ones or all zeros.
WEFT_HD inline float pick(uint32_t mask, float a, float b) {
  return f32_from_bits((f32_bits(a) & mask) | (f32_bits(b) & ~mask));
}

template <bool L2, bool Momentum>
struct SgdUpdate {
  static constexpr int kStates = Momentum ? 1 : 0;
  WEFT_HD static float apply(const OptimizerScalars& c, float g, float p, float& b, float&) {
    if constexpr (L2) g = g + c.wd * p;
    if constexpr (Momentum) {
      const float next = b * c.momentum + g;
      b = pick(c.first, g, next);
      g = b;
    }
    return p + c.neg_lr * g;
  }
};

template <bool L2, bool Decoupled>
struct AdamUpdate {
  static constexpr int kStates = 2;
  WEFT_HD static float apply(const OptimizerScalars& c, float g, float p, float& m, float& v) {
    if constexpr (Decoupled) p = p * c.decay;
    if constexpr (L2) g = g + c.wd * p;
    const float d = g - m;
    const float small = m + c.w * d;
    const float large = g - d * c.one_minus_w;
    m = pick(c.w_small, small, large);
    v = v * c.beta2 + c.one_minus_beta2 * g * g;
    const float denom = sqrtf(v) / c.bc2_sqrt + c.eps;
    return p + c.neg_step_size * m / denom;
  }
};

// Element i of a step: U an update above, GC the gradient's codec and OC the output's
// (Storage, static widen/narrow: the host's in optimizer.cpp, the device's in float_bits.cuh,
// which round alike). Store: whether param_out is written.
template <class U, class GC, class OC, bool Store>
WEFT_HD inline void optimizer_element(const OptimizerScalars& c, size_t i, float* master,
                                      const typename GC::Storage* grad, float* s1, float* s2,
                                      typename OC::Storage* out) {
  const float g = GC::widen(grad[i]) * c.grad_scale;
  float a = 0.0f, b = 0.0f;
  if constexpr (U::kStates >= 1) a = s1[i];
  if constexpr (U::kStates >= 2) b = s2[i];
  const float p = U::apply(c, g, master[i], a, b);
  master[i] = p;
  if constexpr (U::kStates >= 1) s1[i] = a;
  if constexpr (U::kStates >= 2) s2[i] = b;
  if constexpr (Store) out[i] = OC::narrow(p);
}

// Calls fn(U{}) with the update type of a step (host only).
template <class Fn>
void with_update(const OptimizerStep& s, Fn&& fn) {
  const bool l2 = s.weight_decay != 0.0f;
  switch (s.kind) {
    case OptimizerKind::sgd:
      if (s.momentum != 0.0f) return l2 ? fn(SgdUpdate<true, true>{}) : fn(SgdUpdate<false, true>{});
      return l2 ? fn(SgdUpdate<true, false>{}) : fn(SgdUpdate<false, false>{});
    case OptimizerKind::adam: return l2 ? fn(AdamUpdate<true, false>{}) : fn(AdamUpdate<false, false>{});
    case OptimizerKind::adamw: return fn(AdamUpdate<false, true>{});
  }
}

// ---------------------------------------------------------------- gradient statistics
// The sum of squares in a fixed order that depends only on n, so that the host and the device
// (which has no order of its own: its threads run in any order) give the same double:
//   tiles of kStatsTile elements; in tile c, lane l (of kStatsLanes) sums the squares of
//   elements c*kStatsTile + l + k*kStatsLanes, k = 0, 1, ... in order (a lane with no elements
//   gives 0); then, level by level, groups of kStatsGroup consecutive partial sums are summed in
//   order (the first level's groups are the tiles' lanes) while more than kStatsGroup remain;
//   the last <= kStatsGroup are summed in order. Every sum starts from +0.0.
// Lanes interleaved: neighbouring device threads read neighbouring elements, and the host's
// inner loop over lanes vectorises.
constexpr size_t kStatsLanes = 256;
constexpr size_t kStatsRows = 256;
constexpr size_t kStatsTile = kStatsLanes * kStatsRows;
constexpr size_t kStatsGroup = 256;

WEFT_HD inline double scaled_square(float g, double scale) {
  const double x = static_cast<double>(g) * scale;
  return x * x;
}

// False for inf and NaN (x - x is NaN for both), without <cmath> on the device.
WEFT_HD inline bool finite_double(double x) { return x - x == 0.0; }

WEFT_HD constexpr size_t stats_tiles(size_t n) { return (n + kStatsTile - 1) / kStatsTile; }
WEFT_HD constexpr size_t stats_groups(size_t m) { return (m + kStatsGroup - 1) / kStatsGroup; }

}  // namespace weft::kernels::detail
