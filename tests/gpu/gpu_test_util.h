// Shared by the GPU tests: whether a GPU is usable (tests skip with the reason when not) and
// device buffers.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace weft::gputest {

// True when the CUDA runtime sees a device; else *why says what it reported.
inline bool gpu_available(std::string* why) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    *why = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    cudaGetLastError();
    return false;
  }
  if (n == 0) {
    *why = "no CUDA device visible";
    return false;
  }
  return true;
}

#define WEFT_REQUIRE_GPU()                                                      \
  do {                                                                          \
    std::string why_;                                                           \
    if (!::weft::gputest::gpu_available(&why_)) GTEST_SKIP() << "no GPU: " << why_; \
  } while (0)

#define WEFT_CUDA_OK(call) ASSERT_EQ(cudaSuccess, (call)) << #call << ": " << cudaGetErrorString(cudaGetLastError())

// cudaMalloc'd bytes, freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes && cudaMalloc(&ptr_, bytes) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  size_t size() const { return bytes_; }
  // Settled before returning (cudaMemcpy from pageable memory returns before the bytes land).
  void upload(const void* host) const {
    cudaMemcpy(ptr_, host, bytes_, cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();
  }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> out(bytes_);
    cudaMemcpy(out.data(), ptr_, bytes_, cudaMemcpyDeviceToHost);
    return out;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

}  // namespace weft::gputest
