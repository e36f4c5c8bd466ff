// One weft communicator's NCCL communicator: the engine (transports/nccl/nccl_communicator.h)
// made through weft's own bootstrap (the unique id and every verdict travel over the weft
// communicator's host path), with each failure marking the weft communicator broken and naming
// the operation ("allreduce (nccl) #12 on comm 'w' rank 0/2: ...").
//
// Thread safety: the engine holds its lock for every NCCL call, and none of them blocks (the
// communicator is non-blocking), so weft_comm_abort can always take the lock quickly and call
// ncclCommAbort while another thread waits for the communicator's work: NCCL's kernels then
// stop, the waiting thread sees the abort flag, and nothing uses the freed handle afterwards.
#pragma once

#include <nccl.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/comm/comm.h"
#include "core/device/subject.h"
#include "transports/nccl/nccl_communicator.h"
#include "transports/nccl/nccl_lib.h"

namespace weft::gpu {

class NcclComm {
 public:
  // Collective over `comm` (host collectives carry the unique id and the verdict): returns a
  // communicator on every rank, or nullptr on every rank with the reason in *why. `usable`
  // is this rank's own verdict (its GPU is current; *why says why not when false); the NCCL
  // library is checked here.
  static std::unique_ptr<NcclComm> create(Comm& comm, bool usable, std::string* why);
  // Collective over `parent_comm` (every rank of it, including those with color < 0, which get
  // nullptr): ncclCommSplit of `parent` (parent_comm's NCCL communicator), then agreement over
  // the parent's host path. nullptr on every rank, with *why, when any rank failed. A rank that
  // cannot take part (`usable` false, *why saying why) still joins the agreement.
  static std::unique_ptr<NcclComm> split(Comm& parent_comm, NcclComm& parent, bool usable, int color, int key,
                                         std::string* why);
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  const NcclApi& api() const { return engine_->api(); }

  // Runs f(api, handle) under the engine's lock and, if NCCL answers ncclInProgress, polls until
  // the work is issued (within the deadline). Any failure aborts the NCCL communicator, marks
  // `comm` broken and throws an Error naming `what`.
  template <class F>
  void issue(Comm& comm, const DeviceSubject& what, F&& f) {
    std::optional<ncclResult_t> r = engine_->call(std::forward<F>(f));
    if (!r) fail_aborted(comm, what);
    if (*r == ncclInProgress) *r = settle(comm, what);
    if (*r != ncclSuccess) fail_with(comm, what, *r);
  }

  // NCCL's asynchronous error: ncclSuccess (or ncclInProgress) while healthy. After an abort:
  // ncclInvalidUsage.
  ncclResult_t async_error() { return engine_->async_error(); }
  // Throws (after aborting) when NCCL has reported an asynchronous error.
  void check(Comm& comm, const DeviceSubject& what);
  // Aborts and marks `comm` broken with a timeout naming `what`.
  [[noreturn]] void fail_timeout(Comm& comm, const DeviceSubject& what, std::chrono::milliseconds waited);
  // The deadline for settling calls and finalizing (a split child starts with its parent's).
  void set_timeout(std::chrono::milliseconds timeout) { engine_->set_timeout(timeout); }
  // Any thread: ncclCommAbort (once); later issue() calls fail with Status::aborted.
  void abort() noexcept { engine_->abort(); }
  // False once aborted (by weft_comm_abort, a failure or the watchdog): the results of work
  // still in flight then are undefined.
  bool alive() { return engine_->alive(); }

 private:
  explicit NcclComm(std::unique_ptr<NcclCommunicator> engine) : engine_(std::move(engine)) {}
  ncclResult_t settle(Comm& comm, const DeviceSubject& what);
  [[noreturn]] void fail_with(Comm& comm, const DeviceSubject& what, ncclResult_t r);
  [[noreturn]] void fail_aborted(Comm& comm, const DeviceSubject& what);

  std::unique_ptr<NcclCommunicator> engine_;
};

}  // namespace weft::gpu
