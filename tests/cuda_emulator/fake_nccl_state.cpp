// The stand-in NCCL's communicators: see fake_nccl_state.h.
#include "tests/cuda_emulator/fake_nccl_state.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <set>

#include "tests/cuda_emulator/fake_nccl_support.h"

namespace weft::fake_nccl {

namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;  // NCCL_CONFIG_INITIALIZER's

// Live handles: a destroyed or aborted handle (or garbage) is refused instead of dereferenced.
std::mutex g_handles_mutex;
std::set<const ncclComm*> g_handles;

}  // namespace

std::shared_ptr<State> find(const ncclComm* comm) {
  std::lock_guard<std::mutex> lock(g_handles_mutex);
  if (!comm || !g_handles.count(comm)) return nullptr;
  return comm->st;
}

ncclComm* make_handle(std::shared_ptr<State> st) {
  auto* h = new ncclComm;
  h->st = std::move(st);
  std::lock_guard<std::mutex> lock(g_handles_mutex);
  g_handles.insert(h);
  return h;
}

// Removes the handle from the live set; false when it was not live (a second destroy).
bool retire(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(g_handles_mutex);
  return comm && g_handles.erase(comm) > 0;
}

// ncclInvalidArgument for a null, destroyed or foreign handle.
ncclResult_t check_comm(const ncclComm* comm, const char* fn, std::shared_ptr<State>* out) {
  if (!comm) return fail(ncclInvalidArgument, "%s: comm argument is NULL", fn);
  *out = find(comm);
  if (!*out) {
    return fail(ncclInvalidArgument, "%s: comm %p is not a live communicator (destroyed, aborted or never made)", fn,
                static_cast<const void*>(comm));
  }
  return ncclSuccess;
}

// NCCL's ncclCommEnsureReady: a communicator is used again only after its previous call said
// ncclSuccess through ncclCommGetAsyncError; an asynchronous error is returned as such.
ncclResult_t ensure_ready(const State& st, const char* fn) {
  ncclResult_t s = st.state();
  if (s == ncclInProgress) {
    return fail(ncclInvalidArgument,
                "%s: Attempt to use communicator before the previous operation returned ncclSuccess", fn);
  }
  if (s != ncclSuccess) return fail(s, "%s: the communicator has an asynchronous error (%d)", fn, static_cast<int>(s));
  if (st.finalized.load()) return fail(ncclInvalidUsage, "%s: the communicator was finalized", fn);
  return ncclSuccess;
}

// ------------------------------------------------------------------ rendezvous (init, split)

