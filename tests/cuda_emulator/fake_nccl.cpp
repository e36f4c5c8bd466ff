// A stand-in NCCL for the CUDA emulator (emulator.h): libweft_fake_nccl.so exports the NCCL 2.28
// functions weft binds (transports/nccl/nccl_lib.cpp) with nccl.h's own signatures, so that
// weft's NCCL path runs, unchanged, on machines without a GPU (WEFT_NCCL_LIBRARY points here).
//
// It is strict where weft depends on NCCL's behaviour, so that weft's bugs show:
//  - argument checks as NCCL's (null comm, dtype, op, root/peer, buffers that are not device
//    memory of the communicator's GPU -> ncclInvalidArgument, with ncclGetLastError text);
//  - non-blocking communicators (config.blocking = 0): init, split, finalize, collectives and
//    ncclGroupEnd return ncclInProgress and finish in the background; using the communicator
//    again before ncclCommGetAsyncError said ncclSuccess is ncclInvalidArgument, as in NCCL;
//  - operations run on the stream (emulator worker threads), asynchronous to the host, and a
//    communicator's operations run in issue order whatever stream they are on (NCCL serialises
//    a communicator's kernels); a peer that never comes means waiting forever, until
//    ncclCommAbort; a send completes only once the peer has received it;
//  - two ranks on one GPU fail init with ncclInvalidUsage on every rank.
// And, beyond NCCL, it reports (ncclInvalidUsage, asynchronously) ranks that disagree on a
// collective (kind, count, dtype, op, root) or on a send/recv size, where NCCL would hang or
// corrupt memory.
//
// Exchange: ranks are processes (or threads) on one machine. A communicator is a directory
// named in its unique id (under WEFT_FAKE_NCCL_DIR, else /dev/shm, else $TMPDIR, else /tmp).
// Every message is a file written whole and renamed into place, so a reader never sees a part:
//   join.<rank>            init: the rank's device (duplicate GPU check)
//   s<j>.<rank>            the j-th ncclCommSplit: the rank's color and key
//   c<k>.<rank>            the k-th collective: a header and the rank's contribution
//   p<src>.<dst>.<n>       the n-th send from src to dst; the receiver deletes it once read,
//                          which is what completes the send
//   gone.<rank>            destroy/abort; the last rank out removes the directory
// Readers poll for files with a sleeping backoff (never a busy spin: CI runs 8 ranks on 2
// cores) and stop promptly when the communicator is aborted. Rank r deletes c<k-1>.r once its
// collective k completed: every peer then wrote c<k>, so each had finished collective k-1.
//
// Not modelled: ncclCommInitAll, user-defined reduction ops, registration/windows, shrink,
// revoke, ncclMemAlloc, multi-node, NCCL's timing, CUDA graphs, and NCCL's own rounding (the
// reductions below are exact per step in rank order 0..n-1; NCCL's ring/tree order differs).
#pragma GCC visibility push(default)
#include <nccl.h>
#pragma GCC visibility pop

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "kernels/cpu/codecs.h"
#include "tests/cuda_emulator/emulator.h"

namespace {

constexpr uint64_t kIdMagic = 0x574546544e43434cull;  // "WEFTNCCL"
constexpr uint32_t kHandleMagic = 0x6e63636c;
constexpr uint32_t kFileMagic = 0x66616b65;
constexpr unsigned kConfigMagic = 0xcafebeef;  // NCCL_CONFIG_INITIALIZER's

// ------------------------------------------------------------------ last error and logging

// NCCL keeps one process-wide last-error text (ncclGetLastError ignores its argument).
std::mutex g_error_mutex;
char g_last_error[1024] = "";

ncclResult_t fail(ncclResult_t r, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
ncclResult_t fail(ncclResult_t r, const char* fmt, ...) {
  char text[sizeof g_last_error];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  {
    std::lock_guard<std::mutex> lock(g_error_mutex);
    std::memcpy(g_last_error, text, sizeof text);
  }
  // Like NCCL_DEBUG=WARN, on request only.
  if (const char* d = std::getenv("NCCL_DEBUG"); d && *d) {
    std::fprintf(stderr, "[pid %d] fake NCCL WARN %s\n", static_cast<int>(getpid()), text);
  }
  return r;
}

bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  return std::strcmp(v, "0") != 0;
}

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}

// ------------------------------------------------------------------ waiting

void sleep_us(long us) {
  struct timespec ts{us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, nullptr);
}

// Sleeps with growing steps (5 us .. 1 ms) until ready() holds; false when a stop flag was
// raised first (ncclCommAbort), so that an abort ends any wait within about a millisecond.
template <class Ready>
bool wait_until(const std::atomic<bool>& stop, const std::atomic<bool>* stop2, Ready ready) {
  long us = 5;
  while (!ready()) {
    if (stop.load(std::memory_order_acquire) || (stop2 && stop2->load(std::memory_order_acquire))) return false;
    sleep_us(us);
    us = std::min(us * 2, 1000L);
  }
  return true;
}

// ------------------------------------------------------------------ files

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

bool write_all(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes) {
    ssize_t w = write(fd, p, bytes);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    bytes -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* data, size_t bytes, off_t at) {
  char* p = static_cast<char*>(data);
  while (bytes) {
    ssize_t r = pread(fd, p, bytes, at);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    at += r;
    bytes -= static_cast<size_t>(r);
  }
  return true;
}

