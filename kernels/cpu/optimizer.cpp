// The optimizer step and gradient statistics on host memory (optimizer.h): one loop per
// (update kind, gradient dtype, output dtype), each the per-element code of optimizer_ops.h,
// which GCC vectorises at -O3.
//
// fp-contract=off, for this file only: a*b+c stays two rounded operations on every target and
// with any -march (GCC fuses them into an FMA in C++ wherever the target has one, -std=c++20 or
// not), as nvcc --fmad=false keeps them on the GPU: the twins must agree bit for bit.
//
// The Adam loops vectorise only with -fno-math-errno: sqrtf may set errno for a negative input,
// so GCC guards each call with a branch. That flag has no per-function form (the pragma below
// cannot change how the sqrtf builtin is declared), so it has to come from the build for this
// source; without it the Adam loops run scalar, with the same results.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "kernels/cpu/optimizer.h"

#include <cmath>
#include <vector>

#include "core/common/status.h"
#include "kernels/cpu/codecs.h"
#include "kernels/cpu/float_codecs.h"
#include "kernels/cpu/optimizer_ops.h"

namespace weft::kernels {

using namespace detail;

namespace detail {

OptimizerScalars optimizer_scalars(const OptimizerStep& s) {
  // Python floats in torch: double arithmetic on the (float) hyperparameters, rounded to float
  // where a tensor op receives them as a Scalar.
  const double lr = s.lr, b1 = s.beta1, b2 = s.beta2, wd = s.weight_decay;
  const auto t = static_cast<double>(s.step);  // torch reads its step tensor as a Python float
  OptimizerScalars c;
  c.grad_scale = s.grad_scale;
  c.wd = s.weight_decay;
  c.neg_lr = static_cast<float>(-lr);
  c.momentum = s.momentum;
  c.first = s.step == 1 ? ~0u : 0u;
  c.decay = static_cast<float>(1.0 - lr * wd);
  c.w = static_cast<float>(1.0 - b1);
  c.one_minus_w = 1.0f - c.w;  // float arithmetic inside torch's lerp
  c.w_small = std::fabs(c.w) < 0.5f ? ~0u : 0u;
  c.beta2 = s.beta2;
  c.one_minus_beta2 = static_cast<float>(1.0 - b2);
  const double bias_correction1 = 1.0 - std::pow(b1, t);
  const double bias_correction2 = 1.0 - std::pow(b2, t);
  c.bc2_sqrt = static_cast<float>(std::pow(bias_correction2, 0.5));  // Python's bias_correction2 ** 0.5
  c.eps = s.eps;
  c.neg_step_size = static_cast<float>(-(lr / bias_correction1));
  return c;
}

void check_optimizer_step(const OptimizerStep& s, const float* master, const void* grad, DType grad_dtype,
                          const float* state1, const float* state2, const void* param_out, DType param_dtype,
                          size_t n, const char* what) {
  const auto kind = static_cast<int>(s.kind);
  if (kind < 0 || kind > static_cast<int>(OptimizerKind::adamw)) {
    fail(Status::invalid_argument, "%s: optimizer kind %d is not SGD (0), ADAM (1) or ADAMW (2)", what, kind);
  }
  if (s.step < 1) fail(Status::invalid_argument, "%s: step %lld; steps count from 1", what,
                       static_cast<long long>(s.step));
  auto supported = [](DType d) { return d == DType::f32 || d == DType::bf16 || d == DType::f16; };
  if (!supported(grad_dtype)) {
    fail(Status::invalid_argument, "%s: gradient dtype %d is not FLOAT32, BFLOAT16 or FLOAT16", what,
         static_cast<int>(grad_dtype));
  }
  if (param_out && !supported(param_dtype)) {
    fail(Status::invalid_argument, "%s: parameter dtype %d is not FLOAT32, BFLOAT16 or FLOAT16", what,
         static_cast<int>(param_dtype));
  }
  if (param_out && param_out == master && param_dtype != DType::f32) {
    fail(Status::invalid_argument, "%s: param_out is the master buffer but its dtype is not FLOAT32", what);
  }
  if (n == 0) return;
  const int states = s.kind == OptimizerKind::sgd ? (s.momentum != 0.0f ? 1 : 0) : 2;
  if (!master || !grad || (states >= 1 && !state1) || (states >= 2 && !state2)) {
    fail(Status::invalid_argument, "%s: a null buffer for %zu elements (master, gradient and %d state buffers)", what,
         n, states);
  }
}

}  // namespace detail

namespace {


// The buffers are distinct (optimizer.h), which __restrict tells the vectoriser; param_out ==
// master never reaches here (Store is false then: master already holds the f32 result). Not
// inlined: inlined into the dispatch lambdas, GCC forgets the __restrict and versions the loop
// with run-time overlap checks.
template <class U, class GC, class OC, bool Store>
__attribute__((noinline)) void step_loop(const OptimizerScalars& c, float* __restrict master,
                                         const typename GC::Storage* __restrict grad, float* __restrict s1,
                                         float* __restrict s2, typename OC::Storage* __restrict out, size_t n) {
  for (size_t i = 0; i < n; ++i) optimizer_element<U, GC, OC, Store>(c, i, master, grad, s1, s2, out);
}

template <class GC>
double tile_sum(const typename GC::Storage* g, size_t count, double scale) {
  double acc[kStatsLanes] = {};
  const size_t rows = count / kStatsLanes;
  for (size_t r = 0; r < rows; ++r) {
    const typename GC::Storage* row = g + r * kStatsLanes;
    for (size_t l = 0; l < kStatsLanes; ++l) acc[l] += scaled_square(GC::widen(row[l]), scale);
  }
  const typename GC::Storage* tail = g + rows * kStatsLanes;
  for (size_t l = 0; l < count % kStatsLanes; ++l) acc[l] += scaled_square(GC::widen(tail[l]), scale);
  double sum = 0.0;
  for (size_t l = 0; l < kStatsLanes; ++l) sum += acc[l];
  return sum;
}

template <class GC>
double blocked_sum(const typename GC::Storage* g, size_t n, double scale) {
  // The tiles' sums are the first level's groups (one tile = kStatsGroup lanes).
  static_assert(kStatsLanes == kStatsGroup);
  std::vector<double> level(stats_tiles(n));
  for (size_t c = 0; c < level.size(); ++c) {
    const size_t first = c * kStatsTile;
    level[c] = tile_sum<GC>(g + first, n - first < kStatsTile ? n - first : kStatsTile, scale);
  }
  size_t m = level.size();
  while (m > kStatsGroup) {
    const size_t next = stats_groups(m);
    for (size_t j = 0; j < next; ++j) {
      double sum = 0.0;  // read before level[j] (in a group already read) is overwritten
      for (size_t i = j * kStatsGroup; i < m && i < (j + 1) * kStatsGroup; ++i) sum += level[i];
      level[j] = sum;
    }
    m = next;
  }
  double sum = 0.0;
  for (size_t i = 0; i < m; ++i) sum += level[i];
  return sum;
}

}  // namespace

void optimizer_step(const OptimizerStep& s, float* master, const void* grad, DType grad_dtype, float* state1,
                    float* state2, void* param_out, DType param_dtype, size_t n) {
  check_optimizer_step(s, master, grad, grad_dtype, state1, state2, param_out, param_dtype, n, "optimizer_step");
  if (n == 0) return;
  const OptimizerScalars c = optimizer_scalars(s);
  const bool store = param_out && param_out != master;
  with_update(s, [&](auto update) {
    using U = decltype(update);
    with_float_codec(grad_dtype, [&](auto gc) {
      using GC = decltype(gc);
      const auto* g = static_cast<const typename GC::Storage*>(grad);
      if (!store) return step_loop<U, GC, HostF32, false>(c, master, g, state1, state2, nullptr, n);
      with_float_codec(param_dtype, [&](auto oc) {
        using OC = decltype(oc);
        step_loop<U, GC, OC, true>(c, master, g, state1, state2, static_cast<typename OC::Storage*>(param_out), n);
      });
    });
  });
}

GradStats grad_stats(const void* grad, DType dtype, size_t n, float scale) {
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16) {
    fail(Status::invalid_argument, "grad_stats: gradient dtype %d is not FLOAT32, BFLOAT16 or FLOAT16",
         static_cast<int>(dtype));
  }
  GradStats out;
  if (n == 0) return out;
  if (!grad) fail(Status::invalid_argument, "grad_stats: null gradient buffer with %zu elements", n);
  with_float_codec(dtype, [&](auto gc) {
    using GC = decltype(gc);
    out.sum_squares = blocked_sum<GC>(static_cast<const typename GC::Storage*>(grad), n, scale);
  });
  out.nonfinite = !finite_double(out.sum_squares);
  return out;
}

}  // namespace weft::kernels
