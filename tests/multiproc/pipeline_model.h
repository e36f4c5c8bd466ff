// The model of the pipeline-parallel tests (weft_pipeline_*): a chain of kLayers linear layers
// (tanh after all but the last) with a mean-squared-error loss, cut into S stages of contiguous
// layers, its forward and backward written out by hand in float32; the stage callbacks that
// train it under an executor; and single-process training of the same model as the reference.
// The optimizer is mlp_reference's RefOptimizer (SGD with momentum, independent of weft).
//
// Data: a step's batch has m micro-batches of kRows rows; the loss is the sum over all rows of
// 0.5 * |out - y|^2 / (m * kRows), so its gradient is the sum of the micro-batches' gradients.
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "mlp_reference.h"
#include "weft/pipeline.h"

namespace mpt::pipe {

constexpr int kLayers = 8;
constexpr int kRows = 2;  // rows per micro-batch
// Layer l maps kWidth[l] -> kWidth[l + 1] features (uneven on purpose: a mixed-up boundary
// buffer of a neighbour would not even have the right size).
constexpr int kWidth[kLayers + 1] = {5, 7, 6, 9, 4, 8, 6, 7, 3};

// Tensors 2l (weight, kWidth[l + 1] x kWidth[l]) and 2l + 1 (bias) of layer l.
mlp::Params init_params();
void batch(int step, int m, std::vector<float>& x, std::vector<float>& y);
// Stage s of S holds layers [first_layer(s, S), first_layer(s + 1, S)).
inline int first_layer(int s, int S) { return s * kLayers / S; }
mlp::RefOptimizer make_optimizer();

// `steps` steps of single-process training, micro-batch gradients summed in order 0..m-1.
mlp::Params reference_training(int steps, int m);

// Memory the stage callbacks write into: host memory, or (device tests) a copy-in/copy-out
// hook pair around each callback.
struct BoundaryIo {
  virtual ~BoundaryIo() = default;
  // Reads `n` floats of a boundary buffer the callback was given.
  virtual void read(const weft_tensor_t& t, float* dst, size_t n) = 0;
  virtual void write(const weft_tensor_t& t, const float* src, size_t n) = 0;
};
BoundaryIo& host_io();

// One rank's side of pipeline training: the parameters of every layer (it updates only its own
// stages' layers), gradient accumulators, and what each (stage, micro-batch) keeps from F to
// its backward. Its callbacks check what the executor hands them (shapes, NULL inputs on the
// first and outputs on the last stage) and fail with weft_pipeline_set_error when it is wrong.
class StageWorker {
 public:
  StageWorker(int stages, int microbatches, BoundaryIo& io = host_io());
  void begin_step(int step);
  void end_step();  // the optimizer step on this rank's layers
  static weft_status_t callback(const weft_stage_call_t* call, void* self);
  // Boundary tensors for weft_pipeline_config_t (S - 1 of them): shape (kRows, width).
  std::vector<weft_tensor_t> boundaries(weft_device_type_t type, int device_id);
  bool owns_layer(int l) const { return owned_[static_cast<size_t>(l)]; }
  const mlp::Params& params() const { return params_; }
  // Make the callback on (kind, stage, microbatch) fail with WEFT_ERR_INVALID_ARGUMENT.
  void fail_at(weft_action_kind_t kind, int stage, int microbatch) { fail_ = {kind, stage, microbatch}; }
  int calls() const { return calls_; }
  // REDUCE_GRAD calls for `stage` in the current step (each must come after all m backwards).
  int reduce_calls(int stage) const { return reduce_calls_.count(stage) ? reduce_calls_.at(stage) : 0; }

 private:
  struct Saved {
    const float* input_view = nullptr;  // the executor's buffer (valid until the backward)
    weft_tensor_t input_tensor{};        // the same, for BoundaryIo::read (shape not kept)
    std::vector<float> input_copy;      // what it held at F, to check that it stayed unchanged
    std::vector<std::vector<float>> out;  // each layer's output (after tanh)
    std::vector<std::vector<float>> d;    // each layer's pre-activation gradient (I -> W)
    std::vector<float> loss_grad;         // the last stage: dLoss/dout
  };
  weft_status_t run(const weft_stage_call_t& c);
  weft_status_t forward(const weft_stage_call_t& c);
  weft_status_t backward_input(const weft_stage_call_t& c);
  weft_status_t backward_weight(const weft_stage_call_t& c);

  int S_, m_;
  BoundaryIo& io_;
  mlp::Params params_, grads_;
  mlp::RefOptimizer opt_;
  std::vector<bool> owned_;
  std::vector<float> x_, y_;
  std::map<std::pair<int, int>, Saved> saved_;
  std::map<int, int> weights_done_, reduce_calls_;  // per stage, this step
  std::vector<std::vector<int64_t>> shapes_;
  struct Fail {
    int kind = -1, stage = -1, microbatch = -1;
  } fail_;
  int calls_ = 0;
};

}  // namespace mpt::pipe
