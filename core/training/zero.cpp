#include "core/training/zero.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "core/collectives/collectives.h"
#include "core/common/status.h"
#include "core/training/agreement.h"
#include "kernels/cpu/convert.h"

namespace weft::training {

struct Zero::Group {
  size_t first = 0, last = 0;  // parameters [first, last)
  size_t count = 0;            // real elements
  size_t chunk = 0;            // elements per data-parallel rank (torch.chunk's rule)
  size_t mine = 0;             // real elements in this rank's chunk
  std::vector<char> params;    // stages 0-2: nranks * chunk; stage 3: chunk
  BufferPool::Buffer gathered;  // stage 3, while gathered: nranks * chunk
  std::vector<char> grads;     // stages 0-1: nranks * chunk; 2-3: chunk
  BufferPool::Buffer bucket;    // stages 2-3, between the first gradient and the reduction's end
  std::vector<float> master;   // f16/bf16 parameters: stage 0 nranks * chunk, else chunk
  std::vector<float> state1, state2;
  std::vector<float> residual;  // error feedback: nranks * chunk (the whole local gradient)
  size_t pending = 0;          // gradients not yet given this step
  std::shared_ptr<Task> reduction, gathering;
};

namespace {

size_t state_buffers(kernels::OptimizerKind k, float momentum) {
  if (k == kernels::OptimizerKind::sgd) return momentum != 0.0f ? 1 : 0;
  return 2;
}

template <class T>
uint64_t bytes_of(const std::vector<T>& v) {
  return v.size() * sizeof(T);
}


}  // namespace

Zero::Zero(std::shared_ptr<mesh::Mesh> mesh, int dp_dim, std::vector<ParamSpec> params, ZeroConfig config)
    : mesh_(std::move(mesh)), dp_dim_(dp_dim), params_(std::move(params)), config_(std::move(config)) {
  dp_ = mesh_->group(1u << dp_dim_);
  whole_ = mesh_->whole();
  loss_scale_ = config_.loss_scale;
  const int n = dp_->size();
  const size_t r = static_cast<size_t>(dp_->rank());
  const size_t esize = dtype_size(config_.param_dtype);
  // Groups: given, or consecutive parameters up to group_bytes.
  std::vector<size_t> group = config_.groups;
  if (group.empty()) {
    group.resize(params_.size());
    size_t g = 0, bytes = 0;
    for (size_t i = 0; i < params_.size(); ++i) {
      const size_t b = params_[i].count * esize;
      if (i > 0 && bytes + b > config_.group_bytes) {
        ++g;
        bytes = 0;
      }
      group[i] = g;
      bytes += b;
    }
  }
  param_group_ = group;
  param_offset_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    if (group[i] == groups_.size()) {
      groups_.push_back(std::make_unique<Group>());
      groups_.back()->first = i;
    }
    Group& g = *groups_.back();
    param_offset_[i] = g.count;
    g.count += params_[i].count;
    g.last = i + 1;
  }
  std::vector<uint64_t> keys(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    uint64_t shape_key = key_of({params_[i].shape.size()});
    for (int64_t d : params_[i].shape) shape_key = key_of({shape_key, static_cast<uint64_t>(d)});
    keys[i] = key_of({shape_key, param_group_[i]});
  }
  const std::vector<uint64_t> header = {params_.size(), static_cast<uint64_t>(config_.stage),
                                        static_cast<uint64_t>(config_.param_dtype), static_cast<uint64_t>(config_.optimizer),
                                        static_cast<uint64_t>(config_.codec ? config_.codec->id() : 0),
                                        static_cast<uint64_t>(config_.grad_op), static_cast<uint64_t>(config_.error_feedback)};
  if (config_.error_feedback && !config_.codec) {
    fail(Status::invalid_argument, "error feedback needs a compressed wire format (the NATIVE wire loses nothing)");
  }
  check_agreement(*dp_, "ZeRO", header, keys, [this](size_t i) { return params_[i].name; });

