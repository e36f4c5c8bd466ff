#include "core/comm/world.h"

#include <map>

#include "core/comm/channel.h"
#include "core/comm/deadline.h"
#include "core/comm/same_host_p2p.h"
#include "core/common/log.h"
#include "core/common/status.h"
#include "transports/shm/same_host_transport.h"
#include "transports/ucx/ucx_transport.h"

namespace weft {
namespace {

// "<prefix><kind><rank>", built by appending: GCC 12 at -O3 raises a false -Wrestrict on
// chained std::string operator+ (GCC bug 105651).
std::string store_key(const std::string& prefix, const char* kind, int rank) {
  std::string key(prefix);
  key.append(kind);
  key.append(std::to_string(rank));
  return key;
}

// Several worlds may use one store (init_from_env twice in one process, or one unique id
// reused): each gets its own key prefix, numbered in the order this process creates them,
// which is the same order on every rank.
std::string next_key_prefix(const std::string& host, uint16_t port) {
  static std::mutex m;
  static std::map<std::string, int> generations;
  std::lock_guard<std::mutex> lock(m);
  int gen = generations[store_key(host, ":", port)]++;
  return store_key("w", "", gen).append("/");
}

// Notices travel on a communicator id no communicator uses, from any sender (wildcard).
constexpr uint32_t kNoticeCommId = 0xffff;

}  // namespace

std::shared_ptr<World> World::create(const WorldSetup& setup) {
  std::shared_ptr<World> w(new World());
  w->rank_ = setup.rank;
  w->size_ = setup.size;
  w->store_server_ = setup.store_server;
  Deadline deadline(setup.timeout);

  bootstrap::StoreClient store(setup.store_host, setup.store_port, setup.secret, deadline.remaining());
  const std::string prefix = next_key_prefix(setup.store_host, setup.store_port);

  // Same-host peers get weft's shared-memory rings once they are set up (below); failure
  // notices, received from any sender, stay on UCX.
  auto* routed = new transport::SameHostTransport(std::make_unique<transport::UcxTransport>(), kNoticeCommId);
  w->transport_.reset(routed);
  bootstrap::RankRecord mine = bootstrap::local_rank_record(setup.rank, setup.size, w->transport_->local_address());
  store.set(store_key(prefix, "rank/", setup.rank), bootstrap::encode_rank_record(mine));

  w->records_.resize(static_cast<size_t>(setup.size));
  std::vector<std::string> addresses(static_cast<size_t>(setup.size));
  for (int r = 0; r < setup.size; ++r) {
    std::string bytes = store.get(store_key(prefix, "rank/", r), deadline.remaining());
    bootstrap::RankRecord rec = bootstrap::decode_rank_record(bytes, r);
    if (rec.rank != r || rec.nranks != setup.size) {
      fail(Status::mismatch, "rank %d registered as rank %d of %d, but rank %d expects %d ranks", r, rec.rank,
           rec.nranks, setup.rank, setup.size);
    }
    addresses[static_cast<size_t>(r)] = rec.transport_address;
    w->records_[static_cast<size_t>(r)] = std::move(rec);
  }
  bootstrap::check_same_version(w->records_);
  w->same_host_.resize(static_cast<size_t>(setup.size));
  for (int r = 0; r < setup.size; ++r) w->same_host_[r] = bootstrap::same_host(mine, w->records_[r]);
  w->known_dead_.assign(static_cast<size_t>(setup.size), false);
  for (int r = 0; r < setup.size; ++r)
    if (r != setup.rank && w->same_host_[r]) w->same_host_processes_.watch(r, static_cast<pid_t>(w->records_[r].pid));
  w->exited_scratch_.reserve(static_cast<size_t>(setup.size));

  w->transport_->connect(addresses, setup.rank, w->same_host_);
  routed->use_rings(setup_same_host_rings(store, prefix, setup.rank, w->same_host_,
                                          w->transport_->addresses_cuda_memory(), deadline));
  w->reported_.assign(static_cast<size_t>(setup.size), false);
  w->stalled_on_.assign(static_cast<size_t>(setup.size), -1);
  {
    std::lock_guard<std::mutex> lock(w->liveness_mutex_);
    w->post_notice_receive();
  }

  // Every rank has read every record once all "ready" keys exist; the store may then go
  // quiet (it stays up while this world lives, so late readers are still answered).
  store.set(store_key(prefix, "ready/", setup.rank), "1");
  std::vector<std::string> ready;
  for (int r = 0; r < setup.size; ++r) ready.push_back(store_key(prefix, "ready/", r));
  store.wait(ready, deadline.remaining());
  log(LogLevel::info, "[%s:%d] world of %d ranks up; transport %s", setup.name.c_str(), setup.rank, setup.size,
      w->transport_->describe().c_str());
  return w;
}

World::~World() {
  if (notice_receive_ && transport_) {
    transport_->cancel(*notice_receive_);
    Deadline grace(std::chrono::milliseconds(200));
    while (!notice_receive_->finished() && !grace.expired()) transport_->progress();
  }
}

namespace {
constexpr int32_t kNoticeDeath = 1;
constexpr int32_t kNoticeStall = 2;
}  // namespace

void World::post_notice_receive() {
  notice_receive_ = std::make_unique<transport::Op>();
  transport_->recv_any_sender(*notice_receive_, make_tag(kNoticeCommId, 0, kP2PSequence, 0), &notice_in_,
                              sizeof(notice_in_));
}

void World::poll_notices() {
  while (notice_receive_ && notice_receive_->finished()) {
    if (notice_receive_->state.load() != transport::Op::State::done) {
      notice_receive_.reset();  // cancelled or broken: no more notices
      return;
    }
    Notice n = notice_in_;
    const bool valid = n.subject >= 0 && n.subject < size_ && n.reporter >= 0 && n.reporter < size_;
    if (valid && n.kind == kNoticeDeath && n.subject != rank_) {
      log(LogLevel::info, "rank %d reports that %s died", n.reporter, describe_rank(n.subject).c_str());
      mark_dead(n.subject);
    } else if (valid && n.kind == kNoticeStall) {
      stalled_on_[n.reporter] = n.subject;
    }
    post_notice_receive();
  }
}

void World::mark_dead(int world_rank) {
  if (known_dead_[world_rank]) return;
  known_dead_[world_rank] = true;
  death_order_.push_back(world_rank);
}

void World::send_notice(const Notice& n) {
  notice_out_.push_back(n);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || known_dead_[r]) continue;
    // Fire and forget: a notice that cannot be delivered changes nothing.
    notice_sends_.push_back(std::make_unique<transport::Op>());
    transport_->send(*notice_sends_.back(), r, make_tag(kNoticeCommId, rank_, kP2PSequence, 0), &notice_out_.back(),
                     sizeof(Notice));
  }
}