// Writes head + body to a temporary name and moves it to dir/name in one step, so a reader sees
// all of it or nothing. exclusive: fail (EEXIST) rather than replace an existing file.
bool publish(const std::string& dir, const std::string& name, const void* head, size_t head_bytes, const void* body,
             size_t body_bytes, bool exclusive = false) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = dir + "/.tmp." + name + "." + std::to_string(getpid()) + "." +
                          std::to_string(counter.fetch_add(1));
  int fd = open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = write_all(fd, head, head_bytes) && write_all(fd, body, body_bytes);
  ok = close(fd) == 0 && ok;
  const std::string final_path = dir + "/" + name;
  if (ok) ok = exclusive ? link(tmp.c_str(), final_path.c_str()) == 0 : rename(tmp.c_str(), final_path.c_str()) == 0;
  const int saved = errno;
  unlink(tmp.c_str());  // after link(), or after a failure; a no-op after rename()
  errno = saved;
  return ok;
}

void remove_tree(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (struct dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) unlink((dir + "/" + e->d_name).c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

// ------------------------------------------------------------------ types and reductions

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

bool type_valid(ncclDataType_t t) { return t >= 0 && t < ncclNumTypes; }
bool op_valid(ncclRedOp_t o) { return o >= 0 && o < ncclNumOps; }  // user-defined ops: not modelled
bool is_float(ncclDataType_t t) { return t >= ncclFloat16 && t <= ncclFloat8e5m2; }

// Low-precision floats are computed in float32 and rounded back at every step, as NCCL's
// kernels do for half/bfloat16/fp8 arithmetic (fp8 saturating); each pairwise step is exact
// after rounding here, but NCCL's order of steps (ring/tree) and fused operations may round
// differently, so results can differ from real NCCL in the last bit.
float widen(ncclDataType_t t, const void* p, size_t i) {
  namespace d = weft::kernels::detail;
  switch (t) {
    case ncclFloat16: return d::f16_to_f32_inline(static_cast<const uint16_t*>(p)[i]);
    case ncclBfloat16: return d::bf16_to_f32_inline(static_cast<const uint16_t*>(p)[i]);
    case ncclFloat8e4m3: return d::f32_from_bits(d::e4m3_bits(static_cast<const uint8_t*>(p)[i]));
    default: return d::f32_from_bits(d::e5m2_bits(static_cast<const uint8_t*>(p)[i]));
  }
}

void narrow(ncclDataType_t t, void* p, size_t i, float v) {
  namespace d = weft::kernels::detail;
  switch (t) {
    case ncclFloat16: static_cast<uint16_t*>(p)[i] = d::f32_to_f16_inline(v); return;
    case ncclBfloat16: static_cast<uint16_t*>(p)[i] = d::f32_to_bf16_inline(v); return;
    case ncclFloat8e4m3: static_cast<uint8_t*>(p)[i] = d::to_e4m3(v, true); return;
    default: static_cast<uint8_t*>(p)[i] = d::to_e5m2(v, true); return;
  }
}

// NCCL's float min/max are fminf/fmaxf: a NaN operand is dropped.
template <class T>
T apply(ncclRedOp_t op, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case ncclProd: return a * b;
      case ncclMax: return std::fmax(a, b);
      case ncclMin: return std::fmin(a, b);
      default: return a + b;  // sum, and avg's sum of pre-scaled values
    }
  } else {
    // Wrap-around arithmetic in the unsigned type (8-bit values promote to int, where 255*255
    // still fits), so that overflow is defined, as on the GPU.
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ncclProd: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
      case ncclMax: return std::max(a, b);
      case ncclMin: return std::min(a, b);
      default: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    }
  }
}

template <class T>
void reduce_typed(void* acc, const void* x, size_t count, ncclRedOp_t op) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(x);
  for (size_t i = 0; i < count; ++i) a[i] = apply<T>(op, a[i], b[i]);
}

// acc[i] = acc[i] op x[i].
void reduce_into(void* acc, const void* x, size_t count, ncclDataType_t t, ncclRedOp_t op) {
  switch (t) {
    case ncclInt8: return reduce_typed<int8_t>(acc, x, count, op);
    case ncclUint8: return reduce_typed<uint8_t>(acc, x, count, op);
    case ncclInt32: return reduce_typed<int32_t>(acc, x, count, op);
    case ncclUint32: return reduce_typed<uint32_t>(acc, x, count, op);
    case ncclInt64: return reduce_typed<int64_t>(acc, x, count, op);
    case ncclUint64: return reduce_typed<uint64_t>(acc, x, count, op);
    case ncclFloat32: return reduce_typed<float>(acc, x, count, op);
    case ncclFloat64: return reduce_typed<double>(acc, x, count, op);
    default:
      for (size_t i = 0; i < count; ++i) narrow(t, acc, i, apply<float>(op, widen(t, acc, i), widen(t, x, i)));
  }
}

// ncclAvg on floats is NCCL's PreMulSum: every operand is first multiplied by 1/nranks (in the
// element type), then summed.
void premultiply(void* buf, size_t count, ncclDataType_t t, int nranks) {
  if (t == ncclFloat64) {
    double s = 1.0 / nranks;
    for (size_t i = 0; i < count; ++i) static_cast<double*>(buf)[i] *= s;
  } else if (t == ncclFloat32) {
    float s = 1.0f / static_cast<float>(nranks);
    for (size_t i = 0; i < count; ++i) static_cast<float*>(buf)[i] *= s;
  } else {
    uint32_t one = 0;
    narrow(t, &one, 0, 1.0f / static_cast<float>(nranks));
    const float s = widen(t, &one, 0);
    for (size_t i = 0; i < count; ++i) narrow(t, buf, i, widen(t, buf, i) * s);
  }
}