  const bool mixed = config_.param_dtype != DType::f32;
  const size_t nstate = state_buffers(config_.optimizer, config_.momentum);
  for (auto& gp : groups_) {
    Group& g = *gp;
    g.chunk = chunk_of(g.count, n);
    const size_t begin = std::min(g.count, r * g.chunk);
    g.mine = std::min(g.chunk, g.count - begin);
    const size_t full = g.chunk * static_cast<size_t>(n);
    // The initial values, as float32, from data-parallel coordinate 0.
    std::vector<float> init(full, 0.0f);
    for (size_t i = g.first; i < g.last; ++i) {
      kernels::widen_to_f32(init.data() + param_offset_[i], params_[i].init, params_[i].init_dtype, params_[i].count);
    }
    coll::broadcast(*dp_, init.data(), full, DType::f32, 0);
    const size_t local = config_.stage == 0 ? full : g.chunk;
    const float* local_init = init.data() + (config_.stage == 0 ? 0 : r * g.chunk);
    if (mixed) g.master.assign(local_init, local_init + local);
    if (nstate >= 1) g.state1.assign(local, 0.0f);
    if (nstate >= 2) g.state2.assign(local, 0.0f);
    g.params.assign((config_.stage == 3 ? g.chunk : full) * esize, 0);
    if (config_.stage == 3) {
      kernels::narrow_from_f32(g.params.data(), config_.param_dtype, init.data() + r * g.chunk, g.chunk);
    } else {
      kernels::narrow_from_f32(g.params.data(), config_.param_dtype, init.data(), full);
    }
    g.grads.assign((config_.stage >= 2 ? g.chunk : full) * esize, 0);
    if (config_.error_feedback) g.residual.assign(full, 0.0f);
    g.pending = g.last - g.first;
  }
  marked_.assign(params_.size(), 0);
}

Zero::~Zero() {
  for (auto& g : groups_) {
    if (g->reduction) g->reduction->wait();
    if (g->gathering) g->gathering->wait();
  }
}

void* Zero::param(size_t i) {
  Group& g = *groups_[param_group_[i]];
  const size_t esize = dtype_size(config_.param_dtype);
  if (config_.stage < 3) return g.params.data() + param_offset_[i] * esize;
  if (!g.gathering) {
    fail(Status::invalid_argument, "%s: its group %zu is not gathered (weft_zero_gather it first)",
         params_[i].name.c_str(), param_group_[i]);
  }
  if (!g.gathering->done()) {
    fail(Status::invalid_argument, "%s: the gather of its group %zu has not completed (weft_wait its request first)",
         params_[i].name.c_str(), param_group_[i]);
  }
  g.gathering->rethrow();
  return g.gathered.data.get() + param_offset_[i] * esize;
}

std::shared_ptr<Task> Zero::gather(size_t gi) {
  if (config_.stage < 3) return nullptr;
  Group& g = *groups_[gi];
  if (g.gathering) return nullptr;
  const size_t esize = dtype_size(config_.param_dtype);
  const size_t n = static_cast<size_t>(dp_->size());
  g.gathered = pool_.take(g.chunk * n * esize);  // the all-gather writes every byte
  note_buffers();
  volume_ += Volume{g.chunk * n, g.chunk * n * esize};
  Comm* dp = dp_.get();
  const void* shard = g.params.data();
  void* out = g.gathered.data.get();
  const size_t chunk = g.chunk;
  const DType dtype = config_.param_dtype;
  g.gathering = start_on(dp_, [dp, shard, out, chunk, dtype] { coll::allgather(*dp, shard, out, chunk, dtype); });
  return g.gathering;
}

void Zero::release(size_t gi) {
  if (config_.stage < 3) return;
  Group& g = *groups_[gi];
  if (!g.gathering) return;
  if (!g.gathering->done()) {
    fail(Status::invalid_argument, "group %zu: its gather is still in flight (weft_wait its request before releasing)", gi);
  }
  g.gathering.reset();
  pool_.give(std::move(g.gathered));
}

