// kernels::optimizer_step and kernels::grad_stats against references written here from torch's
// formulas (torch/optim/sgd.py, adam.py; weft/training.h), sharing no code with the kernels.
//
// Tolerance of the step. The reference computes each step in double from the kernel's own
// float32 state before the step (so every step t = 1..5 is checked on its own, with its own
// bias corrections) and carries, next to each value, a bound on how far the kernel's float32
// result of the same expression can be from it (struct Ref): the kernel rounds every operation
// to float32 (relative error <= u = 2^-24, plus 2^-150 absolute near zero), its per-call
// constants (1 - b1, 1 - lr*wd, bias corrections, ...) are doubles rounded once to float
// (relative u), and errors in the operands propagate by first-order bounds for +, *, /, sqrt
// (see the operators). The reference's own double rounding (2^-53 per operation) is covered by
// rounding with u + 2^-52. A correct kernel is within the bound; the bound is a few u relative
// to the magnitudes involved, so any wrong operation, operand or order of magnitude fails it.
// param_out is compared bit for bit to the kernel's own master rounded here to bf16/f16 (round
// to nearest even, written from the formats' definitions), i.e. it may differ from the exact
// result only by that one rounding.
//
// WEFT_TEST_INJECT=1 (ctest unit.optimizer_inject) corrupts one element of every checked
// result before it is checked (the top exponent bit, as tests/multiproc/inject.h does): the run
// passes only when every corruption was caught.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "kernels/cpu/optimizer.h"
#include "optimizer_test_util.h"

namespace wk = weft::kernels;
using weft::DType;
using wk::OptimizerKind;

