#include "pipeline_model.h"

#include <cmath>
#include <cstring>
#include <string>

namespace mpt::pipe {
namespace {

float uniform(unsigned& s) {
  s = s * 1664525u + 1013904223u;
  return static_cast<float>(static_cast<int>(s >> 9) - (1 << 22)) / static_cast<float>(1 << 22);
}

// out (rows x kWidth[l + 1]) = layer l of in (rows x kWidth[l]), tanh unless the last layer.
void layer_forward(const mlp::Params& p, int l, const float* in, int rows, std::vector<float>& out) {
  const int ni = kWidth[l], no = kWidth[l + 1];
  const float* W = p[2 * l].data();
  const float* b = p[2 * l + 1].data();
  out.assign(static_cast<size_t>(rows * no), 0.0f);
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < no; ++o) {
      float z = b[o];
      for (int i = 0; i < ni; ++i) z += W[o * ni + i] * in[r * ni + i];
      out[r * no + o] = l < kLayers - 1 ? std::tanh(z) : z;
    }
  }
}

// From g = dLoss/d(layer l's output): d = dLoss/d(pre-activation), gin = dLoss/d(layer input).
void layer_backward_input(const mlp::Params& p, int l, const std::vector<float>& out, const float* g, int rows,
                          std::vector<float>& d, std::vector<float>& gin) {
  const int ni = kWidth[l], no = kWidth[l + 1];
  d.assign(static_cast<size_t>(rows * no), 0.0f);
  for (int k = 0; k < rows * no; ++k) d[k] = l < kLayers - 1 ? g[k] * (1.0f - out[k] * out[k]) : g[k];
  gin.assign(static_cast<size_t>(rows * ni), 0.0f);
  const float* W = p[2 * l].data();
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < ni; ++i) {
      float s = 0.0f;
      for (int o = 0; o < no; ++o) s += W[o * ni + i] * d[r * no + o];
      gin[r * ni + i] = s;
    }
  }
}

// Adds this micro-batch's weight and bias gradients of layer l.
void layer_weight_grad(mlp::Params& grads, int l, const std::vector<float>& d, const float* in, int rows) {
  const int ni = kWidth[l], no = kWidth[l + 1];
  float* gW = grads[2 * l].data();
  float* gb = grads[2 * l + 1].data();
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < no; ++o) {
      gb[o] += d[r * no + o];
      for (int i = 0; i < ni; ++i) gW[o * ni + i] += d[r * no + o] * in[r * ni + i];
    }
  }
}

void zero(mlp::Params& g) {
  for (auto& t : g) std::fill(t.begin(), t.end(), 0.0f);
}

class HostIo final : public BoundaryIo {
 public:
  void read(const weft_tensor_t& t, float* dst, size_t n) override { std::memcpy(dst, t.data, n * sizeof(float)); }
  void write(const weft_tensor_t& t, const float* src, size_t n) override { std::memcpy(t.data, src, n * sizeof(float)); }
};

size_t numel(const weft_tensor_t& t) {
  size_t n = 1;
  for (int k = 0; k < t.ndim; ++k) n *= static_cast<size_t>(t.shape[k]);
  return n;
}

}  // namespace

BoundaryIo& host_io() {
  static HostIo io;
  return io;
}

mlp::Params init_params() {
  mlp::Params p(2 * kLayers);
  unsigned s = 11;
  for (int l = 0; l < kLayers; ++l) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(kWidth[l]));
    p[2 * l].resize(static_cast<size_t>(kWidth[l + 1] * kWidth[l]));
    p[2 * l + 1].resize(static_cast<size_t>(kWidth[l + 1]));
    for (float& v : p[2 * l]) v = 1.5f * uniform(s) * scale;
    for (float& v : p[2 * l + 1]) v = 0.1f * uniform(s);
  }
  return p;
}

void batch(int step, int m, std::vector<float>& x, std::vector<float>& y) {
  unsigned s = 500u + static_cast<unsigned>(step) * 104729u;
  const int rows = m * kRows;
  x.resize(static_cast<size_t>(rows * kWidth[0]));
  y.resize(static_cast<size_t>(rows * kWidth[kLayers]));
  for (float& v : x) v = uniform(s);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < kWidth[kLayers]; ++j) y[r * kWidth[kLayers] + j] = 0.5f * std::sin(float(j + 1) * x[r * kWidth[0]]);
}

