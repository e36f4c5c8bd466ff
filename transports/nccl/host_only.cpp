// device_api.h in a build without CUDA (WEFT_WITH_CUDA=OFF): every buffer is host memory.
//
// Such a build cannot ask the CUDA runtime about pointers, but a process holding device memory
// has the CUDA driver (libcuda.so.1) loaded: when it is, cuPointerGetAttribute tells device
// memory apart, and the call fails with WEFT_ERR_UNSUPPORTED instead of handing a device
// pointer to the host algorithms. dlopen(RTLD_NOLOAD) never loads the driver itself. When the
// driver is not loaded no pointer can be device memory.
#include <dlfcn.h>

#include <atomic>

#include "core/common/status.h"
#include "transports/nccl/device_api.h"

namespace weft::gpu {
namespace {

// From the CUDA driver API (cuda.h), stable since CUDA 4.0.
constexpr int kPointerAttributeMemoryType = 2;  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr unsigned kMemoryTypeDevice = 2;       // CU_MEMORYTYPE_DEVICE
using PointerGetAttribute = int (*)(void* data, int attribute, unsigned long long ptr);

PointerGetAttribute driver_query() {
  static std::atomic<PointerGetAttribute> cached{nullptr};
  PointerGetAttribute f = cached.load(std::memory_order_acquire);
  if (f) return f;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return nullptr;
  f = reinterpret_cast<PointerGetAttribute>(dlsym(lib, "cuPointerGetAttribute"));
  // Keep the reference: the driver stays loaded as long as the process uses CUDA anyway.
  if (f) cached.store(f, std::memory_order_release);
  return f;
}

bool is_device_memory(const void* p) {
  PointerGetAttribute query = driver_query();
  if (!query) return false;
  unsigned type = 0;
  return query(&type, kPointerAttributeMemoryType, reinterpret_cast<unsigned long long>(p)) == 0 &&
         type == kMemoryTypeDevice;
}

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
    if (b.ptr && b.bytes && is_device_memory(b.ptr)) {
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

void attach(Comm&, const Comm*) {}

}  // namespace weft::gpu