namespace {

using namespace opttest;

::testing::Environment* const kInjectionReport = inject::register_report();

// ---------------------------------------------------------------- the step's reference

constexpr double kRound = 0x1p-24 + 0x1p-52;  // float32 rounding, plus the reference's own
constexpr double kTiny = 0x1p-150;            // float32 rounding near zero (subnormals), absolute

// A reference value v and the bound e on |kernel's float32 result - v|.
struct Ref {
  double v, e;
};
Ref exact(double v) { return {v, 0}; }
// A per-call constant the kernel computes in double and rounds to float once.
Ref constant(double v) { return {v, (0x1p-24 + 0x1p-40) * std::fabs(v) + kTiny}; }
Ref rounded(double v, double propagated) {
  return {v, propagated + kRound * (std::fabs(v) + propagated) + kTiny};
}
Ref operator+(Ref a, Ref b) { return rounded(a.v + b.v, a.e + b.e); }
Ref operator-(Ref a, Ref b) { return rounded(a.v - b.v, a.e + b.e); }
Ref operator*(Ref a, Ref b) { return rounded(a.v * b.v, std::fabs(a.v) * b.e + std::fabs(b.v) * a.e + a.e * b.e); }
Ref operator/(Ref a, Ref b) {
  const double d = std::fabs(b.v);
  const double prop = d > b.e ? (a.e * d + std::fabs(a.v) * b.e) / (d * (d - b.e)) : HUGE_VAL;
  return rounded(a.v / b.v, prop);
}
Ref sqrt(Ref a) {
  const double r = std::sqrt(a.v);
  return rounded(r, std::min(std::sqrt(a.e), r > 0 ? a.e / r : HUGE_VAL));
}

double power(double b, int64_t t) {
  double r = 1;
  for (int64_t k = 0; k < t; ++k) r *= b;
  return r;
}

// One step of torch's optimizer on element values (kernel's state before the step, exact).
struct RefState {
  Ref p, s1, s2;
};
RefState reference_step(const wk::OptimizerStep& s, double graw, double p, double s1, double s2) {
  const Ref g0 = exact(graw) * exact(s.grad_scale);
  const Ref P = exact(p), wd = exact(s.weight_decay);
  if (s.kind == OptimizerKind::sgd) {
    const Ref g = s.weight_decay != 0 ? g0 + wd * P : g0;
    if (s.momentum == 0) return {P + exact(-static_cast<double>(s.lr)) * g, {}, {}};
    const Ref b = s.step == 1 ? g : exact(s1) * exact(s.momentum) + g;
    return {P + exact(-static_cast<double>(s.lr)) * b, b, {}};
  }
  const bool adamw = s.kind == OptimizerKind::adamw;
  const Ref p1 = adamw ? P * constant(1.0 - static_cast<double>(s.lr) * s.weight_decay) : P;
  const Ref g = !adamw && s.weight_decay != 0 ? g0 + wd * P : g0;
  const double w = 1.0 - static_cast<double>(s.beta1);
  const Ref W = constant(w), M = exact(s1);
  const Ref m = std::fabs(w) < 0.5 ? M + W * (g - M) : g - (g - M) * (exact(1) - W);
  const Ref v = exact(s2) * exact(s.beta2) + constant(1.0 - static_cast<double>(s.beta2)) * g * g;
  const Ref bc2_sqrt = constant(std::sqrt(1.0 - power(s.beta2, s.step)));
  const Ref step_size = constant(-(static_cast<double>(s.lr) / (1.0 - power(s.beta1, s.step))));
  const Ref denom = sqrt(v) / bc2_sqrt + exact(s.eps);
  return {p1 + step_size * m / denom, m, v};
}

struct Config {
  const char* name;
  wk::OptimizerStep s;
};
wk::OptimizerStep make(OptimizerKind k, float lr, float momentum, float b1, float b2, float wd) {
  wk::OptimizerStep s;
  s.kind = k;
  s.lr = lr;
  s.momentum = momentum;
  s.beta1 = b1;
  s.beta2 = b2;
  s.eps = 1e-8f;
  s.weight_decay = wd;
  return s;
}
const Config kConfigs[] = {
    {"sgd", make(OptimizerKind::sgd, 0.1f, 0, 0, 0, 0)},
    {"sgd wd", make(OptimizerKind::sgd, 0.1f, 0, 0, 0, 0.01f)},
    {"sgd momentum", make(OptimizerKind::sgd, 0.05f, 0.9f, 0, 0, 0)},
    {"sgd momentum wd", make(OptimizerKind::sgd, 0.05f, 0.9f, 0, 0, 0.01f)},
    {"adam", make(OptimizerKind::adam, 1e-3f, 0, 0.9f, 0.999f, 0)},
    {"adam wd", make(OptimizerKind::adam, 1e-3f, 0, 0.9f, 0.999f, 0.01f)},
    {"adam b1=0.3", make(OptimizerKind::adam, 1e-2f, 0, 0.3f, 0.99f, 0)},  // lerp's second form
    {"adamw", make(OptimizerKind::adamw, 1e-3f, 0, 0.9f, 0.999f, 0.01f)},
    {"adamw b1=0.3", make(OptimizerKind::adamw, 1e-2f, 0, 0.3f, 0.99f, 0.1f)},
};
const DType kGradTypes[] = {DType::f32, DType::bf16, DType::f16};
const size_t kSizes[] = {0, 1, 7, 1000, 4099};
enum class Out { none, f32, f32_in_place, bf16, f16 };
const Out kOuts[] = {Out::none, Out::f32, Out::f32_in_place, Out::bf16, Out::f16};

TEST(OptimizerStep, MatchesTorchFormulasWithinFloat32Rounding) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> unit(-1, 1);
  for (const Config& cfg : kConfigs) {
    for (DType gd : kGradTypes) {
      for (size_t n : kSizes) {
        for (Out out : kOuts) {
          const DType pd = out == Out::bf16 ? DType::bf16 : out == Out::f16 ? DType::f16 : DType::f32;
          std::vector<float> master(n), s1(n, 0.0f), s2(n, 0.0f);
          for (float& p : master) p = static_cast<float>(unit(rng));
          // Torch's momentum buffer does not exist before step 1: whatever state1 holds is ignored.
          if (cfg.s.kind == OptimizerKind::sgd) {
            for (float& b : s1) b = static_cast<float>(unit(rng));
          }
          std::vector<uint8_t> param_out(n * (pd == DType::f32 ? 4 : 2)), gbytes;
          std::vector<double> graw;
          for (int64_t t = 1; t <= 5; ++t) {
            wk::OptimizerStep s = cfg.s;
            s.step = t;
            s.grad_scale = 0.75f / 1024;  // 1/loss_scale * a clip coefficient
            random_grads(gd, n, 1024.0 / 0.75, rng, gbytes, graw);
            const std::vector<float> p0 = master, m0 = s1, v0 = s2;
            void* po = out == Out::none           ? nullptr
                       : out == Out::f32_in_place ? static_cast<void*>(master.data())
                                                  : static_cast<void*>(param_out.data());
            wk::optimizer_step(s, master.data(), gbytes.data(), gd, s1.data(), s2.data(), po, pd, n);
            std::vector<RefState> ref(n);
            for (size_t i = 0; i < n; ++i) ref[i] = reference_step(s, graw[i], p0[i], m0[i], v0[i]);
            const std::string what = std::string(cfg.name) + " grad " + std::to_string(static_cast<int>(gd)) +
                                     " out " + std::to_string(static_cast<int>(out)) + " n=" + std::to_string(n) +
                                     " t=" + std::to_string(t);
            auto near = [](const Ref& r, float got) { return std::fabs(static_cast<double>(got) - r.v) <= r.e; };
            check_all(master, what + " master", [&](size_t i, float g) { return near(ref[i].p, g); });
            const bool momentum = s.kind != OptimizerKind::sgd || s.momentum != 0;
            if (momentum) check_all(s1, what + " state1", [&](size_t i, float g) { return near(ref[i].s1, g); });
            if (s.kind != OptimizerKind::sgd) {
              check_all(s2, what + " state2", [&](size_t i, float g) { return near(ref[i].s2, g); });
            }
            if (out == Out::none || out == Out::f32_in_place) continue;
            std::vector<double> got(n);
            for (size_t i = 0; i < n; ++i) got[i] = decode(pd, param_out, i);
            check_all(got, what + " param_out", [&](size_t i, double g) {
              const double want = pd == DType::f32 ? master[i] : pd == DType::f16 ? round_f16(master[i])
                                                                                  : round_bf16(master[i]);
              return g == want && std::signbit(g) == std::signbit(want);
            });
          }
        }
      }
    }
  }
}

