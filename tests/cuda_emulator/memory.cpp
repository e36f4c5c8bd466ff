// The CUDA emulator's memory (emulator.h): allocations, pointer attributes and copies.
//
// Device memory is a memfd mapped twice: PROT_NONE at the address handed to the program, so a
// host access faults as it would on a GPU, and read-write at an alias that only the emulator
// (its streams, the emulated kernels, the stand-in NCCL) uses through host_view().
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "tests/cuda_emulator/emulator.h"
#include "tests/cuda_emulator/state.h"

namespace weft::emu {
namespace {

struct Allocation {
  Region region;
  char* alias = nullptr;  // device memory: the emulator's read-write view; else == region.base
  size_t mapped = 0;      // bytes mapped (page-rounded), for munmap
};

std::mutex g_mutex;
std::map<const char*, Allocation>& allocations() {
  static auto* m = new std::map<const char*, Allocation>;  // never destroyed: streams may outlive exit
  return *m;
}

// WEFT_EMU_HOST_VISIBLE_DEVICE_MEMORY=1: device memory is host-accessible, as a CUDA-enabled UCX
// would treat it (it moves device memory itself): for tests of weft's direct path to UCX.
bool host_visible() {
  static const bool v = [] {
    const char* e = std::getenv("WEFT_EMU_HOST_VISIBLE_DEVICE_MEMORY");
    return e && std::strcmp(e, "1") == 0;
  }();
  return v;
}

std::set<cudaMemPool_t>& pools() {
  static auto* s = new std::set<cudaMemPool_t>;
  return *s;
}

size_t page_round(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

// The allocation containing p; nullptr when none. Caller holds g_mutex.
const Allocation* find_locked(const void* p) {
  auto& m = allocations();
  const char* c = static_cast<const char*>(p);
  auto it = m.upper_bound(c);
  if (it == m.begin()) return nullptr;
  --it;
  const Allocation& a = it->second;
  if (c >= a.region.base + a.region.bytes && !(a.region.bytes == 0 && c == a.region.base)) return nullptr;
  return &a;
}

// device < 0: the calling thread's current device.
cudaError_t allocate(void** out, size_t bytes, Kind kind, int device = -1) {
  if (!out) return fail(cudaErrorInvalidValue);
  *out = nullptr;
  if (bytes == 0) return cudaSuccess;  // as the runtime: a NULL pointer, no error
  Allocation a;
  a.region.kind = kind;
  a.region.bytes = bytes;
  a.region.device = kind == Kind::pinned ? -1 : device >= 0 ? device : bind_current_device();
  a.mapped = page_round(bytes);
  if (kind == Kind::device) {
    const int fd = memfd_create("weft-emu-device", MFD_CLOEXEC);
    if (fd < 0) return fail(cudaErrorMemoryAllocation);
    void* dev = MAP_FAILED;
    void* alias = MAP_FAILED;
    if (ftruncate(fd, static_cast<off_t>(a.mapped)) == 0) {
      dev = mmap(nullptr, a.mapped, host_visible() ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_SHARED, fd, 0);
      alias = mmap(nullptr, a.mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    close(fd);
    if (dev == MAP_FAILED || alias == MAP_FAILED) {
      if (dev != MAP_FAILED) munmap(dev, a.mapped);
      if (alias != MAP_FAILED) munmap(alias, a.mapped);
      return fail(cudaErrorMemoryAllocation);
    }
    a.region.base = static_cast<char*>(dev);
    a.alias = static_cast<char*>(alias);
    // Fresh device memory is not zero on a GPU: fill it with a pattern so reads of unwritten
    // bytes show.
    std::memset(a.alias, 0xa5, bytes);
  } else {
    void* p = mmap(nullptr, a.mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return fail(cudaErrorMemoryAllocation);
    a.region.base = static_cast<char*>(p);
    a.alias = a.region.base;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  allocations()[a.region.base] = a;
  *out = a.region.base;
  return cudaSuccess;
}

cudaError_t release(void* p, Kind expected) {
  if (!p) return cudaSuccess;
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = allocations().find(static_cast<const char*>(p));
    const bool managed_ok = expected == Kind::device && it != allocations().end() &&
                            it->second.region.kind == Kind::managed;
    if (it == allocations().end() || (it->second.region.kind != expected && !managed_ok)) {
      return fail(expected == Kind::pinned ? cudaErrorInvalidValue : cudaErrorInvalidDevicePointer);
    }
    a = it->second;
    allocations().erase(it);
  }
  munmap(a.region.base, a.mapped);
  if (a.alias != a.region.base) munmap(a.alias, a.mapped);
  return cudaSuccess;
}

// Checks a copy's direction against what its pointers are, as a GPU would fault on a device
// pointer given as host memory (or copy garbage the other way).
bool direction_ok(void* dst, const void* src, cudaMemcpyKind kind) {
  auto on_device = [](const void* p) {
    Kind k = lookup(p).kind;
    return k == Kind::device || k == Kind::managed;
  };
  auto host_side = [](const void* p) { return lookup(p).kind != Kind::device; };
  switch (kind) {
    case cudaMemcpyHostToHost: return host_side(dst) && host_side(src);
    case cudaMemcpyHostToDevice: return on_device(dst) && host_side(src);
    case cudaMemcpyDeviceToHost: return host_side(dst) && on_device(src);
    case cudaMemcpyDeviceToDevice: return on_device(dst) && on_device(src);
    case cudaMemcpyDefault: return true;
  }
  return false;
}

// Where work goes for a call with `stream`: the named stream, which must exist.
Stream* stream_for(cudaStream_t stream) {
  bind_current_device();
  return find_stream(stream);
}

cudaError_t copy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src) return fail(cudaErrorInvalidValue);
  if (!direction_ok(dst, src, kind)) return fail(cudaErrorInvalidValue);
  Stream* s = stream_for(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  host_view(dst, bytes);  // checks the ranges now, where the caller can be found in a backtrace
  host_view(src, bytes);
  const bool pageable_src = lookup(src).kind == Kind::unregistered;
  const bool pageable_dst = lookup(dst).kind == Kind::unregistered;
  if (pageable_src && !pageable_dst) {
    // The runtime stages pageable sources before returning: the caller may reuse them at once.
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                      static_cast<const char*>(src) + bytes);
    enqueue_on(*s, [dst, staged, bytes] { std::memcpy(host_view(dst, bytes), staged->data(), bytes); });
    return cudaSuccess;
  }
  enqueue_on(*s, [dst, src, bytes] { std::memmove(host_view(dst, bytes), host_view(src, bytes), bytes); });
  // Into pageable memory the runtime returns only once the copy is done.
  if (pageable_dst && !pageable_src) drain(*s);
  return cudaSuccess;
}

cudaError_t set_async(void* dst, int value, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (lookup(dst).kind != Kind::device && lookup(dst).kind != Kind::managed) return fail(cudaErrorInvalidValue);
  Stream* s = stream_for(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  host_view(dst, bytes);
  enqueue_on(*s, [dst, value, bytes] { std::memset(host_view(dst, bytes), value, bytes); });
  return cudaSuccess;
}

}  // namespace

Region lookup(const void* ptr) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const Allocation* a = find_locked(ptr);
  return a ? a->region : Region{};
}

bool is_device_memory(const void* ptr) { return lookup(ptr).kind == Kind::device; }

void* host_view(const void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const Allocation* a = find_locked(ptr);
  if (!a) return const_cast<void*>(ptr);
  const size_t offset = static_cast<size_t>(static_cast<const char*>(ptr) - a->region.base);
  if (bytes > a->region.bytes - offset) {
    std::fprintf(stderr,
                 "weft CUDA emulator: access of %zu bytes at offset %zu of a %zu-byte allocation runs past its "
                 "end (a GPU would fault)\n",
                 bytes, offset, a->region.bytes);
    std::abort();
  }
  return a->alias + offset;
}

}  // namespace weft::emu

using namespace weft::emu;

extern "C" {

cudaError_t cudaMalloc(void** p, size_t bytes) { return allocate(p, bytes, Kind::device); }
cudaError_t cudaMallocManaged(void** p, size_t bytes, unsigned int) { return allocate(p, bytes, Kind::managed); }
cudaError_t cudaMallocHost(void** p, size_t bytes) { return allocate(p, bytes, Kind::pinned); }
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int) { return allocate(p, bytes, Kind::pinned); }
cudaError_t cudaFree(void* p) {
  // As the runtime: cudaFree synchronises the device, so memory in use by queued work is safe.
  synchronize_device(bind_current_device());
  return release(p, Kind::device);
}
cudaError_t cudaFreeHost(void* p) {
  synchronize_device(bind_current_device());
  return release(p, Kind::pinned);
}

cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t stream) {
  if (!stream_for(stream)) return fail(cudaErrorInvalidResourceHandle);
  return allocate(p, bytes, Kind::device);
}

// Memory pools: a pool is its device; allocations from it are device memory like any other
// (release thresholds are accepted and have nothing to act on).
struct Pool {
  int device;
};

cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps* props) {
  if (!pool || !props || props->allocType != cudaMemAllocationTypePinned ||
      props->location.type != cudaMemLocationTypeDevice) {
    return fail(cudaErrorInvalidValue);
  }
  if (props->location.id < 0 || props->location.id >= device_count()) return fail(cudaErrorInvalidDevice);
  *pool = reinterpret_cast<cudaMemPool_t>(new Pool{props->location.id});
  std::lock_guard<std::mutex> lock(g_mutex);
  pools().insert(*pool);
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  if (!value || attr != cudaMemPoolAttrReleaseThreshold) return fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(g_mutex);
  return pools().count(pool) ? cudaSuccess : fail(cudaErrorInvalidValue);
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (pools().erase(pool) == 0) return fail(cudaErrorInvalidValue);
  }
  delete reinterpret_cast<Pool*>(pool);
  return cudaSuccess;
}