mlp::RefOptimizer make_optimizer() {
  mlp::RefOptimizer o;
  o.adamw = false;
  o.lr = 0.05f;
  o.momentum = 0.9f;
  o.weight_decay = 0.01f;
  return o;
}

mlp::Params reference_training(int steps, int m) {
  mlp::Params p = init_params(), g = p;
  mlp::RefOptimizer opt = make_optimizer();
  std::vector<float> x, y;
  const float divisor = static_cast<float>(m * kRows);
  for (int step = 0; step < steps; ++step) {
    batch(step, m, x, y);
    zero(g);
    for (int i = 0; i < m; ++i) {
      std::vector<std::vector<float>> outs(kLayers);
      const float* in = x.data() + i * kRows * kWidth[0];
      for (int l = 0; l < kLayers; ++l) layer_forward(p, l, l ? outs[l - 1].data() : in, kRows, outs[l]);
      const int no = kWidth[kLayers];
      std::vector<float> grad(static_cast<size_t>(kRows * no)), d, gin;
      for (int k = 0; k < kRows * no; ++k) grad[k] = (outs[kLayers - 1][k] - y[i * kRows * no + k]) / divisor;
      for (int l = kLayers - 1; l >= 0; --l) {
        layer_backward_input(p, l, outs[l], grad.data(), kRows, d, gin);
        layer_weight_grad(g, l, d, l ? outs[l - 1].data() : in, kRows);
        grad.swap(gin);
      }
    }
    opt.step(p, g);
  }
  return p;
}

StageWorker::StageWorker(int stages, int microbatches, BoundaryIo& io)
    : S_(stages), m_(microbatches), io_(io), params_(init_params()), grads_(params_), opt_(make_optimizer()),
      owned_(kLayers, false) {
  for (int s = 0; s + 1 < S_; ++s) shapes_.push_back({kRows, kWidth[first_layer(s + 1, S_)]});
}

std::vector<weft_tensor_t> StageWorker::boundaries(weft_device_type_t type, int device_id) {
  std::vector<weft_tensor_t> out;
  for (auto& shape : shapes_) {
    weft_tensor_t t{};
    t.device_type = type;
    t.device_id = device_id;
    t.ndim = 2;
    t.dtype = WEFT_FLOAT32;
    t.shape = shape.data();
    out.push_back(t);
  }
  return out;
}

void StageWorker::begin_step(int step) {
  batch(step, m_, x_, y_);
  zero(grads_);
  saved_.clear();
  weights_done_.clear();
  reduce_calls_.clear();
}

void StageWorker::end_step() { opt_.step(params_, grads_); }

weft_status_t StageWorker::callback(const weft_stage_call_t* call, void* self) {
  return static_cast<StageWorker*>(self)->run(*call);
}

namespace {
weft_status_t refuse(const std::string& what) {
  weft_pipeline_set_error(what.c_str());
  return WEFT_ERR_INVALID_ARGUMENT;
}
}  // namespace

weft_status_t StageWorker::run(const weft_stage_call_t& c) {
  ++calls_;
  if (c.kind == fail_.kind && c.stage == fail_.stage && c.microbatch == fail_.microbatch) {
    return refuse("injected failure on purpose");
  }
  if (c.kind == WEFT_ACTION_REDUCE_GRAD && c.stage >= 0 && c.stage < S_) {
    if (c.microbatch != -1 || c.input || c.output) return refuse("REDUCE_GRAD with a micro-batch or a boundary view");
    if (weights_done_[c.stage] != m_) return refuse("REDUCE_GRAD before the stage's last backward");
    ++reduce_calls_[c.stage];
    return WEFT_OK;
  }
  if (c.stage < 0 || c.stage >= S_ || c.microbatch < 0 || c.microbatch >= m_) {
    return refuse("called with stage " + std::to_string(c.stage) + ", micro-batch " + std::to_string(c.microbatch));
  }
  // The boundary views: present exactly where weft/pipeline.h says, with the declared shape.
  auto check = [&](const weft_tensor_t* t, int boundary, const char* which) -> std::string {
    const bool want = boundary >= 0 && boundary < S_ - 1;
    if (!want) return t ? std::string(which) + " should be NULL" : "";
    if (!t || !t->data) return std::string(which) + " is missing";
    if (t->ndim != 2 || t->shape[0] != kRows || t->shape[1] != shapes_[static_cast<size_t>(boundary)][1] ||
        t->dtype != WEFT_FLOAT32) {
      return std::string(which) + " has the wrong shape or dtype";
    }
    return "";
  };
  std::string bad;
  switch (c.kind) {
    case WEFT_ACTION_F:
      bad = check(c.input, c.stage - 1, "input") + check(c.output, c.stage, "output");
      if (bad.empty()) return forward(c);
      break;
    case WEFT_ACTION_B:
    case WEFT_ACTION_I:
      bad = check(c.input, c.stage, "input") + check(c.output, c.stage - 1, "output");
      if (!bad.empty()) break;
      if (weft_status_t s = backward_input(c); s != WEFT_OK || c.kind == WEFT_ACTION_I) return s;
      return backward_weight(c);
    case WEFT_ACTION_W:
      if (c.input || c.output) bad = "W got a boundary view";
      if (bad.empty()) return backward_weight(c);
      break;
    default: bad = "unexpected action kind " + std::to_string(int(c.kind));
  }
  return refuse(bad + " (stage " + std::to_string(c.stage) + ", micro-batch " + std::to_string(c.microbatch) + ")");
}

