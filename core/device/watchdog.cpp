#include "core/device/watchdog.h"

#include "core/comm/deadline.h"
#include "core/common/backoff.h"
#include "transports/cuda/cuda_util.h"
#if WEFT_HAVE_NCCL
#include "core/device/nccl_comm.h"
#endif

namespace weft::gpu {
namespace {

[[noreturn]] void fail_broken(Comm& comm, Status status, const std::string& message) {
  Error e(status, message);
  comm.mark_broken(e);
  throw e;
}

}  // namespace

bool event_done(Comm& comm, DeviceContext& ctx, cudaEvent_t event, const DeviceSubject& what) {
  cudaError_t err = cudaEventQuery(event);
  if (err == cudaSuccess) {
#if WEFT_HAVE_NCCL
    // An aborted NCCL communicator stops its kernels, so the stream gets here either way; the
    // work may not have completed, and must not be reported as done.
    if (NcclComm* n = ctx.nccl(); n && !n->alive()) {
      comm.throw_if_unusable();
      fail_broken(comm, Status::aborted,
                  format("%s: the NCCL communicator was aborted before this completed", subject_text(comm, what).c_str()));
    }
#endif
    return true;
  }
  if (err != cudaErrorNotReady) {
    cudaGetLastError();
    fail_broken(comm, Status::transport,
                format("%s: the device work failed: %s", subject_text(comm, what).c_str(), cuda_error_text(err).c_str()));
  }
#if WEFT_HAVE_NCCL
  if (NcclComm* n = ctx.nccl()) n->check(comm, what);
#else
  (void)ctx;
#endif
  if (comm.aborted()) {
    fail_broken(comm, Status::aborted, format("%s: aborted by weft_comm_abort", subject_text(comm, what).c_str()));
  }
  return false;
}

void wait_event(Comm& comm, DeviceContext& ctx, cudaEvent_t event, const DeviceSubject& what) {
  Deadline deadline(comm.config().timeout);
  Backoff backoff;
  while (!event_done(comm, ctx, event, what)) {
    if (deadline.expired()) {
#if WEFT_HAVE_NCCL
      if (NcclComm* n = ctx.nccl()) n->fail_timeout(comm, what, deadline.budget());
#endif
      fail_broken(comm, Status::timeout,
                  format("%s: device work not complete after %lld ms", subject_text(comm, what).c_str(),
                         static_cast<long long>(deadline.budget().count())));
    }
    backoff.pause();
  }
}

void wait_stream(Comm& comm, DeviceContext& ctx, cudaStream_t stream, const DeviceSubject& what) {
  cudaEvent_t e = ctx.events().take();
  struct Give {
    DeviceContext& ctx;
    cudaEvent_t e;
    ~Give() { ctx.events().give(e); }
  } give{ctx, e};
  cuda_check(cudaEventRecord(e, stream), "cudaEventRecord");
  wait_event(comm, ctx, e, what);
}

}  // namespace weft::gpu