void Zero::grad_ready(size_t i, const void* grad) {
  if (marked_[i]) fail(Status::invalid_argument, "%s (parameter %zu): gradient given twice in one step", params_[i].name.c_str(), i);
  free_finished_buckets();
  Group& g = *groups_[param_group_[i]];
  const size_t esize = dtype_size(config_.param_dtype);
  char* dst;
  if (config_.stage >= 2) {
    if (!g.bucket) {
      const size_t bytes = g.chunk * static_cast<size_t>(dp_->size()) * esize;
      g.bucket = pool_.take(bytes);
      // Every gradient of the group is copied in before the reduction; the padding is zeroed here.
      std::memset(g.bucket.data.get() + g.count * esize, 0, bytes - g.count * esize);
      note_buffers();
    }
    dst = g.bucket.data.get();
  } else {
    dst = g.grads.data();
  }
  if (params_[i].count) std::memcpy(dst + param_offset_[i] * esize, grad, params_[i].count * esize);
  marked_[i] = 1;
  --g.pending;
  launch_ready();
}

void Zero::launch_ready() {
  const int n = dp_->size();
  const size_t r = static_cast<size_t>(dp_->rank());
  const size_t esize = dtype_size(config_.param_dtype);
  while (next_launch_ < groups_.size()) {
    Group& g = *groups_[groups_.size() - 1 - next_launch_];
    if (g.pending != 0) break;
    ++next_launch_;
    ReduceSpec spec;
    spec.kind = config_.stage == 0 ? Reduction::allreduce : Reduction::reduce_scatter;
    spec.codec = config_.codec;
    spec.dtype = config_.param_dtype;
    spec.op = config_.grad_op;
    volume_ += reduction_volume(spec, g.chunk, n);
    void* data = config_.stage >= 2 ? g.bucket.data.get() : g.grads.data();
    void* shard = config_.stage >= 2 ? g.grads.data() : g.grads.data() + r * g.chunk * esize;
    const size_t chunk = g.chunk;
    Comm* dp = dp_.get();
    float* residual = g.residual.empty() ? nullptr : g.residual.data();
    g.reduction = start_on(dp_, [dp, spec, data, chunk, shard, residual] {
      reduce_bucket(*dp, spec, data, chunk, shard, residual);
    });
  }
}

void Zero::free_finished_buckets() {
  for (auto& g : groups_) {
    if (g->reduction && g->bucket && g->reduction->done()) pool_.give(std::move(g->bucket));
  }
}

void Zero::note_buffers() {
  uint64_t now = 0;
  for (auto& g : groups_) now += g->bucket.bytes * !!g->bucket + g->gathered.bytes * !!g->gathered;
  now += pool_.kept_bytes();
  buffers_peak_ = std::max(buffers_peak_, now);
}

void Zero::check_grads_complete() const {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!marked_[i]) {
      fail(Status::invalid_argument, "%s (parameter %zu): no gradient was given this step (weft_zero_grad_ready)",
           params_[i].name.c_str(), i);
    }
  }
}

void Zero::wait_reductions() {
  std::vector<std::shared_ptr<Task>> tasks;
  for (auto& g : groups_) {
    if (g->reduction) g->reduction->wait();
    tasks.push_back(std::move(g->reduction));
    pool_.give(std::move(g->bucket));
    g->pending = g->last - g->first;
  }
  std::fill(marked_.begin(), marked_.end(), 0);
  next_launch_ = 0;
  for (auto& t : tasks) {
    if (t) t->rethrow();
  }
}

float* Zero::master_of(Group& g) {
  if (!g.master.empty()) return g.master.data();
  // float32 parameters are their own master weights.
  const size_t r = static_cast<size_t>(dp_->rank());
  float* p = reinterpret_cast<float*>(g.params.data());
  return config_.stage == 1 || config_.stage == 2 ? p + r * g.chunk : p;
}

