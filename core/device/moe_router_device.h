// The MoE router on device memory (weft/moe.h: weft_router_forward / _backward with logits of
// device_type WEFT_DEVICE_CUDA), for capi/src/router_api.cpp: checks that every array is device
// memory of the logits' GPU, makes that GPU current for the call and runs kernels/cuda's router.
// Built without CUDA (host_only.cpp): Error(unsupported).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/common/dtype.h"
#include "kernels/cpu/moe_router.h"

namespace weft::gpu {

// forward: out's arrays (indices, weights, the optional counts) and config's bias are device
// memory of GPU `device`; out.aux_loss / z_loss come back on the host after the stream's work.
void router_forward(const void* logits, DType dtype, size_t tokens, int device, const kernels::RouterConfig& c,
                    kernels::RouterOutputs& out, void* stream);
// backward: indices, grad_weights (or NULL) and grad_logits are device memory of GPU `device`.
void router_backward(const void* logits, DType dtype, size_t tokens, int device, const kernels::RouterConfig& c,
                     const int32_t* indices, const float* grad_weights, float grad_aux, float grad_z,
                     float* grad_logits, void* stream);

}  // namespace weft::gpu
