// The model the shrink tests train on after a rank died: data-parallel linear regression by
// full-batch gradient descent. Every original rank owns a fixed shard of samples, made from
// its rank alone, so any process can rebuild the shards of any set of ranks; the reference
// trains on the concatenated shards of the survivors in one process (no weft involved).
#pragma once

#include <vector>

namespace mpt::shrink {

constexpr int kFeatures = 4;
constexpr int kShardSamples = 16;
constexpr int kSteps = 30;
constexpr double kLearningRate = 0.5;

struct Shard {
  std::vector<double> x;  // kShardSamples x kFeatures, row-major
  std::vector<double> y;  // kShardSamples
};

// The samples of original rank `rank`: y = w_true . x + small noise, all from a fixed LCG.
Shard make_shard(int rank);

// Mean squared error of weights w over one shard and its gradient: means over the shard, so
// their average over equal-sized shards (an AVG allreduce) is the whole batch's.
void shard_loss_grad(const Shard& s, const std::vector<double>& w, double* loss, std::vector<double>* grad);

// Single-process reference: the loss before each of the kSteps steps on the union of the
// shards of `ranks`, starting from w = 0.
std::vector<double> reference_losses(const std::vector<int>& ranks);

}  // namespace mpt::shrink
