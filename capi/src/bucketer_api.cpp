// weft_bucketer_*: the C shims of the gradient bucketer (weft/training.h).
#include <cstring>

#include "capi/src/handles.h"
#include "capi/src/shim.h"
#include "capi/src/training_handles.h"
#include "capi/src/validate.h"
#include "core/device/device_api.h"

using namespace weft;
using namespace weft::capi;

namespace {

weft_bucketer_config_t read_config(const weft_bucketer_config_t* config) {
  weft_bucketer_config_t c = WEFT_BUCKETER_CONFIG_INIT;
  if (!config) return c;
  if (config->struct_size < sizeof(size_t) || config->struct_size > sizeof(c)) {
    fail(Status::invalid_argument, "config->struct_size = %zu; initialise it with WEFT_BUCKETER_CONFIG_INIT",
         config->struct_size);
  }
  std::memcpy(&c, config, config->struct_size);
  return c;
}

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_bucketer_create(weft_comm_t comm, const weft_tensor_t* grads, size_t ngrads,
                                            const weft_bucketer_config_t* config, weft_bucketer_t* bucketer) {
  return guarded(__func__, [&] {
    check_out(bucketer, "bucketer");
    *bucketer = nullptr;
    weft_comm* h = lookup_comm(comm, "comm");
    if (!grads || ngrads == 0) fail(Status::invalid_argument, "grads is %s with ngrads = %zu; expected at least one gradient", grads ? "set" : "NULL", ngrads);
    const weft_bucketer_config_t c = read_config(config);
    const int op = enum_bits(c.op);
    if (op != WEFT_SUM && op != WEFT_AVG) fail(Status::invalid_argument, "config->op = %d: a bucketer sums (WEFT_SUM) or averages (WEFT_AVG)", op);
    const int red = enum_bits(c.reduction);
    if (red != WEFT_BUCKET_ALLREDUCE && red != WEFT_BUCKET_REDUCE_SCATTER) {
      fail(Status::invalid_argument, "config->reduction = %d is not a weft_bucket_reduction_t", red);
    }
    // The codec once (a plugin codec's lookup), then each gradient's dtype against it below.
    const std::shared_ptr<const training::Codec> codec = read_wire(c.wire, DType::f32, "config");
    const bool feedback = read_error_feedback(c.error_feedback, codec.get(), "config");
    std::vector<training::GradSpec> specs(ngrads);
    std::vector<size_t> bucket_of;
    for (size_t i = 0; i < ngrads; ++i) {
      const std::string name = item_name(c.names, i, "grad");
      const std::string arg = std::string("grads[").append(std::to_string(i)).append("]");
      specs[i].count = contiguous_count(grads[i], arg.c_str(), true);
      specs[i].dtype = check_dtype(grads[i].dtype, (arg + ".dtype").c_str());
      if (!dtype_is_float(specs[i].dtype)) fail(Status::invalid_argument, "%s (%s) is %s; gradients are floating point", arg.c_str(), name.c_str(), dtype_name(specs[i].dtype));
      specs[i].data = static_cast<char*>(grads[i].data) + grads[i].byte_offset;
      specs[i].name = name;
      // Where it lives decides its bucket's path (gpu::route: device memory of comm's GPU, or
      // host memory; anything else is refused, naming the gradient).
      // An empty gradient has no memory to look at: its device_type says.
      const size_t bytes = specs[i].count * dtype_size(specs[i].dtype);
      specs[i].on_device = enum_bits(grads[i].device_type) == WEFT_DEVICE_CUDA;
      if (bytes) {
        const bool device = gpu::route(*h->comm, nullptr, {{specs[i].data, bytes, arg.c_str()}}) == gpu::Route::device;
        if (device != specs[i].on_device) {
          fail(Status::invalid_argument, "%s (%s): device_type says %s memory, but its data is %s memory", arg.c_str(),
               name.c_str(), specs[i].on_device ? "device" : "host", device ? "device" : "host");
        }
      }
      if (codec && specs[i].dtype != DType::f32) {
        fail(Status::invalid_argument, "%s (%s) is %s: config->wire = %d (%s) takes float32 gradients only", arg.c_str(),
             name.c_str(), dtype_name(specs[i].dtype), codec->id(), codec->name().c_str());
      }
      if (c.bucket_of) bucket_of.push_back(c.bucket_of[i]);
    }
    training::ReduceSpec spec;
    spec.kind = red == WEFT_BUCKET_ALLREDUCE ? training::Reduction::allreduce : training::Reduction::reduce_scatter;
    spec.codec = codec;
    spec.op = static_cast<ReduceOp>(op);
    spec.dtype = specs[0].dtype;
    auto b = std::make_unique<weft_bucketer>();
    b->comm = h->comm;
    b->op = c.op;
    const size_t bytes = c.bucket_bytes ? c.bucket_bytes : size_t{25} << 20;
    Comm& cm = *h->comm;
    cm.throw_if_unusable();
    cm.executor().run_blocking([&] {
      b->bucketer = std::make_unique<training::Bucketer>(h->comm, std::move(specs), std::move(bucket_of), bytes, spec,
                                                               feedback);
    });
    *bucketer = register_bucketer(std::move(b));
  });
}

WEFT_API weft_status_t weft_bucketer_destroy(weft_bucketer_t bucketer) {
  return guarded(__func__, [&] {
    if (!bucketer) return;
    lookup_bucketer(bucketer, "bucketer");
    unregister_bucketer(bucketer);
  });
}

WEFT_API weft_status_t weft_bucketer_num_buckets(weft_bucketer_t bucketer, size_t* nbuckets) {
  return guarded(__func__, [&] {
    weft_bucketer* b = lookup_bucketer(bucketer, "bucketer");
    check_out(nbuckets, "nbuckets");
    *nbuckets = b->bucketer->num_buckets();
  });
}

WEFT_API weft_status_t weft_bucketer_bucket_of(weft_bucketer_t bucketer, size_t grad, size_t* bucket, size_t* offset) {
  return guarded(__func__, [&] {
    weft_bucketer* b = lookup_bucketer(bucketer, "bucketer");
    if (grad >= b->bucketer->num_grads()) fail(Status::invalid_argument, "grad = %zu; the bucketer has %zu gradients", grad, b->bucketer->num_grads());
    if (bucket) *bucket = b->bucketer->bucket_of(grad);
    if (offset) *offset = b->bucketer->offset_of(grad);
  });
}

WEFT_API weft_status_t weft_bucketer_mark_ready(weft_bucketer_t bucketer, size_t grad, const void* data, void* stream) {
  return guarded(__func__, [&] {
    weft_bucketer* b = lookup_bucketer(bucketer, "bucketer");
    if (grad >= b->bucketer->num_grads()) fail(Status::invalid_argument, "grad = %zu; the bucketer has %zu gradients", grad, b->bucketer->num_grads());
    if (stream && !b->bucketer->grad_on_device(grad)) {
      fail(Status::unsupported, "stream is set but gradient %zu is host memory (stream must be NULL)", grad);
    }
    b->comm->throw_if_unusable();
    b->bucketer->mark_ready(grad, data, stream);
  });
}

WEFT_API weft_status_t weft_bucketer_finish(weft_bucketer_t bucketer, void* stream) {
  return guarded(__func__, [&] {
    weft_bucketer* b = lookup_bucketer(bucketer, "bucketer");
    (void)stream;  // finish() returns when every result is written, so any later work sees them
    b->bucketer->finish();
  });
}

WEFT_API weft_status_t weft_bucketer_shard(weft_bucketer_t bucketer, size_t bucket, weft_tensor_t* shard, size_t* offset) {
  return guarded(__func__, [&] {
    weft_bucketer* b = lookup_bucketer(bucketer, "bucketer");
    check_out(shard, "shard");
    if (bucket >= b->bucketer->num_buckets()) fail(Status::invalid_argument, "bucket = %zu; the bucketer has %zu buckets", bucket, b->bucketer->num_buckets());
    if (!b->bucketer->scatters()) fail(Status::invalid_argument, "the bucketer all-reduces (config->reduction = WEFT_BUCKET_ALLREDUCE): its results are in the gradients, it has no shards");
    size_t off = 0, count = 0;
    const void* data = b->bucketer->shard(bucket, &off, &count);
    b->shard_extent.assign(1, static_cast<int64_t>(count));
    *shard = weft_tensor_t{};
    shard->data = const_cast<void*>(data);
    const bool dev = b->bucketer->bucket_on_device(bucket);
    shard->device_type = dev ? WEFT_DEVICE_CUDA : WEFT_DEVICE_CPU;
    shard->device_id = dev ? gpu::device_id(*b->comm) : 0;
    shard->ndim = 1;
    shard->dtype = static_cast<weft_dtype_t>(b->bucketer->bucket_dtype(bucket));
    shard->shape = b->shard_extent.data();
    if (offset) *offset = off;
  });
}

WEFT_API weft_status_t weft_bucketer_stats(weft_bucketer_t bucketer, weft_bucketer_stats_t* stats) {
  return guarded(__func__, [&] {
    weft_bucketer* b = lookup_bucketer(bucketer, "bucketer");
    check_out(stats, "stats");
    if (stats->struct_size < sizeof(size_t) || stats->struct_size > sizeof(weft_bucketer_stats_t)) {
      fail(Status::invalid_argument, "stats->struct_size = %zu; initialise it with WEFT_BUCKETER_STATS_INIT", stats->struct_size);
    }
    const training::BucketerStats& s = b->bucketer->stats();
    weft_bucketer_stats_t out = {stats->struct_size, s.steps, s.wire_bytes, s.exposed_ns, s.launched_late};
    std::memcpy(stats, &out, stats->struct_size);
  });
}

}  // extern "C"
