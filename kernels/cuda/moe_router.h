// The MoE router on device memory: the CUDA twins of kernels/cpu/moe_router.h (same arguments,
// same results bit for bit: the per-token arithmetic and the loss sums' order are
// kernels/cpu/moe_router_ops.h, compiled for both). Work is queued on `stream` (a cudaStream_t;
// NULL is the legacy default stream). Buffers (logits, bias, indices, weights, the counts,
// grad_weights, grad_logits) must be device memory on the current device.
//
// Kernels: one thread per token for its scores, selection and weights (its scratch in a
// stream-ordered device workspace); the loss sums one thread per (block of 256 tokens, expert)
// then one per expert, in moe_router_ops.h's fixed order (no atomics); capacity dropping one
// thread per expert in token order (BY_POSITION) or one per assignment counting the same
// expert's assignments that outrank it (BY_PROBABILITY: O((T k)^2 / E) work, fine for the
// router's sizes, exact and order-free); the counts one thread per expert.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/moe_router.h"

namespace weft::kernels::cuda {

// kernels::router_forward on device buffers. out.aux_loss and out.z_loss are host values: the
// call waits for the stream to compute them (weft/moe.h says so). Throws weft::Error
// (invalid_argument) for a bad configuration, (out_of_memory) when the workspace cannot be had,
// (transport) when a launch or copy fails.
void router_forward(const void* logits, DType dtype, size_t tokens, const RouterConfig& c, RouterOutputs& out,
                    void* stream);

// kernels::router_backward on device buffers, stream-ordered (returns without waiting). Unlike
// the CPU twin it does not compare the kept indices with the recomputed selection (that would
// cost a wait); it reads them only to know which slots were dropped.
void router_backward(const void* logits, DType dtype, size_t tokens, const RouterConfig& c, const int32_t* indices,
                     const float* grad_weights, float grad_aux, float grad_z, float* grad_logits, void* stream);

}  // namespace weft::kernels::cuda
