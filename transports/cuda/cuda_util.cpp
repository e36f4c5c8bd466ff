#include "transports/cuda/cuda_util.h"

#include <cuda.h>

#include "core/common/status.h"

namespace weft::gpu {

std::string cuda_error_text(cudaError_t err) {
  return format("%s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
}

void cuda_check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear the non-sticky error so the next call starts clean
  Status s = Status::transport;
  if (err == cudaErrorMemoryAllocation) s = Status::out_of_memory;
  if (err == cudaErrorInvalidValue || err == cudaErrorInvalidResourceHandle || err == cudaErrorInvalidDevice ||
      err == cudaErrorInvalidDevicePointer) {
    s = Status::invalid_argument;
  }
  throw Error(s, format("%s: %s", what, cuda_error_text(err).c_str()));
}

void* cuda_malloc_zeroed(size_t bytes, const char* what) {
  void* p = nullptr;
  cuda_check(cudaMalloc(&p, bytes), what);
  cudaError_t e = cudaMemset(p, 0, bytes);
  if (e == cudaSuccess) e = cudaStreamSynchronize(nullptr);
  if (e != cudaSuccess) {
    cudaFree(p);
    cuda_check(e, what);
  }
  return p;
}

int device_count(std::string* why) {
  // Asked once: the answer does not change for the process (CUDA_VISIBLE_DEVICES is read at
  // initialisation), and a failing driver load is slow to repeat.
  static const std::pair<int, std::string> answer = [] {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return std::make_pair(0, "cudaGetDeviceCount: " + cuda_error_text(err));
    }
    if (n == 0) return std::make_pair(0, std::string("no CUDA device is visible"));
    return std::make_pair(n, std::string());
  }();
  if (why) *why = answer.second;
  return answer.first;
}

namespace {

// A few driver functions, reached through the runtime's entry points (libcuda.so.1 is loaded by
// the runtime, never linked): the current context, and pointer attributes, which the driver
// answers without a current context (cudaPointerGetAttributes may create one first).
struct Driver {
  decltype(&::cuCtxGetCurrent) ctx_get = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set = nullptr;
  decltype(&::cuPointerGetAttributes) pointer_attributes = nullptr;
};

template <class F>
void entry_point(const char* name, F& slot) {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &q) == cudaSuccess &&
      q == cudaDriverEntryPointSuccess) {
    slot = reinterpret_cast<F>(f);
  }
  cudaGetLastError();
}

const Driver& driver() {
  static const Driver d = [] {
    Driver x;
    entry_point("cuCtxGetCurrent", x.ctx_get);
    entry_point("cuCtxSetCurrent", x.ctx_set);
    entry_point("cuPointerGetAttributes", x.pointer_attributes);
    if (!x.ctx_get || !x.ctx_set) x.ctx_get = nullptr, x.ctx_set = nullptr;
    return x;
  }();
  return d;
}

}  // namespace

DeviceGuard::DeviceGuard(int device) {
  const Driver& d = driver();
  CUcontext current = nullptr;
  have_context_api_ = d.ctx_get && d.ctx_get(&current) == CUDA_SUCCESS;
  saved_context_ = current;
  cuda_check(cudaGetDevice(&previous_), "cudaGetDevice");
  // Nothing to do when the device is current with a context bound.
  if (previous_ == device && (!have_context_api_ || saved_context_)) return;
  cuda_check(cudaSetDevice(device), "cudaSetDevice");
  changed_ = true;
}

DeviceGuard::~DeviceGuard() {
  if (!changed_) return;
  if (have_context_api_) {
    driver().ctx_set(static_cast<CUcontext>(saved_context_));
  } else {
    cudaSetDevice(previous_);
  }
}

MemInfo classify(const void* ptr) {
  MemInfo info;
  if (const auto query = driver().pointer_attributes) {
    CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    unsigned int type = 0;
    unsigned int managed = 0;  // the driver writes a bool-sized value; zeroed first
    int ordinal = -1;
    void* data[3] = {&type, &managed, &ordinal};
    // Memory the driver does not know: success with type 0 (host).
    if (query(3, attrs, data, reinterpret_cast<CUdeviceptr>(ptr)) != CUDA_SUCCESS) return info;
    if (managed) {
      info.kind = MemKind::managed;
      info.device = ordinal;
    } else if (type == CU_MEMORYTYPE_DEVICE) {
      info.kind = MemKind::device;
      info.device = ordinal;
    }
    return info;
  }
  cudaPointerAttributes attr{};
  cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) {
    // Memory CUDA does not know (older runtimes answer with an error instead of "unregistered").
    cudaGetLastError();
    return info;
  }
  if (attr.type == cudaMemoryTypeDevice) info.kind = MemKind::device;
  if (attr.type == cudaMemoryTypeManaged) info.kind = MemKind::managed;
  info.device = attr.device;
  return info;
}

EventPool::~EventPool() {
  for (cudaEvent_t e : free_) cudaEventDestroy(e);
}

cudaEvent_t EventPool::take() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!free_.empty()) {
      cudaEvent_t e = free_.back();
      free_.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;
  cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  return e;
}

void EventPool::give(cudaEvent_t e) {
  if (!e) return;
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(e);
}

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  cudaError_t err = cudaHostAlloc(&data_, bytes, cudaHostAllocPortable);
  if (err != cudaSuccess) {
    data_ = nullptr;
    bytes_ = 0;
    cudaGetLastError();
    fail(Status::out_of_memory, "cudaHostAlloc of %zu bytes of pinned staging memory failed: %s", bytes,
         cuda_error_text(err).c_str());
  }
}

PinnedBuffer::~PinnedBuffer() {
  if (data_) cudaFreeHost(data_);
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    if (data_) cudaFreeHost(data_);
    data_ = o.data_;
    bytes_ = o.bytes_;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

PinnedBuffer PinnedPool::take(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].size() >= bytes && (best == free_.size() || free_[i].size() < free_[best].size())) best = i;
    }
    if (best != free_.size()) {
      PinnedBuffer b = std::move(free_[best]);
      free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
      return b;
    }
  }
  // Round up so that slowly growing sizes do not allocate every time: to a power of two up to
  // 64 MiB, then to a multiple of 64 MiB (so a huge request pins at most 64 MiB more than asked).
  constexpr size_t kStep = size_t{64} << 20;
  size_t cap = 4096;
  while (cap < bytes && cap < kStep) cap *= 2;
  if (cap < bytes) cap = (bytes + kStep - 1) / kStep * kStep;
  return PinnedBuffer(cap);
}

void PinnedPool::give(PinnedBuffer b) {
  if (!b.data()) return;
  // Pinned memory is locked out of the host's reach: keep at most 8 buffers and 512 MiB, giving
  // the largest back first (a few huge staged messages must not stay pinned for good).
  constexpr size_t kMaxBuffers = 8;
  constexpr size_t kMaxBytes = size_t{512} << 20;
  std::vector<PinnedBuffer> freed;  // released after the lock
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(std::move(b));
  size_t total = 0;
  for (const PinnedBuffer& p : free_) total += p.size();
  while (!free_.empty() && (free_.size() > kMaxBuffers || total > kMaxBytes)) {
    size_t victim = 0;
    for (size_t i = 1; i < free_.size(); ++i) {
      // Over the byte cap the largest goes; over the count cap the smallest (least useful).
      const bool larger = free_[i].size() > free_[victim].size();
      if (total > kMaxBytes ? larger : !larger && free_[i].size() != free_[victim].size()) victim = i;
    }
    total -= free_[victim].size();
    freed.push_back(std::move(free_[victim]));
    free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(victim));
  }
}

}  // namespace weft::gpu