namespace {

struct JoinRecord {
  uint32_t magic;
  int32_t device;
  int32_t pid;
  int32_t pad;
};

// Every rank publishes its device and waits for all the others; two ranks on one device is
// ncclInvalidUsage (NCCL's "Duplicate GPU detected"). Every rank reads the same files, so every
// rank reaches the same verdict. Runs in a background thread for non-blocking communicators.
ncclResult_t rendezvous(State& st, const std::atomic<bool>* also_stop) {
  if (mkdir(st.dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return fail(ncclSystemError, "init: cannot create %s: %s", st.dir.c_str(), std::strerror(errno));
  }
  JoinRecord me{kFileMagic, st.device, static_cast<int32_t>(getpid()), 0};
  const std::string name = "join." + std::to_string(st.rank);
  if (!publish(st.dir, name, &me, sizeof me, nullptr, 0, true)) {
    if (errno == EEXIST) {
      return fail(ncclInvalidUsage, "init: rank %d of %d joined twice (two callers used the same rank)", st.rank,
                  st.nranks);
    }
    return fail(ncclSystemError, "init: cannot write %s: %s", st.path(name).c_str(), std::strerror(errno));
  }
  std::vector<JoinRecord> all(static_cast<size_t>(st.nranks));
  for (int r = 0; r < st.nranks; ++r) {
    const std::string p = st.path("join." + std::to_string(r));
    if (!wait_until(st.aborted, also_stop, [&] { return exists(p); })) return ncclInProgress;  // aborted
    int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
    bool ok = fd >= 0 && read_all(fd, &all[static_cast<size_t>(r)], sizeof(JoinRecord), 0);
    if (fd >= 0) close(fd);
    if (!ok || all[static_cast<size_t>(r)].magic != kFileMagic) {
      return fail(ncclSystemError, "init: cannot read %s", p.c_str());
    }
  }
  for (int r = 0; r < st.nranks; ++r) {
    for (int q = 0; q < r; ++q) {
      if (all[static_cast<size_t>(q)].device == all[static_cast<size_t>(r)].device) {
        return fail(ncclInvalidUsage, "Duplicate GPU detected : rank %d and rank %d both on CUDA device %d", q, r,
                    all[static_cast<size_t>(r)].device);
      }
    }
  }
  return ncclSuccess;
}

}  // namespace

// Runs the rendezvous and records its verdict in init_state.
void complete_init(const std::shared_ptr<State>& st, const std::atomic<bool>* also_stop) {
  ncclResult_t r = rendezvous(*st, also_stop);
  if (r == ncclInProgress) return;  // aborted: the handle is gone or going
  st->init_state.store(r);
}

// Leaving: the last rank out removes the directory (best effort: a rank that never comes back
// leaves it behind, as NCCL leaves a hung job).
void leave(State& st) {
  if (!exists(st.dir)) return;
  const char nothing = 0;
  publish(st.dir, "gone." + std::to_string(st.rank), &nothing, 0, nullptr, 0);
  for (int r = 0; r < st.nranks; ++r) {
    if (!exists(st.path("gone." + std::to_string(r)))) return;
  }
  remove_tree(st.dir);
}

std::shared_ptr<State> new_state(std::string dir, int rank, int nranks, int device, bool blocking) {
  auto st = std::make_shared<State>();
  st->dir = std::move(dir);
  st->rank = rank;
  st->nranks = nranks;
  st->device = device;
  st->blocking = blocking;
  st->sent.assign(static_cast<size_t>(nranks), 0);
  st->received.assign(static_cast<size_t>(nranks), 0);
  return st;
}

// Blocking unless config says blocking = 0 (NCCL's default is blocking).
ncclResult_t read_config(const ncclConfig_t* config, const char* fn, bool* blocking) {
  *blocking = true;
  if (!config) return ncclSuccess;
  if (config->magic != kConfigMagic || config->size < offsetof(ncclConfig_t, cgaClusterSize)) {
    return fail(ncclInvalidArgument, "%s: the config was not initialised with NCCL_CONFIG_INITIALIZER", fn);
  }
  if (config->blocking != NCCL_CONFIG_UNDEF_INT && config->blocking != 0 && config->blocking != 1) {
    return fail(ncclInvalidArgument, "%s: config->blocking is %d, not 0 or 1", fn, config->blocking);
  }
  *blocking = config->blocking != 0;
  return ncclSuccess;
}

std::string base_dir() {
  if (const char* d = std::getenv("WEFT_FAKE_NCCL_DIR"); d && *d) return d;
  if (access("/dev/shm", W_OK) == 0) return "/dev/shm";
  if (const char* t = std::getenv("TMPDIR"); t && *t) return t;
  return "/tmp";
}

// Init in the calling thread (blocking) or a background thread (non-blocking).
ncclResult_t init_comm(ncclComm_t* out, std::shared_ptr<State> st, std::function<void()> background) {
  ncclComm* h = make_handle(st);
  *out = h;
  if (!st->blocking) {
    st->start_job(std::move(background));
    return ncclInProgress;
  }
  background();
  const ncclResult_t r = static_cast<ncclResult_t>(st->init_state.load());
  if (r == ncclSuccess) return r;
  // A blocking init that fails leaves no communicator behind.
  retire(h);
  leave(*st);
  delete h;
  *out = nullptr;
  return r;
}

// Waits (blocking) until everything the communicator was given has run: NCCL's finalize.
void drain(State& st) {
  wait_until(st.aborted, nullptr, [&] {
    std::lock_guard<std::mutex> lock(st.mutex);
    // After a failure the remaining units are skipped (or were never queued).
    return st.units_done.load() == st.next_unit || st.async_error.load() != ncclSuccess;
  });
}

}  // namespace weft::fake_nccl
