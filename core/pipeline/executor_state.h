// The executor's private state (executor.cpp builds it, executor_run.cpp runs a step on it):
// the rank's list with its look-ahead table, and the pool of boundary buffers that activations
// and gradients live in between the actions that make, send, receive and use them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "core/comm/comm.h"
#include "core/pipeline/executor.h"

namespace weft::pipeline {

// What a buffer holds: stage b's output (the activation crossing boundary b) or the gradient
// w.r.t. it, for one micro-batch.
enum class BufferKind : int { activation = 0, gradient = 1 };

struct BufferKey {
  BufferKind kind;
  int boundary;  // 0..S-2
  int microbatch;
  auto operator<=>(const BufferKey&) const = default;
};

// Buffers of each boundary's size, reused across actions and steps. Host buffers come from the
// heap, device buffers from gpu::device_buffer (comm's GPU); either way a shared_ptr, so a
// buffer an unfinished transfer may still touch can be parked instead of freed.
class BufferPool {
 public:
  BufferPool(Comm& comm, const std::vector<Boundary>& boundaries) : comm_(comm), boundaries_(boundaries) {}
  // A buffer for `key` (fresh, or reused from the boundary's free list); it must not exist yet.
  void* make(const BufferKey& key);
  // The buffer for `key`, or nullptr when there is none.
  void* find(const BufferKey& key) const;
  // Back to the free list (a key that holds nothing is ignored).
  void release(const BufferKey& key);
  // After a failed step: every live buffer moves to `parked` (a transfer may still use it), so
  // the next step starts empty.
  void park_all();
  size_t live() const { return live_.size(); }

 private:
  Comm& comm_;
  const std::vector<Boundary>& boundaries_;
  std::map<BufferKey, std::shared_ptr<void>> live_;
  std::map<int, std::vector<std::shared_ptr<void>>> free_;  // per boundary
  std::vector<std::shared_ptr<void>> parked_;
};

struct Executor::State {
  std::shared_ptr<Comm> comm;
  std::shared_ptr<const Schedule> schedule;
  ExecutorConfig config;
  int rank = 0;
  bool device = false;  // the boundaries are device memory (all of them)
  // next_compute[k]: the index of the first compute action after k in this rank's list (or
  // the list's size): receives before it are posted when action k starts.
  std::vector<size_t> next_compute;
  // (RECV_F or RECV_B, stage, micro-batch) -> its index in this rank's list.
  std::map<std::tuple<int, int, int>, size_t> recv_at;
  BufferPool pool;

  State(std::shared_ptr<Comm> c, std::shared_ptr<const Schedule> s, ExecutorConfig cfg);
  const std::vector<Action>& list() const { return schedule->actions[static_cast<size_t>(rank)]; }
  bool local(int stage) const { return schedule->stage_rank[static_cast<size_t>(stage)] == rank; }
};

}  // namespace weft::pipeline
