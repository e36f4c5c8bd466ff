// The fused optimizer arithmetic on flat buffers (weft/training.h, weft_optimizer_config_t): one
// SGD / Adam / AdamW step over a shard of float32 master weights, and the gradient statistics
// (global norm, inf/NaN check) taken before it. kernels/cuda/optimizer.h has the device twins;
// these define their results, and the per-element arithmetic of both is kernels/cpu/
// optimizer_ops.h, written once, so the two agree bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/common/dtype.h"

namespace weft::kernels {

enum class OptimizerKind { sgd, adam, adamw };

// One step's hyperparameters. lr .. weight_decay are weft_optimizer_config_t's.
struct OptimizerStep {
  OptimizerKind kind = OptimizerKind::adamw;
  float lr = 1e-3f, momentum = 0.0f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  int64_t step = 1;         // t, counted from 1: this step's number
  float grad_scale = 1.0f;  // every gradient element is multiplied by this first (1/loss_scale * clip coefficient)
};

// One optimizer step over n elements, torch.optim's arithmetic (foreach=False) in float32:
//   g = grad[i] (widened to f32 from grad_dtype: f32, bf16 or f16) * grad_scale
//   SGD:   g += wd*p; if momentum != 0: b = (step == 1 ? g : momentum*b + g); g = b;  p -= lr*g
//          (state1 = b; momentum == 0 needs no state: state1 and state2 may be null)
//   Adam:  g += wd*p; m = lerp(m, g, 1-b1); v = b2*v + (1-b2)*g*g;
//          p -= (lr/(1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps)   (state1 = m, state2 = v)
//   AdamW: p *= 1 - lr*wd; then Adam without the wd*p term.
// Exactly as torch computes it (optimizer_ops.h has the order of operations): the per-call
// scalars (bias corrections, step size, 1 - lr*wd, 1 - b1, 1 - b2) in double, rounded once to
// float; every per-element operation in float32, rounded after each operation, never fused
// (torch's CPU kernels may fuse a multiply-add where the hardware has FMA; weft never does, so
// that the device twins match bit for bit). wd*p is added only when weight_decay != 0, the
// momentum buffer only when momentum != 0, as torch does (the signs of zeros depend on it).
//
// master: the float32 weights p, updated in place. param_out: if non-null, receives p rounded
// to param_dtype (f32, bf16 or f16; round to nearest even, as kernels::narrow_from_f32); it may
// equal master when param_dtype is f32. No other two buffers may overlap. States are float32.
// Throws weft::Error (invalid_argument) for a bad kind, step < 1, an unsupported dtype, or a
// null buffer that the kind needs (n > 0).
void optimizer_step(const OptimizerStep& s, float* master, const void* grad, DType grad_dtype, float* state1,
                    float* state2, void* param_out, DType param_dtype, size_t n);

// Gradient statistics before a step (loss-scale check and gradient clipping).
//   sum_squares: the sum over i of (grad[i] * scale)^2, each product and square in double and
//     summed in double in a fixed blocked order (optimizer_ops.h, kStatsLanes...) that depends
//     only on n: the same on any machine and thread count, and the same as the device twin's,
//     bit for bit.
//   nonfinite: some grad[i] * scale is inf or NaN (for a finite scale: some grad[i] is). In
//     double no finite product or sum of squares overflows, so this is !isfinite(sum_squares).
// dtype: f32, bf16 or f16. n == 0 gives {0, false}.
struct GradStats {
  double sum_squares = 0;
  bool nonfinite = false;
};
GradStats grad_stats(const void* grad, DType dtype, size_t n, float scale);

}  // namespace weft::kernels
