// Distributed checkpoints (weft/mesh.h, "distributed checkpoints"): argument checks, then
// core/sharding/checkpoint_*. The weft_checkpoint handle is an opened, verified index.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "capi/src/handles.h"
#include "capi/src/mesh_handles.h"
#include "capi/src/registry.h"
#include "capi/src/shim.h"
#include "capi/src/validate.h"
#include "core/sharding/checkpoint_agree.h"
#include "core/sharding/checkpoint_index.h"
#include "core/sharding/checkpoint_load.h"
#include "core/sharding/checkpoint_safetensors.h"
#include "core/sharding/checkpoint_save.h"

using namespace weft;
using namespace weft::capi;

struct weft_checkpoint {
  uint64_t magic;
  std::string dir;
  shard::CheckpointIndex index;
};

namespace {

constexpr uint64_t kCheckpointMagic = 0x74706b4374666577ull;  // "weftCkpt"

// Leaked on purpose, like the other registries: handles may be closed from static destructors.
auto& checkpoints() {
  static auto* r = new Registry<weft_checkpoint, kCheckpointMagic>("a checkpoint from weft_checkpoint_open",
                                                                   "an open checkpoint", "closed");
  return *r;
}

weft_checkpoint* lookup_checkpoint(weft_checkpoint_t h, const char* arg) { return checkpoints().find(h, arg); }

std::string read_dir(const char* dir, const char* arg) {
  if (!dir) fail(Status::invalid_argument, "%s is NULL; expected a directory path", arg);
  if (!*dir) fail(Status::invalid_argument, "%s is empty; expected a directory path", arg);
  return dir;
}

// NULL = defaults. A newer caller's larger struct is accepted when the fields this library
// does not know are zero (their defaults), as for weft_comm_config_t.
shard::SaveOptions read_config(const weft_checkpoint_config_t* config) {
  shard::SaveOptions out;
  if (!config) return out;
  constexpr size_t kKnown = sizeof(weft_checkpoint_config_t);
  const size_t size = config->struct_size;
  if (size < kKnown || size > 4096) {
    fail(Status::invalid_argument,
         "config->struct_size = %zu; this weft knows a %zu-byte weft_checkpoint_config_t (initialise it with "
         "WEFT_CHECKPOINT_CONFIG_INIT)",
         size, kKnown);
  }
  const auto* tail = reinterpret_cast<const unsigned char*>(config) + kKnown;
  for (size_t i = 0; i < size - kKnown; ++i) {
    if (tail[i]) {
      fail(Status::invalid_argument, "config->struct_size = %zu: the caller sets fields this weft does not know", size);
    }
  }
  if (config->fsync != 0 && config->fsync != 1) {
    fail(Status::invalid_argument, "config->fsync = %d; expected 1 (fsync, the default) or 0", config->fsync);
  }
  out.fsync = config->fsync == 1;
  return out;
}

struct TensorArgs {
  std::vector<std::string> names;
  std::vector<std::shared_ptr<const shard::Sharded>> tensors;
};

TensorArgs read_tensors(const char* const* names, const weft_sharded_t* tensors, size_t count) {
  TensorArgs out;
  if (count == 0) return out;
  if (!names) fail(Status::invalid_argument, "names is NULL but count is %zu", count);
  if (!tensors) fail(Status::invalid_argument, "tensors is NULL but count is %zu", count);
  out.names.reserve(count);
  out.tensors.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    if (!names[i]) fail(Status::invalid_argument, "names[%zu] is NULL; expected the tensor's name", i);
    const std::string arg = "tensors[" + std::to_string(i) + "]";
    out.names.emplace_back(names[i]);
    out.tensors.push_back(lookup_sharded(tensors[i], arg.c_str())->tensor);
  }
  return out;
}

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_checkpoint_save(weft_comm_t comm, const char* dir, const char* const* names,
                                            const weft_sharded_t* tensors, size_t count,
                                            const weft_checkpoint_config_t* config) {
  return guarded(__func__, [&] {
    Comm& c = *lookup_comm(comm, "comm")->comm;
    c.throw_if_unusable();
    // A bad argument on this rank is handed to the save, which shares it with the other ranks:
    // they fail at once with its words instead of waiting for this rank until their deadline.
    std::string d;
    shard::SaveOptions options;
    TensorArgs args;
    const std::optional<Error> local = shard::capture([&] {
      d = read_dir(dir, "dir");
      options = read_config(config);
      args = read_tensors(names, tensors, count);
    });
    c.executor().run_blocking([&] { shard::checkpoint_save(c, d, args.names, args.tensors, options, local); });
  });
}

