#include "shrink_training.h"

#include <cstddef>
#include <cstdint>

namespace mpt::shrink {

Shard make_shard(int rank) {
  static const double w_true[kFeatures] = {1.5, -2.0, 0.5, 3.0};
  uint64_t state = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank + 1);
  auto uniform = [&] {  // in [-1, 1)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) / static_cast<double>(uint64_t{1} << 52) - 1.0;
  };
  Shard s;
  s.x.resize(kShardSamples * kFeatures);
  s.y.resize(kShardSamples);
  for (int i = 0; i < kShardSamples; ++i) {
    double y = 0.01 * uniform();
    for (int f = 0; f < kFeatures; ++f) {
      s.x[i * kFeatures + f] = uniform();
      y += w_true[f] * s.x[i * kFeatures + f];
    }
    s.y[i] = y;
  }
  return s;
}

void shard_loss_grad(const Shard& s, const std::vector<double>& w, double* loss, std::vector<double>* grad) {
  *loss = 0;
  grad->assign(kFeatures, 0.0);
  for (int i = 0; i < kShardSamples; ++i) {
    double err = -s.y[i];
    for (int f = 0; f < kFeatures; ++f) err += w[f] * s.x[i * kFeatures + f];
    *loss += err * err / kShardSamples;
    for (int f = 0; f < kFeatures; ++f) (*grad)[f] += 2.0 * err * s.x[i * kFeatures + f] / kShardSamples;
  }
}

std::vector<double> reference_losses(const std::vector<int>& ranks) {
  // One batch of all the survivors' samples, in one process.
  std::vector<double> x, y;
  for (int r : ranks) {
    Shard s = make_shard(r);
    x.insert(x.end(), s.x.begin(), s.x.end());
    y.insert(y.end(), s.y.begin(), s.y.end());
  }
  const size_t m = y.size();
  std::vector<double> w(kFeatures, 0.0), losses;
  for (int step = 0; step < kSteps; ++step) {
    double loss = 0;
    std::vector<double> grad(kFeatures, 0.0);
    for (size_t i = 0; i < m; ++i) {
      double err = -y[i];
      for (int f = 0; f < kFeatures; ++f) err += w[f] * x[i * kFeatures + f];
      loss += err * err / static_cast<double>(m);
      for (int f = 0; f < kFeatures; ++f) grad[f] += 2.0 * err * x[i * kFeatures + f] / static_cast<double>(m);
    }
    losses.push_back(loss);
    for (int f = 0; f < kFeatures; ++f) w[f] -= kLearningRate * grad[f];
  }
  return losses;
}

}  // namespace mpt::shrink
