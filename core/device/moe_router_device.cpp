// The MoE router on device memory (moe_router_device.h): argument memory checks, the GPU made
// current, and kernels/cuda/moe_router.h.
#include "core/device/moe_router_device.h"

#include <string>

#include "core/common/status.h"
#include "kernels/cuda/moe_router.h"
#include "transports/cuda/cuda_util.h"

namespace weft::gpu {
namespace {

// Error(invalid_argument) naming `name` unless [p, p + bytes) starts and ends in device memory
// of GPU `device` (nothing to check for an empty or absent array).
void check_on_device(const void* p, size_t bytes, int device, const char* name) {
  if (!p || bytes == 0) return;
  const char* ends[2] = {static_cast<const char*>(p), static_cast<const char*>(p) + bytes - 1};
  for (const char* e : ends) {
    const MemInfo m = classify(e);
    if (m.kind != MemKind::device || m.device != device) {
      fail(Status::invalid_argument, "%s (%p) must be CUDA device memory of GPU %d, as the logits are, but it is %s",
           name, static_cast<const void*>(e), device,
           m.kind == MemKind::host      ? "host memory"
           : m.kind == MemKind::managed ? "CUDA managed memory"
                                        : ("device memory of GPU " + std::to_string(m.device)).c_str());
    }
  }
}

void check_device_number(int device) {
  std::string why;
  const int n = device_count(&why);
  if (n == 0) {
    fail(Status::unsupported, "logits have device_type WEFT_DEVICE_CUDA, but no CUDA device is usable here (%s)",
         why.c_str());
  }
  if (device < 0 || device >= n) {
    fail(Status::invalid_argument, "logits.device_id = %d; this process sees %d CUDA device(s)", device, n);
  }
}

}  // namespace

void router_forward(const void* logits, DType dtype, size_t tokens, int device, const kernels::RouterConfig& c,
                    kernels::RouterOutputs& out, void* stream) {
  check_device_number(device);
  const size_t E = static_cast<size_t>(c.experts), n = tokens * static_cast<size_t>(c.topk);
  check_on_device(logits, tokens * E * dtype_size(dtype), device, "logits.data");
  check_on_device(c.bias, c.bias ? E * sizeof(float) : 0, device, "config->bias");
  check_on_device(out.indices, n * sizeof(int32_t), device, "result->indices");
  check_on_device(out.weights, n * sizeof(float), device, "result->weights");
  check_on_device(out.tokens_per_expert, E * sizeof(int64_t), device, "result->tokens_per_expert");
  check_on_device(out.selected_per_expert, E * sizeof(int64_t), device, "result->selected_per_expert");
  DeviceGuard guard(device);
  kernels::cuda::router_forward(logits, dtype, tokens, c, out, stream);
}

void router_backward(const void* logits, DType dtype, size_t tokens, int device, const kernels::RouterConfig& c,
                     const int32_t* indices, const float* grad_weights, float grad_aux, float grad_z,
                     float* grad_logits, void* stream) {
  check_device_number(device);
  const size_t E = static_cast<size_t>(c.experts), n = tokens * static_cast<size_t>(c.topk);
  check_on_device(logits, tokens * E * dtype_size(dtype), device, "logits.data");
  check_on_device(c.bias, c.bias ? E * sizeof(float) : 0, device, "config->bias");
  check_on_device(indices, n * sizeof(int32_t), device, "indices");
  check_on_device(grad_weights, grad_weights ? n * sizeof(float) : 0, device, "grad_weights");
  check_on_device(grad_logits, tokens * E * sizeof(float), device, "grad_logits.data");
  DeviceGuard guard(device);
  kernels::cuda::router_backward(logits, dtype, tokens, c, indices, grad_weights, grad_aux, grad_z, grad_logits,
                                 stream);
}

}  // namespace weft::gpu
