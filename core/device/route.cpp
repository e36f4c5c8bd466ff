// route(): where a call runs, from its buffers and stream (the rule is in weft.h).
#include "core/common/status.h"
#include "core/device/device_api.h"
#include "core/device/device_context.h"
#include "core/device/driver_probe.h"
#include "transports/cuda/cuda_util.h"

namespace weft::gpu {
namespace {

// A user stream must belong to the communicator's GPU. The legacy default stream's handle names
// "the current device's", which is the communicator's while weft works on it. The per-thread
// default stream's handle names the calling thread's stream, but weft may issue the work from
// its executor's thread (a request, or a call queued behind asynchronous ones), where the same
// handle is another stream: refused, rather than silently unordered.
void check_stream(const DeviceContext& ctx, void* stream) {
  if (!stream) return;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (s == cudaStreamPerThread) {
    fail(Status::invalid_argument,
         "stream is cudaStreamPerThread, which names a different stream on weft's own thread; pass the stream "
         "itself (a created stream) or NULL");
  }
  if (s == cudaStreamLegacy) return;
  int dev = -1;
  cudaError_t err = cudaStreamGetDevice(s, &dev);
  if (err != cudaSuccess) {
    cudaGetLastError();
    fail(Status::invalid_argument, "stream (%p) is not a usable CUDA stream: %s", stream, cuda_error_text(err).c_str());
  }
  if (dev != ctx.device()) {
    fail(Status::invalid_argument,
         "stream belongs to CUDA device %d but this communicator uses device %d (WEFT_DEVICE, else local rank %% "
         "device count)",
         dev, ctx.device());
  }
}

}  // namespace

Route route(Comm& comm, void* stream, std::span<const BufferRef> buffers) {
  const DeviceContext* ctx = context_of(comm);
  if (!ctx || !ctx->has_devices()) {
    // weft's CUDA runtime sees no GPU. The application may still hold device memory (its own
    // runtime may work where weft's does not, e.g. on a driver too old for weft's CUDA): ask the
    // driver, so such a pointer is refused rather than dereferenced by the host path.
    for (const BufferRef& b : buffers) {
      if (b.ptr && b.bytes && driver_says_device_memory(b.ptr)) {
        fail(Status::unsupported, "%s (%p) is CUDA device memory, but weft's CUDA runtime cannot use any GPU (%s)",
             b.name, b.ptr, ctx ? ctx->why_no_device().c_str() : "no device state");
      }
    }
    if (stream) {
      fail(Status::unsupported,
           "stream is not NULL, but this process has no CUDA device (%s); host memory takes no stream: pass NULL",
           ctx ? ctx->why_no_device().c_str() : "no device state");
    }
    return Route::host;
  }
  const BufferRef* host = nullptr;
  const BufferRef* dev = nullptr;
  int dev_device = -1;
  for (const BufferRef& b : buffers) {
    if (!b.ptr || !b.bytes) continue;
    MemInfo m = classify(b.ptr);
    if (m.kind == MemKind::managed) {
      fail(Status::unsupported,
           "%s (%p) is CUDA managed memory, which weft does not move; pass device memory (cudaMalloc) or host "
           "memory",
           b.name, b.ptr);
    }
    if (m.kind == MemKind::host) {
      if (!host) host = &b;
      continue;
    }
    if (!dev) {
      dev = &b;
      dev_device = m.device;
    } else if (m.device != dev_device) {
      fail(Status::invalid_argument, "%s is on CUDA device %d but %s is on device %d; a call's buffers must be on "
           "the communicator's device", dev->name, dev_device, b.name, m.device);
    }
  }
  if (host && dev) {
    fail(Status::unsupported,
         "%s is host memory but %s is CUDA device memory; all buffers of one call must be host memory or all "
         "device memory of the communicator's GPU",
         host->name, dev->name);
  }
  if (dev) {
    if (ctx->device() < 0) {
      fail(Status::unsupported, "%s is CUDA device memory, but %s has no GPU (%s)", dev->name,
           comm.describe().c_str(), ctx->why_no_device().c_str());
    }
    if (dev_device != ctx->device()) {
      fail(Status::invalid_argument,
           "%s is on CUDA device %d but %s uses device %d (WEFT_DEVICE, else local rank %% device count); pass "
           "memory of that device",
           dev->name, dev_device, comm.describe().c_str(), ctx->device());
    }
    check_stream(*ctx, stream);
    return Route::device;
  }
  if (!stream) return Route::host;
  if (host) {
    fail(Status::unsupported,
         "stream is not NULL but %s is host memory; host-memory operations run on the host and take no stream "
         "(pass NULL)",
         host->name);
  }
  // No buffer at all (a barrier, or an empty operation) with a stream: stream-ordered.
  if (ctx->device() < 0) {
    fail(Status::unsupported, "stream is not NULL, but %s has no GPU (%s)", comm.describe().c_str(),
         ctx->why_no_device().c_str());
  }
  check_stream(*ctx, stream);
  return Route::device;
}

}  // namespace weft::gpu
