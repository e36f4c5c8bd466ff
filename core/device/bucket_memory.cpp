// device_api.h's gradient-bucket memory: persistent device buffers for the bucketer's buckets
// (allocated once, reused every step) and device-to-device copies queued on a launch's stream.
#include "core/common/status.h"
#include "core/device/device_api.h"
#include "core/device/device_context.h"
#include "core/device/launch.h"
#include "transports/cuda/cuda_util.h"

namespace weft::gpu {

std::shared_ptr<void> device_buffer(Comm& comm, size_t bytes) {
  DeviceContext& ctx = require_context(comm, "a gradient bucket in device memory");
  if (!bytes) return nullptr;
  DeviceGuard guard(ctx.device());
  // Zeroed: the padding behind the last gradient must add nothing to a reduction.
  void* p = cuda_malloc_zeroed(bytes, "allocating a zeroed gradient bucket");
  const int device = ctx.device();
  return std::shared_ptr<void>(p, [device](void* q) {
    DeviceGuard g(device);
    cudaFree(q);
  });
}

int device_id(const Comm& comm) {
  const DeviceContext* ctx = context_of(comm);
  return ctx ? ctx->device() : -1;
}

void copy_device(Launch& l, void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, l.stream()), "copying a gradient bucket");
}

void settle_copies(Launch& l) {
  if (l.nccl()) return;
  cuda_check(cudaStreamSynchronize(l.stream()), "waiting for a staged gradient bucket's copies");
}

}  // namespace weft::gpu