char* Zero::owned_params(Group& g) {
  const size_t r = static_cast<size_t>(dp_->rank());
  const size_t esize = dtype_size(config_.param_dtype);
  return config_.stage == 1 || config_.stage == 2 ? g.params.data() + r * g.chunk * esize : g.params.data();
}

StepInfo Zero::step() {
  check_grads_complete();
  wait_reductions();
  const size_t r = static_cast<size_t>(dp_->rank());
  const size_t esize = dtype_size(config_.param_dtype);
  // Each rank's real elements of the reduced gradient (stage 0: its chunk of the full one, so
  // each element is counted once over the data-parallel group).
  auto grad_of = [&](Group& g) -> char* {
    return config_.stage >= 2 ? g.grads.data() : g.grads.data() + r * g.chunk * esize;
  };
  double mine[2] = {0.0, 0.0};
  const float unscale = 1.0f / loss_scale_;
  for (auto& gp : groups_) {
    const kernels::GradStats s = kernels::grad_stats(grad_of(*gp), config_.param_dtype, gp->mine, unscale);
    mine[0] += s.sum_squares;
    mine[1] += s.nonfinite ? 1.0 : 0.0;
  }
  // Every rank sums the same terms in the same (rank) order, so all take the same decision and
  // the same clipping coefficient to the bit.
  const size_t n = static_cast<size_t>(whole_->size());
  std::vector<double> all(2 * n);
  run_on(whole_, [&] { coll::allgather(*whole_, mine, all.data(), 2, DType::f64); });
  double sum_squares = 0.0, nonfinite = 0.0;
  for (size_t q = 0; q < n; ++q) {
    sum_squares += all[2 * q];
    nonfinite += all[2 * q + 1];
  }
  StepInfo info;
  info.grad_norm = static_cast<float>(std::sqrt(sum_squares));
  for (auto& g : groups_) {
    if (g->gathering && g->gathering->done()) release(static_cast<size_t>(&g - groups_.data()));
  }
  if (nonfinite > 0.0) {
    info.skipped = true;
    // The residuals took in this step's gradients, which the skip discards (and which hold the
    // inf/NaN): feedback restarts from zero.
    scale_residuals(0.0f);
    if (config_.dynamic_loss_scale) loss_scale_ *= config_.backoff;
    clean_steps_ = 0;
    info.loss_scale = loss_scale_;
    info.volume = std::exchange(volume_, Volume{});
    return info;
  }
  float clip = 1.0f;
  if (config_.max_grad_norm > 0.0f) {
    // torch.nn.utils.clip_grad_norm_: max_norm / (norm + 1e-6), never above 1.
    clip = std::min(1.0f, config_.max_grad_norm / (info.grad_norm + 1e-6f));
  }
  ++step_count_;
  kernels::OptimizerStep s;
  s.kind = config_.optimizer;
  s.lr = config_.lr;
  s.momentum = config_.momentum;
  s.beta1 = config_.beta1;
  s.beta2 = config_.beta2;
  s.eps = config_.eps;
  s.weight_decay = config_.weight_decay;
  s.step = step_count_;
  s.grad_scale = clip * unscale;
  const bool mixed = config_.param_dtype != DType::f32;
  for (auto& gp : groups_) {
    Group& g = *gp;
    const size_t count = config_.stage == 0 ? g.count : g.mine;
    // Stage 0: every rank updates the whole group (the same values everywhere); others their chunk.
    const char* grad = config_.stage == 0 ? g.grads.data() : grad_of(g);
    kernels::optimizer_step(s, master_of(g), grad,
                            config_.param_dtype, g.state1.empty() ? nullptr : g.state1.data(),
                            g.state2.empty() ? nullptr : g.state2.data(), mixed ? owned_params(g) : nullptr,
                            config_.param_dtype, count);
  }
  publish_params();
  if (config_.dynamic_loss_scale && ++clean_steps_ >= config_.growth_interval) {
    loss_scale_ *= config_.growth;
    scale_residuals(config_.growth);  // the next gradients come in the new scale
    clean_steps_ = 0;
  }
  info.loss_scale = loss_scale_;
  info.volume = std::exchange(volume_, Volume{});  // with the parameters' all-gather just made
  return info;
}

