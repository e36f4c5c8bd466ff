// weft-gpu-bench: the numbers scripts/gpu-check reports, as a table.
//
//  1. Each kernel of kernels/cuda: bandwidth (bytes read + written per second) as a fraction of
//     a device-to-device cudaMemcpy measured the same way (target >= 85%).
//  2. weft's per-call overhead over a raw NCCL call of the same collective: issuing a
//     one-element allreduce on a user stream (stream-ordered, no request) through weft_allreduce
//     and through ncclAllReduce on a single-rank communicator of each (target <= 2 us). Calls are
//     issued in batches well below CUDA's launch queue depth and only the issuing is timed.
//
// Exit status: 0 when every target is met, 2 when one is missed, 1 when it cannot run (no GPU).
//   weft-gpu-bench [--mib N] [--iters N]
#include <cuda_runtime_api.h>
#include <weft/weft.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/common/dtype.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/fill.h"
#include "kernels/cuda/order_key.h"
#include "kernels/cuda/reduce.h"
#include "transports/nccl/nccl_lib.h"

namespace {

using weft::DType;
using weft::ReduceOp;
namespace kc = weft::kernels::cuda;

int g_missed = 0;

#define BENCH_CUDA(call)                                                                     \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "weft-gpu-bench: %s: %s\n", #call, cudaGetErrorString(e_));        \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

// Seconds per run of `body` (queued on `s`), best of `iters` after a warm-up.
double time_gpu(cudaStream_t s, int iters, const std::function<void()>& body) {
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  body();
  BENCH_CUDA(cudaStreamSynchronize(s));
  float best = 1e30f;
  for (int i = 0; i < iters; ++i) {
    BENCH_CUDA(cudaEventRecord(a, s));
    body();
    BENCH_CUDA(cudaEventRecord(b, s));
    BENCH_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
    best = std::min(best, ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return best / 1e3;
}

// Median seconds per call of `issue`, timing batches of calls on the host.
double time_issue(cudaStream_t s, const std::function<void()>& issue) {
  constexpr int kBatch = 200, kBatches = 30;
  std::vector<double> per_call;
  for (int b = 0; b < kBatches + 3; ++b) {
    BENCH_CUDA(cudaStreamSynchronize(s));
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kBatch; ++i) issue();
    auto t1 = std::chrono::steady_clock::now();
    if (b >= 3) per_call.push_back(std::chrono::duration<double>(t1 - t0).count() / kBatch);
  }
  BENCH_CUDA(cudaStreamSynchronize(s));
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

void kernel_table(size_t bytes, int iters, cudaStream_t s) {
  void *x, *y, *z;
  BENCH_CUDA(cudaMalloc(&x, bytes));
  BENCH_CUDA(cudaMalloc(&y, bytes));
  BENCH_CUDA(cudaMalloc(&z, bytes));
  BENCH_CUDA(cudaMemsetAsync(x, 0x3c, bytes, s));
  BENCH_CUDA(cudaMemsetAsync(y, 0x3c, bytes, s));
  const double copy_s = time_gpu(s, iters, [&] { cudaMemcpyAsync(z, x, bytes, cudaMemcpyDeviceToDevice, s); });
  const double copy_bw = 2.0 * static_cast<double>(bytes) / copy_s;
  std::printf("\nkernel bandwidth vs device-to-device cudaMemcpy (%.1f GB/s moved, %zu MiB buffers)\n",
              copy_bw / 1e9, bytes >> 20);
  std::printf("%-30s %12s %10s %8s  %s\n", "kernel", "GB/s", "vs copy", "target", "");
  struct Row {
    std::string name;
    double moved;  // bytes read + written per run
    std::function<void()> run;
  };
  std::vector<Row> rows;
  auto n_of = [&](DType d) { return bytes / weft::dtype_size(d); };
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::f8e4m3, DType::i32, DType::u8}) {
    const size_t n = n_of(d);
    rows.push_back({std::string("reduce sum ") + weft::dtype_name(d), 3.0 * static_cast<double>(n * weft::dtype_size(d)),
                    [=] { kc::reduce(z, x, y, n, d, ReduceOp::sum, s); }});
  }
  rows.push_back({"reduce max f32", 3.0 * static_cast<double>(bytes),
                  [=] { kc::reduce(z, x, y, bytes / 4, DType::f32, ReduceOp::max, s); }});
  rows.push_back({"divide_by f32 (in place)", 2.0 * static_cast<double>(bytes),
                  [=] { kc::divide_by(z, bytes / 4, DType::f32, 3, s); }});
  rows.push_back({"divide_by i64 (in place)", 2.0 * static_cast<double>(bytes),
                  [=] { kc::divide_by(z, bytes / 8, DType::i64, 3, s); }});
  for (DType d : {DType::f16, DType::bf16, DType::f8e4m3, DType::f8e5m2}) {
    const size_t n = bytes / 4, e = weft::dtype_size(d);
    rows.push_back({std::string("widen ") + weft::dtype_name(d) + " -> f32", static_cast<double>(n * (e + 4)),
                    [=] { kc::widen_to_f32(static_cast<float*>(z), x, d, n, s); }});
    rows.push_back({std::string("narrow f32 -> ") + weft::dtype_name(d), static_cast<double>(n * (e + 4)),
                    [=] { kc::narrow_from_f32(z, d, static_cast<const float*>(x), n, s); }});
  }
  rows.push_back({"to_order_key f32", 2.0 * static_cast<double>(bytes),
                  [=] { kc::to_order_key(z, x, DType::f32, bytes / 4, ReduceOp::max, s); }});
  rows.push_back({"from_order_key f32", 2.0 * static_cast<double>(bytes),
                  [=] { kc::from_order_key(z, DType::f32, x, bytes / 4, s); }});
  const uint32_t pattern = 0x3f800000u;
  rows.push_back({"fill u32", static_cast<double>(bytes), [=] { kc::fill(z, 4, &pattern, bytes / 4, s); }});
  for (const Row& r : rows) {
    const double bw = r.moved / time_gpu(s, iters, r.run);
    const double frac = bw / copy_bw;
    const bool ok = frac >= 0.85;
    if (!ok) ++g_missed;
    std::printf("%-30s %12.1f %9.0f%% %7s  %s\n", r.name.c_str(), bw / 1e9, 100.0 * frac, ">=85%",
                ok ? "ok" : "BELOW TARGET");
  }
  cudaFree(x);
  cudaFree(y);
  cudaFree(z);
}

void overhead_table(cudaStream_t s) {
  std::string why;
  const weft::gpu::NcclApi* nccl = weft::gpu::nccl_api(&why);
  if (!nccl) {
    std::printf("\nper-call overhead: skipped (%s)\n", why.c_str());
    ++g_missed;
    return;
  }
  int dev = 0;
  BENCH_CUDA(cudaGetDevice(&dev));
  float* buf;
  BENCH_CUDA(cudaMalloc(reinterpret_cast<void**>(&buf), 256));
  BENCH_CUDA(cudaMemset(buf, 0, 256));

  ncclUniqueId id;
  ncclComm_t raw = nullptr;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;  // blocking, as most NCCL programs use it
  if (nccl->GetUniqueId(&id) != ncclSuccess || nccl->CommInitRankConfig(&raw, 1, id, 0, &cfg) != ncclSuccess) {
    std::fprintf(stderr, "weft-gpu-bench: ncclCommInitRankConfig failed\n");
    std::exit(1);
  }
  weft_unique_id_t wid;
  weft_comm_t comm = nullptr;
  if (weft_get_unique_id(&wid) != WEFT_OK || weft_comm_init(&comm, &wid, 0, 1, nullptr) != WEFT_OK) {
    std::fprintf(stderr, "weft-gpu-bench: weft_comm_init: %s\n", weft_last_error());
    std::exit(1);
  }
  const double t_nccl = time_issue(s, [&] { nccl->AllReduce(buf, buf, 1, ncclFloat32, ncclSum, raw, s); });
  const double t_weft = time_issue(s, [&] { weft_allreduce(buf, buf, 1, WEFT_FLOAT32, WEFT_SUM, comm, s, nullptr); });
  const double t_req = time_issue(s, [&] {
    weft_request_t r = nullptr;
    weft_allreduce(buf, buf, 1, WEFT_FLOAT32, WEFT_SUM, comm, s, &r);
    weft_request_free(r);
  });
  const double overhead_us = (t_weft - t_nccl) * 1e6;
  const bool ok = overhead_us <= 2.0;
  if (!ok) ++g_missed;
  std::printf("\nper-call overhead, 1-element allreduce, single-rank communicators, device %d\n", dev);
  std::printf("%-46s %10s\n", "call", "us/call");
  std::printf("%-46s %10.2f\n", "ncclAllReduce (raw NCCL)", t_nccl * 1e6);
  std::printf("%-46s %10.2f\n", "weft_allreduce, stream-ordered", t_weft * 1e6);
  std::printf("%-46s %10.2f\n", "weft_allreduce + request (issue, free=wait)", t_req * 1e6);
  std::printf("%-46s %10.2f  target <= 2.00  %s\n", "weft overhead over NCCL", overhead_us,
              ok ? "ok" : "ABOVE TARGET");
  weft_comm_destroy(comm);
  nccl->CommDestroy(raw);
  cudaFree(buf);
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 256;
  int iters = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--mib")) mib = std::strtoull(argv[i + 1], nullptr, 10);
    if (!std::strcmp(argv[i], "--iters")) iters = std::atoi(argv[i + 1]);
  }
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n == 0) {
    std::fprintf(stderr, "weft-gpu-bench: no GPU found (%s)\n",
                 err != cudaSuccess ? cudaGetErrorString(err) : "no device visible");
    return 1;
  }
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  BENCH_CUDA(cudaSetDevice(0));
  std::printf("weft-gpu-bench on %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  cudaStream_t s;
  BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  kernel_table(mib << 20, iters, s);
  overhead_table(s);
  cudaStreamDestroy(s);
  std::printf("\n%s\n", g_missed ? "some targets were missed" : "all targets met");
  return g_missed ? 2 : 0;
}