// ncclAvg on integers is NCCL's SumPostDiv: the sum divided by nranks (truncating).
template <class T>
void divide_typed(void* buf, size_t count, int nranks) {
  T* p = static_cast<T*>(buf);
  for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(nranks));
}

void postdivide(void* buf, size_t count, ncclDataType_t t, int nranks) {
  switch (t) {
    case ncclInt8: return divide_typed<int8_t>(buf, count, nranks);
    case ncclUint8: return divide_typed<uint8_t>(buf, count, nranks);
    case ncclInt32: return divide_typed<int32_t>(buf, count, nranks);
    case ncclUint32: return divide_typed<uint32_t>(buf, count, nranks);
    case ncclInt64: return divide_typed<int64_t>(buf, count, nranks);
    case ncclUint64: return divide_typed<uint64_t>(buf, count, nranks);
    default: return;
  }
}

// ------------------------------------------------------------------ communicator state

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

}  // namespace

// The opaque type nccl.h names; weft only ever holds the pointer.
struct ncclComm {
  uint32_t magic = kHandleMagic;
  std::shared_ptr<State> st;
};

namespace {

// Live handles: a destroyed or aborted handle (or garbage) is refused instead of dereferenced.
std::mutex g_handles_mutex;
std::set<const ncclComm*> g_handles;

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

// ------------------------------------------------------------------ operations

enum class Kind : uint32_t { allreduce = 1, broadcast, reduce, allgather, reducescatter, send, recv };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::allreduce: return "AllReduce";
    case Kind::broadcast: return "Broadcast";
    case Kind::reduce: return "Reduce";
    case Kind::allgather: return "AllGather";
    case Kind::reducescatter: return "ReduceScatter";
    case Kind::send: return "Send";
    case Kind::recv: return "Recv";
  }
  return "?";
}

struct Op {
  Kind kind;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;  // root, or the peer of a send/recv
  cudaStream_t stream;
  uint64_t seq = 0;  // collective number, or the number of the send/recv to/from this peer
};

// What every rank writes first in a collective's file: ranks that disagree are reported.
struct Header {
  uint32_t magic, kind, type, op;
  int32_t root, pad;
  uint64_t count;
  bool operator==(const Header&) const = default;
};

Header header_of(const Op& o) {
  const bool reduces = o.kind == Kind::allreduce || o.kind == Kind::reduce || o.kind == Kind::reducescatter;
  const bool rooted = o.kind == Kind::broadcast || o.kind == Kind::reduce;
  return {kFileMagic, static_cast<uint32_t>(o.kind), static_cast<uint32_t>(o.type),
          reduces ? static_cast<uint32_t>(o.op) : 0u, rooted ? o.root : -1, 0, o.count};
}

// Bytes rank r contributes to collective o.
size_t contribution(const Op& o, int r, int nranks) {
  const size_t bytes = o.count * type_size(o.type);
  switch (o.kind) {
    case Kind::reducescatter: return bytes * static_cast<size_t>(nranks);
    case Kind::broadcast: return r == o.root ? bytes : 0;
    default: return bytes;
  }
}

// A peer's file, opened once it exists and checked against this rank's header.
struct PeerFile {
  int fd = -1;
  ~PeerFile() {
    if (fd >= 0) close(fd);
  }
};

