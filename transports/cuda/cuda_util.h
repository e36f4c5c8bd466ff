// The CUDA runtime as core/device uses it: errors as weft::Error, the device count of a
// machine that may have no GPU or driver, a scoped current device, pointer classification, and
// pools of events and pinned host buffers.
//
// libweft.so links the CUDA runtime statically (see core/device/device.cmake): without a
// driver every runtime call fails cleanly, and device_count() is then 0.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace weft::gpu {

// Throws weft::Error ("<what>: <CUDA error name>: <text>") unless err is cudaSuccess; clears the
// runtime's last error. Memory errors map to out_of_memory, bad handles/values to
// invalid_argument, everything else to transport.
void cuda_check(cudaError_t err, const char* what);
std::string cuda_error_text(cudaError_t err);

// cudaMalloc of `bytes` zeroed and settled: cudaMemset of device memory returns before the bytes
// are written, and work later queued on a non-blocking stream is not ordered after it (an H100
// run lost a pipeline's first activation to a late zeroing), so this waits for the memset. On
// failure nothing stays allocated and cuda_check's error names `what`.
void* cuda_malloc_zeroed(size_t bytes, const char* what);

// Visible devices; 0 when there is no driver or device (the reason is in *why when not NULL).
int device_count(std::string* why = nullptr);

// Makes `device` current for the scope and restores the caller's state afterwards, so that a
// weft call never changes the application's current device. The state restored is the driver's
// current context (through cuCtxGetCurrent/cuCtxSetCurrent, found via the runtime's driver entry
// points), including "none": restoring "device 0" instead would create a context on GPU 0 in
// every rank that had not picked its GPU yet (e.g. one that creates the communicator first).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  void* saved_context_ = nullptr;  // CUcontext
  bool have_context_api_ = false;
  int previous_ = -1;
  bool changed_ = false;
};

enum class MemKind { host, device, managed };
struct MemInfo {
  MemKind kind = MemKind::host;
  int device = -1;  // for device and managed memory
};
// What CUDA knows of a pointer: pageable and pinned host memory are both `host`.
MemInfo classify(const void* ptr);

// Events without timing, reused (creating one costs microseconds).
class EventPool {
 public:
  EventPool() = default;
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  cudaEvent_t take();
  void give(cudaEvent_t e);

 private:
  std::mutex mutex_;
  std::vector<cudaEvent_t> free_;
};

// Page-locked host memory (cudaHostAlloc), the staging area between device buffers and UCX.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& o) noexcept : data_(o.data_), bytes_(o.bytes_) { o.data_ = nullptr; o.bytes_ = 0; }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  char* data() const { return static_cast<char*>(data_); }
  size_t size() const { return bytes_; }
  // Forgets the memory without freeing it (a transfer may still write into it).
  void release() {
    data_ = nullptr;
    bytes_ = 0;
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Pinned buffers kept for reuse: take() hands out one of at least `bytes` (allocating when none
// is free), give() returns it. Allocation is slow (milliseconds), so the steady state reuses.
class PinnedPool {
 public:
  PinnedBuffer take(size_t bytes);
  void give(PinnedBuffer b);

 private:
  std::mutex mutex_;
  std::vector<PinnedBuffer> free_;
};

}  // namespace weft::gpu
