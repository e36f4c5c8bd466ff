// Private to transports/nccl: device memory for one operation, allocated and freed in stream
// order (cudaMallocAsync / cudaFreeAsync), so it is reused only after the work that uses it
// and the steady state allocates from CUDA's pool without synchronising.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "transports/nccl/cuda_util.h"

namespace weft::gpu {

class DeviceScratch {
 public:
  DeviceScratch(size_t bytes, cudaStream_t stream) : stream_(stream) {
    if (bytes) cuda_check(cudaMallocAsync(&data_, bytes, stream), "cudaMallocAsync for device scratch");
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
