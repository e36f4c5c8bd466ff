// The device watchdog across ranks, run under weftrun: rank 0 skips a device allreduce that
// the others call. NCCL itself would wait forever; weft must end the others' wait at the
// communicator's deadline with WEFT_ERR_TIMEOUT naming the operation (and, on NCCL, its
// sequence number), abort the NCCL communicator, refuse later calls, and let every rank destroy
// its communicator and exit. Staged (WEFT_DEVICE=0: ranks share a GPU) the same holds through
// the host path's deadline. Exits 77 (ctest: skipped) when no GPU is visible.
#include <cuda_runtime_api.h>
#include <weft/weft.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

constexpr int64_t kTimeoutMs = 2000;

int fail(int rank, const char* what, const char* detail) {
  std::fprintf(stderr, "rank %d: %s: %s\n", rank, what, detail);
  return 1;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no GPU\n");
    return 77;
  }
  weft_comm_config_t cfg = WEFT_COMM_CONFIG_INIT;
  cfg.timeout_ms = kTimeoutMs;
  weft_comm_t comm = nullptr;
  if (weft_comm_init_from_env(&comm, &cfg) != WEFT_OK) return fail(-1, "weft_comm_init_from_env", weft_last_error());
  int rank = 0, size = 1;
  weft_comm_rank(comm, &rank);
  weft_comm_size(comm, &size);
  int device = rank % devices;
  if (const char* v = std::getenv("WEFT_DEVICE")) device = std::atoi(v);
  cudaSetDevice(device);
  void* d = nullptr;
  cudaMalloc(&d, 64);
  cudaMemset(d, 0, 64);

  // All ranks: the path works (and NCCL, where chosen, is connected).
  if (weft_allreduce(d, d, 16, WEFT_FLOAT32, WEFT_SUM, comm, nullptr, nullptr) != WEFT_OK) {
    return fail(rank, "first allreduce", weft_last_error());
  }
  int bad = 0;
  if (rank == 0) {
    // Stay away past the others' deadline, then leave.
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * kTimeoutMs + 1000));
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    weft_status_t st = weft_allreduce(d, d, 16, WEFT_FLOAT32, WEFT_SUM, comm, nullptr, nullptr);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    const std::string msg = weft_last_error();
    std::printf("rank %d: after %lld ms: %s: %s\n", rank, static_cast<long long>(ms), weft_status_string(st),
                msg.c_str());
    if (st != WEFT_ERR_TIMEOUT) bad += fail(rank, "second allreduce", "expected WEFT_ERR_TIMEOUT");
    if (msg.find("allreduce") == std::string::npos) bad += fail(rank, "timeout message", "does not name allreduce");
    if (ms < kTimeoutMs - 100 || ms > kTimeoutMs + 1500) bad += fail(rank, "timeout", "not near the deadline");
    // The communicator stays unusable; device and host calls say so at once.
    int x = 1;
    if (weft_allreduce(&x, &x, 1, WEFT_INT32, WEFT_SUM, comm, nullptr, nullptr) == WEFT_OK ||
        weft_allreduce(d, d, 16, WEFT_FLOAT32, WEFT_SUM, comm, nullptr, nullptr) == WEFT_OK) {
      bad += fail(rank, "after the timeout", "a call on the timed-out communicator succeeded");
    }
  }
  cudaFree(d);
  if (weft_comm_destroy(comm) != WEFT_OK) bad += fail(rank, "weft_comm_destroy", weft_last_error());
  if (bad) return 1;
  std::printf("rank %d: watchdog behaved\n", rank);
  return 0;
}
