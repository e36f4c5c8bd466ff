// The stand-in NCCL's communicators (fake_nccl.cpp says what is modelled): what a communicator
// is, the table of live handles, and joining and leaving the directory its ranks meet in.
#pragma once

#pragma GCC visibility push(default)
#include <nccl.h>
#pragma GCC visibility pop

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace weft::fake_nccl {

constexpr uint64_t kIdMagic = 0x574546544e43434cull;  // "WEFTNCCL"
constexpr uint32_t kHandleMagic = 0x6e63636c;

// Everything a communicator is, shared (shared_ptr) by its handle, its background jobs and the
// stream work it queued, so that ncclCommAbort can free the handle while work still runs: that
// work sees `aborted` and returns.
struct State {
  std::string dir;
  int rank = 0;
  int nranks = 1;
  int device = 0;
  bool blocking = true;

  std::atomic<bool> aborted{false};
  std::atomic<int> init_state{ncclInProgress};  // ncclInProgress until every rank joined
  std::atomic<int> async_error{ncclSuccess};    // first failure of an operation
  std::atomic<int> busy{0};                     // background launches/splits/finalize running
  std::atomic<bool> finalized{false};
  std::atomic<uint64_t> units_done{0};          // issued units (see Unit) that have run

  std::mutex mutex;  // guards the counters below and `jobs`
  uint64_t next_unit = 0;
  uint64_t next_coll = 0;
  uint64_t next_split = 0;
  std::vector<uint64_t> sent, received;  // per peer
  std::vector<std::thread> jobs;         // background threads: joined at destroy/abort

  ~State() {
    for (std::thread& t : jobs) {
      if (t.joinable()) t.detach();  // only reached from a job itself; see stop_jobs()
    }
  }

  std::string path(const std::string& name) const { return dir + "/" + name; }
  std::string peer_text(int r) const { return "rank " + std::to_string(r) + " of " + std::to_string(nranks); }

  // Records the first asynchronous failure (ncclCommGetAsyncError reports it from then on).
  void set_error(ncclResult_t r) {
    int expected = ncclSuccess;
    async_error.compare_exchange_strong(expected, r);
  }

  // What ncclCommGetAsyncError reports.
  ncclResult_t state() const {
    int s = init_state.load();
    if (s != ncclSuccess) return static_cast<ncclResult_t>(s);
    s = async_error.load();
    if (s != ncclSuccess) return static_cast<ncclResult_t>(s);
    return busy.load() > 0 ? ncclInProgress : ncclSuccess;
  }

  void start_job(std::function<void()> f) {
    std::lock_guard<std::mutex> lock(mutex);
    jobs.emplace_back(std::move(f));
  }

  void stop_jobs() {
    std::vector<std::thread> mine;
    {
      std::lock_guard<std::mutex> lock(mutex);
      mine.swap(jobs);
    }
    for (std::thread& t : mine) {
      if (t.get_id() == std::this_thread::get_id()) {
        t.detach();
      } else if (t.joinable()) {
        t.join();
      }
    }
  }
};

}  // namespace weft::fake_nccl

// The opaque type nccl.h names; weft only ever holds the pointer.
struct ncclComm {
  uint32_t magic = weft::fake_nccl::kHandleMagic;
  std::shared_ptr<weft::fake_nccl::State> st;
};

namespace weft::fake_nccl {

// The live handle's state; nullptr for a destroyed, aborted or foreign handle.
std::shared_ptr<State> find(const ncclComm* comm);
ncclComm* make_handle(std::shared_ptr<State> st);
// Removes the handle from the live set; false when it was not live (a second destroy).
bool retire(ncclComm* comm);

// ncclInvalidArgument for a null, destroyed or foreign handle.
ncclResult_t check_comm(const ncclComm* comm, const char* fn, std::shared_ptr<State>* out);
// NCCL's ncclCommEnsureReady.
ncclResult_t ensure_ready(const State& st, const char* fn);

// Runs the rendezvous (every rank's device, duplicate GPU check) and records its verdict in
// init_state.
void complete_init(const std::shared_ptr<State>& st, const std::atomic<bool>* also_stop);
// Leaving: the last rank out removes the directory.
void leave(State& st);
std::shared_ptr<State> new_state(std::string dir, int rank, int nranks, int device, bool blocking);
// Blocking unless config says blocking = 0 (NCCL's default is blocking).
ncclResult_t read_config(const ncclConfig_t* config, const char* fn, bool* blocking);

// The unique id: a magic, a random token and the directory every rank meets in.
struct IdLayout {
  uint64_t magic;
  char dir[NCCL_UNIQUE_ID_BYTES - sizeof(uint64_t)];
};
static_assert(sizeof(IdLayout) == NCCL_UNIQUE_ID_BYTES);

// Where unique ids put their directories: WEFT_FAKE_NCCL_DIR, else /dev/shm, else $TMPDIR, else /tmp.
std::string base_dir();

// Init in the calling thread (blocking) or a background thread (non-blocking).
ncclResult_t init_comm(ncclComm_t* out, std::shared_ptr<State> st, std::function<void()> background);
// Waits (blocking) until everything the communicator was given has run: NCCL's finalize.
void drain(State& st);

}  // namespace weft::fake_nccl
