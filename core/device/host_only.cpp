// device_api.h in a build without CUDA (WEFT_WITH_CUDA=OFF): every buffer is host memory.
//
// Such a build cannot ask the CUDA runtime about pointers; driver_probe.h asks the driver when
// the process has it loaded, and a device pointer fails with WEFT_ERR_UNSUPPORTED instead of
// reaching the host algorithms.
#include "core/common/status.h"
#include "core/device/device_api.h"
#include "core/device/driver_probe.h"
#include "core/device/moe_router_device.h"

namespace weft::gpu {
namespace {

[[noreturn]] void unreachable(const char* what) {
  fail(Status::internal, "%s: device path reached in a build without CUDA", what);
}

}  // namespace

Route route(Comm&, void* stream, std::span<const BufferRef> buffers) {
  if (stream) {
    fail(Status::unsupported,
         "stream is not NULL, but this weft was built without CUDA (WEFT_WITH_CUDA=OFF): only host memory, "
         "with a NULL stream");
  }
  for (const BufferRef& b : buffers) {
    if (b.ptr && b.bytes && driver_says_device_memory(b.ptr)) {
      fail(Status::unsupported, "%s (%p) is CUDA device memory, but this weft was built without CUDA "
           "(WEFT_WITH_CUDA=OFF): pass host memory", b.name, b.ptr);
    }
  }
  return Route::host;
}

std::shared_ptr<Pending> launch(const std::shared_ptr<Comm>&, const char* operation, DeviceOp, void*, bool,
                                DeviceWork) {
  unreachable(operation);
}

std::shared_ptr<Pending> p2p(const std::shared_ptr<Comm>&, const char* operation, const std::vector<P2POp>&, void*,
                             bool) {
  unreachable(operation);
}

std::shared_ptr<Pending> redistribute(const shard::Sharded&, const shard::Sharded&, const shard::Plan&, void*, bool) {
  fail(Status::unsupported,
       "a local piece is CUDA device memory (device_type WEFT_DEVICE_CUDA), but this weft was built without CUDA "
       "(WEFT_WITH_CUDA=OFF): pass host memory");
}

namespace {
[[noreturn]] void no_cuda(const char* name) {
  fail(Status::unsupported,
       "%s is declared CUDA device memory (device_type WEFT_DEVICE_CUDA), but this weft was built without CUDA "
       "(WEFT_WITH_CUDA=OFF): pass host memory",
       name);
}
}  // namespace

void check_device_view(const kernels::StridedView&, int, const char* name) { no_cuda(name); }
void copy_to_host(void*, const kernels::StridedView&, int) { no_cuda("a local piece"); }
void copy_from_host(const kernels::StridedView&, const void*, int) { no_cuda("a local piece"); }
std::shared_ptr<void> device_buffer(Comm&, size_t) { no_cuda("a gradient bucket"); }
int device_id(const Comm&) { return -1; }
void copy_device(Launch&, void*, const void*, size_t) { unreachable("copy_device"); }
void settle_copies(Launch&) { unreachable("settle_copies"); }

void allreduce(Launch&, const void*, void*, size_t, DType, ReduceOp) { unreachable("allreduce"); }
void broadcast(Launch&, void*, size_t, DType, int) { unreachable("broadcast"); }
void reduce(Launch&, const void*, void*, size_t, DType, ReduceOp, int) { unreachable("reduce"); }
void allgather(Launch&, const void*, void*, size_t, DType) { unreachable("allgather"); }
void allgatherv(Launch&, const void*, size_t, void*, const std::vector<size_t>&, const std::vector<size_t>&, DType) {
  unreachable("allgatherv");
}
void reduce_scatter(Launch&, const void*, void*, size_t, DType, ReduceOp) { unreachable("reduce_scatter"); }
void alltoall(Launch&, const void*, void*, size_t, DType) { unreachable("alltoall"); }
void alltoallv(Launch&, const void*, const std::vector<size_t>&, const std::vector<size_t>&, void*,
               const std::vector<size_t>&, const std::vector<size_t>&, DType) {
  unreachable("alltoallv");
}
void gather(Launch&, const void*, void*, size_t, DType, int) { unreachable("gather"); }
void scatter(Launch&, const void*, void*, size_t, DType, int) { unreachable("scatter"); }
void barrier(Launch&) { unreachable("barrier"); }

void attach(Comm&, const Comm*, std::shared_ptr<SplitDevice>) {}
std::shared_ptr<SplitDevice> split_device(Comm&, int, int) { return nullptr; }

// The MoE router (moe_router_device.h): device logits need the CUDA build.
void router_forward(const void*, DType, size_t, int, const kernels::RouterConfig&, kernels::RouterOutputs&, void*) {
  fail(Status::unsupported, "logits have device_type WEFT_DEVICE_CUDA, but this weft was built without CUDA "
       "(WEFT_WITH_CUDA=OFF): pass host memory");
}
void router_backward(const void*, DType, size_t, int, const kernels::RouterConfig&, const int32_t*, const float*,
                     float, float, float*, void*) {
  fail(Status::unsupported, "logits have device_type WEFT_DEVICE_CUDA, but this weft was built without CUDA "
       "(WEFT_WITH_CUDA=OFF): pass host memory");
}

}  // namespace weft::gpu