void Zero::scale_residuals(float factor) {
  for (auto& g : groups_) {
    for (float& x : g->residual) x = factor == 0.0f ? 0.0f : x * factor;
  }
}

void Zero::publish_params() {
  if (config_.stage != 1 && config_.stage != 2) return;
  const size_t esize = dtype_size(config_.param_dtype);
  const size_t r = static_cast<size_t>(dp_->rank());
  const size_t n = static_cast<size_t>(dp_->size());
  std::vector<std::shared_ptr<Task>> tasks;
  for (auto& gp : groups_) {
    Group& g = *gp;
    char* full = g.params.data();
    const char* mine = full + r * g.chunk * esize;
    const size_t chunk = g.chunk;
    const DType dtype = config_.param_dtype;
    Comm* dp = dp_.get();
    volume_ += Volume{chunk * n, chunk * n * esize};
    tasks.push_back(start_on(dp_, [dp, mine, full, chunk, dtype] { coll::allgather(*dp, mine, full, chunk, dtype); }));
  }
  for (auto& t : tasks) t->wait();
  for (auto& t : tasks) t->rethrow();
}

MemoryReport Zero::memory() const {
  MemoryReport m;
  for (const auto& g : groups_) {
    m.params += bytes_of(g->params);
    m.grads += bytes_of(g->grads);
    m.optimizer += bytes_of(g->master) + bytes_of(g->state1) + bytes_of(g->state2) + bytes_of(g->residual);
    m.buffers += g->bucket.bytes * !!g->bucket + g->gathered.bytes * !!g->gathered;
  }
  m.buffers += pool_.kept_bytes();
  m.buffers_peak = std::max(buffers_peak_, m.buffers);
  return m;
}

Zero::ShardState Zero::shard_state(size_t gi) {
  Group& g = *groups_[gi];
  const size_t r = static_cast<size_t>(dp_->rank());
  ShardState s;
  const size_t skip = config_.stage == 0 ? r * g.chunk : 0;  // stage 0 keeps everything: point at this rank's chunk
  s.master = master_of(g) + skip;
  s.state1 = g.state1.empty() ? nullptr : g.state1.data() + skip;
  s.state2 = g.state2.empty() ? nullptr : g.state2.data() + skip;
  s.count = g.mine;
  s.offset = std::min(g.count, r * g.chunk);
  s.total = g.count;
  return s;
}

void Zero::restore(int64_t steps, float loss_scale) {
  step_count_ = steps;
  loss_scale_ = loss_scale;
  clean_steps_ = 0;
  scale_residuals(0.0f);  // a checkpoint holds no residuals: feedback restarts from zero
  const size_t r = static_cast<size_t>(dp_->rank());
  const size_t n = static_cast<size_t>(dp_->size());
  for (auto& gp : groups_) {
    Group& g = *gp;
    if (config_.stage == 0) {
      // Stage 0 keeps everything, but every rank loaded only its chunk: share them.
      for (float* p : {master_of(g), g.state1.empty() ? nullptr : g.state1.data(),
                       g.state2.empty() ? nullptr : g.state2.data()}) {
        if (!p) continue;
        run_on(dp_, [&] { coll::allgather(*dp_, p + r * g.chunk, p, g.chunk, DType::f32); });
      }
      if (!g.master.empty()) kernels::narrow_from_f32(g.params.data(), config_.param_dtype, g.master.data(), g.chunk * n);
      continue;
    }
    if (!g.master.empty()) kernels::narrow_from_f32(owned_params(g), config_.param_dtype, g.master.data(), g.chunk);
  }
  if (config_.stage == 1 || config_.stage == 2) {
    const Volume before = volume_;
    publish_params();
    volume_ = before;
  }
}

}  // namespace weft::training
