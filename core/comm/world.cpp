#include "core/comm/world.h"

#include <signal.h>

#include <cerrno>
#include <map>

#include "core/comm/deadline.h"
#include "core/common/log.h"
#include "core/common/status.h"
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


}  // namespace

std::shared_ptr<World> World::create(const WorldSetup& setup) {
  std::shared_ptr<World> w(new World());
  w->rank_ = setup.rank;
  w->size_ = setup.size;
  w->store_server_ = setup.store_server;
  Deadline deadline(setup.timeout);

  bootstrap::StoreClient store(setup.store_host, setup.store_port, setup.secret, deadline.remaining());
  const std::string prefix = next_key_prefix(setup.store_host, setup.store_port);

  w->transport_ = std::make_unique<transport::UcxTransport>();
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

  w->transport_->connect(addresses, setup.rank, w->same_host_);

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

World::~World() = default;

bool World::peer_dead(int world_rank) {
  if (transport_->peer_failed(world_rank)) return true;
  std::lock_guard<std::mutex> lock(liveness_mutex_);
  if (known_dead_[world_rank]) return true;
  auto now = std::chrono::steady_clock::now();
  if (now - last_pid_check_ < std::chrono::milliseconds(100)) return false;
  last_pid_check_ = now;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || !same_host_[r] || known_dead_[r]) continue;
    // Signal 0 checks existence only. ESRCH = gone; EPERM = exists but not ours (alive).
    if (kill(static_cast<pid_t>(records_[r].pid), 0) != 0 && errno == ESRCH) known_dead_[r] = true;
  }
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
  return ids_in_use_.insert(id).second;
}

void World::release_comm_id(uint32_t id) {
  std::lock_guard<std::mutex> lock(ids_mutex_);
  ids_in_use_.erase(id);
}

uint32_t World::lowest_free_comm_id(uint32_t at_least) {
  std::lock_guard<std::mutex> lock(ids_mutex_);
  uint32_t id = at_least;
  while (ids_in_use_.count(id)) ++id;
  return id;
}

}  // namespace weft
