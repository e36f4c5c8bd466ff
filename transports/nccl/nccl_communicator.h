// One NCCL communicator, the engine alone: made from a unique id or split from another,
// non-blocking (every NCCL call returns at once and is polled against a timeout), and abortable
// from any thread. It takes plain inputs and knows nothing of weft's communicators: who agrees
// on the unique id, and what a failure means for the communicator above, is
// core/device/nccl_comm.h's business.
//
// Thread safety: every NCCL call on the handle holds mutex_, and none of them blocks (the
// communicator is non-blocking), so abort() from another thread (weft_comm_abort) can always
// take the lock quickly and call ncclCommAbort while a thread waits for the communicator's
// work: NCCL's kernels then stop, the waiting thread sees the abort, and nothing uses the freed
// handle afterwards.
#pragma once

#include <nccl.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "transports/nccl/nccl_lib.h"

namespace weft::gpu {

// Asked while waiting for NCCL: true when the wait should give up at once (the owner was
// aborted). Called from the waiting thread only.
using ShouldStop = std::function<bool()>;

class NcclCommunicator;

// What making a communicator left on this rank. `comm` is set whenever NCCL made a handle, also
// when it then failed: the caller first agrees with the other ranks, then aborts it, so that no
// rank tears down a communicator the others are still setting up.
struct NcclStart {
  std::unique_ptr<NcclCommunicator> comm;
  bool ok = false;
  std::string why;  // when !ok: "ncclCommInitRankConfig: ..." or "ncclCommSplit: ..."
};

class NcclCommunicator {
 public:
  // ncclCommInitRankConfig on the current device (collective over the `nranks` ranks that hold
  // `id`), then waits until the communicator is ready, at most `timeout` and while !stop().
  // `timeout` is also the deadline the result keeps for settling calls and finalizing.
  static NcclStart init_rank(const NcclApi& api, const ncclUniqueId& id, int rank, int nranks,
                             std::chrono::milliseconds timeout, const ShouldStop& stop);
  // ncclCommSplit of this communicator (collective over all its ranks; color < 0 gives no
  // communicator, as asked), then waits until the child is ready, as init_rank does. When the
  // split itself does not finish (stop() or `timeout`), this communicator and the child are
  // aborted and an Error is thrown: Status::aborted or Status::timeout, its text
  // "ncclCommSplit <why>; the NCCL communicator was aborted" for the caller to prefix.
  NcclStart split(int color, int key, std::chrono::milliseconds timeout, const ShouldStop& stop);
  // Finalizes what this rank issued, within the timeout; aborts instead when that does not
  // finish, so destroying never hangs.
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  const NcclApi& api() const { return api_; }

  // Runs f(api, handle) under the lock and returns its result; nullopt (f not run) once aborted.
  template <class F>
  std::optional<ncclResult_t> call(F&& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!handle_) return std::nullopt;
    return f(api_, handle_);
  }

  // NCCL's asynchronous error: ncclSuccess (or ncclInProgress) while healthy. After an abort:
  // ncclInvalidUsage.
  ncclResult_t async_error();
  // ncclGetLastError's text for this communicator ("" when it has none); nullopt once aborted.
  std::optional<std::string> last_error();
  std::chrono::milliseconds timeout();
  void set_timeout(std::chrono::milliseconds timeout);
  // Any thread: ncclCommAbort (once); later call()s return nullopt.
  void abort() noexcept;
  // False once aborted: the results of work still in flight then are undefined.
  bool alive();

 private:
  NcclCommunicator(const NcclApi& api, ncclComm_t handle, std::chrono::milliseconds timeout)
      : api_(api), handle_(handle), timeout_(timeout) {}

  const NcclApi& api_;
  std::mutex mutex_;
  ncclComm_t handle_;
  // Where each split's child handle was written: NCCL's thread may write one (NULL for a rank
  // without a color) after split() returned, so they live as long as this communicator, whose
  // destroy or abort ends NCCL's jobs first (the emulator's NCCL showed the late write).
  std::vector<std::unique_ptr<ncclComm_t>> split_slots_;
  std::chrono::milliseconds timeout_;
};

// weft's status for a failed NCCL call.
Status nccl_status(ncclResult_t r);

}  // namespace weft::gpu
