#include "core/training/bucketer.h"

#include <cstring>
#include <optional>
#include <utility>

#include "core/collectives/collectives.h"
#include "core/common/status.h"
#include "core/training/agreement.h"

namespace weft::training {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

std::vector<size_t> Bucketer::assign(const std::vector<GradSpec>& grads, size_t bucket_bytes) {
  std::vector<size_t> out(grads.size());
  size_t bucket = 0, bytes = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    const size_t b = grads[i].count * dtype_size(grads[i].dtype);
    const bool new_kind = i > 0 && (grads[i].dtype != grads[i - 1].dtype || grads[i].on_device != grads[i - 1].on_device);
    if (i > 0 && (new_kind || bytes + b > bucket_bytes)) {
      ++bucket;
      bytes = 0;
    }
    out[i] = bucket;
    bytes += b;
  }
  return out;
}

Bucketer::Bucketer(std::shared_ptr<Comm> comm, std::vector<GradSpec> grads, std::vector<size_t> bucket_of,
                   size_t bucket_bytes, const ReduceSpec& spec, bool error_feedback)
    : comm_(std::move(comm)), grads_(std::move(grads)), spec_(spec), error_feedback_(error_feedback) {
  if (error_feedback_ && !spec_.codec) {
    fail(Status::invalid_argument, "error feedback needs a compressed wire format (the NATIVE wire loses nothing)");
  }
  grad_bucket_ = bucket_of.empty() ? assign(grads_, bucket_bytes) : std::move(bucket_of);
  grad_offset_.resize(grads_.size());
  marked_.assign(grads_.size(), 0);
  for (size_t i = 0; i < grads_.size(); ++i) {
    const size_t b = grad_bucket_[i];
    if (b > buckets_.size()) fail(Status::invalid_argument, "bucket_of[%zu] = %zu leaves bucket %zu empty", i, b, buckets_.size());
    if (b == buckets_.size()) {
      buckets_.emplace_back();
      buckets_.back().dtype = grads_[i].dtype;
      buckets_.back().on_device = grads_[i].on_device;
    }
    Bucket& k = buckets_[b];
    if (k.on_device != grads_[i].on_device) {
      fail(Status::invalid_argument, "bucket %zu mixes host and device memory: %s is %s memory, %s is not", b,
           grads_[i].name.c_str(), grads_[i].on_device ? "device" : "host", grads_[k.grads.front()].name.c_str());
    }
    if (k.dtype != grads_[i].dtype) {
      fail(Status::invalid_argument, "bucket %zu mixes dtypes: %s is %s, %s is %s", b, grads_[i].name.c_str(),
           dtype_name(grads_[i].dtype), grads_[k.grads.front()].name.c_str(), dtype_name(k.dtype));
    }
    grad_offset_[i] = k.count;
    k.count += grads_[i].count;
    k.grads.push_back(i);
  }
  const int n = comm_->size();
  for (Bucket& k : buckets_) {
    k.chunk = chunk_of(k.count, n);
    const size_t bytes = k.chunk * static_cast<size_t>(n) * dtype_size(k.dtype);
    const size_t shard_bytes = spec_.kind == Reduction::reduce_scatter ? k.chunk * dtype_size(k.dtype) : 0;
    if (k.on_device) {
      if (spec_.codec) {
        fail(Status::unsupported, "%s is device memory: compressed wire formats (here %s) take host gradients in this "
             "release", grads_[k.grads.front()].name.c_str(), spec_.codec->name().c_str());
      }
      // One gradient all-reduced in place needs no bucket.
      if (spec_.kind == Reduction::reduce_scatter || k.grads.size() > 1) k.device_data = gpu::device_buffer(*comm_, bytes);
      if (shard_bytes) k.device_shard = gpu::device_buffer(*comm_, shard_bytes);
    } else {
      k.data.assign(bytes, 0);
      k.shard.assign(shard_bytes, 0);
      if (error_feedback_) k.residual.assign(k.chunk * static_cast<size_t>(n), 0.0f);
    }
    k.pending = k.grads.size();
  }
  check_agreement();
}

Bucketer::~Bucketer() { wait_all_quietly(); }

void Bucketer::check_agreement() const {
  std::vector<uint64_t> keys(grads_.size());
  for (size_t i = 0; i < grads_.size(); ++i) keys[i] = key_of({grads_[i].count, static_cast<uint64_t>(grads_[i].dtype), grad_bucket_[i]});
  const std::vector<uint64_t> header = {grads_.size(), static_cast<uint64_t>(spec_.kind), static_cast<uint64_t>(wire_id(spec_)),
                                        static_cast<uint64_t>(spec_.op), static_cast<uint64_t>(error_feedback_)};
  training::check_agreement(*comm_, "bucketer", header, keys, [this](size_t i) { return grads_[i].name; });
}

void Bucketer::mark_ready(size_t grad, const void* data, void* stream) {
  const GradSpec& g = grads_[grad];
  if (data != g.data) {
    fail(Status::invalid_argument, "%s (gradient %zu) is at %p now but was registered at %p: gradients must keep their address",
         g.name.c_str(), grad, data, g.data);
  }
  if (marked_[grad]) fail(Status::invalid_argument, "%s (gradient %zu) was marked ready twice in one step", g.name.c_str(), grad);
  marked_[grad] = 1;
  Bucket& k = buckets_[grad_bucket_[grad]];
  if (--k.pending == 0 && grad_bucket_[grad] > next_launch_) ++late_;
  launch_ready(stream);
}