// The order of operations, bit for bit: torch's per-element sequence (sgd.py / adam.py, each
// tensor op one float32 rounding, Python floats in double cast where the op takes them)
// written out here in float. The bounds above cannot tell apart expressions that differ only in
// rounding (lerp's two forms, ((1-b2)*g)*g against (1-b2)*(g*g)); this can. (The test is built
// for x86-64 without FMA, so the compiler fuses none of these operations.)
float torch_float_step(const wk::OptimizerStep& s, float graw, float p, float& s1, float& s2) {
  const double lr = s.lr, wd = s.weight_decay, b1 = s.beta1, b2 = s.beta2, t = static_cast<double>(s.step);
  float g = graw * s.grad_scale;
  if (s.kind == OptimizerKind::sgd) {
    if (wd != 0) g = g + s.weight_decay * p;          // grad.add(param, alpha=wd)
    if (s.momentum != 0) {                            // buf = clone(grad), or buf.mul_(m).add_(grad)
      s1 = s.step == 1 ? g : s1 * s.momentum + g;
      g = s1;
    }
    return p + static_cast<float>(-lr) * g;           // param.add_(grad, alpha=-lr)
  }
  if (s.kind == OptimizerKind::adamw) {
    p = p * static_cast<float>(1 - lr * wd);          // param.mul_(1 - lr * wd)
  } else if (wd != 0) {
    g = g + s.weight_decay * p;
  }
  const auto w = static_cast<float>(1 - b1);          // exp_avg.lerp_(grad, 1 - b1)
  s1 = std::fabs(w) < 0.5f ? s1 + w * (g - s1) : g - (g - s1) * (1.0f - w);
  s2 = s2 * s.beta2 + static_cast<float>(1 - b2) * g * g;  // mul_(b2).addcmul_(g, g, value=1 - b2)
  const double bias_correction1 = 1 - std::pow(b1, t), bias_correction2 = 1 - std::pow(b2, t);
  const float denom = std::sqrt(s2) / static_cast<float>(std::pow(bias_correction2, 0.5)) + s.eps;
  return p + static_cast<float>(-(lr / bias_correction1)) * s1 / denom;  // addcdiv_(m, denom, value=-ss)
}

