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

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/cuda_emulator/emulator.h"
#include "tests/cuda_emulator/fake_nccl_group.h"
#include "tests/cuda_emulator/fake_nccl_ops.h"
#include "tests/cuda_emulator/fake_nccl_state.h"
#include "tests/cuda_emulator/fake_nccl_support.h"

// The pieces, each in its own file under weft::fake_nccl (hidden, as the project's default):
// fake_nccl_support (last error, waiting, files), fake_nccl_reduce (types and reductions),
// fake_nccl_state (communicators, rendezvous), fake_nccl_ops (running an operation) and
// fake_nccl_group (checks, groups, launches).
using namespace weft::fake_nccl;

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
    // The handle is written on the abort path too. After a split that worked it is written
    // shortly after the parent's state left ncclInProgress: NCCL 2.28.3 on an H100 reported the
    // split over before the handle was there, so a caller must wait for both.
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
    if (!late_out || !handle) {  // a rank without a color: NCCL set its NULL in the call
      publish_handle();
      parent->busy.fetch_sub(1);
      return;
    }
    parent->busy.fetch_sub(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    publish_handle();
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
