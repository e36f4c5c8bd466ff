#include "core/device/nccl_comm.h"

#include <cstring>

#include "core/collectives/collectives.h"
#include "core/comm/deadline.h"
#include "core/common/backoff.h"
#include "core/common/log.h"

namespace weft::gpu {
namespace {

Status status_of(ncclResult_t r) {
  switch (r) {
    case ncclRemoteError: return Status::remote;
    case ncclInvalidArgument: return Status::invalid_argument;
    case ncclInternalError:
    case ncclInvalidUsage: return Status::internal;
    default: return Status::transport;
  }
}

// Polls a non-blocking communicator until it leaves ncclInProgress; returns its state, or a
// description of why it stopped waiting in *stopped.
ncclResult_t wait_ready(const NcclApi& api, ncclComm_t h, Comm& comm, std::string* stopped) {
  Deadline deadline(comm.config().timeout);
  Backoff backoff;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = api.CommGetAsyncError(h, &state);
    if (r != ncclSuccess) return r;
    if (state != ncclInProgress) return state;
    if (comm.aborted()) {
      *stopped = "aborted by weft_comm_abort";
      return ncclInProgress;
    }
    if (deadline.expired()) {
      *stopped = format("not ready after %lld ms", static_cast<long long>(deadline.budget().count()));
      return ncclInProgress;
    }
    backoff.pause();
  }
}

}  // namespace

std::unique_ptr<NcclComm> NcclComm::create(Comm& comm, bool usable, std::string* why) {
  std::string local_why = *why;  // the caller's reason when it says "not usable"
  std::string lib_why;
  const NcclApi* api = nccl_api(&lib_why);
  if (usable && !api) local_why = lib_why;
  if (!usable && local_why.empty()) local_why = "this rank has no usable GPU";
  usable = usable && api;

  // Rank 0 makes the id; every rank learns it and whether everyone can go on.
  struct IdMessage {
    int32_t ok;
    int32_t pad;
    ncclUniqueId id;
  } msg;
  std::memset(&msg, 0, sizeof(msg));
  if (comm.rank() == 0 && usable) {
    ncclResult_t r = api->GetUniqueId(&msg.id);
    msg.ok = r == ncclSuccess ? 1 : 0;
    if (!msg.ok) local_why = "ncclGetUniqueId: " + nccl_error_text(*api, r);
  }
  coll::broadcast(comm, &msg, sizeof(msg), DType::u8, 0);
  int64_t go = (usable && msg.ok) ? 1 : 0;
  coll::allreduce(comm, &go, &go, 1, DType::i64, ReduceOp::min);
  if (!go) {
    if (usable && !msg.ok && comm.rank() != 0) local_why = "rank 0 could not make an NCCL unique id";
    if (usable && msg.ok) local_why = "another rank cannot use NCCL";
    *why = local_why;
    return nullptr;
  }

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every call returns at once; weft polls with its deadline
  ncclComm_t handle = nullptr;
  // NCCL binds the communicator to the current device (the caller's DeviceGuard).
  ncclResult_t r = api->CommInitRankConfig(&handle, comm.size(), msg.id, comm.rank(), &config);
  std::string stopped;
  if (handle && (r == ncclSuccess || r == ncclInProgress)) r = wait_ready(*api, handle, comm, &stopped);
  int64_t ok = r == ncclSuccess ? 1 : 0;
  if (!ok) {
    local_why = stopped.empty() ? "ncclCommInitRankConfig: " + nccl_error_text(*api, r) +
                                      (handle ? format(" (%s)", api->GetLastError(handle)) : std::string())
                                : "ncclCommInitRankConfig: " + stopped;
  }
  try {
    coll::allreduce(comm, &ok, &ok, 1, DType::i64, ReduceOp::min);
  } catch (...) {
    if (handle) api->CommAbort(handle);  // the host path failed (abort, timeout): nothing will use it
    throw;
  }
  if (!ok) {
    if (handle) api->CommAbort(handle);
    *why = local_why.empty() ? "NCCL initialisation failed on another rank" : local_why;
    return nullptr;
  }
  return std::unique_ptr<NcclComm>(new NcclComm(*api, handle, comm.config().timeout));
}