// One collective, run on the stream worker: publish, wait for every rank, compute.
// Returns false when aborted or failed (the failure is recorded in async_error).
bool run_collective(State& st, const Op& o) {
  const int n = st.nranks, me = st.rank;
  const size_t esz = type_size(o.type), bytes = o.count * esz;
  const Header mine = header_of(o);
  const size_t give = contribution(o, me, n);
  const void* src = give ? weft::emu::host_view(o.send, give) : nullptr;
  const std::string tag = "c" + std::to_string(o.seq);
  if (!publish(st.dir, tag + "." + std::to_string(me), &mine, sizeof mine, src, give)) {
    fail(ncclSystemError, "%s #%llu: cannot write to %s: %s", kind_name(o.kind),
         static_cast<unsigned long long>(o.seq), st.dir.c_str(), std::strerror(errno));
    st.set_error(ncclSystemError);
    return false;
  }
  std::vector<PeerFile> files(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    const std::string p = st.path(tag + "." + std::to_string(q));
    if (!wait_until(st.aborted, nullptr, [&] { return exists(p); })) return false;
    PeerFile& f = files[static_cast<size_t>(q)];
    f.fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
    Header h{};
    struct stat sb{};
    if (f.fd < 0 || !read_all(f.fd, &h, sizeof h, 0) || fstat(f.fd, &sb) != 0) {
      fail(ncclSystemError, "%s #%llu: cannot read %s", kind_name(o.kind), static_cast<unsigned long long>(o.seq),
           p.c_str());
      st.set_error(ncclSystemError);
      return false;
    }
    if (!(h == mine) || static_cast<size_t>(sb.st_size) != sizeof h + contribution(o, q, n)) {
      fail(ncclInvalidUsage,
           "collective #%llu: %s called %s(count %llu, type %u, op %u, root %d) but rank %d called "
           "%s(count %llu, type %u, op %u, root %d): every rank must call the same collectives in the same order",
           static_cast<unsigned long long>(o.seq), st.peer_text(me).c_str(), kind_name(o.kind),
           static_cast<unsigned long long>(o.count), mine.type, mine.op, mine.root, q,
           kind_name(static_cast<Kind>(h.kind)), static_cast<unsigned long long>(h.count), h.type, h.op, h.root);
      st.set_error(ncclInvalidUsage);
      return false;
    }
  }
  // Reads `len` bytes of rank q's contribution from offset `at`.
  auto read_from = [&](int q, void* dst, size_t len, size_t at) {
    if (read_all(files[static_cast<size_t>(q)].fd, dst, len, static_cast<off_t>(sizeof(Header) + at))) return true;
    fail(ncclSystemError, "%s #%llu: short read from rank %d", kind_name(o.kind),
         static_cast<unsigned long long>(o.seq), q);
    st.set_error(ncclSystemError);
    return false;
  };
  // Reduces block `at` of every rank's contribution, in rank order, into `out`.
  auto reduce_all = [&](void* out, size_t at) {
    std::vector<char> acc(bytes), x(bytes);
    const bool avg = o.op == ncclAvg, pre = avg && is_float(o.type);
    const ncclRedOp_t op = avg ? ncclSum : o.op;
    for (int q = 0; q < n; ++q) {
      if (!read_from(q, q == 0 ? acc.data() : x.data(), bytes, at)) return false;
      if (pre) premultiply(q == 0 ? acc.data() : x.data(), o.count, o.type, n);
      if (q > 0) reduce_into(acc.data(), x.data(), o.count, o.type, op);
    }
    if (avg && !pre) postdivide(acc.data(), o.count, o.type, n);
    std::memcpy(out, acc.data(), bytes);
    return true;
  };
  bool ok = true;
  switch (o.kind) {
    case Kind::allreduce: ok = reduce_all(weft::emu::host_view(o.recv, bytes), 0); break;
    case Kind::reduce:
      if (me == o.root) ok = reduce_all(weft::emu::host_view(o.recv, bytes), 0);
      break;
    case Kind::reducescatter: ok = reduce_all(weft::emu::host_view(o.recv, bytes), bytes * static_cast<size_t>(me)); break;
    case Kind::broadcast: ok = read_from(o.root, weft::emu::host_view(o.recv, bytes), bytes, 0); break;
    case Kind::allgather: {
      char* out = static_cast<char*>(weft::emu::host_view(o.recv, bytes * static_cast<size_t>(n)));
      for (int q = 0; q < n && ok; ++q) ok = read_from(q, out + bytes * static_cast<size_t>(q), bytes, 0);
      break;
    }
    default: break;
  }
  // Every rank has finished collective seq-1 (it wrote c<seq>): its file of ours is read.
  if (o.seq > 0) unlink(st.path("c" + std::to_string(o.seq - 1) + "." + std::to_string(me)).c_str());
  return ok;
}

std::string p2p_name(int src, int dst, uint64_t seq) {
  return "p" + std::to_string(src) + "." + std::to_string(dst) + "." + std::to_string(seq);
}

bool post_send(State& st, const Op& o) {
  const size_t bytes = o.count * type_size(o.type);
  const Header h = header_of(o);
  const void* src = bytes ? weft::emu::host_view(o.send, bytes) : nullptr;
  if (publish(st.dir, p2p_name(st.rank, o.root, o.seq), &h, sizeof h, src, bytes)) return true;
  fail(ncclSystemError, "Send to rank %d: cannot write to %s: %s", o.root, st.dir.c_str(), std::strerror(errno));
  st.set_error(ncclSystemError);
  return false;
}

bool run_recv(State& st, const Op& o) {
  const size_t bytes = o.count * type_size(o.type);
  const std::string p = st.path(p2p_name(o.root, st.rank, o.seq));
  if (!wait_until(st.aborted, nullptr, [&] { return exists(p); })) return false;
  PeerFile f;
  f.fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
  Header h{};
  struct stat sb{};
  if (f.fd < 0 || !read_all(f.fd, &h, sizeof h, 0) || fstat(f.fd, &sb) != 0) {
    fail(ncclSystemError, "Recv from rank %d: cannot read %s", o.root, p.c_str());
    st.set_error(ncclSystemError);
    return false;
  }
  const size_t sent = static_cast<size_t>(sb.st_size) - sizeof h;
  if (sent != bytes) {
    fail(ncclInvalidUsage, "Recv #%llu from rank %d: %s posted %zu bytes, rank %d sent %zu",
         static_cast<unsigned long long>(o.seq), o.root, st.peer_text(st.rank).c_str(), bytes, o.root, sent);
    st.set_error(ncclInvalidUsage);
    return false;
  }
  if (bytes && !read_all(f.fd, weft::emu::host_view(o.recv, bytes), bytes, sizeof h)) {
    fail(ncclSystemError, "Recv from rank %d: short read", o.root);
    st.set_error(ncclSystemError);
    return false;
  }
  unlink(p.c_str());  // completes the peer's send
  return true;
}

// A send is complete once the receiver has taken (deleted) its file, as an NCCL send occupies
// its stream until the peer receives.
bool finish_send(State& st, const Op& o) {
  const std::string p = st.path(p2p_name(st.rank, o.root, o.seq));
  return wait_until(st.aborted, nullptr, [&] { return !exists(p); });
}

// One communicator's share of one group (or one call outside a group): the ops run together,
// after the communicator's previous unit, whatever stream each is on.
struct Unit {
  std::shared_ptr<State> st;
  std::vector<Op> ops;
  uint64_t seq = 0;
};

