#include "mlp_reference.h"

#include <algorithm>
#include <cmath>

namespace mpt::mlp {

namespace {

// A small deterministic generator (not std::, whose distributions differ across libraries).
float uniform(unsigned& s) {
  s = s * 1664525u + 1013904223u;
  return static_cast<float>(static_cast<int>(s >> 9) - (1 << 22)) / static_cast<float>(1 << 22);
}

// Layer l: in -> out sizes.
const int kDims[4] = {kIn, kH1, kH2, kOut};

}  // namespace

std::vector<std::vector<long long>> shapes() {
  return {{kH1, kIn}, {kH1}, {kH2, kH1}, {kH2}, {kOut, kH2}, {kOut}};
}

const char* name_of(int p) {
  static const char* const names[kParams] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"};
  return names[p];
}

long long count_of(int p) {
  long long n = 1;
  const auto all = shapes();  // range-for over an element of a temporary would dangle
  for (long long d : all[static_cast<size_t>(p)]) n *= d;
  return n;
}

Params init_params(unsigned seed) {
  Params p(kParams);
  unsigned s = seed;
  for (int i = 0; i < kParams; ++i) {
    p[i].resize(static_cast<size_t>(count_of(i)));
    const float scale = 1.0f / std::sqrt(static_cast<float>(kDims[i / 2]));
    for (float& x : p[i]) x = uniform(s) * scale;
  }
  return p;
}

void batch(int step, std::vector<float>& x, std::vector<float>& y) {
  unsigned s = 1000u + static_cast<unsigned>(step) * 7919u;
  x.resize(kBatch * kIn);
  y.resize(kBatch * kOut);
  for (float& v : x) v = uniform(s);
  for (int r = 0; r < kBatch; ++r) {
    for (int j = 0; j < kOut; ++j) {
      float t = 0.0f;
      for (int k = 0; k < kIn; ++k) t += std::sin(static_cast<float>(j + 1) * x[r * kIn + k]);
      y[r * kOut + j] = 0.3f * t;
    }
  }
}

void forward(const float* const* w, const std::vector<float>& x, int row0, int rows, Activations& acts) {
  // Activations of every row: a[0] = input, a[1], a[2] after tanh, a[3] = output.
  acts.row0 = row0;
  acts.rows = rows;
  std::vector<std::vector<float>>& a = acts.a;
  a.assign(4, {});
  a[0].assign(x.begin() + row0 * kIn, x.begin() + (row0 + rows) * kIn);
  for (int l = 0; l < 3; ++l) {
    const int in = kDims[l], out = kDims[l + 1];
    const float* W = w[2 * l];
    const float* b = w[2 * l + 1];
    a[l + 1].assign(static_cast<size_t>(rows * out), 0.0f);
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < out; ++o) {
        float z = b[o];
        for (int i = 0; i < in; ++i) z += W[o * in + i] * a[l][r * in + i];
        a[l + 1][r * out + o] = l < 2 ? std::tanh(z) : z;
      }
    }
  }
}

void forward_backward(const float* const* w, const std::vector<float>& x, const std::vector<float>& y, int row0,
                      int rows, float divisor, float* const* grads, const std::function<void(int)>& layer_done) {
  Activations acts;
  forward(w, x, row0, rows, acts);
  backward(w, acts, y, divisor, grads, layer_done);
}

void backward(const float* const* w, const Activations& acts, const std::vector<float>& y, float divisor,
              float* const* grads, const std::function<void(int)>& layer_done) {
  const std::vector<std::vector<float>>& a = acts.a;
  const int row0 = acts.row0, rows = acts.rows;
  // d = dLoss/d(pre-activation) of the current layer, for every row.
  std::vector<float> d(static_cast<size_t>(rows * kOut));
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < kOut; ++j) d[r * kOut + j] = (a[3][r * kOut + j] - y[(row0 + r) * kOut + j]) / divisor;
  }
  for (int l = 2; l >= 0; --l) {
    const int in = kDims[l], out = kDims[l + 1];
    float* gW = grads[2 * l];
    float* gb = grads[2 * l + 1];
    std::fill(gW, gW + out * in, 0.0f);
    std::fill(gb, gb + out, 0.0f);
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < out; ++o) {
        gb[o] += d[r * out + o];
        for (int i = 0; i < in; ++i) gW[o * in + i] += d[r * out + o] * a[l][r * in + i];
      }
    }
    layer_done(l);
    if (l == 0) break;
    std::vector<float> prev(static_cast<size_t>(rows * in), 0.0f);
    const float* W = w[2 * l];
    for (int r = 0; r < rows; ++r) {
      for (int i = 0; i < in; ++i) {
        float s = 0.0f;
        for (int o = 0; o < out; ++o) s += W[o * in + i] * d[r * out + o];
        const float act = a[l][r * in + i];
        prev[r * in + i] = s * (1.0f - act * act);
      }
    }
    d.swap(prev);
  }
}

void RefOptimizer::step(Params& p, const Params& g) {
  ++t;
  if (m.empty()) {
    m.resize(p.size());
    v.resize(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      m[i].assign(p[i].size(), 0.0f);
      v[i].assign(p[i].size(), 0.0f);
    }
  }
  float clip = 1.0f;
  if (max_grad_norm > 0.0f) {
    double sq = 0.0;
    for (const auto& gi : g)
      for (float x : gi) sq += static_cast<double>(x) * x;
    const float norm = static_cast<float>(std::sqrt(sq));
    clip = std::min(1.0f, max_grad_norm / (norm + 1e-6f));
  }
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), t);
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), t);
  for (size_t i = 0; i < p.size(); ++i) {
    for (size_t k = 0; k < p[i].size(); ++k) {
      float gr = g[i][k] * clip;
      float& w = p[i][k];
      if (!adamw) {  // SGD with momentum, L2 weight decay
        gr += weight_decay * w;
        m[i][k] = t == 1 ? gr : momentum * m[i][k] + gr;
        w -= lr * m[i][k];
        continue;
      }
      w *= static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
      m[i][k] += (gr - m[i][k]) * static_cast<float>(1.0 - beta1);
      v[i][k] = v[i][k] * beta2 + gr * gr * static_cast<float>(1.0 - beta2);
      const float denom = std::sqrt(v[i][k]) / static_cast<float>(std::sqrt(bc2)) + eps;
      w -= static_cast<float>(lr / bc1) * (m[i][k] / denom);
    }
  }
}

double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  if (scale == 0.0) return diff;
  return diff / scale;
}

}  // namespace mpt::mlp