std::unique_ptr<NcclComm> NcclComm::split(Comm& parent_comm, NcclComm& parent, bool usable, int color, int key,
                                          std::string* why) {
  const NcclApi& api = parent.api_;
  // Every rank calls ncclCommSplit or none does: it is collective over the parent, and a rank
  // that stayed out would leave the others' split, and NCCL's parent communicator, stuck.
  int64_t all_usable = usable ? 1 : 0;
  coll::allreduce(parent_comm, &all_usable, &all_usable, 1, DType::i64, ReduceOp::min);
  if (!all_usable) {
    if (usable) *why = "another rank cannot take part in ncclCommSplit";
    return nullptr;
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  // A non-blocking split writes the new handle when it is over, from NCCL's own thread, and the
  // parent's state says when: the slot lives on the heap until then (after an abort of the
  // parent, which ends NCCL's split job, it is settled too).
  auto slot = std::make_unique<ncclComm_t>(nullptr);
  ncclResult_t r;
  {
    std::lock_guard<std::mutex> lock(parent.mutex_);
    r = parent.handle_ ? api.CommSplit(parent.handle_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, slot.get(), &config)
                       : ncclInvalidUsage;
  }
  if (r == ncclInProgress) {
    Deadline deadline(parent_comm.config().timeout);
    Backoff backoff;
    while ((r = parent.async_error()) == ncclInProgress) {
      if (parent_comm.aborted() || deadline.expired()) {
        const bool aborted = parent_comm.aborted();
        parent.abort();
        if (ncclComm_t h = __atomic_load_n(slot.get(), __ATOMIC_ACQUIRE)) api.CommAbort(h);
        Error e(aborted ? Status::aborted : Status::timeout,
                format("%s: ncclCommSplit %s; the NCCL communicator was aborted", parent_comm.describe().c_str(),
                       aborted ? "aborted by weft_comm_abort"
                               : format("not complete after %lld ms",
                                        static_cast<long long>(deadline.budget().count())).c_str()));
        parent_comm.mark_broken(e);
        throw e;
      }
      backoff.pause();
    }
  }
  ncclComm_t handle = __atomic_load_n(slot.get(), __ATOMIC_ACQUIRE);
  if (r == ncclSuccess && color >= 0 && !handle) r = ncclInternalError;  // "done" but no communicator
  std::string stopped;
  if (r == ncclSuccess && handle) r = wait_ready(api, handle, parent_comm, &stopped);
  std::string local_why;
  if (r != ncclSuccess) {
    local_why = "ncclCommSplit: " + (stopped.empty() ? nccl_error_text(api, r) : stopped);
  }
  int64_t ok = r == ncclSuccess ? 1 : 0;
  try {
    coll::allreduce(parent_comm, &ok, &ok, 1, DType::i64, ReduceOp::min);
  } catch (...) {
    if (handle) api.CommAbort(handle);
    throw;
  }
  if (!ok) {
    if (handle) api.CommAbort(handle);
    *why = local_why.empty() ? "ncclCommSplit failed on another rank" : local_why;
    return nullptr;
  }
  if (!handle) return nullptr;  // color < 0: no communicator, as asked
  return std::unique_ptr<NcclComm>(new NcclComm(api, handle, parent_comm.config().timeout));
}

void NcclComm::set_timeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  timeout_ = timeout;
}

NcclComm::~NcclComm() {
  // Finalize flushes what this rank issued; a communicator that does not get there within the
  // deadline (a peer gone, work that never completes) is aborted instead, so destroy never hangs.
  // The lock is held per call, not across the wait: abort() from another thread (weft_comm_abort)
  // must get through at once, and then leaves nothing to finalize.
  ncclResult_t r;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!handle_) return;
    r = api_.CommFinalize(handle_);
  }
  if (r == ncclSuccess || r == ncclInProgress) {
    Deadline deadline(timeout_);
    Backoff backoff;
    for (;;) {
      r = async_error();
      if (r != ncclInProgress || deadline.expired()) break;
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

ncclResult_t NcclComm::async_error() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!handle_) return ncclInvalidUsage;
  ncclResult_t state = ncclSuccess;
  ncclResult_t r = api_.CommGetAsyncError(handle_, &state);
  return r != ncclSuccess ? r : state;
}

void NcclComm::check(Comm& comm, const DeviceSubject& what) {
  ncclResult_t r = async_error();
  if (r == ncclSuccess || r == ncclInProgress) return;
  if (comm.aborted()) fail_aborted(comm, what);
  fail_with(comm, what, r);
}

ncclResult_t NcclComm::settle(Comm& comm, const DeviceSubject& what) {
  Deadline deadline(timeout_);
  Backoff backoff;
  for (;;) {
    ncclResult_t r = async_error();
    if (r != ncclInProgress) return r;
    if (comm.aborted()) fail_aborted(comm, what);
    if (deadline.expired()) fail_timeout(comm, what, timeout_);
    backoff.pause();
  }
}

std::string NcclComm::last_error_locked() {
  const char* text = handle_ ? api_.GetLastError(handle_) : nullptr;
  return text && *text ? text : "";
}

void NcclComm::fail_with(Comm& comm, const DeviceSubject& what, ncclResult_t r) {
  std::string last;
  bool gone = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    gone = handle_ == nullptr;
    if (!gone) last = last_error_locked();
  }
  if (gone) fail_aborted(comm, what);  // aborted under us: weft_comm_abort or an earlier failure
  abort();
  Error e(status_of(r), format("%s: NCCL failed: %s%s%s; the NCCL communicator was aborted",
                               subject_text(comm, what).c_str(), nccl_error_text(api_, r).c_str(),
                               last.empty() ? "" : " - ", last.c_str()));
  comm.mark_broken(e);
  throw e;
}

void NcclComm::fail_aborted(Comm& comm, const DeviceSubject& what) {
  Error e(Status::aborted, subject_text(comm, what) + ": aborted by weft_comm_abort");
  comm.mark_broken(e);
  throw e;
}

void NcclComm::fail_timeout(Comm& comm, const DeviceSubject& what, std::chrono::milliseconds waited) {
  abort();
  Error e(Status::timeout,
          format("%s: not complete after %lld ms (NCCL has no timeout; weft's watchdog aborted the NCCL "
                 "communicator: a rank may have died, hung, or not called this operation)",
                 subject_text(comm, what).c_str(), static_cast<long long>(waited.count())));
  comm.mark_broken(e);
  throw e;
}

void NcclComm::abort() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!handle_) return;
  api_.CommAbort(handle_);
  handle_ = nullptr;
}

bool NcclComm::alive() {
  std::lock_guard<std::mutex> lock(mutex_);
  return handle_ != nullptr;
}

}  // namespace weft::gpu