void execute(const Unit& u) {
  State& st = *u.st;
  // NCCL serialises a communicator's work: wait for the previous unit (or a failure).
  wait_until(st.aborted, nullptr, [&] { return st.units_done.load() == u.seq || st.async_error.load() != ncclSuccess; });
  if (!st.aborted.load() && st.async_error.load() == ncclSuccess) {
    // Sends are posted first and receives taken last, so the ops of a group progress together
    // as they do in NCCL's one grouped kernel.
    bool ok = true;
    for (const Op& o : u.ops) {
      if (ok && o.kind == Kind::send) ok = post_send(st, o);
    }
    for (const Op& o : u.ops) {
      if (ok && o.kind != Kind::send && o.kind != Kind::recv) ok = run_collective(st, o);
    }
    for (const Op& o : u.ops) {
      if (ok && o.kind == Kind::recv) ok = run_recv(st, o);
    }
    for (const Op& o : u.ops) {
      if (ok && o.kind == Kind::send) ok = finish_send(st, o);
    }
  }
  st.units_done.fetch_add(1);
}

// The stream handles that mean "the current device's default stream".
bool special_stream(cudaStream_t s) { return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread; }

// Queues the unit on its first op's stream. A group that uses several streams makes the work
// wait for each other stream's earlier work and each other stream wait for the work, as NCCL's
// grouped launch does with events: an "arrived" mark goes on every other stream first, then
// the work, then a "wait until done" on every other stream (so the legacy default stream's
// implicit ordering, which waits for whole jobs, cannot deadlock). The communicator's device
// is current while queueing (NCCL switches to it), so stream 0 is that device's default stream.
ncclResult_t launch(std::shared_ptr<Unit> u) {
  struct Join {
    std::atomic<int> arrived{0};
    std::atomic<bool> done{false};
  };
  auto join = std::make_shared<Join>();
  std::vector<cudaStream_t> others;
  for (const Op& o : u->ops) {
    if (o.stream != u->ops.front().stream && std::find(others.begin(), others.end(), o.stream) == others.end()) {
      others.push_back(o.stream);
    }
  }
  int old = -1;
  cudaGetDevice(&old);
  if (old != u->st->device) cudaSetDevice(u->st->device);
  cudaError_t err = cudaSuccess;
  for (size_t i = 0; err == cudaSuccess && i < others.size(); ++i) {
    err = weft::emu::enqueue(others[i], [join] { join->arrived.fetch_add(1); });
  }
  const int waiting = static_cast<int>(others.size());
  if (err == cudaSuccess) {
    err = weft::emu::enqueue(u->ops.front().stream, [u, join, waiting] {
      wait_until(u->st->aborted, nullptr, [&] { return join->arrived.load() == waiting; });
      execute(*u);
      join->done.store(true);
    });
  }
  for (size_t i = 0; err == cudaSuccess && i < others.size(); ++i) {
    err = weft::emu::enqueue(others[i], [u, join] {
      wait_until(u->st->aborted, nullptr, [&] { return join->done.load(); });
    });
  }
  if (old >= 0 && old != u->st->device) cudaSetDevice(old);
  if (err != cudaSuccess) {
    cudaGetLastError();
    u->st->set_error(ncclUnhandledCudaError);  // this unit and those after it are skipped
    join->arrived.store(waiting);
    join->done.store(true);
    return fail(ncclUnhandledCudaError, "%s: queueing on the stream failed: %s", kind_name(u->ops.front().kind),
                cudaGetErrorString(err));
  }
  return ncclSuccess;
}

// Non-blocking launches are handed to one background thread, which queues them after a short
// delay, so that a caller that uses the stream before ncclCommGetAsyncError says ncclSuccess
// gets its work ordered wrongly, as it would with NCCL's own launch thread.
class Launcher {
 public:
  static Launcher& get() {
    // Leaked on purpose: the thread may still run during static destruction at exit.
    static Launcher* l = [] {
      auto* p = new Launcher;
      std::thread([p] { p->loop(); }).detach();
      return p;
    }();
    return *l;
  }
  void post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return !queue_.empty(); });
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      sleep_us(env_long("WEFT_FAKE_NCCL_LAUNCH_DELAY_US", 300));
      job();
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
};

// ------------------------------------------------------------------ groups

struct Pending {
  std::shared_ptr<State> st;
  Op op;
};

// Per thread, as NCCL's group state.
thread_local int t_depth = 0;
thread_local std::vector<Pending> t_pending;
thread_local ncclResult_t t_group_error = ncclSuccess;

// Issues what the outermost group collected: one unit per communicator (in order of first
// use), numbered here so that every rank numbers the same calls alike.
ncclResult_t issue_group() {
  std::vector<Pending> pending;
  pending.swap(t_pending);
  const ncclResult_t group_error = t_group_error;
  t_group_error = ncclSuccess;
  if (group_error != ncclSuccess) return group_error;  // NCCL drops the whole group
  std::vector<std::shared_ptr<Unit>> units;
  for (Pending& p : pending) {
    if (p.st->aborted.load()) continue;
    auto it = std::find_if(units.begin(), units.end(), [&](const auto& u) { return u->st == p.st; });
    if (it == units.end()) {
      units.push_back(std::make_shared<Unit>());
      units.back()->st = p.st;
      it = units.end() - 1;
    }
    (*it)->ops.push_back(p.op);
  }
  if (units.empty()) return ncclSuccess;
  bool async = env_flag("WEFT_FAKE_NCCL_INPROGRESS", true);
  for (auto& u : units) {
    State& st = *u->st;
    std::lock_guard<std::mutex> lock(st.mutex);
    u->seq = st.next_unit++;
    for (Op& o : u->ops) {
      const size_t peer = static_cast<size_t>(o.root);
      if (o.kind == Kind::send) o.seq = st.sent[peer]++;
      else if (o.kind == Kind::recv) o.seq = st.received[peer]++;
      else o.seq = st.next_coll++;
      // cudaStreamPerThread names the caller's own stream, which another thread cannot reach.
      if (o.stream == cudaStreamPerThread) async = false;
    }
    if (st.blocking) async = false;  // a group with a blocking communicator is blocking
  }
  if (!async) {
    for (auto& u : units) {
      if (ncclResult_t r = launch(u); r != ncclSuccess) return r;
    }
    return ncclSuccess;
  }
  for (auto& u : units) u->st->busy.fetch_add(1);
  Launcher::get().post([units] {
    for (const auto& u : units) {
      if (!u->st->aborted.load()) launch(u);
      u->st->busy.fetch_sub(1);
    }
  });
  return ncclInProgress;
}

