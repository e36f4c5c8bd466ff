#include "core/comm/comm.h"

#include "core/comm/shm_context.h"
#include "core/common/log.h"

namespace weft {

Comm::Comm(std::shared_ptr<World> world, std::vector<int> members, int my_rank, uint32_t id, CommConfig config)
    : world_(std::move(world)), members_(std::move(members)), rank_(my_rank), id_(id), config_(std::move(config)) {
  const auto& me = world_->record(world_rank_of(rank_));
  local_rank_ = 0;
  local_size_ = 0;
  for (int r = 0; r < size(); ++r) {
    if (!bootstrap::same_host(me, world_->record(world_rank_of(r)))) continue;
    if (r < rank_) ++local_rank_;
    ++local_size_;
  }
}

Comm::~Comm() {
  executor_.shutdown();
  world_->release_comm_id(id_);
}

ShmContext* Comm::shm(Channel& ch) {
  if (shm_state_ == ShmState::untried) {
    if (shm_possible()) shm_ = ShmContext::setup(ch, config_.shm_slot_bytes);
    shm_state_ = shm_ ? ShmState::ready : ShmState::unavailable;
  }
  return shm_.get();
}

std::string Comm::shm_unavailable_reason() const {
  if (!config_.shm) return "shared memory is off for this communicator (WEFT_SHM=0)";
  if (size() < 2) return "it has a single rank";
  if (local_size_ != size()) return format("only %d of its %d ranks are on this host", local_size_, size());
  if (shm_state_ == ShmState::unavailable) {
    return "setting up the shared-memory segment failed on at least one rank (WEFT_DEBUG=info logs why)";
  }
  return "it is available";
}

void Comm::abort() {
  aborted_.store(true, std::memory_order_release);
  if (device_) device_->abort();
  executor_.wake();
}

void Comm::mark_broken(const Error& e) {
  std::lock_guard<std::mutex> lock(broken_mutex_);
  if (broken_.load()) return;
  broken_status_ = e.status();
  broken_message_ = e.message();
  broken_.store(true, std::memory_order_release);
  log(LogLevel::info, "%s is unusable from now on: %s", describe().c_str(), e.message().c_str());
}

void Comm::throw_if_unusable() const {
  if (aborted()) fail(Status::aborted, "%s was aborted (weft_comm_abort)", describe().c_str());
  if (!broken_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(broken_mutex_);
  throw Error(broken_status_, format("%s is unusable after an earlier error: %s", describe().c_str(),
                                     broken_message_.c_str()));
}

void Comm::log_algorithm_once(const char* operation, const char* algorithm) {
  if (!log_enabled(LogLevel::info) || !algorithm || !*algorithm) return;
  std::string key = std::string(operation) + "/" + algorithm;
  if (!logged_algorithms_.insert(key).second) return;
  log(LogLevel::info, "%s: %s uses %s", describe().c_str(), operation, algorithm);
}

std::string Comm::describe() const {
  return format("comm '%s' rank %d/%d", config_.name.c_str(), rank_, size());
}

}  // namespace weft
