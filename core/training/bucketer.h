// The gradient bucketer (weft/training.h, "gradient bucketer"): gradients grouped into flat
// buckets in the order backward produces them; as soon as a bucket and every earlier one are
// complete, its copy-in, reduction and copy-out are queued on the communicator's worker, so
// communication overlaps the rest of backward; finish() waits for them. Host memory, or device
// memory (core/device: the copies and the collective queued on a stream, NCCL or staged).
// With error feedback (compressed wires, host buckets) each bucket keeps one float32 residual
// per element, allocated here once and carried from step to step.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/comm.h"
#include "core/comm/executor.h"
#include "core/device/device_api.h"
#include "core/training/reduction.h"

namespace weft::training {

struct GradSpec {
  void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::f32;
  std::string name;
  bool on_device = false;  // CUDA memory of the communicator's GPU
};

struct BucketerStats {
  uint64_t steps = 0;
  uint64_t wire_bytes = 0;
  uint64_t exposed_ns = 0;
  uint64_t launched_late = 0;
};

class Bucketer {
 public:
  // bucket_of: each gradient's bucket (0.. without gaps; empty = by bucket_bytes). Collective over
  // comm (checks every rank registered the same gradients and buckets); run it on comm's
  // executor. error_feedback: spec.codec must be set (a compressed wire).
  Bucketer(std::shared_ptr<Comm> comm, std::vector<GradSpec> grads, std::vector<size_t> bucket_of,
           size_t bucket_bytes, const ReduceSpec& spec, bool error_feedback = false);
  ~Bucketer();
  Bucketer(const Bucketer&) = delete;
  Bucketer& operator=(const Bucketer&) = delete;

  // Consecutive gradients up to bucket_bytes (a new bucket also where the dtype or the memory
  // kind changes).
  static std::vector<size_t> assign(const std::vector<GradSpec>& grads, size_t bucket_bytes);

  size_t num_grads() const { return grads_.size(); }
  size_t num_buckets() const { return buckets_.size(); }
  bool scatters() const { return spec_.kind == Reduction::reduce_scatter; }
  size_t bucket_of(size_t grad) const { return grad_bucket_[grad]; }
  size_t offset_of(size_t grad) const { return grad_offset_[grad]; }
  // stream: device buckets only (NULL = the communicator's own stream).
  void mark_ready(size_t grad, const void* data, void* stream);
  void finish();
  // REDUCE_SCATTER: this rank's chunk of bucket b after finish (elements [offset, offset+count)).
  const void* shard(size_t b, size_t* offset, size_t* count) const;
  DType bucket_dtype(size_t b) const { return buckets_[b].dtype; }
  bool bucket_on_device(size_t b) const { return buckets_[b].on_device; }
  bool grad_on_device(size_t g) const { return grads_[g].on_device; }
  const BucketerStats& stats() const { return stats_; }

 private:
  struct Bucket {
    std::vector<size_t> grads;  // in list order
    DType dtype = DType::f32;
    size_t count = 0;           // real elements
    size_t chunk = 0;           // per rank (torch.chunk's rule)
    bool on_device = false;
    std::vector<char> data;     // host: nranks * chunk elements, zero padded
    std::vector<char> shard;    // host reduce_scatter: chunk elements
    std::vector<float> residual;  // error feedback: nranks * chunk, this rank's, kept across steps
    std::shared_ptr<void> device_data, device_shard;  // the same in device memory
    size_t pending = 0;         // gradients not yet marked this step
    std::shared_ptr<Task> task;             // host: queued on the communicator's worker
    std::shared_ptr<gpu::Pending> device;   // device: queued on a stream
  };
  void check_agreement() const;
  // One bucket's work on the communicator's worker: copy in, reduce, copy out.
  void reduce(Comm& c, const ReduceSpec& spec, Bucket& k) const;
  void launch_ready(void* stream);
  void launch_device(Bucket& k, const ReduceSpec& spec, void* stream);
  void wait_all_quietly() noexcept;

  std::shared_ptr<Comm> comm_;
  std::vector<GradSpec> grads_;
  ReduceSpec spec_;
  bool error_feedback_ = false;
  std::vector<Bucket> buckets_;
  std::vector<size_t> grad_bucket_, grad_offset_;
  std::vector<char> marked_;
  size_t next_launch_ = 0;
  uint64_t late_ = 0;  // buckets complete this step while an earlier one was not
  BucketerStats stats_;
  uint64_t step_bytes_ = 0;
};

}  // namespace weft::training