TEST(OptimizerStep, FollowsTorchsOperationOrderBitForBit) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> unit(-1, 1);
  const size_t n = 4099;
  for (const Config& cfg : kConfigs) {
    std::vector<float> master(n), s1(n), s2(n), grad(n);
    for (size_t i = 0; i < n; ++i) {
      master[i] = unit(rng);
      s1[i] = 0.1f * unit(rng);
      s2[i] = 0.01f * std::fabs(unit(rng));
    }
    for (int64_t t = 1; t <= 5; ++t) {
      wk::OptimizerStep s = cfg.s;
      s.step = t;
      s.grad_scale = 0.5f;
      for (float& g : grad) g = 2 * unit(rng);
      std::vector<float> p = master, m = s1, v = s2;
      for (size_t i = 0; i < n; ++i) p[i] = torch_float_step(s, grad[i], p[i], m[i], v[i]);
      wk::optimizer_step(s, master.data(), grad.data(), DType::f32, s1.data(), s2.data(), nullptr, DType::f32, n);
      const std::string what = std::string(cfg.name) + " t=" + std::to_string(t);
      auto same = [](float a, float b) { return std::memcmp(&a, &b, 4) == 0; };
      check_all(master, what + " master", [&](size_t i, float g) { return same(g, p[i]); });
      if (s.kind != OptimizerKind::sgd || s.momentum != 0) {
        check_all(s1, what + " state1", [&](size_t i, float g) { return same(g, m[i]); });
      }
      if (s.kind != OptimizerKind::sgd) {
        check_all(s2, what + " state2", [&](size_t i, float g) { return same(g, v[i]); });
      }
      master = p;  // continue from the reference (equal unless a check failed or was injected)
      s1 = m;
      s2 = v;
    }
  }
}

TEST(OptimizerStep, RejectsBadArguments) {
  float p = 0, m = 0, v = 0, g = 0;
  wk::OptimizerStep s;
  s.step = 0;
  EXPECT_THROW(wk::optimizer_step(s, &p, &g, DType::f32, &m, &v, nullptr, DType::f32, 1), weft::Error);
  s.step = 1;
  EXPECT_THROW(wk::optimizer_step(s, &p, &g, DType::f8e4m3, &m, &v, nullptr, DType::f32, 1), weft::Error);
  EXPECT_THROW(wk::optimizer_step(s, &p, &g, DType::f32, &m, nullptr, nullptr, DType::f32, 1), weft::Error);
  EXPECT_THROW(wk::optimizer_step(s, &p, &g, DType::f32, &m, &v, &p, DType::bf16, 1), weft::Error);
  s.kind = static_cast<OptimizerKind>(7);
  EXPECT_THROW(wk::optimizer_step(s, &p, &g, DType::f32, &m, &v, nullptr, DType::f32, 1), weft::Error);
  s.kind = OptimizerKind::sgd;  // no momentum: no state needed
  EXPECT_NO_THROW(wk::optimizer_step(s, &p, &g, DType::f32, nullptr, nullptr, nullptr, DType::f32, 1));
  EXPECT_THROW(wk::grad_stats(&g, DType::f64, 1, 1.0f), weft::Error);
}

// ---------------------------------------------------------------- gradient statistics

