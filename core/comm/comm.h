// A communicator: an ordered group of world ranks with its own message space (id), its
// settings, the sequence number that tags each collective, the abort flag, and the queue that
// runs asynchronous collectives in issue order.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/comm/config.h"
#include "core/comm/device_state.h"
#include "core/comm/executor.h"
#include "core/comm/scratch.h"
#include "core/comm/world.h"
#include "core/common/status.h"

namespace weft {

class Channel;
class ShmContext;

class Comm : public std::enable_shared_from_this<Comm> {
 public:
  // members[i] = world rank of this communicator's rank i; `id` must be reserved in the world.
  Comm(std::shared_ptr<World> world, std::vector<int> members, int my_rank, uint32_t id, CommConfig config);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(members_.size()); }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  uint32_t id() const { return id_; }
  int world_rank_of(int r) const { return members_[static_cast<size_t>(r)]; }
  // This communicator's rank for a world rank, or -1 when it is no member (the inverse of the above).
  int rank_of_world(int world_rank) const {
    for (size_t i = 0; i < members_.size(); ++i)
      if (members_[i] == world_rank) return static_cast<int>(i);
    return -1;
  }
  const std::vector<int>& members() const { return members_; }
  const CommConfig& config() const { return config_; }
  World& world() { return *world_; }
  const std::shared_ptr<World>& world_ptr() const { return world_; }
  Scratch& scratch() { return scratch_; }
  Executor& executor() { return executor_; }

  // Shared-memory state, set up on first use inside a collective every rank calls; nullptr when
  // the ranks are not all on this host, WEFT_SHM=0, or setup failed on any rank.
  ShmContext* shm(Channel& ch);
  // Whether the shared-memory collectives may run: on, more than one rank, all on this host, and
  // the segment not already found impossible to set up.
  bool shm_possible() const {
    return config_.shm && size() > 1 && local_size_ == size() && shm_state_ != ShmState::unavailable;
  }
  // Why shm_possible() is false, in words for an error message.
  std::string shm_unavailable_reason() const;

  // Device-memory state (core/device), set while the communicator is created; nullptr in
  // host-only builds.
  DeviceState* device() const { return device_.get(); }
  void set_device(std::unique_ptr<DeviceState> d) { device_ = std::move(d); }

  // Sequence number for the next collective; every rank draws them in the same order.
  uint32_t next_sequence() { return seq_++; }
  // Number of this communicator's next shrink (core/comm/shrink.h): keeps a late message of one
  // shrink from matching the next. Survivors call shrink equally often, so they agree.
  uint32_t next_shrink_epoch() { return shrink_epoch_++; }

  // Abort: any thread. Pending and later operations fail with Status::aborted.
  void abort();
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }

  // After a timeout, a dead peer or an abort the message stream is out of step: the
  // communicator refuses further work with the first error (NCCL does the same).
  void mark_broken(const Error& e);
  // Throws the stored error if broken (or aborted).
  void throw_if_unusable() const;

  // WEFT_DEBUG=info: logs the first use of each (collective, algorithm) pair on this comm.
  void log_algorithm_once(const char* operation, const char* algorithm);

  // "comm 'name' rank 2/4" for messages.
  std::string describe() const;

 private:
  std::shared_ptr<World> world_;
  std::vector<int> members_;
  int rank_;
  uint32_t id_;
  CommConfig config_;
  int local_rank_ = 0;
  int local_size_ = 1;
  uint32_t seq_ = 0;
  uint32_t shrink_epoch_ = 0;
  std::atomic<bool> aborted_{false};
  mutable std::mutex broken_mutex_;
  std::atomic<bool> broken_{false};
  Status broken_status_ = Status::ok;
  std::string broken_message_;
  Scratch scratch_;
  std::set<std::string> logged_algorithms_;
  enum class ShmState { untried, ready, unavailable } shm_state_ = ShmState::untried;
  std::unique_ptr<ShmContext> shm_;
  std::unique_ptr<DeviceState> device_;
  // Last member: destroyed first, so queued work finishes while the rest is intact.
  Executor executor_;
};

}  // namespace weft
