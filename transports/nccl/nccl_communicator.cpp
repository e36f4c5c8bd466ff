#include "transports/nccl/nccl_communicator.h"

#include "core/common/backoff.h"
#include "core/common/log.h"

namespace weft::gpu {
namespace {

using Clock = std::chrono::steady_clock;

// Polls a non-blocking communicator until it leaves ncclInProgress; returns its state, or a
// description of why it stopped waiting in *stopped.
ncclResult_t wait_ready(const NcclApi& api, ncclComm_t h, std::chrono::milliseconds timeout, const ShouldStop& stop,
                        std::string* stopped) {
  const Clock::time_point until = Clock::now() + timeout;
  Backoff backoff;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = api.CommGetAsyncError(h, &state);
    if (r != ncclSuccess) return r;
    if (state != ncclInProgress) return state;
    if (stop()) {
      *stopped = "aborted by weft_comm_abort";
      return ncclInProgress;
    }
    if (Clock::now() >= until) {
      *stopped = format("not ready after %lld ms", static_cast<long long>(timeout.count()));
      return ncclInProgress;
    }
    backoff.pause();
  }
}

}  // namespace

Status nccl_status(ncclResult_t r) {
  switch (r) {
    case ncclRemoteError: return Status::remote;
    case ncclInvalidArgument: return Status::invalid_argument;
    case ncclInternalError:
    case ncclInvalidUsage: return Status::internal;
    default: return Status::transport;
  }
}

NcclStart NcclCommunicator::init_rank(const NcclApi& api, const ncclUniqueId& id, int rank, int nranks,
                                      std::chrono::milliseconds timeout, const ShouldStop& stop) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every call returns at once; weft polls with its deadline
  ncclComm_t handle = nullptr;
  // NCCL binds the communicator to the current device (the caller's DeviceGuard).
  ncclResult_t r = api.CommInitRankConfig(&handle, nranks, id, rank, &config);
  std::string stopped;
  if (handle && (r == ncclSuccess || r == ncclInProgress)) r = wait_ready(api, handle, timeout, stop, &stopped);
  NcclStart start;
  start.ok = r == ncclSuccess;
  if (!start.ok) {
    start.why = stopped.empty() ? "ncclCommInitRankConfig: " + nccl_error_text(api, r) +
                                      (handle ? format(" (%s)", api.GetLastError(handle)) : std::string())
                                : "ncclCommInitRankConfig: " + stopped;
  }
  if (handle || start.ok) start.comm.reset(new NcclCommunicator(api, handle, timeout));
  return start;
}

NcclStart NcclCommunicator::split(int color, int key, std::chrono::milliseconds timeout, const ShouldStop& stop) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  // A non-blocking split writes the new handle when it is over, from NCCL's own thread, and the
  // parent's state says when: the slot lives on the heap until then (after an abort of the
  // parent, which ends NCCL's split job, it is settled too).
  auto slot = std::make_unique<ncclComm_t>(nullptr);
  ncclResult_t r;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    r = handle_ ? api_.CommSplit(handle_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, slot.get(), &config)
                : ncclInvalidUsage;
  }
  // Over when the parent's state leaves ncclInProgress and, for a rank with a color, the handle
  // is written. Both are waited for: NCCL 2.28.3 (on an H100) answered ncclSuccess at once and
  // wrote the handle later from its thread, which polling the parent completes.
  auto pending = [&] {
    return r == ncclInProgress || (r == ncclSuccess && color >= 0 && !__atomic_load_n(slot.get(), __ATOMIC_ACQUIRE));
  };
  if (pending()) {
    const Clock::time_point until = Clock::now() + timeout;
    Backoff backoff;
    for (;;) {
      r = async_error();
      if (!pending()) break;
      if (stop() || Clock::now() >= until) {
        const bool aborted = stop();
        abort();
        if (ncclComm_t h = __atomic_load_n(slot.get(), __ATOMIC_ACQUIRE)) api_.CommAbort(h);
        // NCCL's thread may still hold the slot's address: it stays allocated (8 bytes, once).
        (void)slot.release();
        throw Error(aborted ? Status::aborted : Status::timeout,
                    format("ncclCommSplit %s; the NCCL communicator was aborted",
                           aborted ? "aborted by weft_comm_abort"
                                   : format("not complete after %lld ms",
                                            static_cast<long long>(timeout.count())).c_str()));
      }
      backoff.pause();
    }
  }
  ncclComm_t handle = __atomic_load_n(slot.get(), __ATOMIC_ACQUIRE);
  std::string stopped;
  if (r == ncclSuccess && handle) r = wait_ready(api_, handle, timeout, stop, &stopped);
  NcclStart start;
  start.ok = r == ncclSuccess;
  if (!start.ok) {
    const char* last = api_.GetLastError(handle);  // NCCL ignores the argument (nccl.h)
    start.why = "ncclCommSplit: " + (stopped.empty() ? nccl_error_text(api_, r) : stopped) +
                (last && *last ? format(" (%s)", last) : std::string());
  }
  if (handle) start.comm.reset(new NcclCommunicator(api_, handle, timeout));
  std::lock_guard<std::mutex> lock(mutex_);
  split_slots_.push_back(std::move(slot));
  return start;
}

NcclCommunicator::~NcclCommunicator() {
  // Finalize flushes what this rank issued; a communicator that does not get there within the
  // deadline (a peer gone, work that never completes) is aborted instead, so destroy never hangs.
  // The lock is held per call, not across the wait: abort() from another thread (weft_comm_abort)
  // must get through at once, and then leaves nothing to finalize.
  ncclResult_t r;
  std::chrono::milliseconds budget;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!handle_) return;
    r = api_.CommFinalize(handle_);
    budget = timeout_;
  }
  if (r == ncclSuccess || r == ncclInProgress) {
    const Clock::time_point until = Clock::now() + budget;
    Backoff backoff;
    for (;;) {
      r = async_error();
      if (r != ncclInProgress || Clock::now() >= until) break;
      backoff.pause();
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!handle_) return;  // aborted meanwhile
  if (r == ncclSuccess) {
    api_.CommDestroy(handle_);
  } else {
    log(LogLevel::info, "NCCL communicator did not finalize (%s); aborting it", nccl_error_text(api_, r).c_str());
    api_.CommAbort(handle_);
  }
  handle_ = nullptr;
}

ncclResult_t NcclCommunicator::async_error() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!handle_) return ncclInvalidUsage;
  ncclResult_t state = ncclSuccess;
  ncclResult_t r = api_.CommGetAsyncError(handle_, &state);
  return r != ncclSuccess ? r : state;
}

std::optional<std::string> NcclCommunicator::last_error() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!handle_) return std::nullopt;
  const char* text = api_.GetLastError(handle_);
  return std::string(text && *text ? text : "");
}

std::chrono::milliseconds NcclCommunicator::timeout() {
  std::lock_guard<std::mutex> lock(mutex_);
  return timeout_;
}

void NcclCommunicator::set_timeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  timeout_ = timeout;
}

void NcclCommunicator::abort() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!handle_) return;
  api_.CommAbort(handle_);
  handle_ = nullptr;
}

bool NcclCommunicator::alive() {
  std::lock_guard<std::mutex> lock(mutex_);
  return handle_ != nullptr;
}

}  // namespace weft::gpu
