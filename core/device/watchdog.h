// Waiting for device work with a deadline. NCCL has no timeouts; weft adds one: while a call or
// weft_wait waits for a CUDA event, it also polls NCCL's asynchronous error and the abort flag,
// and when the communicator's deadline passes it aborts the NCCL communicator (which stops its
// kernels, so the streams drain), marks the communicator broken and reports the operation and
// its sequence number with WEFT_ERR_TIMEOUT.
#pragma once

#include <cuda_runtime_api.h>

#include "core/comm/comm.h"
#include "core/device/device_context.h"
#include "core/device/subject.h"

namespace weft::gpu {

// True when `event` has completed; throws on an NCCL or CUDA error, or an abort.
bool event_done(Comm& comm, DeviceContext& ctx, cudaEvent_t event, const DeviceSubject& what);
// Until `event` completes, within the communicator's deadline (see above).
void wait_event(Comm& comm, DeviceContext& ctx, cudaEvent_t event, const DeviceSubject& what);
// Records an event on `stream` and waits for it.
void wait_stream(Comm& comm, DeviceContext& ctx, cudaStream_t stream, const DeviceSubject& what);

}  // namespace weft::gpu
