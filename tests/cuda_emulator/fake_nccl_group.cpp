// The stand-in NCCL's groups and launches: see fake_nccl_group.h.
#include "tests/cuda_emulator/fake_nccl_group.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/cuda_emulator/emulator.h"
#include "tests/cuda_emulator/fake_nccl_reduce.h"
#include "tests/cuda_emulator/fake_nccl_support.h"

namespace weft::fake_nccl {

namespace {

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

}  // namespace

// Per thread, as NCCL's group state.
constinit thread_local int t_depth = 0;

namespace {

thread_local std::vector<Pending> t_pending;
thread_local ncclResult_t t_group_error = ncclSuccess;

}  // namespace

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

namespace {

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

}  // namespace

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

}  // namespace weft::fake_nccl
