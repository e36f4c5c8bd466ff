// Private to core/device: device memory for one operation, allocated and freed in stream
// order (cudaMallocFromPoolAsync / cudaFreeAsync), so it is reused only after the work that
// uses it. The pool is the communicator's own (DeviceContext::scratch_pool), which keeps freed
// memory up to a threshold: CUDA's default pool returns everything at each synchronisation, so
// every call would map its scratch afresh. A null pool means the device's default pool.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "transports/cuda/cuda_util.h"

namespace weft::gpu {

class DeviceScratch {
 public:
  DeviceScratch(cudaMemPool_t pool, size_t bytes, cudaStream_t stream) : stream_(stream) {
    if (!bytes) return;
    cuda_check(pool ? cudaMallocFromPoolAsync(&data_, bytes, pool, stream) : cudaMallocAsync(&data_, bytes, stream),
               "allocating device scratch (stream-ordered)");
  }
  ~DeviceScratch() {
    if (data_) cudaFreeAsync(data_, stream_);
  }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  char* data() const { return static_cast<char*>(data_); }

 private:
  void* data_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace weft::gpu