// A device buffer of `bytes` for comm's GPU: device memory there (or managed memory), as NCCL's
// pointer check demands; a host pointer is ncclInvalidArgument (real NCCL faults or errors).
ncclResult_t check_buffer(const State& st, const void* p, size_t bytes, const char* fn, const char* which) {
  if (bytes == 0) return ncclSuccess;
  if (!p) return fail(ncclInvalidArgument, "%s : %s argument is NULL", fn, which);
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    return fail(ncclInvalidArgument, "%s : %s %p is not a valid pointer", fn, which, p);
  }
  if (attr.type == cudaMemoryTypeManaged) return ncclSuccess;
  if (!weft::emu::is_device_memory(p)) {
    return fail(ncclInvalidArgument, "%s : %s %p is not device memory (NCCL needs GPU buffers)", fn, which, p);
  }
  if (attr.device != st.device) {
    return fail(ncclInvalidArgument, "%s : %s allocated on device %d mismatchs with NCCL device %d", fn, which,
                attr.device, st.device);
  }
  return ncclSuccess;
}

// A stream NCCL could launch on for this communicator's GPU.
ncclResult_t check_stream(const State& st, cudaStream_t s, const char* fn) {
  if (special_stream(s)) return ncclSuccess;
  int dev = -1;
  cudaError_t err = cudaStreamGetDevice(s, &dev);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return fail(ncclUnhandledCudaError, "%s : stream %p is not a valid CUDA stream: %s", fn, static_cast<void*>(s),
                cudaGetErrorString(err));
  }
  if (dev != st.device) {
    return fail(ncclUnhandledCudaError, "%s : stream %p belongs to device %d, the communicator to device %d", fn,
                static_cast<void*>(s), dev, st.device);
  }
  return ncclSuccess;
}

// NCCL's ncclEnqueueCheck: checks, then collects the op into the current group (or a group of
// one, issued at once). For a non-blocking communicator the answer of a call outside a group is
// the communicator's state after issuing (usually ncclInProgress).
ncclResult_t submit(ncclComm_t comm, Op op) {
  const char* fn = kind_name(op.kind);
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<State> st;
  auto checks = [&]() -> ncclResult_t {
    if (ncclResult_t c = check_comm(comm, fn, &st); c != ncclSuccess) return c;
    if (ncclResult_t c = ensure_ready(*st, fn); c != ncclSuccess) return c;
    if (!type_valid(op.type)) return fail(ncclInvalidArgument, "%s : invalid type %d", fn, static_cast<int>(op.type));
    const bool p2p = op.kind == Kind::send || op.kind == Kind::recv;
    const bool reduces = op.kind == Kind::allreduce || op.kind == Kind::reduce || op.kind == Kind::reducescatter;
    if (reduces && !op_valid(op.op)) {
      return fail(ncclInvalidArgument, "%s : invalid reduction operation %d", fn, static_cast<int>(op.op));
    }
    if ((p2p || op.kind == Kind::broadcast || op.kind == Kind::reduce) && (op.root < 0 || op.root >= st->nranks)) {
      return fail(ncclInvalidArgument, "%s : invalid %s %d (should be in the 0..%d range)", fn, p2p ? "peer" : "root",
                  op.root, st->nranks - 1);
    }
    const size_t bytes = op.count * type_size(op.type), n = static_cast<size_t>(st->nranks);
    const bool root = st->rank == op.root;
    size_t sbytes = bytes, rbytes = bytes;
    switch (op.kind) {
      case Kind::allgather: rbytes = bytes * n; break;
      case Kind::reducescatter: sbytes = bytes * n; break;
      case Kind::broadcast: sbytes = root ? bytes : 0; break;
      case Kind::reduce: rbytes = root ? bytes : 0; break;
      case Kind::send: rbytes = 0; break;
      case Kind::recv: sbytes = 0; break;
      default: break;
    }
    if (ncclResult_t c = check_buffer(*st, op.send, sbytes, fn, "sendbuff"); c != ncclSuccess) return c;
    if (ncclResult_t c = check_buffer(*st, op.recv, rbytes, fn, "recvbuff"); c != ncclSuccess) return c;
    return check_stream(*st, op.stream, fn);
  };
  r = checks();
  if (r != ncclSuccess) {
    if (t_depth > 0 && t_group_error == ncclSuccess) t_group_error = r;
    return r;
  }
  // A collective of zero elements is no operation in NCCL (no rank waits for it); a zero-byte
  // send/recv still pairs up.
  const bool p2p = op.kind == Kind::send || op.kind == Kind::recv;
  if (op.count > 0 || p2p) t_pending.push_back({st, op});
  if (t_depth > 0) return ncclSuccess;
  r = issue_group();
  if (r != ncclSuccess && r != ncclInProgress) return r;
  return st->blocking ? ncclSuccess : st->state();
}

