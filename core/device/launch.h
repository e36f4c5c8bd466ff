// Private to core/device: one device operation being issued. It knows the communicator,
// its device state, the stream the work is ordered on (the caller's, or the communicator's own
// for a NULL stream) and, on the NCCL path, the operation's Channel: its sequence number and
// the WEFT_DEBUG=check exchange. The staging path has no Channel: the host collectives it runs
// draw their own.
#pragma once

#include <cuda_runtime_api.h>

#include <optional>

#include "core/collectives/arg_check.h"
#include "core/comm/channel.h"
#include "core/device/device_api.h"
#include "core/device/device_context.h"
#include "core/device/subject.h"

namespace weft::gpu {

class Launch {
 public:
  // The device must be current (launch() holds a DeviceGuard). A collective on the NCCL path
  // takes a Channel (the next sequence number); point-to-point does not (device_api.h).
  Launch(Comm& comm, DeviceContext& ctx, void* user_stream, const char* operation, DeviceOp kind);
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  Comm& comm() const { return comm_; }
  DeviceContext& ctx() const { return ctx_; }
  cudaStream_t stream() const { return stream_; }
  void* stream_ptr() const { return static_cast<void*>(stream_); }
  // True when the caller passed no stream (the communicator's own is used).
  bool internal_stream() const { return internal_; }
  const char* operation() const { return operation_; }
  NcclComm* nccl() const { return ctx_.nccl(); }
  DeviceSubject subject() const;
  // WEFT_DEBUG=check on the NCCL path: compares the call across ranks over the host path. The
  // operation name carries "(device)", so a rank calling with host memory while another uses
  // device memory is reported as a mismatch rather than a hang.
  void check(coll::CallSignature sig);

 private:
  Comm& comm_;
  DeviceContext& ctx_;
  cudaStream_t stream_;
  bool internal_;
  const char* operation_;
  std::optional<Channel> channel_;
};

}  // namespace weft::gpu
