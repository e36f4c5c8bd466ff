#include "core/device/driver_probe.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstddef>

namespace weft::gpu {
namespace {

// From the CUDA driver API (cuda.h), stable since CUDA 4.0; spelled out so that this file
// builds without the toolkit.
constexpr int kPointerAttributeMemoryType = 2;  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr unsigned kMemoryTypeDevice = 2;       // CU_MEMORYTYPE_DEVICE
using PointerGetAttribute = int (*)(void* data, int attribute, unsigned long long ptr);

// How many shared objects the process has loaded so far (glibc's dlpi_adds counter). Reading it
// walks the loader's list in memory: no system call, unlike dlopen(RTLD_NOLOAD), which searches
// the library path on disk (about ten openat/mmap/close) every time the library is absent.
unsigned long long libraries_loaded() {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* out) {
        if (size >= offsetof(dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds)) {
          *static_cast<unsigned long long*>(out) = info->dlpi_adds;
        }
        return 1;  // the counter is the same in every entry: the first one is enough
      },
      &adds);
  return adds;
}

PointerGetAttribute driver_query() {
  static std::atomic<PointerGetAttribute> cached{nullptr};
  // The load count at the last probe that found no driver: the driver cannot have appeared
  // unless something was loaded since (the application may initialise CUDA after weft).
  static std::atomic<unsigned long long> absent_at{~0ull};
  PointerGetAttribute f = cached.load(std::memory_order_acquire);
  if (f) return f;
  const unsigned long long loads = libraries_loaded();
  if (loads != 0 && loads == absent_at.load(std::memory_order_relaxed)) return nullptr;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib) f = reinterpret_cast<PointerGetAttribute>(dlsym(lib, "cuPointerGetAttribute"));
  if (!f) {
    absent_at.store(loads, std::memory_order_relaxed);
    return nullptr;
  }
  // Keep the reference: the driver stays loaded as long as the process uses CUDA anyway.
  cached.store(f, std::memory_order_release);
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
