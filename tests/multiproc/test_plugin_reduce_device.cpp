// Custom reduction operators (weft/plugin.h) on device memory: over NCCL they are refused
// (WEFT_ERR_UNSUPPORTED naming the operator and NCCL: NCCL reduces on the GPU with its own
// operators); where the device path stages through host memory (ranks sharing a GPU, or
// WEFT_NCCL=0) the host algorithms run them, and the result must match the reference here
// (absmax of plugins/c_reduce: exact, as in test_plugin_reduce.cpp).
//
//   weftrun -n N weft_mp_plugin_reduce_device --expect=nccl|staged|any
// Environment: WEFT_TEST_C_REDUCE = the plugin's path. Exit 77 (skip) without a usable GPU.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "inject.h"
#include "mp_common.h"

namespace {

// Rank r's element i: multiples of 1/64 in [-156, 156], exact in float32.
float input(int r, size_t i) {
  return static_cast<float>(static_cast<double>((static_cast<uint64_t>(r) * 7919 + i * 104729) % 20001) - 10000.0) /
         64.0f;
}

// absmax over ranks; a single rank's value is itself (no merge happens).
float reference(int n, size_t i) {
  if (n == 1) return input(0, i);
  float m = 0;
  for (int r = 0; r < n; ++r) m = std::fmax(m, std::fabs(input(r, i)));
  return m;
}

size_t first_wrong(const std::vector<float>& got, int n) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != reference(n, i)) return i;
  }
  return got.size();
}

}  // namespace

int main(int argc, char** argv) {
  std::string expect = "any";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--expect=", 9) == 0) expect = argv[i] + 9;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("skipped: no usable CUDA device\n");
    return 77;
  }
  mpt::World w = mpt::init_world();
  mpt::set_log_rank(w.rank, w.size);
  int device = w.rank % devices;
  if (const char* v = std::getenv("WEFT_DEVICE")) device = std::atoi(v);
  cudaSetDevice(device);

  const char* path = std::getenv("WEFT_TEST_C_REDUCE");
  if (!path) mpt::die("WEFT_TEST_C_REDUCE is not set");
  weft_plugin_t plugin = nullptr;
  MPT_OK(weft_plugin_load(path, &plugin));
  weft_plugin_entry_t e = WEFT_PLUGIN_ENTRY_INIT;
  MPT_OK(weft_plugin_lookup(plugin, "absmax", &e));
  weft_op_t absmax;
  std::memcpy(&absmax, &e.id, sizeof absmax);

  const size_t count = 1023;
  std::vector<float> host(count), got(count, -1.0f);
  for (size_t i = 0; i < count; ++i) host[i] = input(w.rank, i);
  void* dev = nullptr;
  if (cudaMalloc(&dev, count * sizeof(float)) != cudaSuccess) mpt::die("cudaMalloc failed");
  cudaMemcpy(dev, host.data(), count * sizeof(float), cudaMemcpyHostToDevice);

  const weft_status_t s = weft_allreduce(dev, dev, count, WEFT_FLOAT32, absmax, w.comm, nullptr, nullptr);
  const std::string err = mpt::last_error();
  int failures = 0;
  if (s == WEFT_OK) {
    mpt::logf("device allreduce with absmax ran (staged through host memory)");
    if (expect == "nccl") {
      mpt::logf("FAIL: expected WEFT_ERR_UNSUPPORTED over NCCL, got WEFT_OK");
      ++failures;
    }
    cudaMemcpy(got.data(), dev, count * sizeof(float), cudaMemcpyDeviceToHost);
    const size_t at = first_wrong(got, w.size);
    if (at < count) {
      mpt::logf("FAIL: element %zu is %g, expected %g", at, double(got[at]), double(reference(w.size, at)));
      ++failures;
    }
    if (mpt::inject_enabled()) {  // the check must refuse one corrupted element
      got[count / 3] = -got[count / 3] - 1.0f;
      const bool caught = first_wrong(got, w.size) < count;
      mpt::logf("injected 1, caught %d", caught ? 1 : 0);
      if (!caught) ++failures;
    }
  } else {
    mpt::logf("device allreduce with absmax: %s: %s", mpt::status_name(s), err.c_str());
    if (expect == "staged") {
      mpt::logf("FAIL: expected the staged path to run the operator");
      ++failures;
    }
    if (s != WEFT_ERR_UNSUPPORTED || !mpt::contains_ci(err, "absmax") || !mpt::contains_ci(err, "NCCL")) {
      mpt::logf("FAIL: expected WEFT_ERR_UNSUPPORTED naming 'absmax' and NCCL");
      ++failures;
    }
  }
  cudaFree(dev);
  weft_plugin_destroy(plugin);
  weft_comm_destroy(w.comm);  // after a refused call its status is not what this test checks
  if (failures) mpt::logf("FAILED");
  return failures ? 1 : 0;
}
