#include "transports/nccl/driver_probe.h"

#include <dlfcn.h>

#include <atomic>

namespace weft::gpu {
namespace {

// From the CUDA driver API (cuda.h), stable since CUDA 4.0; spelled out so that this file
// builds without the toolkit.
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

}  // namespace

bool driver_says_device_memory(const void* ptr) {
  PointerGetAttribute query = driver_query();
  if (!query) return false;
  unsigned type = 0;
  return query(&type, kPointerAttributeMemoryType, reinterpret_cast<unsigned long long>(ptr)) == 0 &&
         type == kMemoryTypeDevice;
}

}  // namespace weft::gpu