void Bucketer::launch_ready(void* stream) {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    Bucket& k = buckets_[next_launch_++];
    ReduceSpec spec = spec_;
    spec.dtype = k.dtype;
    step_bytes_ += reduction_volume(spec, k.chunk, comm_->size()).bytes;
    if (k.on_device) {
      launch_device(k, spec, stream);
      continue;
    }
    // Copying in and out happens on the communicator's worker too, so the caller's thread goes
    // straight back to backward (the gradients stay untouched until finish(), by contract).
    Comm* c = comm_.get();
    Bucket* kp = &k;
    k.task = start_on(comm_, [this, c, spec, kp] { reduce(*c, spec, *kp); });
  }
}

void Bucketer::launch_device(Bucket& k, const ReduceSpec& spec, void* stream) {
  std::vector<std::pair<char*, size_t>> pieces;  // (gradient, bytes) at the bucket's offsets
  const size_t esize = dtype_size(k.dtype);
  for (size_t i : k.grads) pieces.emplace_back(static_cast<char*>(grads_[i].data), grads_[i].count * esize);
  char* data = static_cast<char*>(k.device_data.get());
  char* shard = static_cast<char*>(k.device_shard.get());
  const size_t chunk = k.chunk, n = static_cast<size_t>(comm_->size());
  const bool allreduce = spec.kind == Reduction::allreduce;
  k.device = gpu::launch(comm_, "bucketer", gpu::DeviceOp::collective, stream, true, [=](gpu::Launch& l) {
    if (!data) {  // one gradient, all-reduced where it is
      gpu::allreduce(l, pieces[0].first, pieces[0].first, pieces[0].second / esize, spec.dtype, spec.op);
      return;
    }
    size_t offset = 0;
    for (const auto& [g, bytes] : pieces) {
      gpu::copy_device(l, data + offset, g, bytes);
      offset += bytes;
    }
    if (!allreduce) {
      gpu::reduce_scatter(l, data, shard, chunk, spec.dtype, spec.op);
      return;
    }
    gpu::allreduce(l, data, data, chunk * n, spec.dtype, spec.op);
    offset = 0;
    for (const auto& [g, bytes] : pieces) {
      gpu::copy_device(l, g, data + offset, bytes);
      offset += bytes;
    }
    gpu::settle_copies(l);
  });
}

void Bucketer::reduce(Comm& c, const ReduceSpec& spec, Bucket& k) const {
  const size_t esize = dtype_size(k.dtype);
  const bool allreduce = spec.kind == Reduction::allreduce;
  if (allreduce && !spec.codec && k.grads.size() == 1) {
    // A bucket of one gradient needs no bucket: all-reduce it where it is.
    const GradSpec& g = grads_[k.grads[0]];
    coll::allreduce(c, g.data, g.data, g.count, k.dtype, spec.op);
    return;
  }
  char* data = k.data.data();
  for (size_t i : k.grads) {
    if (grads_[i].count) std::memcpy(data + grad_offset_[i] * esize, grads_[i].data, grads_[i].count * esize);
  }
  reduce_bucket(c, spec, data, k.chunk, k.shard.empty() ? nullptr : k.shard.data(),
                k.residual.empty() ? nullptr : k.residual.data());
  if (!allreduce) return;
  for (size_t i : k.grads) {
    if (grads_[i].count) std::memcpy(grads_[i].data, data + grad_offset_[i] * esize, grads_[i].count * esize);
  }
}

void Bucketer::finish() {
  for (size_t i = 0; i < grads_.size(); ++i) {
    if (!marked_[i]) {
      fail(Status::invalid_argument, "%s (gradient %zu) was never marked ready this step", grads_[i].name.c_str(), i);
    }
  }
  const auto start = Clock::now();
  // Device work that failed throws from wait(): keep the first error, still wait for the rest.
  std::optional<Error> device_error;
  for (Bucket& k : buckets_) {
    if (k.task) k.task->wait();
    if (!k.device) continue;
    try {
      k.device->wait();
    } catch (const Error& e) {
      if (!device_error) device_error = e;
    }
  }
  stats_.exposed_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
  // Reset before rethrowing, so a failed step does not leave half of the next one marked.
  std::vector<std::shared_ptr<Task>> tasks;
  for (Bucket& k : buckets_) {
    if (k.task) tasks.push_back(std::move(k.task));
    k.device.reset();
    k.pending = k.grads.size();
  }
  std::fill(marked_.begin(), marked_.end(), 0);
  next_launch_ = 0;
  stats_.launched_late = late_;
  late_ = 0;
  stats_.wire_bytes = step_bytes_;
  step_bytes_ = 0;
  ++stats_.steps;
  for (auto& t : tasks) t->rethrow();
  if (device_error) throw *device_error;
}

const void* Bucketer::shard(size_t b, size_t* offset, size_t* count) const {
  const Bucket& k = buckets_[b];
  const size_t begin = std::min(k.count, k.chunk * static_cast<size_t>(comm_->rank()));
  *offset = begin;
  *count = std::min(k.count - begin, k.chunk);
  return k.on_device ? k.device_shard.get() : k.shard.data();
}

void Bucketer::wait_all_quietly() noexcept {
  for (Bucket& k : buckets_) {
    if (k.task) k.task->wait();
    if (!k.device) continue;
    try {
      k.device->wait();
    } catch (...) {  // destroying: the error was or will never be asked for
    }
  }
}

}  // namespace weft::training
