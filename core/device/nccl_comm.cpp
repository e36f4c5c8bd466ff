#include "core/device/nccl_comm.h"

#include <cstring>

#include "core/collectives/collectives.h"
#include "core/comm/deadline.h"
#include "core/common/backoff.h"

namespace weft::gpu {

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

  NcclStart start = NcclCommunicator::init_rank(*api, msg.id, comm.rank(), comm.size(), comm.config().timeout,
                                                [&comm] { return comm.aborted(); });
  int64_t ok = start.ok ? 1 : 0;
  if (!ok) local_why = start.why;
  try {
    coll::allreduce(comm, &ok, &ok, 1, DType::i64, ReduceOp::min);
  } catch (...) {
    if (start.comm) start.comm->abort();  // the host path failed (abort, timeout): nothing will use it
    throw;
  }
  if (!ok) {
    if (start.comm) start.comm->abort();
    *why = local_why.empty() ? "NCCL initialisation failed on another rank" : local_why;
    return nullptr;
  }
  return std::unique_ptr<NcclComm>(new NcclComm(std::move(start.comm)));
}

std::unique_ptr<NcclComm> NcclComm::split(Comm& parent_comm, NcclComm& parent, bool usable, int color, int key,
                                          std::string* why) {
  // Every rank calls ncclCommSplit or none does: it is collective over the parent, and a rank
  // that stayed out would leave the others' split, and NCCL's parent communicator, stuck.
  int64_t all_usable = usable ? 1 : 0;
  coll::allreduce(parent_comm, &all_usable, &all_usable, 1, DType::i64, ReduceOp::min);
  if (!all_usable) {
    if (usable) *why = "another rank cannot take part in ncclCommSplit";
    return nullptr;
  }
  NcclStart start;
  try {
    start = parent.engine_->split(color, key, parent_comm.config().timeout,
                                  [&parent_comm] { return parent_comm.aborted(); });
  } catch (const Error& stopped) {
    // The engine aborted the parent's NCCL communicator: the weft communicator is broken too.
    Error e(stopped.status(), parent_comm.describe() + ": " + stopped.message());
    parent_comm.mark_broken(e);
    throw e;
  }
  int64_t ok = start.ok ? 1 : 0;
  try {
    coll::allreduce(parent_comm, &ok, &ok, 1, DType::i64, ReduceOp::min);
  } catch (...) {
    if (start.comm) start.comm->abort();
    throw;
  }
  if (!ok) {
    if (start.comm) start.comm->abort();
    *why = start.why.empty() ? "ncclCommSplit failed on another rank" : start.why;
    return nullptr;
  }
  if (!start.comm) return nullptr;  // color < 0: no communicator, as asked
  return std::unique_ptr<NcclComm>(new NcclComm(std::move(start.comm)));
}

void NcclComm::check(Comm& comm, const DeviceSubject& what) {
  ncclResult_t r = async_error();
  if (r == ncclSuccess || r == ncclInProgress) return;
  if (comm.aborted()) fail_aborted(comm, what);
  fail_with(comm, what, r);
}

ncclResult_t NcclComm::settle(Comm& comm, const DeviceSubject& what) {
  const std::chrono::milliseconds timeout = engine_->timeout();
  Deadline deadline(timeout);
  Backoff backoff;
  for (;;) {
    ncclResult_t r = async_error();
    if (r != ncclInProgress) return r;
    if (comm.aborted()) fail_aborted(comm, what);
    if (deadline.expired()) fail_timeout(comm, what, timeout);
    backoff.pause();
  }
}

void NcclComm::fail_with(Comm& comm, const DeviceSubject& what, ncclResult_t r) {
  std::optional<std::string> last = engine_->last_error();
  if (!last) fail_aborted(comm, what);  // aborted under us: weft_comm_abort or an earlier failure
  abort();
  Error e(nccl_status(r), format("%s: NCCL failed: %s%s%s; the NCCL communicator was aborted",
                                 subject_text(comm, what).c_str(), nccl_error_text(api(), r).c_str(),
                                 last->empty() ? "" : " - ", last->c_str()));
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

}  // namespace weft::gpu
