// weft_router_*: the C shims of the MoE router (weft/moe.h). Every argument is checked here,
// naming it; host logits run kernels/cpu/moe_router.h, device logits (WEFT_DEVICE_CUDA) the
// CUDA twin through core/device/moe_router_device.h (WEFT_ERR_UNSUPPORTED without CUDA).
// config->selector names a ROUTER plugin (core/plugin/registry.h): its function is handed to the
// host kernel as a plain pointer (kernels/ stays free of core/plugin); device logits refuse it.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>

#include "capi/src/shim.h"
#include "capi/src/training_handles.h"
#include "capi/src/validate.h"
#include "core/device/moe_router_device.h"
#include "core/plugin/registry.h"
#include "kernels/cpu/moe_router.h"

using namespace weft;
using namespace weft::capi;

namespace {

// The config in kernel form; a selector's description (for messages) lives in *selector_name,
// which must outlive the returned config's use.
kernels::RouterConfig read_config(const weft_router_config_t* config, std::string* selector_name) {
  const weft_router_config_t c =
      read_struct(config, weft_router_config_t(WEFT_ROUTER_CONFIG_INIT), "config", "WEFT_ROUTER_CONFIG_INIT");
  kernels::RouterConfig r;
  if (c.selector != 0) {
    if (c.selector < plugin::kIdBase) {
      fail(Status::invalid_argument, "config->selector = %d; expected 0 (top-k) or a ROUTER plugin's id (>= %d)",
           c.selector, plugin::kIdBase);
    }
    // The registry never drops a router, so its function stays valid after the shared_ptr goes.
    const auto router = plugin::get_router(c.selector);
    *selector_name = router->origin.describe("router");
    r.selector.fn = router->select;
    r.selector.name = selector_name->c_str();
  }
  r.experts = c.experts;
  r.topk = c.topk;
  r.score = enum_bits(c.score);
  r.normalize = c.normalize != 0;
  r.groups = c.groups;
  r.topk_groups = c.topk_groups;
  r.bias = c.bias;
  r.drop = enum_bits(c.drop);
  r.capacity_factor = c.capacity_factor;
  r.aux_loss_coeff = c.aux_loss_coeff;
  r.z_loss_coeff = c.z_loss_coeff;
  if (!std::isfinite(c.aux_loss_coeff) || !std::isfinite(c.z_loss_coeff)) {
    fail(Status::invalid_argument, "config->aux_loss_coeff = %g, z_loss_coeff = %g; expected finite values",
         double(c.aux_loss_coeff), double(c.z_loss_coeff));
  }
  return r;
}

// The logits' rows T (shape [T, E], contiguous, FLOAT32 or BFLOAT16) and whether they are
// device memory; `data` gets the first element's address.
struct Logits {
  const void* data;
  DType dtype;
  size_t tokens;
  bool device;
  int device_id;
};

Logits read_logits(const weft_tensor_t* t, const kernels::RouterConfig& c, const char* arg) {
  if (!t) fail(Status::invalid_argument, "%s is NULL", arg);
  if (t->ndim != 2) fail(Status::invalid_argument, "%s.ndim = %d; expected 2 ([tokens, experts])", arg, t->ndim);
  Logits l;
  l.dtype = check_dtype(t->dtype, (std::string(arg) + ".dtype").c_str());
  contiguous_count(*t, arg, true);
  if (t->shape[1] != c.experts) {
    fail(Status::invalid_argument, "%s.shape = [%lld, %lld]; expected [tokens, config->experts = %d]", arg,
         static_cast<long long>(t->shape[0]), static_cast<long long>(t->shape[1]), c.experts);
  }
  l.tokens = static_cast<size_t>(t->shape[0]);
  l.data = t->data ? static_cast<const char*>(t->data) + t->byte_offset : nullptr;
  l.device = enum_bits(t->device_type) == WEFT_DEVICE_CUDA;
  l.device_id = t->device_id;
  return l;
}

void check_stream(const Logits& l, void* stream) {
  if (stream && !l.device) {
    fail(Status::invalid_argument, "stream is not NULL, but the logits are host memory: pass a NULL stream");
  }
}

// A router plugin runs on the host over all tokens' scores: no device twin.
void check_selector_host(const kernels::RouterConfig& c, const Logits& l) {
  if (c.selector.fn && l.device) {
    fail(Status::unsupported, "config->selector (%s) with device logits: router plugins run on host logits only",
         c.selector.name);
  }
}

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_router_forward(const weft_tensor_t* logits, const weft_router_config_t* config,
                                           weft_router_result_t* result, void* stream) {
  return guarded("weft_router_forward", [&] {
    std::string selector_name;
    const kernels::RouterConfig c = read_config(config, &selector_name);
    const Logits l = read_logits(logits, c, "logits");
    kernels::check_router_config(c, l.dtype, "config");
    check_stream(l, stream);
    check_selector_host(c, l);
    const weft_router_result_t r =
        read_struct(static_cast<const weft_router_result_t*>(result), weft_router_result_t(WEFT_ROUTER_RESULT_INIT),
                    "result", "WEFT_ROUTER_RESULT_INIT");
    if (l.tokens > 0 && (!r.indices || !r.weights)) {
      fail(Status::invalid_argument, "result->%s is NULL with %zu tokens; expected [tokens, topk] arrays",
           r.indices ? "weights" : "indices", l.tokens);
    }
    kernels::RouterOutputs out;
    out.indices = r.indices;
    out.weights = r.weights;
    out.tokens_per_expert = r.tokens_per_expert;
    out.selected_per_expert = r.selected_per_expert;
    if (l.device) {
      gpu::router_forward(l.data, l.dtype, l.tokens, l.device_id, c, out, stream);
    } else {
      kernels::router_forward(l.data, l.dtype, l.tokens, c, out);
    }
    // Only the fields the caller's struct has.
    if (result->struct_size >= offsetof(weft_router_result_t, aux_loss) + sizeof(float)) result->aux_loss = out.aux_loss;
    if (result->struct_size >= offsetof(weft_router_result_t, z_loss) + sizeof(float)) result->z_loss = out.z_loss;
  });
}

WEFT_API weft_status_t weft_router_backward(const weft_tensor_t* logits, const weft_router_config_t* config,
                                            const int32_t* indices, const float* grad_weights, float grad_aux,
                                            float grad_z, const weft_tensor_t* grad_logits, void* stream) {
  return guarded("weft_router_backward", [&] {
    std::string selector_name;
    const kernels::RouterConfig c = read_config(config, &selector_name);
    const Logits l = read_logits(logits, c, "logits");
    kernels::check_router_config(c, l.dtype, "config");
    check_stream(l, stream);
    check_selector_host(c, l);
    const Logits g = read_logits(grad_logits, c, "grad_logits");
    if (g.dtype != DType::f32) {
      fail(Status::invalid_argument, "grad_logits.dtype = %s; expected FLOAT32", dtype_name(g.dtype));
    }
    if (g.tokens != l.tokens) {
      fail(Status::invalid_argument, "grad_logits has %zu rows, logits %zu; expected the same shape", g.tokens,
           l.tokens);
    }
    if (g.device != l.device || (l.device && g.device_id != l.device_id)) {
      fail(Status::invalid_argument, "grad_logits must be in the logits' memory (device_type and device_id)");
    }
    if (!std::isfinite(grad_aux) || !std::isfinite(grad_z)) {
      fail(Status::invalid_argument, "grad_aux = %g, grad_z = %g; expected finite values", double(grad_aux),
           double(grad_z));
    }
    if (l.tokens == 0) return;
    if (!indices) fail(Status::invalid_argument, "indices is NULL with %zu tokens", l.tokens);
    if (!grad_weights) fail(Status::invalid_argument, "grad_weights is NULL with %zu tokens", l.tokens);
    float* out = static_cast<float*>(const_cast<void*>(g.data));
    if (l.device) {
      gpu::router_backward(l.data, l.dtype, l.tokens, l.device_id, c, indices, grad_weights, grad_aux, grad_z, out,
                           stream);
      return;
    }
    const size_t n = l.tokens * static_cast<size_t>(c.topk);
    for (size_t i = 0; i < n; ++i) {
      if (indices[i] < -1 || indices[i] >= c.experts) {
        fail(Status::invalid_argument, "indices[%zu] = %d (token %zu); expected an expert in [0, %d) or WEFT_MOE_DROPPED",
             i, static_cast<int>(indices[i]), i / static_cast<size_t>(c.topk), c.experts);
      }
    }
    kernels::router_backward(l.data, l.dtype, l.tokens, c, indices, grad_weights, grad_aux, grad_z, out);
  });
}

WEFT_API weft_status_t weft_router_update_bias(float* bias, const int64_t* tokens_per_expert, int experts, float rate) {
  return guarded("weft_router_update_bias", [&] {
    if (experts < 1) fail(Status::invalid_argument, "experts = %d; expected >= 1", experts);
    if (!bias) fail(Status::invalid_argument, "bias is NULL; expected %d floats", experts);
    if (!tokens_per_expert) fail(Status::invalid_argument, "tokens_per_expert is NULL; expected %d counts", experts);
    if (!std::isfinite(rate)) fail(Status::invalid_argument, "rate = %g; expected a finite value", double(rate));
    for (int e = 0; e < experts; ++e) {
      if (tokens_per_expert[e] < 0) {
        fail(Status::invalid_argument, "tokens_per_expert[%d] = %lld; expected a count >= 0", e,
             static_cast<long long>(tokens_per_expert[e]));
      }
    }
    kernels::router_update_bias(bias, tokens_per_expert, experts, rate);
  });
}

}  // extern "C"