// The unique id: a magic, a random token and the directory every rank meets in.
struct IdLayout {
  uint64_t magic;
  char dir[NCCL_UNIQUE_ID_BYTES - sizeof(uint64_t)];
};
static_assert(sizeof(IdLayout) == NCCL_UNIQUE_ID_BYTES);

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

}  // namespace

// ====================================================================== the exported API

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (!version) return fail(ncclInvalidArgument, "ncclGetVersion: version argument is NULL");
  *version = NCCL_VERSION(2, 28, 0);
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t) {
  // NCCL returns its global buffer; the text may change under a concurrent failure, as there.
  return g_last_error;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* out) {
  if (!out) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId argument is NULL");
  IdLayout id{};
  id.magic = kIdMagic;
  std::random_device rd;
  const unsigned long long token = (static_cast<unsigned long long>(rd()) << 32) ^ rd();
  int len = std::snprintf(id.dir, sizeof id.dir, "%s/weft-fake-nccl-%d-%016llx", base_dir().c_str(),
                          static_cast<int>(getpid()), token);
  if (len < 0 || static_cast<size_t>(len) >= sizeof id.dir) {
    std::snprintf(id.dir, sizeof id.dir, "/tmp/weft-fake-nccl-%d-%016llx", static_cast<int>(getpid()), token);
  }
  std::memcpy(out, &id, sizeof id);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  const char* fn = "ncclCommInitRankConfig";
  if (!comm) return fail(ncclInvalidArgument, "%s: comm argument is NULL", fn);
  *comm = nullptr;
  bool blocking = true;
  if (ncclResult_t r = read_config(config, fn, &blocking); r != ncclSuccess) return r;
  if (nranks < 1) return fail(ncclInvalidArgument, "%s: invalid rank count %d", fn, nranks);
  if (rank < 0 || rank >= nranks) return fail(ncclInvalidArgument, "%s: rank %d is not in 0..%d", fn, rank, nranks - 1);
  IdLayout id;
  std::memcpy(&id, &commId, sizeof id);
  if (id.magic != kIdMagic || !std::memchr(id.dir, 0, sizeof id.dir) || id.dir[0] != '/') {
    return fail(ncclInvalidArgument, "%s: the unique id was not made by ncclGetUniqueId", fn);
  }
  // NCCL binds the communicator to the caller's current device.
  auto st = new_state(id.dir, rank, nranks, weft::emu::current_device(), blocking);
  return init_comm(comm, st, [st] { complete_init(st, nullptr); });
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return ncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  std::shared_ptr<State> st;
  if (ncclResult_t r = check_comm(comm, "ncclCommGetAsyncError", &st); r != ncclSuccess) return r;
  if (!asyncError) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError argument is NULL");
  *asyncError = st->state();
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  std::shared_ptr<State> st;
  if (ncclResult_t r = check_comm(comm, "ncclCommCount", &st); r != ncclSuccess) return r;
  if (!count) return fail(ncclInvalidArgument, "ncclCommCount: count argument is NULL");
  std::lock_guard<std::mutex> lock(st->mutex);  // a split child learns its size in the background
  *count = st->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  std::shared_ptr<State> st;
  if (ncclResult_t r = check_comm(comm, "ncclCommCuDevice", &st); r != ncclSuccess) return r;
  if (!device) return fail(ncclInvalidArgument, "ncclCommCuDevice: device argument is NULL");
  *device = st->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  std::shared_ptr<State> st;
  if (ncclResult_t r = check_comm(comm, "ncclCommUserRank", &st); r != ncclSuccess) return r;
  if (!rank) return fail(ncclInvalidArgument, "ncclCommUserRank: rank argument is NULL");
  std::lock_guard<std::mutex> lock(st->mutex);
  *rank = st->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  const char* fn = "ncclCommFinalize";
  std::shared_ptr<State> st;
  if (ncclResult_t r = check_comm(comm, fn, &st); r != ncclSuccess) return r;
  if (ncclResult_t r = ensure_ready(*st, fn); r != ncclSuccess) return r;
  st->finalized.store(true);
  if (st->blocking) {
    drain(*st);
    return ncclSuccess;
  }
  st->busy.fetch_add(1);
  st->start_job([st] {
    drain(*st);
    st->busy.fetch_sub(1);
  });
  return ncclInProgress;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;  // NCCL accepts NULL
  std::shared_ptr<State> st = find(comm);
  if (!st) return fail(ncclInvalidArgument, "ncclCommDestroy: comm %p is not a live communicator", static_cast<void*>(comm));
  // Without ncclCommFinalize, destroy finalizes (waits for this rank's work) itself; a
  // non-blocking init still running is waited for too. A peer that never comes: this waits
  // forever, like NCCL (use ncclCommAbort).
  wait_until(st->aborted, nullptr, [&] { return st->init_state.load() != ncclInProgress; });
  wait_until(st->aborted, nullptr, [&] { return st->busy.load() == 0; });
  drain(*st);
  if (!retire(comm)) return fail(ncclInvalidArgument, "ncclCommDestroy: comm was destroyed concurrently");
  st->aborted.store(true);  // nothing may wait on it any more
  st->stop_jobs();
  leave(*st);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  std::shared_ptr<State> st = find(comm);
  if (!st || !retire(comm)) {
    return fail(ncclInvalidArgument, "ncclCommAbort: comm %p is not a live communicator", static_cast<void*>(comm));
  }
  // Every wait of this communicator (init, stream work, finalize) sees the flag within ~1 ms;
  // queued stream work keeps the state alive through its own shared_ptr and returns at once.
  st->aborted.store(true);
  st->stop_jobs();
  leave(*st);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  const char* fn = "ncclCommSplit";
  std::shared_ptr<State> parent;
  if (ncclResult_t r = check_comm(comm, fn, &parent); r != ncclSuccess) return r;
  if (!newcomm) return fail(ncclInvalidArgument, "%s: newcomm argument is NULL", fn);
  *newcomm = nullptr;
  if (ncclResult_t r = ensure_ready(*parent, fn); r != ncclSuccess) return r;
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) return fail(ncclInvalidArgument, "%s: invalid color %d", fn, color);
  bool blocking = parent->blocking;  // a NULL config inherits the parent's
  if (config && read_config(config, fn, &blocking) != ncclSuccess) return ncclInvalidArgument;
  uint64_t j;
  {
    std::lock_guard<std::mutex> lock(parent->mutex);
    j = parent->next_split++;
  }
  // The child exists (in progress) at once; its place is learnt from the parent's exchange. As
  // NCCL: a non-blocking split writes *newcomm only when it is over (success or not), from its
  // own thread, and the caller learns that from the parent's state; a blocking one before
  // returning.
  std::shared_ptr<State> child;
  ncclComm_t handle = nullptr;
  if (color != NCCL_SPLIT_NOCOLOR) {
    child = new_state("", 0, 1, parent->device, blocking);
    handle = make_handle(child);
  }
  const bool async = !parent->blocking || (child && !child->blocking);
  if (!async) *newcomm = handle;
  ncclComm_t* late_out = async ? newcomm : nullptr;
  auto work = [parent, child, color, key, j, handle, late_out] {
    // The handle is written before the parent's state leaves ncclInProgress (callers read it
    // once the parent says the split is over), and on the abort path too.
    auto publish_handle = [late_out, handle] {
      if (late_out) __atomic_store_n(late_out, handle, __ATOMIC_RELEASE);
    };
    const int32_t mine[2] = {color, key};
    const std::string tag = "s" + std::to_string(j);
    ncclResult_t r = ncclSuccess;
    if (!publish(parent->dir, tag + "." + std::to_string(parent->rank), mine, sizeof mine, nullptr, 0)) {
      r = fail(ncclSystemError, "ncclCommSplit: cannot write to %s", parent->dir.c_str());
    }
    std::vector<std::array<int32_t, 3>> members;  // key, parent rank, color
    for (int q = 0; q < parent->nranks && r == ncclSuccess; ++q) {
      const std::string p = parent->path(tag + "." + std::to_string(q));
      if (!wait_until(parent->aborted, child ? &child->aborted : nullptr, [&] { return exists(p); })) {
        publish_handle();
        return;
      }
      int32_t theirs[2] = {0, 0};
      int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
      bool ok = fd >= 0 && read_all(fd, theirs, sizeof theirs, 0);
      if (fd >= 0) close(fd);
      if (!ok) r = fail(ncclSystemError, "ncclCommSplit: cannot read %s", p.c_str());
      if (theirs[0] == color) members.push_back({theirs[1], q, theirs[0]});
    }
    if (child) {
      if (r == ncclSuccess) {
        std::sort(members.begin(), members.end());  // by key, then parent rank
        const auto me = std::find_if(members.begin(), members.end(), [&](const auto& m) { return m[1] == parent->rank; });
        {
          // Published to other threads by init_state (atomic) and, for ncclCommCount and
          // ncclCommUserRank, by the mutex.
          std::lock_guard<std::mutex> lock(child->mutex);
          child->rank = static_cast<int>(me - members.begin());
          child->nranks = static_cast<int>(members.size());
          child->sent.assign(members.size(), 0);
          child->received.assign(members.size(), 0);
          child->dir = parent->dir + "." + tag + "." + std::to_string(color);
        }
        complete_init(child, &parent->aborted);
      } else {
        child->init_state.store(r);
      }
    }
    if (r != ncclSuccess) parent->set_error(r);
    publish_handle();
    parent->busy.fetch_sub(1);
  };
  if (async) {
    parent->busy.fetch_add(1);
    parent->start_job(std::move(work));
    return ncclInProgress;
  }
  parent->busy.fetch_add(1);
  work();
  ncclResult_t r = child ? static_cast<ncclResult_t>(child->init_state.load()) : parent->state();
  if (r != ncclSuccess && child) {
    retire(*newcomm);
    leave(*child);
    delete *newcomm;
    *newcomm = nullptr;
  }
  return r;
}

ncclResult_t ncclGroupStart() {
  ++t_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd: not in a group call");
  if (--t_depth > 0) return ncclSuccess;
  return issue_group();
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return submit(comm, {Kind::allreduce, sendbuff, recvbuff, count, datatype, op, -1, stream});
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return submit(comm, {Kind::broadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, stream});
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return submit(comm, {Kind::reduce, sendbuff, recvbuff, count, datatype, op, root, stream});
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return submit(comm, {Kind::allgather, sendbuff, recvbuff, sendcount, datatype, ncclSum, -1, stream});
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return submit(comm, {Kind::reducescatter, sendbuff, recvbuff, recvcount, datatype, op, -1, stream});
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return submit(comm, {Kind::send, sendbuff, nullptr, count, datatype, ncclSum, peer, stream});
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return submit(comm, {Kind::recv, nullptr, recvbuff, count, datatype, ncclSum, peer, stream});
}

}  // extern "C"
