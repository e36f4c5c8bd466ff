#include "transports/nccl/cuda_util.h"

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

DeviceGuard::DeviceGuard(int device) {
  cuda_check(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device) {
    cuda_check(cudaSetDevice(device), "cudaSetDevice");
    changed_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (changed_) cudaSetDevice(previous_);
}

MemInfo classify(const void* ptr) {
  MemInfo info;
  cudaPointerAttributes attr{};
  cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) {
    // Memory CUDA does not know (older runtimes answer with an error instead of "unregistered").
    cudaGetLastError();
    return info;
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice:
      info.kind = MemKind::device;
      info.device = attr.device;
      break;
    case cudaMemoryTypeManaged:
      info.kind = MemKind::managed;
      info.device = attr.device;
      break;
    case cudaMemoryTypeHost:
    case cudaMemoryTypeUnregistered:
      break;
  }
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
  // Round up so that slowly growing sizes do not allocate every time.
  size_t cap = 4096;
  while (cap < bytes && cap < (size_t{1} << 40)) cap *= 2;
  if (cap < bytes) cap = bytes;
  return PinnedBuffer(cap);
}

void PinnedPool::give(PinnedBuffer b) {
  if (!b.data()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(std::move(b));
  // Keep a handful; the largest are the most useful.
  if (free_.size() > 8) {
    size_t smallest = 0;
    for (size_t i = 1; i < free_.size(); ++i) {
      if (free_[i].size() < free_[smallest].size()) smallest = i;
    }
    free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(smallest));
  }
}

}  // namespace weft::gpu
