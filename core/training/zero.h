// ZeRO stages 0-3 over the data-parallel dim of a mesh (weft/training.h, "ZeRO"). Parameters are
// grouped into flat buffers (FSDP's units); each group is padded to a multiple of the
// data-parallel size N and rank r owns chunk r of it (torch.chunk's rule, so a group's shards are
// a 1-d sharded tensor and the checkpoint can re-partition them for another N). Host memory.
//
//   stage  parameters      gradients                     optimizer state (+ f32 master)
//   0      full            full, all-reduced             full
//   1      full            full, reduce-scattered        shard
//   2      full            shard (bucket while reduced)  shard
//   3      shard (+ gathered groups while in use)  shard  shard
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/comm/comm.h"
#include "core/comm/executor.h"
#include "core/mesh/mesh.h"
#include "core/training/buffer_pool.h"
#include "core/training/reduction.h"
#include "kernels/cpu/optimizer.h"

namespace weft::training {

struct ZeroConfig {
  int stage = 2;
  DType param_dtype = DType::f32;
  kernels::OptimizerKind optimizer = kernels::OptimizerKind::adamw;
  float lr = 1e-3f, momentum = 0.0f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.01f;
  std::vector<size_t> groups;  // per parameter; empty = by group_bytes
  size_t group_bytes = 25u << 20;
  ReduceOp grad_op = ReduceOp::avg;
  std::shared_ptr<const Codec> codec;  // the gradients' wire: nullptr = NATIVE
  // Error feedback (compressed wires only): per group element a float32 residual of this rank's
  // encode, kept across steps; zeroed when a step is skipped or a checkpoint is loaded, and
  // multiplied by `growth` when the loss scale grows (it is in loss-scaled units).
  bool error_feedback = false;
  float max_grad_norm = 0.0f;
  float loss_scale = 1.0f;
  bool dynamic_loss_scale = false;
  float growth = 2.0f, backoff = 0.5f;
  int growth_interval = 2000;
};

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  size_t count = 0;
  const void* init = nullptr;  // contiguous host values of init_dtype
  DType init_dtype = DType::f32;
};

struct StepInfo {
  bool skipped = false;
  float grad_norm = 0.0f;
  float loss_scale = 1.0f;
  Volume volume;
};

struct MemoryReport {
  uint64_t params = 0, grads = 0, optimizer = 0, buffers = 0, buffers_peak = 0;
};

class Zero {
 public:
  // Collective over the mesh's members; run it on the whole mesh communicator's executor.
  Zero(std::shared_ptr<mesh::Mesh> mesh, int dp_dim, std::vector<ParamSpec> params, ZeroConfig config);
  ~Zero();
  Zero(const Zero&) = delete;
  Zero& operator=(const Zero&) = delete;

  size_t num_params() const { return params_.size(); }
  size_t num_groups() const { return groups_.size(); }
  size_t group_of(size_t param) const { return param_group_[param]; }
  const ParamSpec& param_spec(size_t param) const { return params_[param]; }
  const ZeroConfig& config() const { return config_; }
  // The full parameter (stage 3: only while its group is gathered and the gather has completed).
  void* param(size_t param);
  // Stage 3: starts the all-gather of group g (nullptr when there is nothing to do).
  std::shared_ptr<Task> gather(size_t g);
  void release(size_t g);
  void grad_ready(size_t param, const void* grad);
  StepInfo step();
  MemoryReport memory() const;

  // The optimizer state for checkpoints: per group, this rank's real elements of the float32
  // master weights and of state buffers 1 and 2 (those the optimizer uses).
  struct ShardState {
    float* master;
    float* state1;  // nullptr when unused
    float* state2;
    size_t count;   // real elements on this rank
    size_t offset;  // of the first one in the group
    size_t total;   // real elements of the group
  };
  ShardState shard_state(size_t g);
  int64_t steps_taken() const { return step_count_; }
  float loss_scale() const { return loss_scale_; }
  // After the state was overwritten (checkpoint load): the parameters from the master weights,
  // all-gathered where parameters are full.
  void restore(int64_t steps, float loss_scale);
  const std::shared_ptr<mesh::Mesh>& mesh() const { return mesh_; }
  int dp_dim() const { return dp_dim_; }

 private:
  struct Group;
  void check_grads_complete() const;
  void launch_ready();
  void free_finished_buckets();
  void wait_reductions();
  float* master_of(Group& g);
  char* owned_params(Group& g);
  void publish_params();
  void note_buffers();
  // Error feedback: residual *= factor (0: cleared).
  void scale_residuals(float factor);

  std::shared_ptr<mesh::Mesh> mesh_;
  int dp_dim_;
  std::shared_ptr<Comm> dp_, whole_;
  std::vector<ParamSpec> params_;
  ZeroConfig config_;
  std::vector<size_t> param_group_, param_offset_;
  std::vector<std::unique_ptr<Group>> groups_;
  std::vector<char> marked_;
  size_t next_launch_ = 0;  // groups are reduced in descending order: next_launch_ counts them
  int64_t step_count_ = 0;
  float loss_scale_ = 1.0f;
  int clean_steps_ = 0;
  Volume volume_;
  uint64_t buffers_peak_ = 0;
  BufferPool pool_;  // buckets and gathered groups, reused from step to step
};

}  // namespace weft::training