weft_status_t StageWorker::forward(const weft_stage_call_t& c) {
  const int l0 = first_layer(c.stage, S_), l1 = first_layer(c.stage + 1, S_);
  Saved& sv = saved_[{c.stage, c.microbatch}];
  if (c.input) {
    sv.input_copy.resize(numel(*c.input));
    io_.read(*c.input, sv.input_copy.data(), sv.input_copy.size());
    sv.input_view = static_cast<const float*>(c.input->data);
    sv.input_tensor = *c.input;
    sv.input_tensor.shape = nullptr;
  } else {
    const float* x = x_.data() + c.microbatch * kRows * kWidth[0];
    sv.input_copy.assign(x, x + kRows * kWidth[0]);
  }
  sv.out.assign(static_cast<size_t>(l1 - l0), {});
  for (int l = l0; l < l1; ++l) {
    owned_[static_cast<size_t>(l)] = true;
    layer_forward(params_, l, l == l0 ? sv.input_copy.data() : sv.out[l - 1 - l0].data(), kRows, sv.out[l - l0]);
  }
  const std::vector<float>& last = sv.out.back();
  if (c.output) {
    io_.write(*c.output, last.data(), last.size());
  } else {
    const int no = kWidth[kLayers];
    const float divisor = static_cast<float>(m_ * kRows);
    sv.loss_grad.resize(last.size());
    for (size_t k = 0; k < last.size(); ++k) sv.loss_grad[k] = (last[k] - y_[c.microbatch * kRows * no + k]) / divisor;
  }
  return WEFT_OK;
}

weft_status_t StageWorker::backward_input(const weft_stage_call_t& c) {
  auto it = saved_.find({c.stage, c.microbatch});
  if (it == saved_.end()) return refuse("backward before forward");
  Saved& sv = it->second;
  const int l0 = first_layer(c.stage, S_), l1 = first_layer(c.stage + 1, S_);
  // The F input must still hold what it held at F (weft/pipeline.h: valid until the backward).
  if (sv.input_view) {
    std::vector<float> now(sv.input_copy.size());
    io_.read(sv.input_tensor, now.data(), now.size());
    if (now != sv.input_copy) return refuse("the forward input changed before the backward");
  }
  std::vector<float> grad;
  if (c.input) {
    grad.resize(numel(*c.input));
    io_.read(*c.input, grad.data(), grad.size());
  } else {
    grad = sv.loss_grad;
  }
  sv.d.assign(static_cast<size_t>(l1 - l0), {});
  std::vector<float> gin;
  for (int l = l1 - 1; l >= l0; --l) {
    layer_backward_input(params_, l, sv.out[l - l0], grad.data(), kRows, sv.d[l - l0], gin);
    grad.swap(gin);
  }
  if (c.output) io_.write(*c.output, grad.data(), grad.size());
  return WEFT_OK;
}

weft_status_t StageWorker::backward_weight(const weft_stage_call_t& c) {
  auto it = saved_.find({c.stage, c.microbatch});
  if (it == saved_.end() || it->second.d.empty()) return refuse("W before I");
  Saved& sv = it->second;
  const int l0 = first_layer(c.stage, S_), l1 = first_layer(c.stage + 1, S_);
  for (int l = l1 - 1; l >= l0; --l) {
    layer_weight_grad(grads_, l, sv.d[l - l0], l == l0 ? sv.input_copy.data() : sv.out[l - 1 - l0].data(), kRows);
  }
  saved_.erase(it);
  ++weights_done_[c.stage];
  return WEFT_OK;
}

}  // namespace mpt::pipe
