// The multi-rank device tests' one rule for this rank's GPU: the one weft gives its
// communicator (weft.h: WEFT_DEVICE, else local rank % visible devices; the tests run on one
// host, so local rank == rank). A test's device buffers must live there, or weft refuses them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdlib>

namespace weft::gputest {

// Makes this rank's GPU current and returns its number (devices: cudaGetDeviceCount's, > 0).
inline int use_rank_device(int rank, int devices) {
  int device = rank % devices;
  if (const char* v = std::getenv("WEFT_DEVICE")) device = std::atoi(v);
  cudaSetDevice(device);
  return device;
}

}  // namespace weft::gputest
