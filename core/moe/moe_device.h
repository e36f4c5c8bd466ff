// Expert-parallel dispatch and combine on device memory (weft_moe_config_t.device = 1): the
// plan is made on the host as for host memory (the routing is copied to the host first: the
// counts decide every buffer size, as in DeepEP's normal mode), its index arrays are uploaded
// once per handle, and every row movement is a kernels/cuda/moe_rows.h kernel queued on the
// call's stream around the device layer's all-to-all-v (NCCL, or staged). Results equal the
// host path's bit for bit (the CUDA kernels are the CPU twins' equals). fp8_dispatch stays a
// host-memory option. In a build without CUDA every entry point fails with unsupported.
//
// Call these outside the communicator's executor (they go through gpu::launch, which takes it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/moe/moe.h"

namespace weft::moe {

// The communicator's GPU (-1: none).
int device_of(Comm& comm);

// Host copies of device routing arrays ([n] each), after the work queued on `stream` (NULL: the
// legacy default stream) is done.
void routing_to_host(const int32_t* indices, const float* weights, size_t n, void* stream, std::vector<int32_t>& host_indices,
                     std::vector<float>& host_weights);

// After moe.plan(): uploads the plan, moves x's rows [T, H] to the expert ranks and fills
// h.dev.received [rows, H].
void device_dispatch_rows(Moe& moe, Handle& h, const void* x, void* stream);
// After moe.agree(): as Moe::combine, device buffers.
void device_combine(Moe& moe, Handle& h, const void* expert_out, bool weighted, void* out, void* stream);
// After moe.agree(): as Moe::combine_backward, device buffers (grad_weights device memory).
void device_combine_backward(Moe& moe, Handle& h, const void* grad_out, void* grad_expert_out, float* grad_weights,
                             void* stream);

}  // namespace weft::moe
