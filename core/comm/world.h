// Everything a tree of communicators shares: the transport (one UCX worker), the rank records
// of all world ranks, the store server when this process hosts it, the set of communicator ids
// in use in this process, and peer liveness. A root communicator (init / init_from_env) makes
// one; split and dup share their parent's.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/bootstrap/rank_record.h"
#include "core/bootstrap/store.h"
#include "core/common/process_watch.h"
#include "transports/transport.h"

namespace weft {

struct WorldSetup {
  std::string store_host;
  uint16_t store_port = 0;
  std::string secret;
  int rank = -1;
  int size = -1;
  // Set when this process runs the store for the job (kept alive as long as the world).
  std::shared_ptr<bootstrap::StoreServer> store_server;
  std::chrono::milliseconds timeout{300000};
  std::string name;
};

class World {
 public:
  // Collective over all ranks: exchange rank records through the store, check versions,
  // connect the transport. Throws weft::Error.
  static std::shared_ptr<World> create(const WorldSetup& setup);
  ~World();

  int rank() const { return rank_; }
  int size() const { return size_; }
  transport::Transport& transport() { return *transport_; }
  const bootstrap::RankRecord& record(int world_rank) const { return records_[world_rank]; }

  // True when world rank r is known to be gone: its transport endpoint failed, or it ran on
  // this host and its process no longer exists. The process check runs at most every 100 ms.
  bool peer_dead(int world_rank);
  // "rank 3 (pid 1234 on host-a)" for error messages.
  std::string describe_rank(int world_rank) const;

  // Failure notices. A survivor often sees only a second-hand symptom: a peer that left
  // after its own error. So whoever learns that a rank died tells every other rank once, and
  // errors name the rank that died first.
  void report_failure(int dead_world_rank);
  // The first rank among `world_ranks` known to have died (by notice, endpoint error or
  // process check), or -1.
  int first_dead_among(const std::vector<int>& world_ranks);

  // Stall notices. A rank that times out waiting for a peer tells everyone, so a rank whose
  // own wait timed out on a peer that was itself waiting can follow the chain to the rank
  // that never answered (the likely cause).
  void report_stall(int waiting_for_world_rank);
  // Whom world_rank reported waiting for (its latest stall notice), or -1.
  int stalled_on(int world_rank);

  // Communicator ids: never reused within a world, so a message still in flight for a
  // destroyed communicator can never match a later one.
  bool try_reserve_comm_id(uint32_t id);
  void release_comm_id(uint32_t id);
  // The lowest id >= at_least that this process has never used.
  uint32_t next_unused_comm_id(uint32_t at_least);

  // Keeps an operation that a failed wait could not finish (a send UCX still holds) alive
  // until the transport is shut down, so its completion never writes to freed memory.
  void bury(std::unique_ptr<transport::Op> op);

 private:
  World() = default;
  int rank_ = -1;
  int size_ = 0;
  // Declared before transport_ so it is destroyed after it: closing the transport completes
  // the buried operations.
  std::mutex graveyard_mutex_;
  std::vector<std::unique_ptr<transport::Op>> graveyard_;
  // Failure notices in flight (see report_failure): buffers and operations outlive the
  // transport for the same reason. A deque keeps the buffers' addresses stable.
  struct Notice {
    int32_t kind;      // kNoticeDeath or kNoticeStall
    int32_t subject;   // the dead rank, or the rank the reporter waits for
    int32_t reporter;
    int32_t unused;
  };
  void send_notice(const Notice& n);  // liveness_mutex_ held
  Notice notice_in_{};
  std::deque<Notice> notice_out_;
  std::unique_ptr<transport::Op> notice_receive_;
  std::vector<std::unique_ptr<transport::Op>> notice_sends_;
  std::unique_ptr<transport::Transport> transport_;
  std::shared_ptr<bootstrap::StoreServer> store_server_;
  std::vector<bootstrap::RankRecord> records_;
  std::vector<bool> same_host_;
  std::mutex ids_mutex_;
  std::set<uint32_t> ids_in_use_;
  uint32_t next_unused_id_ = 0;  // every id below it has been used
  void post_notice_receive();  // liveness_mutex_ held
  void poll_notices();          // liveness_mutex_ held
  void mark_dead(int world_rank);  // liveness_mutex_ held

  std::mutex liveness_mutex_;
  std::vector<bool> known_dead_;
  std::vector<bool> reported_;
  std::vector<int> death_order_;
  std::vector<int> stalled_on_;

  std::chrono::steady_clock::time_point last_pid_check_{};
  // Same-host peers' processes (pidfds), checked at most every 100 ms by peer_dead.
  ProcessWatch same_host_processes_;
  std::vector<int> exited_scratch_;
};

}  // namespace weft