// Against a plain loop over the same terms (double(g) * scale, squared, in double): both are
// sums of the same n non-negative terms in different orders, each within gamma_(n-1) S of the
// exact sum S (recursive summation; every term passes through at most n - 1 additions), so
// |kernel - plain| <= 2 (n-1) 2^-53 / (1 - (n-1) 2^-53) S.
TEST(GradStats, MatchesPlainDoubleSum) {
  std::mt19937_64 rng(7);
  const size_t kTile = 65536;
  const size_t sizes[] = {0, 1, 7, 1000, 4099, kTile, kTile + 1, 3 * kTile + 5, 257 * kTile + 3};
  for (DType d : kGradTypes) {
    for (size_t n : sizes) {
      if (n > 4 * kTile && d != DType::bf16) continue;  // past 256 tiles (a second level) once
      for (float scale : {1.0f, 1.0f / 1024}) {
        std::vector<uint8_t> bytes;
        std::vector<double> values;
        random_grads(d, n, 1000.0, rng, bytes, values);
        const wk::GradStats st = wk::grad_stats(bytes.data(), d, n, scale);
        double plain = 0;
        for (double x : values) plain += (x * static_cast<double>(scale)) * (x * static_cast<double>(scale));
        const double nn = static_cast<double>(n);
        const double bound = 2 * nn * 0x1p-53 / (1 - nn * 0x1p-53) * plain;
        const std::string what = "grad_stats dtype " + std::to_string(static_cast<int>(d)) + " n=" +
                                 std::to_string(n) + " scale " + std::to_string(scale);
        check_all(std::vector<double>{st.sum_squares}, what,
                  [&](size_t, double got) { return std::fabs(got - plain) <= bound; });
        EXPECT_FALSE(st.nonfinite) << what;
      }
    }
  }
}

TEST(GradStats, AppliesTheScaleExactly) {
  const std::vector<float> twos(4099, 2.0f);
  const wk::GradStats st = wk::grad_stats(twos.data(), DType::f32, twos.size(), 0.5f);
  check_all(std::vector<double>{st.sum_squares}, "sum of (2 * 0.5)^2",
            [&](size_t, double got) { return got == static_cast<double>(twos.size()); });
}

// An inf or NaN anywhere (first, middle, last element; inside and across tiles) is reported.
TEST(GradStats, DetectsInfAndNaN) {
  std::mt19937_64 rng(9);
  for (DType d : kGradTypes) {
    for (size_t n : {size_t{1}, size_t{4099}, size_t{2 * 65536 + 3}}) {
      std::vector<uint8_t> bytes;
      std::vector<double> values;
      random_grads(d, n, 10.0, rng, bytes, values);
      for (size_t at : {size_t{0}, n / 2, n - 1}) {
        for (double bad : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN()}) {
          std::vector<uint8_t> b = bytes;
          if (d == DType::f32) {
            const auto f = static_cast<float>(bad);
            std::memcpy(b.data() + 4 * at, &f, 4);
          } else {
            const uint16_t h = d == DType::f16 ? (std::isnan(bad) ? 0x7e00 : bad > 0 ? 0x7c00 : 0xfc00)
                                               : (std::isnan(bad) ? 0x7fc0 : bad > 0 ? 0x7f80 : 0xff80);
            std::memcpy(b.data() + 2 * at, &h, 2);
          }
          const wk::GradStats st = wk::grad_stats(b.data(), d, n, 0.5f);
          const std::string what = "nonfinite dtype " + std::to_string(static_cast<int>(d)) + " n=" +
                                   std::to_string(n) + " at " + std::to_string(at) + " value " + std::to_string(bad);
          // The flag as a one-element result, so that an injection run corrupts it too.
          check_all(std::vector<float>{st.nonfinite ? 1.0f : 0.0f}, what, [](size_t, float f) { return f == 1.0f; });
          EXPECT_EQ(std::isnan(bad), std::isnan(st.sum_squares)) << what;
        }
      }
    }
  }
}

}  // namespace
