// weft_pipeline_*: the C shims of the executor (weft/pipeline.h). A C callback becomes a
// pipeline::StageFn that turns a failure status into a weft::Error carrying the text the
// callback left with weft_pipeline_set_error.
#include <cstring>
#include <string>

#include "capi/src/handles.h"
#include "capi/src/pipeline_handles.h"
#include "capi/src/shim.h"
#include "capi/src/validate.h"
#include "core/device/device_api.h"
#include "core/pipeline/executor.h"

using namespace weft;
using namespace weft::capi;

namespace {

// The text of the last failed callback on this thread (callbacks run on the caller's thread).
thread_local std::string callback_error;

weft_pipeline_config_t read_config(const weft_pipeline_config_t* given) {
  if (!given) fail(Status::invalid_argument, "config is NULL; expected a weft_pipeline_config_t with its callbacks");
  if (given->struct_size < sizeof(size_t) || given->struct_size > sizeof(weft_pipeline_config_t)) {
    fail(Status::invalid_argument, "config->struct_size = %zu; initialise it with WEFT_PIPELINE_CONFIG_INIT",
         given->struct_size);
  }
  weft_pipeline_config_t c = WEFT_PIPELINE_CONFIG_INIT;
  std::memcpy(&c, given, given->struct_size);
  c.struct_size = sizeof c;
  return c;
}

pipeline::Boundary read_boundary(const weft_tensor_t& t, size_t i, const Comm& comm) {
  const std::string arg = "config->boundaries[" + std::to_string(i) + "]";
  pipeline::Boundary b;
  b.dtype = check_dtype(t.dtype, (arg + ".dtype").c_str());
  if (t.ndim < 0 || t.ndim > WEFT_TENSOR_MAX_DIMS) {
    fail(Status::invalid_argument, "%s.ndim = %d; expected 0..%d", arg.c_str(), t.ndim, WEFT_TENSOR_MAX_DIMS);
  }
  if (t.ndim > 0 && !t.shape) fail(Status::invalid_argument, "%s.shape is NULL but ndim = %d", arg.c_str(), t.ndim);
  b.shape.assign(t.shape, t.shape + t.ndim);
  const int type = enum_bits(t.device_type);
  if (type != WEFT_DEVICE_CPU && type != WEFT_DEVICE_CUDA && type != WEFT_DEVICE_CUDA_HOST) {
    fail(Status::invalid_argument, "%s.device_type = %d; expected WEFT_DEVICE_CPU, WEFT_DEVICE_CUDA or "
         "WEFT_DEVICE_CUDA_HOST", arg.c_str(), type);
  }
  b.device = type == WEFT_DEVICE_CUDA;
  const int gpu = gpu::device_id(comm);
  if (b.device && gpu >= 0 && t.device_id != gpu) {
    fail(Status::invalid_argument, "%s.device_id = %d but the communicator's GPU is %d; expected %d", arg.c_str(),
         t.device_id, gpu, gpu);
  }
  return b;
}

// A view of a weft-owned boundary buffer for a callback.
weft_tensor_t tensor_of(const pipeline::StageBuffer& b, const Comm& comm) {
  weft_tensor_t t{};
  t.data = b.data;
  t.device_type = b.boundary->device ? WEFT_DEVICE_CUDA : WEFT_DEVICE_CPU;
  t.device_id = b.boundary->device ? gpu::device_id(comm) : 0;
  t.ndim = static_cast<int>(b.boundary->shape.size());
  t.dtype = static_cast<weft_dtype_t>(b.boundary->dtype);
  t.shape = b.boundary->shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}

pipeline::StageFn wrap(weft_stage_fn fn, void* user_data, const char* what, std::shared_ptr<Comm> comm) {
  if (!fn) return {};
  return [fn, user_data, what, comm](const pipeline::StageCall& c) {
    weft_tensor_t in{}, out{};
    if (c.input.boundary) in = tensor_of(c.input, *comm);
    if (c.output.boundary) out = tensor_of(c.output, *comm);
    const weft_stage_call_t call{static_cast<weft_action_kind_t>(c.kind), c.stage, c.microbatch,
                                 c.input.boundary ? &in : nullptr, c.output.boundary ? &out : nullptr};
    callback_error.clear();
    const weft_status_t s = fn(&call, user_data);
    if (s == WEFT_OK) return;
    std::string text = std::move(callback_error);
    callback_error.clear();
    if (text.empty()) text = "(no message: the callback did not call weft_pipeline_set_error)";
    const int code = static_cast<int>(s);
    if (code < WEFT_ERR_INVALID_ARGUMENT || code > WEFT_ERR_INTERNAL) {
      fail(Status::internal, "%s callback failed with status %d, which is not a weft_status_t: %s", what, code,
           text.c_str());
    }
    throw Error(static_cast<Status>(code), std::string(what).append(" callback failed: ").append(text));
  };
}

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_pipeline_create(weft_comm_t comm, weft_schedule_t schedule,
                                            const weft_pipeline_config_t* config, weft_pipeline_t* pipeline) {
  return guarded(__func__, [&] {
    check_out(pipeline, "pipeline");
    *pipeline = nullptr;
    weft_comm* hc = lookup_comm(comm, "comm");
    weft_schedule* hs = lookup_schedule(schedule, "schedule");
    const weft_pipeline_config_t c = read_config(config);
    if (c.nboundaries && !c.boundaries) {
      fail(Status::invalid_argument, "config->boundaries is NULL but config->nboundaries = %zu", c.nboundaries);
    }
    pipeline::ExecutorConfig ec;
    const std::shared_ptr<Comm>& cm = hc->comm;
    ec.forward = wrap(c.forward, c.user_data, "forward", cm);
    ec.backward = wrap(c.backward, c.user_data, "backward", cm);
    ec.backward_input = wrap(c.backward_input, c.user_data, "backward_input", cm);
    ec.backward_weight = wrap(c.backward_weight, c.user_data, "backward_weight", cm);
    ec.reduce_grad = wrap(c.reduce_grad, c.user_data, "reduce_grad", cm);
    for (size_t i = 0; i < c.nboundaries; ++i) ec.boundaries.push_back(read_boundary(c.boundaries[i], i, *cm));
    ec.stream = c.stream;
    ec.record = c.record != 0;
    auto h = std::make_unique<weft_pipeline>();
    h->executor = std::make_unique<pipeline::Executor>(cm, hs->schedule, std::move(ec));
    *pipeline = register_pipeline(std::move(h));
  });
}

WEFT_API weft_status_t weft_pipeline_run(weft_pipeline_t pipeline, weft_timeline_t* record) {
  return guarded(__func__, [&] {
    if (record) *record = nullptr;
    weft_pipeline* h = lookup_pipeline(pipeline, "pipeline");
    pipeline::Timeline t = h->executor->run();
    if (record && t.schedule) *record = register_timeline(std::move(t));
  });
}

WEFT_API weft_status_t weft_pipeline_destroy(weft_pipeline_t pipeline) {
  return guarded(__func__, [&] {
    if (!pipeline) return;
    lookup_pipeline(pipeline, "pipeline");
    unregister_pipeline(pipeline);
  });
}

WEFT_API weft_status_t weft_pipeline_set_error(const char* message) {
  return guarded(__func__, [&] { callback_error = message ? message : ""; });
}

}  // extern "C"