WEFT_API weft_status_t weft_checkpoint_load(const char* dir, const char* const* names, const weft_sharded_t* tensors,
                                            size_t count, const weft_checkpoint_config_t* config) {
  return guarded(__func__, [&] {
    const std::string d = read_dir(dir, "dir");
    read_config(config);  // checked; loading has no option yet
    const TensorArgs args = read_tensors(names, tensors, count);
    shard::checkpoint_load(d, args.names, args.tensors);
  });
}

WEFT_API weft_status_t weft_checkpoint_open(const char* dir, weft_checkpoint_t* checkpoint) {
  return guarded(__func__, [&] {
    check_out(checkpoint, "checkpoint");
    *checkpoint = nullptr;
    auto h = std::make_unique<weft_checkpoint>();
    h->dir = read_dir(dir, "dir");
    h->index = shard::read_index(h->dir);
    *checkpoint = checkpoints().add(std::move(h));
  });
}

WEFT_API weft_status_t weft_checkpoint_close(weft_checkpoint_t checkpoint) {
  if (!checkpoint) return WEFT_OK;
  return guarded(__func__, [&] {
    checkpoints().remove(lookup_checkpoint(checkpoint, "checkpoint"));
  });
}

WEFT_API weft_status_t weft_checkpoint_count(weft_checkpoint_t checkpoint, size_t* count) {
  return guarded(__func__, [&] {
    const weft_checkpoint* h = lookup_checkpoint(checkpoint, "checkpoint");
    check_out(count, "count");
    *count = h->index.tensors.size();
  });
}

WEFT_API weft_status_t weft_checkpoint_tensor(weft_checkpoint_t checkpoint, size_t i, const char** name,
                                              weft_dtype_t* dtype, int* ndim, int64_t* global_shape,
                                              size_t* nshards) {
  return guarded(__func__, [&] {
    const weft_checkpoint* h = lookup_checkpoint(checkpoint, "checkpoint");
    if (i >= h->index.tensors.size()) {
      fail(Status::invalid_argument, "i = %zu; the checkpoint holds %zu tensors (0..%zu)", i, h->index.tensors.size(),
           h->index.tensors.size() ? h->index.tensors.size() - 1 : 0);
    }
    const shard::StoredTensor& t = h->index.tensors[i];
    if (name) *name = t.name.c_str();
    if (dtype) *dtype = static_cast<weft_dtype_t>(t.dtype);
    if (ndim) *ndim = static_cast<int>(t.shape.size());
    if (global_shape) {
      for (size_t k = 0; k < t.shape.size(); ++k) global_shape[k] = t.shape[k];
    }
    if (nshards) *nshards = t.shards.size();
  });
}

WEFT_API weft_status_t weft_checkpoint_verify(weft_checkpoint_t checkpoint) {
  return guarded(__func__, [&] {
    const weft_checkpoint* h = lookup_checkpoint(checkpoint, "checkpoint");
    shard::checkpoint_verify(h->dir, h->index);
  });
}

WEFT_API weft_status_t weft_checkpoint_export_safetensors(weft_checkpoint_t checkpoint, const char* path) {
  return guarded(__func__, [&] {
    const weft_checkpoint* h = lookup_checkpoint(checkpoint, "checkpoint");
    if (!path || !*path) fail(Status::invalid_argument, "path is %s; expected the file to write", path ? "empty" : "NULL");
    shard::export_safetensors(h->dir, h->index, path);
  });
}

}  // extern "C"