cudaError_t cudaMallocFromPoolAsync(void** p, size_t bytes, cudaMemPool_t pool, cudaStream_t stream) {
  if (!stream_for(stream)) return fail(cudaErrorInvalidResourceHandle);
  int device;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!pools().count(pool)) return fail(cudaErrorInvalidValue);
    device = reinterpret_cast<Pool*>(pool)->device;
  }
  return allocate(p, bytes, Kind::device, device);
}

cudaError_t cudaFreeAsync(void* p, cudaStream_t stream) {
  Stream* s = stream_for(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  if (p && lookup(p).kind != Kind::device) return fail(cudaErrorInvalidValue);
  enqueue_on(*s, [p] { release(p, Kind::device); });  // freed when the stream gets there
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* ptr) {
  if (!attr) return fail(cudaErrorInvalidValue);
  std::memset(attr, 0, sizeof *attr);
  const Region r = lookup(ptr);
  switch (r.kind) {
    case Kind::unregistered: attr->type = cudaMemoryTypeUnregistered; attr->device = -2; break;
    case Kind::pinned: attr->type = cudaMemoryTypeHost; attr->device = 0; break;
    case Kind::device: attr->type = cudaMemoryTypeDevice; attr->device = r.device; break;
    case Kind::managed: attr->type = cudaMemoryTypeManaged; attr->device = r.device; break;
  }
  if (r.kind == Kind::device || r.kind == Kind::managed) attr->devicePointer = const_cast<void*>(ptr);
  if (r.kind != Kind::device) attr->hostPointer = const_cast<void*>(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  return copy_async(dst, src, bytes, kind, stream);
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t stream) {
  if (width > dpitch || width > spitch) return fail(cudaErrorInvalidValue);
  for (size_t row = 0; row < height; ++row) {
    cudaError_t e = copy_async(static_cast<char*>(dst) + row * dpitch, static_cast<const char*>(src) + row * spitch,
                               width, kind, stream);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  return set_async(dst, value, bytes, stream);
}

// The synchronous forms run on the legacy default stream (after the device's other blocking
// streams). As the CUDA runtime documents ("API synchronization behavior"), only some of them
// return when done: a copy from pageable host memory to the device returns once the source is
// staged (the legacy stream's earlier work done first), a copy between device buffers and a
// memset of device memory return at once. Work on a non-blocking stream is not ordered after
// them; a late_write() lands them later than such work usually runs, so a caller that does not
// synchronise sees the old bytes here as it may on a GPU.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  Stream* legacy = find_stream(cudaStreamLegacy);
  const Kind from = lookup(src).kind, to = lookup(dst).kind;
  const bool to_device = to == Kind::device;
  const bool early = to_device && (from == Kind::unregistered || from == Kind::device);
  if (early && legacy) {
    if (from == Kind::unregistered) drain(*legacy);
    late_write(*legacy);
  }
  cudaError_t e = copy_async(dst, src, bytes, kind, cudaStreamLegacy);
  if (e == cudaSuccess && !early) drain(*find_stream(cudaStreamLegacy));
  return e;
}

cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  Stream* legacy = find_stream(cudaStreamLegacy);
  const bool early = lookup(dst).kind == Kind::device;
  if (early && legacy) late_write(*legacy);
  cudaError_t e = set_async(dst, value, bytes, cudaStreamLegacy);
  if (e == cudaSuccess && !early) drain(*find_stream(cudaStreamLegacy));
  return e;
}

}  // extern "C"
