// weft_moe_*: the C shims of expert-parallel layout, dispatch and combine (weft/moe.h).
//
// Argument checks that concern one rank's input are caught here and handed to core/moe as a
// refusal, so the rank still takes part in the call's first small exchange and the other ranks
// fail naming it instead of waiting for data that never comes.
#include <cstring>
#include <optional>

#include "capi/src/handles.h"
#include "capi/src/moe_handles.h"
#include "capi/src/shim.h"
#include "capi/src/validate.h"
#include "core/device/device_api.h"
#include "core/moe/layout.h"
#include "core/moe/moe_device.h"

using namespace weft;
using namespace weft::capi;

namespace {

// Runs work where the communicator's operations run (its executor, on this thread).
template <class Work>
void run_on(Comm& comm, Work&& work) {
  comm.throw_if_unusable();
  comm.executor().run_blocking([&] {
    comm.throw_if_unusable();
    work();
  });
}

// The error `body` throws, with this rank named in front, or nothing.
template <class Body>
std::optional<Error> refusal(int rank, Body&& body) {
  try {
    body();
  } catch (const Error& e) {
    return Error(e.status(), format("rank %d: %s", rank, e.message().c_str()));
  }
  return std::nullopt;
}

moe::MoeConfig read_config(const weft_moe_config_t* given, int nranks) {
  if (!given) fail(Status::invalid_argument, "config is NULL; initialise one with WEFT_MOE_CONFIG_INIT");
  weft_moe_config_t c = WEFT_MOE_CONFIG_INIT;
  if (given->struct_size < sizeof(size_t) || given->struct_size > sizeof c) {
    fail(Status::invalid_argument, "config->struct_size = %zu; initialise it with WEFT_MOE_CONFIG_INIT",
         given->struct_size);
  }
  std::memcpy(&c, given, given->struct_size);
  moe::MoeConfig m;
  if (c.experts < 1) fail(Status::invalid_argument, "config->experts = %d; expected at least 1", c.experts);
  if (c.hidden < 1) fail(Status::invalid_argument, "config->hidden = %zu; expected at least 1", c.hidden);
  m.experts = c.experts;
  m.hidden = c.hidden;
  m.dtype = check_dtype(c.dtype, "config->dtype");
  if (m.dtype != DType::f32 && m.dtype != DType::bf16 && m.dtype != DType::f16) {
    fail(Status::invalid_argument, "config->dtype = %s; expected FLOAT32, BFLOAT16 or FLOAT16", dtype_name(m.dtype));
  }
  m.given_placement = c.expert_rank != nullptr;
  m.placement = moe::read_placement(c.expert_rank, c.experts, nranks, "config->expert_rank");
  m.alignment = c.expert_alignment;
  if (c.fp8_dispatch != 0 && c.fp8_dispatch != 1) {
    fail(Status::invalid_argument, "config->fp8_dispatch = %d; expected 0 or 1", c.fp8_dispatch);
  }
  m.fp8 = c.fp8_dispatch == 1;
  if (c.device != 0 && c.device != 1) fail(Status::invalid_argument, "config->device = %d; expected 0 or 1", c.device);
#ifndef WEFT_HAVE_CUDA
  if (c.device == 1) {
    fail(Status::unsupported,
         "config->device = 1 (CUDA memory), but this weft was built without CUDA (WEFT_WITH_CUDA=OFF): use host "
         "memory (device = 0)");
  }
#endif
  if (c.device == 1 && m.fp8) {
    fail(Status::unsupported, "config->fp8_dispatch = 1 with device = 1: fp8 dispatch is a host-memory option here");
  }
  m.device = c.device == 1;
  return m;
}

void check_host_stream(const moe::MoeConfig& cfg, void* stream) {
  if (stream && !cfg.device) {
    fail(Status::invalid_argument, "stream is not NULL; with config.device = 0 (host memory) pass NULL");
  }
}

// config.device: every used buffer is memory of the communicator's GPU (gpu::route's rule).
void check_device_buffers(Comm& comm, const moe::MoeConfig& cfg, void* stream, std::initializer_list<gpu::BufferRef> bufs) {
  if (!cfg.device) return;
  bool used = false;  // a rank with no tokens and no rows has nothing to route
  for (const gpu::BufferRef& b : bufs) used = used || (b.ptr && b.bytes);
  if (used && gpu::route(comm, stream, bufs) != gpu::Route::device) {
    fail(Status::invalid_argument, "config.device = 1, but the buffers are host memory; pass CUDA memory of the "
                                   "communicator's GPU");
  }
}

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_moe_layout(const int32_t* indices, size_t tokens, int topk, int experts, int nranks,
                                       const int32_t* expert_rank, int64_t* tokens_per_rank,
                                       int64_t* tokens_per_expert, uint8_t* token_in_rank) {
  return guarded(__func__, [&] {
    const std::vector<int32_t> placement = moe::read_placement(expert_rank, experts, nranks, "expert_rank");
    moe::check_routing(-1, indices, nullptr, tokens, topk, experts);
    moe::count_layout(indices, tokens, topk, experts, nranks, placement, tokens_per_rank, tokens_per_expert,
                      token_in_rank);
  });
}

WEFT_API weft_status_t weft_moe_create(weft_comm_t comm, const weft_moe_config_t* config, weft_moe_t* moe) {
  return guarded(__func__, [&] {
    check_out(moe, "moe");
    *moe = nullptr;
    weft_comm* h = lookup_comm(comm, "comm");
    const std::shared_ptr<Comm> c = h->comm;
    moe::MoeConfig cfg;
    std::optional<Error> refused = refusal(c->rank(), [&] { cfg = read_config(config, c->size()); });
    auto m = std::make_unique<weft_moe>();
    run_on(*c, [&] { m->moe = std::make_unique<moe::Moe>(c, std::move(cfg), refused); });
    *moe = register_moe(std::move(m));
  });
}

WEFT_API weft_status_t weft_moe_destroy(weft_moe_t moe) {
  return guarded(__func__, [&] {
    if (!moe) return;
    lookup_moe(moe, "moe");
    unregister_moe(moe);
  });
}

WEFT_API weft_status_t weft_moe_dispatch(weft_moe_t moe, const weft_tensor_t* x, const int32_t* indices,
                                         const float* weights, size_t tokens, int topk, void* stream,
                                         weft_moe_handle_t* handle) {
  return guarded(__func__, [&] {
    check_out(handle, "handle");
    *handle = nullptr;
    weft_moe* m = lookup_moe(moe, "moe");
    moe::Moe& core = *m->moe;
    const moe::MoeConfig& cfg = core.config();
    const void* xd = nullptr;
    std::vector<int32_t> host_indices;
    std::vector<float> host_weights;
    std::optional<Error> refused = refusal(core.comm().rank(), [&] {
      check_host_stream(cfg, stream);
      xd = matrix_data(x, tokens, cfg.hidden, cfg.dtype, "x", cfg.device);
      if (tokens && !indices) fail(Status::invalid_argument, "indices is NULL with %zu tokens", tokens);
      if (tokens && !weights) fail(Status::invalid_argument, "weights is NULL with %zu tokens", tokens);
      if (cfg.device && topk > 0) {
        const size_t n = tokens * static_cast<size_t>(topk);
        check_device_buffers(core.comm(), cfg, stream,
                             {{xd, tokens * cfg.hidden * dtype_size(cfg.dtype), "x"},
                              {indices, n * sizeof(int32_t), "indices"},
                              {weights, n * sizeof(float), "weights"}});
        moe::routing_to_host(indices, weights, n, stream, host_indices, host_weights);
      }
    });
    auto out = std::make_unique<weft_moe_handle>();
    out->owner = m;
    out->device_id = 0;
    out->on_device = cfg.device;
    if (cfg.device) {
      run_on(core.comm(), [&] {
        out->handle = core.plan(host_indices.data(), host_weights.data(), tokens, topk, refused);
      });
      moe::device_dispatch_rows(core, *out->handle, xd, stream);
      out->device_id = moe::device_of(core.comm());
    } else {
      run_on(core.comm(), [&] { out->handle = core.dispatch(xd, indices, weights, tokens, topk, refused); });
    }
    out->shape[0] = static_cast<int64_t>(out->handle->recv.rows());
    out->shape[1] = static_cast<int64_t>(cfg.hidden);
    out->dtype = static_cast<weft_dtype_t>(cfg.dtype);
    *handle = register_moe_handle(std::move(out));
  });
}

WEFT_API weft_status_t weft_moe_handle_destroy(weft_moe_handle_t handle) {
  return guarded(__func__, [&] {
    if (!handle) return;
    lookup_moe_handle(handle, "handle");
    unregister_moe_handle(handle);
  });
}

WEFT_API weft_status_t weft_moe_handle_received(weft_moe_handle_t handle, weft_moe_received_t* received) {
  return guarded(__func__, [&] {
    weft_moe_handle* h = lookup_moe_handle(handle, "handle");
    check_out(received, "received");
    if (received->struct_size < sizeof(size_t) || received->struct_size > sizeof(weft_moe_received_t)) {
      fail(Status::invalid_argument, "received->struct_size = %zu; initialise it with WEFT_MOE_RECEIVED_INIT",
           received->struct_size);
    }
    const moe::Handle& b = *h->handle;
    weft_moe_received_t r = WEFT_MOE_RECEIVED_INIT;
    const bool on_gpu = h->on_device;
    r.tokens.data = on_gpu ? b.dev.received.get() : const_cast<unsigned char*>(b.received.data());
    r.tokens.device_type = on_gpu ? WEFT_DEVICE_CUDA : WEFT_DEVICE_CPU;
    r.tokens.device_id = h->device_id;
    r.tokens.ndim = 2;
    r.tokens.dtype = h->dtype;
    r.tokens.shape = h->shape;
    r.rows = b.recv.rows();
    r.local_experts = static_cast<int>(b.recv.experts.size());
    r.experts = b.recv.experts.data();
    r.counts = b.recv.counts.data();
    r.offsets = b.recv.offsets.data();
    r.row_expert = b.recv.row_expert.data();
    r.row_weight = b.recv.row_weight.data();
    r.row_source_rank = b.recv.row_source_rank.data();
    r.row_source_token = b.recv.row_source_token.data();
    std::memcpy(received, &r, received->struct_size);
  });
}

WEFT_API weft_status_t weft_moe_combine(weft_moe_t moe, weft_moe_handle_t handle, const weft_tensor_t* expert_out,
                                        int weighted, const weft_tensor_t* out, void* stream) {
  return guarded(__func__, [&] {
    weft_moe* m = lookup_moe(moe, "moe");
    moe::Moe& core = *m->moe;
    const moe::MoeConfig& cfg = core.config();
    weft_moe_handle* h = nullptr;
    const void* src = nullptr;
    void* dst = nullptr;
    std::optional<Error> refused = refusal(core.comm().rank(), [&] {
      h = lookup_moe_handle(handle, "handle");
      if (h->owner != m) fail(Status::invalid_argument, "handle was made by another weft_moe_t's dispatch");
      check_host_stream(cfg, stream);
      const size_t rows = h->handle->recv.rows(), T = h->handle->tokens, row_bytes = cfg.hidden * dtype_size(cfg.dtype);
      src = matrix_data(expert_out, rows, cfg.hidden, cfg.dtype, "expert_out (the received rows)", cfg.device);
      dst = matrix_data(out, T, cfg.hidden, cfg.dtype, "out (the dispatched tokens)", cfg.device);
      check_device_buffers(core.comm(), cfg, stream, {{src, rows * row_bytes, "expert_out"}, {dst, T * row_bytes, "out"}});
    });
    if (cfg.device) {
      run_on(core.comm(), [&] { core.agree("weft_moe_combine", refused); });
      moe::device_combine(core, *h->handle, src, weighted != 0, dst, stream);
      return;
    }
    run_on(core.comm(), [&] { core.combine(h ? h->handle.get() : nullptr, src, weighted != 0, dst, refused); });
  });
}

WEFT_API weft_status_t weft_moe_combine_backward(weft_moe_t moe, weft_moe_handle_t handle,
                                                 const weft_tensor_t* grad_out, const weft_tensor_t* grad_expert_out,
                                                 float* grad_weights, void* stream) {
  return guarded(__func__, [&] {
    weft_moe* m = lookup_moe(moe, "moe");
    moe::Moe& core = *m->moe;
    const moe::MoeConfig& cfg = core.config();
    weft_moe_handle* h = nullptr;
    const void* g = nullptr;
    void* ge = nullptr;
    std::optional<Error> refused = refusal(core.comm().rank(), [&] {
      h = lookup_moe_handle(handle, "handle");
      if (h->owner != m) fail(Status::invalid_argument, "handle was made by another weft_moe_t's dispatch");
      check_host_stream(cfg, stream);
      const size_t rows = h->handle->recv.rows(), T = h->handle->tokens, row_bytes = cfg.hidden * dtype_size(cfg.dtype);
      g = matrix_data(grad_out, T, cfg.hidden, cfg.dtype, "grad_out (the dispatched tokens)", cfg.device);
      ge = matrix_data(grad_expert_out, rows, cfg.hidden, cfg.dtype, "grad_expert_out (the received rows)", cfg.device);
      if (!grad_weights && T) {
        fail(Status::invalid_argument, "grad_weights is NULL; expected [%zu, %d] float32", T, h->handle->topk);
      }
      check_device_buffers(core.comm(), cfg, stream,
                           {{g, T * row_bytes, "grad_out"}, {ge, rows * row_bytes, "grad_expert_out"},
                            {grad_weights, T * static_cast<size_t>(h->handle->topk) * sizeof(float), "grad_weights"}});
      if (cfg.device && T && !h->handle->has_returned) {
        fail(Status::invalid_argument, "grad_weights needs the expert outputs of a weighted weft_moe_combine on this "
                                       "handle, and there was none");
      }
    });
    if (cfg.device) {
      run_on(core.comm(), [&] { core.agree("weft_moe_combine_backward", refused); });
      moe::device_combine_backward(core, *h->handle, g, ge, grad_weights, stream);
      return;
    }
    run_on(core.comm(), [&] { core.combine_backward(h ? h->handle.get() : nullptr, g, ge, grad_weights, refused); });
  });
}

}  // extern "C"
