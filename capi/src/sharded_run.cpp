#include "capi/src/sharded_run.h"

#include <span>

#include "capi/src/launch.h"
#include "core/device/device_api.h"
#include "core/sharding/host_backend.h"
#include "core/sharding/redistribute.h"

namespace weft::capi {

bool on_device_pair(Comm& anchor, const shard::Sharded& a, const char* a_name, const shard::Sharded& b,
                    const char* b_name, void* stream) {
  struct Side {
    gpu::BufferRef ref;
    bool declared;
  };
  Side sides[2];
  size_t n = 0;
  auto add = [&](const shard::Sharded& t, const char* name) {
    if (!t.mesh->member()) return;  // a descriptor: no local piece
    const auto span = t.local.byte_span();
    sides[n++] = {{t.local.base, span.second - span.first, name}, t.on_device};
  };
  add(a, a_name);
  add(b, b_name);
  gpu::BufferRef refs[2];
  for (size_t i = 0; i < n; ++i) refs[i] = sides[i].ref;
  if (gpu::route(anchor, stream, std::span<const gpu::BufferRef>(refs, n)) == gpu::Route::device) return true;
  // Every non-empty piece is host memory (and there is no stream).
  const Side* declared = nullptr;
  const Side* host = nullptr;
  for (size_t i = 0; i < n; ++i) {
    const Side& x = sides[i];
    const bool used = x.ref.ptr && x.ref.bytes;
    if (x.declared && used) {
      fail(Status::invalid_argument,
           "%s's local piece is declared CUDA device memory (device_type WEFT_DEVICE_CUDA) but %p is host memory",
           x.ref.name, x.ref.ptr);
    }
    if (x.declared) declared = &x;
    if (used) host = &x;
  }
  if (!declared) return false;
  if (host) {
    fail(Status::unsupported,
         "%s is host memory but %s is declared CUDA device memory (device_type WEFT_DEVICE_CUDA); on each rank %s's "
         "and %s's local pieces must be all host memory or all device memory of the communicator's GPU",
         host->ref.name, declared->ref.name, a_name, b_name);
  }
  return true;
}

void run_plan(weft_comm* anchor, const char* operation, const char* what, std::shared_ptr<const shard::Sharded> a,
              const char* a_name, std::shared_ptr<const shard::Sharded> b, const char* b_name,
              std::shared_ptr<const shard::Plan> plan, void* stream, weft_request_t* request) {
  if (on_device_pair(*anchor->comm, *a, a_name, *b, b_name, stream)) {
    // core/device: every step queued on one stream; the request is the stream reaching the end.
    register_device_request(anchor, request, operation, gpu::redistribute(*a, *b, *plan, stream, request != nullptr));
    return;
  }
  if (stream) fail(Status::unsupported, "stream is not NULL; host-memory %s takes no stream", what);
  launch(anchor, request, operation, [a = std::move(a), b = std::move(b), plan = std::move(plan)] {
    shard::HostBackend host;
    shard::redistribute(*a, *b, *plan, host);
  });
}

}  // namespace weft::capi
