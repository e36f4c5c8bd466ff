// The small model of the training-parity tests (weft/training.h): an MLP of three linear layers
// with tanh between them, a mean-squared-error loss, and its forward and backward written out
// by hand in float32 - plus a plain optimizer (torch.optim's formulas, written independently of
// kernels/cpu/optimizer.*). Single-process training with these is the reference every
// parallel run must equal.
#pragma once

#include <functional>
#include <vector>

namespace mpt::mlp {

// Layer sizes: odd on purpose, so no parameter (and no group of them) divides by 2, 3 or 4.
constexpr int kIn = 7, kH1 = 13, kH2 = 11, kOut = 3;
constexpr int kBatch = 12;  // divides by 1, 2, 3 and 4 data-parallel ranks
constexpr int kParams = 6;  // W1, b1, W2, b2, W3, b3

using Params = std::vector<std::vector<float>>;  // kParams tensors, row-major

// Shapes and names of the six tensors.
std::vector<std::vector<long long>> shapes();
const char* name_of(int p);
long long count_of(int p);

Params init_params(unsigned seed);
// The batch for step `step`: kBatch rows of inputs (kIn) and targets (kOut).
void batch(int step, std::vector<float>& x, std::vector<float>& y);

// Forward and backward over rows [row0, row0 + rows) of the batch; loss = sum over those rows
// of 0.5 * |out - y|^2 / divisor. Writes the gradients (overwrites grads) layer by layer,
// last layer first, and calls layer_done(l) once layer l's gradients (W, b) are final - where
// a data-parallel trainer hands them to the bucketer. w[p] point at the parameter values.
void forward_backward(const float* const* w, const std::vector<float>& x, const std::vector<float>& y, int row0,
                      int rows, float divisor, float* const* grads, const std::function<void(int layer)>& layer_done);

// The same in two halves, for trainers that fetch parameters per phase (ZeRO-3): forward keeps
// the activations, backward needs them and the parameters again.
struct Activations {
  int row0 = 0, rows = 0;
  std::vector<std::vector<float>> a;  // input, the two hidden layers (after tanh), output
};
void forward(const float* const* w, const std::vector<float>& x, int row0, int rows, Activations& acts);
void backward(const float* const* w, const Activations& acts, const std::vector<float>& y, float divisor,
              float* const* grads, const std::function<void(int layer)>& layer_done);

// torch.optim's SGD (momentum) and AdamW, written out per element in float32.
struct RefOptimizer {
  bool adamw = true;
  float lr = 0.01f, momentum = 0.9f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.01f;
  float max_grad_norm = 0.0f;  // clip_grad_norm_ when > 0
  int t = 0;
  Params m, v;
  void step(Params& p, const Params& g);
};

// max |a - b| / max |b| over one tensor (0 when both are all zero).
double relative_error(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace mpt::mlp