void World::report_failure(int dead_world_rank) {
  std::lock_guard<std::mutex> lock(liveness_mutex_);
  mark_dead(dead_world_rank);
  if (reported_[dead_world_rank]) return;
  reported_[dead_world_rank] = true;
  send_notice(Notice{kNoticeDeath, dead_world_rank, rank_, 0});
}

void World::report_stall(int waiting_for_world_rank) {
  std::lock_guard<std::mutex> lock(liveness_mutex_);
  send_notice(Notice{kNoticeStall, waiting_for_world_rank, rank_, 0});
}

int World::stalled_on(int world_rank) {
  std::lock_guard<std::mutex> lock(liveness_mutex_);
  poll_notices();
  return stalled_on_[world_rank];
}

int World::first_dead_among(const std::vector<int>& world_ranks) {
  std::lock_guard<std::mutex> lock(liveness_mutex_);
  poll_notices();
  for (int dead : death_order_) {
    for (int r : world_ranks) {
      if (r == dead) return dead;
    }
  }
  return -1;
}

bool World::peer_dead(int world_rank) {
  std::lock_guard<std::mutex> lock(liveness_mutex_);
  poll_notices();
  if (transport_->peer_failed(world_rank)) mark_dead(world_rank);
  if (known_dead_[world_rank]) return true;
  auto now = std::chrono::steady_clock::now();
  if (now - last_pid_check_ < std::chrono::milliseconds(100)) return false;
  last_pid_check_ = now;
  // Exited processes count as dead before their launcher reaps them (process_watch.h).
  same_host_processes_.exited(exited_scratch_);
  for (int r : exited_scratch_)
    if (!known_dead_[r]) mark_dead(r);
  return known_dead_[world_rank];
}

std::string World::describe_rank(int world_rank) const {
  const bootstrap::RankRecord& r = records_[world_rank];
  return format("world rank %d (pid %d on %s)", world_rank, static_cast<int>(r.pid), r.host_name.c_str());
}

void World::bury(std::unique_ptr<transport::Op> op) {
  std::lock_guard<std::mutex> lock(graveyard_mutex_);
  graveyard_.push_back(std::move(op));
}

bool World::try_reserve_comm_id(uint32_t id) {
  std::lock_guard<std::mutex> lock(ids_mutex_);
  if (id < next_unused_id_) return false;
  ids_in_use_.insert(id);
  next_unused_id_ = id + 1;
  return true;
}

void World::release_comm_id(uint32_t id) {
  std::lock_guard<std::mutex> lock(ids_mutex_);
  ids_in_use_.erase(id);  // not reusable: next_unused_id_ stays above it
}

uint32_t World::next_unused_comm_id(uint32_t at_least) {
  std::lock_guard<std::mutex> lock(ids_mutex_);
  return at_least > next_unused_id_ ? at_least : next_unused_id_;
}

}  // namespace weft
