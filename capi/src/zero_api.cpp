// weft_zero_*: the C shims of ZeRO (weft/training.h).
#include <cmath>
#include <cstring>

#include "capi/src/handles.h"
#include "capi/src/launch.h"
#include "capi/src/shim.h"
#include "capi/src/training_handles.h"
#include "capi/src/validate.h"
#include "core/training/zero_state.h"

using namespace weft;
using namespace weft::capi;

namespace {

training::ZeroConfig read_config(const weft_zero_config_t* config, size_t nparams) {
  const weft_zero_config_t defaults = WEFT_ZERO_CONFIG_INIT;
  const weft_zero_config_t c = config ? read_struct(config, defaults, "config", "WEFT_ZERO_CONFIG_INIT") : defaults;
  training::ZeroConfig z;
  if (c.stage < 0 || c.stage > 3) fail(Status::invalid_argument, "config->stage = %d; expected 0, 1, 2 or 3", c.stage);
  z.stage = c.stage;
  z.param_dtype = check_dtype(c.param_dtype, "config->param_dtype");
  if (z.param_dtype != DType::f32 && z.param_dtype != DType::bf16 && z.param_dtype != DType::f16) {
    fail(Status::invalid_argument, "config->param_dtype = %s; expected FLOAT32, BFLOAT16 or FLOAT16", dtype_name(z.param_dtype));
  }
  const weft_optimizer_config_t& o = c.optimizer;
  const int kind = enum_bits(o.kind);
  if (kind < WEFT_OPTIMIZER_SGD || kind > WEFT_OPTIMIZER_ADAMW) {
    fail(Status::invalid_argument, "config->optimizer.kind = %d is not a weft_optimizer_kind_t", kind);
  }
  z.optimizer = static_cast<kernels::OptimizerKind>(kind);
  z.lr = o.lr;
  z.momentum = o.momentum;
  z.beta1 = o.beta1;
  z.beta2 = o.beta2;
  z.eps = o.eps;
  z.weight_decay = o.weight_decay;
  if (!(o.lr >= 0.0f) || !(o.momentum >= 0.0f && o.momentum < 1.0f) || !(o.beta1 >= 0.0f && o.beta1 < 1.0f) ||
      !(o.beta2 >= 0.0f && o.beta2 < 1.0f) || !(o.eps >= 0.0f) || !(o.weight_decay >= 0.0f)) {
    fail(Status::invalid_argument,
         "config->optimizer: lr %g, momentum %g, beta1 %g, beta2 %g, eps %g, weight_decay %g; expected lr, eps, "
         "weight_decay >= 0 and momentum, betas in [0, 1)",
         double(o.lr), double(o.momentum), double(o.beta1), double(o.beta2), double(o.eps), double(o.weight_decay));
  }
  if (c.groups) {
    for (size_t i = 0; i < nparams; ++i) {
      const int g = c.groups[i];
      const int prev = i ? c.groups[i - 1] : 0;
      if (g < 0 || (i == 0 && g != 0) || (i > 0 && g != prev && g != prev + 1)) {
        fail(Status::invalid_argument, "config->groups[%zu] = %d; groups start at 0 and go up by 0 or 1 per parameter", i, g);
      }
      z.groups.push_back(static_cast<size_t>(g));
    }
  }
  z.group_bytes = c.group_bytes ? c.group_bytes : size_t{25} << 20;
  const int op = enum_bits(c.grad_op);
  if (op != WEFT_SUM && op != WEFT_AVG) fail(Status::invalid_argument, "config->grad_op = %d; expected WEFT_SUM or WEFT_AVG", op);
  z.grad_op = static_cast<ReduceOp>(op);
  z.codec = read_wire(c.wire, z.param_dtype, "config");
  z.error_feedback = read_error_feedback(c.error_feedback, z.codec.get(), "config");
  if (!(c.max_grad_norm >= 0.0f)) fail(Status::invalid_argument, "config->max_grad_norm = %g; expected >= 0", double(c.max_grad_norm));
  if (!(c.loss_scale > 0.0f) || !std::isfinite(c.loss_scale)) fail(Status::invalid_argument, "config->loss_scale = %g; expected a finite value > 0", double(c.loss_scale));
  z.max_grad_norm = c.max_grad_norm;
  z.loss_scale = c.loss_scale;
  z.dynamic_loss_scale = c.dynamic_loss_scale != 0;
  if (z.dynamic_loss_scale && (!(c.growth >= 1.0f) || !(c.backoff > 0.0f && c.backoff < 1.0f) || c.growth_interval < 1)) {
    fail(Status::invalid_argument, "config: growth %g (>= 1), backoff %g (in (0, 1)), growth_interval %d (>= 1)",
         double(c.growth), double(c.backoff), c.growth_interval);
  }
  z.growth = c.growth;
  z.backoff = c.backoff;
  z.growth_interval = c.growth_interval;
  return z;
}

void check_param_index(const weft_zero* z, size_t param) {
  if (param >= z->zero->num_params()) fail(Status::invalid_argument, "param = %zu; the ZeRO handle has %zu parameters", param, z->zero->num_params());
}

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_zero_create(weft_mesh_t mesh, const char* dp_dim, const weft_tensor_t* params, size_t nparams,
                                        const weft_zero_config_t* config, weft_zero_t* zero) {
  return guarded(__func__, [&] {
    check_out(zero, "zero");
    *zero = nullptr;
    weft_mesh* m = lookup_mesh(mesh, "mesh");
    if (!m->mesh->member()) fail(Status::invalid_argument, "mesh: this rank is not a member of it (a descriptor mesh)");
    const int dim = mesh_dim_named(*m->mesh, dp_dim, "dp_dim");
    if (!params || nparams == 0) fail(Status::invalid_argument, "params is %s with nparams = %zu; expected at least one parameter", params ? "set" : "NULL", nparams);
    training::ZeroConfig cfg = read_config(config, nparams);
    std::vector<training::ParamSpec> specs(nparams);
    const char* const* names = config && config->struct_size >= offsetof(weft_zero_config_t, names) + sizeof(config->names) ? config->names : nullptr;
    for (size_t i = 0; i < nparams; ++i) {
      const std::string arg = std::string("params[").append(std::to_string(i)).append("]");
      training::ParamSpec& s = specs[i];
      s.name = item_name(names, i, "param");
      s.count = contiguous_count(params[i], arg.c_str());
      s.init_dtype = check_dtype(params[i].dtype, (arg + ".dtype").c_str());
      if (s.init_dtype != DType::f32 && s.init_dtype != cfg.param_dtype) {
        fail(Status::invalid_argument, "%s (%s) is %s; expected FLOAT32 or param_dtype %s", arg.c_str(), s.name.c_str(),
             dtype_name(s.init_dtype), dtype_name(cfg.param_dtype));
      }
      s.shape.assign(params[i].shape, params[i].shape + params[i].ndim);
      s.init = static_cast<const char*>(params[i].data) + params[i].byte_offset;
    }
    auto z = std::make_unique<weft_zero>();
    for (const auto& s : specs) z->shapes.push_back(s.shape);
    std::shared_ptr<Comm> whole = m->mesh->whole();
    whole->throw_if_unusable();
    whole->executor().run_blocking([&] {
      z->zero = std::make_unique<training::Zero>(m->mesh, dim, std::move(specs), std::move(cfg));
    });
    *zero = register_zero(std::move(z));
  });
}

WEFT_API weft_status_t weft_zero_destroy(weft_zero_t zero) {
  return guarded(__func__, [&] {
    if (!zero) return;
    lookup_zero(zero, "zero");
    unregister_zero(zero);
  });
}

WEFT_API weft_status_t weft_zero_num_groups(weft_zero_t zero, size_t* ngroups) {
  return guarded(__func__, [&] {
    weft_zero* z = lookup_zero(zero, "zero");
    check_out(ngroups, "ngroups");
    *ngroups = z->zero->num_groups();
  });
}

WEFT_API weft_status_t weft_zero_group_of(weft_zero_t zero, size_t param, size_t* group) {
  return guarded(__func__, [&] {
    weft_zero* z = lookup_zero(zero, "zero");
    check_param_index(z, param);
    check_out(group, "group");
    *group = z->zero->group_of(param);
  });
}

WEFT_API weft_status_t weft_zero_param(weft_zero_t zero, size_t param, weft_tensor_t* view) {
  return guarded(__func__, [&] {
    weft_zero* z = lookup_zero(zero, "zero");
    check_param_index(z, param);
    check_out(view, "view");
    void* data = z->zero->param(param);
    *view = weft_tensor_t{};
    view->data = data;
    view->device_type = WEFT_DEVICE_CPU;
    view->ndim = static_cast<int>(z->shapes[param].size());
    view->dtype = static_cast<weft_dtype_t>(z->zero->config().param_dtype);
    view->shape = z->shapes[param].data();
  });
}

WEFT_API weft_status_t weft_zero_gather(weft_zero_t zero, size_t group, weft_request_t* request) {
  return guarded(__func__, [&] {
    weft_zero* z = lookup_zero(zero, "zero");
    if (request) *request = nullptr;
    if (group >= z->zero->num_groups()) fail(Status::invalid_argument, "group = %zu; the ZeRO handle has %zu groups", group, z->zero->num_groups());
    const auto& whole = z->zero->mesh()->whole();
    whole->throw_if_unusable();
    std::shared_ptr<Task> task = z->zero->gather(group);
    if (!task) return;
    if (!request) {
      task->wait();
      task->rethrow();
      return;
    }
    *request = register_task_request(z->zero->mesh()->group(1u << z->zero->dp_dim()), "zero_gather", std::move(task));
  });
}

WEFT_API weft_status_t weft_zero_release(weft_zero_t zero, size_t group) {
  return guarded(__func__, [&] {
    weft_zero* z = lookup_zero(zero, "zero");
    if (group >= z->zero->num_groups()) fail(Status::invalid_argument, "group = %zu; the ZeRO handle has %zu groups", group, z->zero->num_groups());
    z->zero->release(group);
  });
}

WEFT_API weft_status_t weft_zero_grad_ready(weft_zero_t zero, size_t param, const weft_tensor_t* grad) {
  return guarded(__func__, [&] {
    weft_zero* z = lookup_zero(zero, "zero");
    check_param_index(z, param);
    if (!grad) fail(Status::invalid_argument, "grad is NULL; expected the gradient of parameter %zu", param);
    const training::ParamSpec& p = z->zero->param_spec(param);
    const size_t count = contiguous_count(*grad, "grad");
    const DType d = check_dtype(grad->dtype, "grad->dtype");
    if (d != z->zero->config().param_dtype) {
      fail(Status::invalid_argument, "grad (%s) is %s; the parameters are %s", p.name.c_str(), dtype_name(d),
           dtype_name(z->zero->config().param_dtype));
    }
    bool same = grad->ndim == static_cast<int>(p.shape.size());
    for (int k = 0; same && k < grad->ndim; ++k) same = grad->shape[k] == p.shape[static_cast<size_t>(k)];
    if (!same || count != p.count) fail(Status::invalid_argument, "grad (%s) has another shape than the parameter", p.name.c_str());
    z->zero->mesh()->whole()->throw_if_unusable();
    z->zero->grad_ready(param, static_cast<const char*>(grad->data) + grad->byte_offset);
  });
}

WEFT_API weft_status_t weft_zero_step(weft_zero_t zero, weft_zero_step_info_t* info) {
  return guarded(__func__, [&] {
    weft_zero* z = lookup_zero(zero, "zero");
    if (info && (info->struct_size < sizeof(size_t) || info->struct_size > sizeof(weft_zero_step_info_t))) {
      fail(Status::invalid_argument, "info->struct_size = %zu; initialise it with WEFT_ZERO_STEP_INFO_INIT", info->struct_size);
    }
    z->zero->mesh()->whole()->throw_if_unusable();
    const training::StepInfo s = z->zero->step();
    if (!info) return;
    weft_zero_step_info_t out = {info->struct_size, s.skipped ? 1 : 0, s.grad_norm, s.loss_scale, s.volume.elements, s.volume.bytes};
    std::memcpy(info, &out, info->struct_size);
  });
}

WEFT_API weft_status_t weft_zero_memory(weft_zero_t zero, weft_zero_memory_t* memory) {
  return guarded(__func__, [&] {
    weft_zero* z = lookup_zero(zero, "zero");
    check_out(memory, "memory");
    if (memory->struct_size < sizeof(size_t) || memory->struct_size > sizeof(weft_zero_memory_t)) {
      fail(Status::invalid_argument, "memory->struct_size = %zu; initialise it with WEFT_ZERO_MEMORY_INIT", memory->struct_size);
    }
    const training::MemoryReport m = z->zero->memory();
    weft_zero_memory_t out = {memory->struct_size, m.params, m.grads, m.optimizer, m.buffers, m.buffers_peak};
    std::memcpy(memory, &out, memory->struct_size);
  });
}

}  // extern "C"

extern "C" {

WEFT_API weft_status_t weft_zero_save(weft_zero_t zero, const char* path) {
  return guarded(__func__, [&] {
    weft_zero* z = lookup_zero(zero, "zero");
    if (!path || !*path) fail(Status::invalid_argument, "path is %s; expected a directory path", path ? "empty" : "NULL");
    Comm& whole = *z->zero->mesh()->whole();
    whole.throw_if_unusable();
    whole.executor().run_blocking([&] { training::zero_save(*z->zero, path); });
  });
}

WEFT_API weft_status_t weft_zero_load(weft_zero_t zero, const char* path) {
  return guarded(__func__, [&] {
    weft_zero* z = lookup_zero(zero, "zero");
    if (!path || !*path) fail(Status::invalid_argument, "path is %s; expected a directory path", path ? "empty" : "NULL");
    Comm& whole = *z->zero->mesh()->whole();
    whole.throw_if_unusable();
    training::zero_load(*z->zero, path);
  });
}

}  // extern "C"
