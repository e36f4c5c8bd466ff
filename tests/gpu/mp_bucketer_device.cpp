// The gradient bucketer (weft/training.h) on CUDA device memory, run under weftrun (1 or more
// ranks): all-reduce and reduce-scatter, SUM and AVG, f32/f16/bf16 gradients of 0, 1, odd and
// large sizes in buckets of one gradient (reduced in place) and of several, marked with a NULL
// stream and with a user stream, over two steps; plus a bucketer holding host and device
// gradients (a bucket per memory kind). Staged (every rank on GPU 0) or on NCCL (a GPU per rank;
// emulated: the stand-in), as the environment chooses.
//
// Expected values: gradient g's element i on rank r is a small integer (grad_value), so every sum
// is exact; AVG divides the exact sum in float32 and rounds once (weft.h's rule), written here.
// Results are read back to the host with cudaMemcpy after finish().
//
// Exits 77 when no GPU is visible. WEFT_TEST_INJECT=1 corrupts one element of every non-empty
// result before it is checked; the program then passes only when every corruption was caught.
#include <cuda_runtime_api.h>
#include <weft/weft.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "rank_device.h"
#include "injection.h"
#include "mp_common.h"
#include "reference.h"

namespace {

int g_failures = 0, g_injected = 0, g_caught = 0;

#define CUDA_OK(call)                                                                    \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) {                                                             \
      mpt::logf("FAIL %s: %s\n", #call, cudaGetErrorString(e_));                         \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)
#define WEFT_OK(call)                                                                    \
  do {                                                                                   \
    weft_status_t s_ = (call);                                                           \
    if (s_ != WEFT_OK) {                                                                 \
      mpt::logf("FAIL %s: %s: %s\n", #call, mpt::status_name(s_), mpt::last_error().c_str()); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

double grad_value(int r, size_t g, size_t i) { return static_cast<double>(static_cast<int>((i * 5 + g * 3 + r) % 9) - 4); }

struct Case {
  weft_dtype_t dt;
  weft_op_t op;
  weft_bucket_reduction_t red;
  size_t bucket_bytes;
  bool user_stream;
  bool mixed_memory;  // the last gradient in host memory
};

std::string describe(const Case& c) {
  return std::string(mpt::dtype_name(c.dt)) + " " + mpt::op_name(c.op) + (c.red ? " reduce-scatter" : " all-reduce") +
         " bucket_bytes " + std::to_string(c.bucket_bytes) + (c.user_stream ? " user stream" : " NULL stream") +
         (c.mixed_memory ? " + a host gradient" : "");
}

// Compares `n` elements of `got` (host copy) with expected(i); with injection, corrupts one first.
template <class Expected>
void compare(const Case& c, const char* what, std::vector<unsigned char>& got, size_t n, Expected expected) {
  const bool injected = weft::gputest::inject(got.data(), c.dt, n);
  bool ok = true;
  for (size_t i = 0; i < n && ok; ++i) ok = mpt::load_bits(c.dt, got.data(), i) == expected(i);
  if (injected) {
    ++g_injected;
    g_caught += ok ? 0 : 1;
    return;
  }
  if (!ok) {
    ++g_failures;
    mpt::logf("FAIL %s: %s does not match the reference\n", describe(c).c_str(), what);
  }
}

void run(const Case& c, int rank, int size, weft_comm_t comm) {
  const std::vector<size_t> sizes = {0, 1, 7, 1000, 4099, 3};
  const size_t esize = mpt::dtype_bytes(c.dt);
  const size_t n = sizes.size();
  std::vector<void*> dev(n, nullptr);
  std::vector<std::vector<unsigned char>> host(n);
  std::vector<int64_t> shapes(n);
  std::vector<weft_tensor_t> views(n);
  for (size_t g = 0; g < n; ++g) {
    const bool on_host = c.mixed_memory && g == n - 1;
    host[g].assign(std::max<size_t>(1, sizes[g]) * esize, 0);
    if (!on_host) CUDA_OK(cudaMalloc(&dev[g], std::max<size_t>(1, sizes[g]) * esize));
    shapes[g] = static_cast<int64_t>(sizes[g]);
    views[g] = weft_tensor_t{};
    views[g].data = on_host ? host[g].data() : dev[g];
    views[g].device_type = on_host ? WEFT_DEVICE_CPU : WEFT_DEVICE_CUDA;
    views[g].ndim = 1;
    views[g].dtype = c.dt;
    views[g].shape = &shapes[g];
  }
  weft_bucketer_config_t cfg = WEFT_BUCKETER_CONFIG_INIT;
  cfg.bucket_bytes = c.bucket_bytes;
  cfg.op = c.op;
  cfg.reduction = c.red;
  weft_bucketer_t b = nullptr;
  WEFT_OK(weft_bucketer_create(comm, views.data(), n, &cfg, &b));
  cudaStream_t stream = nullptr;
  if (c.user_stream) CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int step = 0; step < 2; ++step) {
    for (size_t g = 0; g < n; ++g) {
      for (size_t i = 0; i < sizes[g]; ++i) {
        mpt::store_bits(c.dt, host[g].data(), i, mpt::encode_float(c.dt, grad_value(rank, g + step, i), false));
      }
      if (dev[g]) CUDA_OK(cudaMemcpy(dev[g], host[g].data(), sizes[g] * esize, cudaMemcpyHostToDevice));
    }
    CUDA_OK(cudaDeviceSynchronize());  // cudaMemcpy from pageable memory may return before the bytes land
    for (size_t g = 0; g < n; ++g) {
      WEFT_OK(weft_bucketer_mark_ready(b, g, views[g].data, dev[g] ? stream : nullptr));
    }
    WEFT_OK(weft_bucketer_finish(b, stream));
    auto expected = [&](size_t g, size_t i) {
      double sum = 0.0;
      for (int r = 0; r < size; ++r) sum += grad_value(r, g + step, i);
      if (c.op == WEFT_AVG) sum = static_cast<double>(static_cast<float>(sum) / static_cast<float>(size));
      return mpt::encode_float(c.dt, sum, false);
    };
    for (size_t g = 0; g < n; ++g) {
      size_t bucket = 0, offset = 0;
      WEFT_OK(weft_bucketer_bucket_of(b, g, &bucket, &offset));
      if (c.red == WEFT_BUCKET_ALLREDUCE) {
        std::vector<unsigned char> got(host[g].size());
        if (dev[g]) {
          CUDA_OK(cudaMemcpy(got.data(), dev[g], sizes[g] * esize, cudaMemcpyDeviceToHost));
        } else {
          got = host[g];
        }
        compare(c, "an all-reduced gradient", got, sizes[g], [&](size_t i) { return expected(g, i); });
        continue;
      }
      weft_tensor_t shard{};
      size_t shard_off = 0;
      WEFT_OK(weft_bucketer_shard(b, bucket, &shard, &shard_off));
      const size_t count = static_cast<size_t>(shard.shape[0]);
      const size_t lo = std::max(offset, shard_off), hi = std::min(offset + sizes[g], shard_off + count);
      if (lo >= hi) continue;
      std::vector<unsigned char> got((hi - lo) * esize);
      const char* src = static_cast<const char*>(shard.data) + (lo - shard_off) * esize;
      CUDA_OK(cudaMemcpy(got.data(), src, got.size(),
                         shard.device_type == WEFT_DEVICE_CUDA ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost));
      compare(c, "a reduce-scattered chunk", got, hi - lo, [&](size_t e) { return expected(g, lo + e - offset); });
    }
  }
  WEFT_OK(weft_bucketer_destroy(b));
  if (stream) CUDA_OK(cudaStreamDestroy(stream));
  for (void* p : dev) {
    if (p) CUDA_OK(cudaFree(p));
  }
}

}  // namespace

int main() {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("no GPU visible: skipped\n");
    return 77;
  }
  mpt::World w = mpt::init_world();
  weft::gputest::use_rank_device(w.rank, ndev);  // the gradients must live on the comm's GPU
  int cases = 0;
  for (weft_dtype_t dt : {WEFT_FLOAT32, WEFT_BFLOAT16, WEFT_FLOAT16}) {
    for (weft_op_t op : {WEFT_SUM, WEFT_AVG}) {
      for (weft_bucket_reduction_t red : {WEFT_BUCKET_ALLREDUCE, WEFT_BUCKET_REDUCE_SCATTER}) {
        for (size_t bytes : {size_t{1}, size_t{0}}) {
          for (bool user_stream : {false, true}) {
            run({dt, op, red, bytes, user_stream, dt == WEFT_FLOAT32 && bytes == 0}, w.rank, w.size, w.comm);
            ++cases;
          }
        }
      }
    }
  }
  WEFT_OK(weft_comm_destroy(w.comm));
  if (mpt::inject_enabled()) {
    mpt::logf("injected %d, caught %d\n", g_injected, g_caught);
    return g_injected > 0 && g_caught == g_injected && g_failures == 0 ? 0 : 1;
  }
  mpt::logf("%d cases, %d failures\n", cases, g_failures);
  return g_failures == 0 ? 0 : 1;
}
