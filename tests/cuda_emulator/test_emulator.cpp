// The CUDA emulator's own checks: that it is as strict as emulator.h promises, since the GPU
// tests that run over it are only as good as its model (device memory the host cannot touch,
// asynchronous streams, events, the legacy default stream's ordering, pageable copies).
#include <cuda.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/cuda_emulator/emulator.h"

namespace {

// Holds a stream until release(): makes "not yet done" observable without relying on timing.
class Gate {
 public:
  void block(cudaStream_t s) { ASSERT_EQ(cudaSuccess, cudaLaunchHostFunc(s, &Gate::wait, this)); }
  void release() { open_.store(true); }
  ~Gate() { release(); }

 private:
  static void wait(void* self) {
    auto* g = static_cast<Gate*>(self);
    while (!g->open_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::atomic<bool> open_{false};
};

TEST(CudaEmulatorDeathTest, HostAccessToDeviceMemoryFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  void* d = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&d, 64));
  EXPECT_DEATH({ static_cast<volatile char*>(d)[0] = 1; }, "");
  EXPECT_DEATH(weft::emu::host_view(static_cast<char*>(d) + 60, 8), "runs past its end");
  cudaFree(d);
}

TEST(CudaEmulator, CopiesRunOnTheStreamNotInTheCall) {
  cudaStream_t s;
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void *d, *in, *out;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&d, 256));
  ASSERT_EQ(cudaSuccess, cudaMallocHost(&in, 256));
  ASSERT_EQ(cudaSuccess, cudaHostAlloc(&out, 256, cudaHostAllocPortable));
  std::memset(in, 7, 256);
  std::memset(out, 0, 256);
  Gate gate;
  gate.block(s);
  ASSERT_EQ(cudaSuccess, cudaMemcpyAsync(d, in, 256, cudaMemcpyHostToDevice, s));
  ASSERT_EQ(cudaSuccess, cudaMemcpyAsync(out, d, 256, cudaMemcpyDeviceToHost, s));
  EXPECT_EQ(cudaErrorNotReady, cudaStreamQuery(s));
  EXPECT_EQ(0, static_cast<char*>(out)[255]) << "a pinned destination was written before the stream ran";
  gate.release();
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  EXPECT_EQ(7, static_cast<char*>(out)[255]);
  EXPECT_EQ(cudaSuccess, cudaFree(d));
  EXPECT_EQ(cudaSuccess, cudaFreeHost(in));
  EXPECT_EQ(cudaSuccess, cudaFreeHost(out));
  EXPECT_EQ(cudaSuccess, cudaStreamDestroy(s));
}

TEST(CudaEmulator, PageableCopiesFollowTheRuntimesRules) {
  cudaStream_t s;
  ASSERT_EQ(cudaSuccess, cudaStreamCreate(&s));
  void* d;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&d, 16));
  std::vector<char> src(16, 3), dst(16, 0);
  Gate gate;
  gate.block(s);
  // A pageable source is staged before the call returns: changing it afterwards changes nothing.
  ASSERT_EQ(cudaSuccess, cudaMemcpyAsync(d, src.data(), 16, cudaMemcpyHostToDevice, s));
  src.assign(16, 9);
  gate.release();
  // A pageable destination is written before the call returns.
  ASSERT_EQ(cudaSuccess, cudaMemcpyAsync(dst.data(), d, 16, cudaMemcpyDeviceToHost, s));
  EXPECT_EQ(3, dst[15]);
  cudaFree(d);
  cudaStreamDestroy(s);
}

// The runtime's "API synchronization behavior": cudaMemcpy from pageable memory to the device,
// between device buffers, and cudaMemset of device memory may return before the bytes land (an
// H100 showed tests and weft itself reading them too early from a non-blocking stream); a copy
// into pageable memory returns when done.
TEST(CudaEmulator, SynchronousCopiesToTheDeviceAndMemsetsMayReturnEarly) {
  void* d;
  void* e;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&d, 16));
  ASSERT_EQ(cudaSuccess, cudaMalloc(&e, 16));
  std::vector<char> src(16, 5), dst(16, 0);
  ASSERT_EQ(cudaSuccess, cudaMemcpy(d, src.data(), 16, cudaMemcpyHostToDevice));
  EXPECT_EQ(cudaErrorNotReady, cudaStreamQuery(cudaStreamLegacy)) << "pageable to device";
  ASSERT_EQ(cudaSuccess, cudaMemcpy(e, d, 16, cudaMemcpyDeviceToDevice));
  EXPECT_EQ(cudaErrorNotReady, cudaStreamQuery(cudaStreamLegacy)) << "device to device";
  ASSERT_EQ(cudaSuccess, cudaMemcpy(dst.data(), e, 16, cudaMemcpyDeviceToHost));
  EXPECT_EQ(cudaSuccess, cudaStreamQuery(cudaStreamLegacy)) << "device to pageable";
  EXPECT_EQ(5, dst[15]);
  ASSERT_EQ(cudaSuccess, cudaMemset(d, 7, 16));
  EXPECT_EQ(cudaErrorNotReady, cudaStreamQuery(cudaStreamLegacy)) << "memset";
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  ASSERT_EQ(cudaSuccess, cudaMemcpy(dst.data(), d, 16, cudaMemcpyDeviceToHost));
  EXPECT_EQ(7, dst[0]);
  cudaFree(d);
  cudaFree(e);
}

TEST(CudaEmulator, EventsAndCrossStreamWaits) {
  cudaStream_t a, b;
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  cudaEvent_t e;
  ASSERT_EQ(cudaSuccess, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  EXPECT_EQ(cudaSuccess, cudaEventQuery(e)) << "an event never recorded is complete";
  Gate gate;
  gate.block(a);
  ASSERT_EQ(cudaSuccess, cudaEventRecord(e, a));
  EXPECT_EQ(cudaErrorNotReady, cudaEventQuery(e));
  ASSERT_EQ(cudaSuccess, cudaStreamWaitEvent(b, e, 0));
  std::atomic<bool> ran{false};
  ASSERT_EQ(cudaSuccess, cudaLaunchHostFunc(b, [](void* f) { static_cast<std::atomic<bool>*>(f)->store(true); }, &ran));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(ran.load()) << "stream b ran past a wait on an event that had not happened";
  gate.release();
  ASSERT_EQ(cudaSuccess, cudaEventSynchronize(e));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(b));
  EXPECT_TRUE(ran.load());
  float ms;
  EXPECT_EQ(cudaErrorInvalidResourceHandle, cudaEventElapsedTime(&ms, e, e)) << "timing was disabled";
  cudaGetLastError();
  cudaEventDestroy(e);
  EXPECT_EQ(cudaErrorInvalidResourceHandle, cudaEventQuery(e));
  cudaGetLastError();
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

TEST(CudaEmulator, LegacyDefaultStreamOrdersBlockingStreamsOnly) {
  cudaStream_t blocking, nonblocking;
  ASSERT_EQ(cudaSuccess, cudaStreamCreate(&blocking));
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
  Gate gate;
  gate.block(blocking);
  std::atomic<bool> legacy_ran{false};
  ASSERT_EQ(cudaSuccess,
            cudaLaunchHostFunc(nullptr, [](void* f) { static_cast<std::atomic<bool>*>(f)->store(true); }, &legacy_ran));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(nonblocking)) << "a non-blocking stream does not wait for it";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(legacy_ran.load()) << "the legacy stream ran before earlier work on a blocking stream";
  gate.release();
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  EXPECT_TRUE(legacy_ran.load());
  cudaStreamDestroy(blocking);
  cudaStreamDestroy(nonblocking);
}

TEST(CudaEmulator, PointerAttributesAsTheRuntimeAndDriverReportThem) {
  void *dev, *managed, *pinned;
  int pageable = 0;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&dev, 32));
  ASSERT_EQ(cudaSuccess, cudaMallocManaged(&managed, 32));
  ASSERT_EQ(cudaSuccess, cudaMallocHost(&pinned, 32));
  cudaPointerAttributes a;
  ASSERT_EQ(cudaSuccess, cudaPointerGetAttributes(&a, static_cast<char*>(dev) + 31));
  EXPECT_EQ(cudaMemoryTypeDevice, a.type);
  EXPECT_EQ(0, a.device);
  ASSERT_EQ(cudaSuccess, cudaPointerGetAttributes(&a, managed));
  EXPECT_EQ(cudaMemoryTypeManaged, a.type);
  ASSERT_EQ(cudaSuccess, cudaPointerGetAttributes(&a, pinned));
  EXPECT_EQ(cudaMemoryTypeHost, a.type);
  ASSERT_EQ(cudaSuccess, cudaPointerGetAttributes(&a, &pageable));
  EXPECT_EQ(cudaMemoryTypeUnregistered, a.type);
  ASSERT_EQ(cudaSuccess, cudaPointerGetAttributes(&a, static_cast<char*>(dev) + 32)) << "one past the end";
  EXPECT_EQ(cudaMemoryTypeUnregistered, a.type);

  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  ASSERT_EQ(cudaSuccess, cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &fn, 12000, cudaEnableDefault, &q));
  ASSERT_EQ(cudaDriverEntryPointSuccess, q);
  auto query = reinterpret_cast<decltype(&cuPointerGetAttributes)>(fn);
  CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED};
  unsigned int type = 0;
  bool is_managed = false;
  void* data[2] = {&type, &is_managed};
  ASSERT_EQ(CUDA_SUCCESS, query(2, attrs, data, reinterpret_cast<CUdeviceptr>(managed)));
  EXPECT_EQ(CU_MEMORYTYPE_DEVICE, type);
  EXPECT_TRUE(is_managed);
  ASSERT_EQ(CUDA_SUCCESS, query(2, attrs, data, reinterpret_cast<CUdeviceptr>(&pageable)));
  EXPECT_EQ(0u, type);
  EXPECT_FALSE(is_managed);
  ASSERT_EQ(cudaSuccess, cudaGetDriverEntryPointByVersion("cuNoSuchFunction", &fn, 12000, cudaEnableDefault, &q));
  EXPECT_EQ(cudaDriverEntryPointSymbolNotFound, q);

  EXPECT_EQ(cudaErrorInvalidDevicePointer, cudaFree(pinned)) << "pinned memory is freed with cudaFreeHost";
  EXPECT_EQ(cudaErrorInvalidDevicePointer, cudaGetLastError());
  EXPECT_EQ(cudaSuccess, cudaGetLastError()) << "cudaGetLastError clears";
  EXPECT_EQ(cudaErrorInvalidValue, cudaMemcpy(&pageable, dev, 4, cudaMemcpyHostToDevice)) << "wrong direction";
  cudaGetLastError();
  cudaFree(dev);
  cudaFree(managed);
  cudaFreeHost(pinned);
}

TEST(CudaEmulator, DevicesAndContexts) {
  int n = 0;
  ASSERT_EQ(cudaSuccess, cudaGetDeviceCount(&n));
  EXPECT_GE(n, 1);
  EXPECT_EQ(cudaErrorInvalidDevice, cudaSetDevice(n));
  cudaGetLastError();
  cudaDeviceProp p0, p0again;
  ASSERT_EQ(cudaSuccess, cudaGetDeviceProperties(&p0, 0));
  ASSERT_EQ(cudaSuccess, cudaGetDeviceProperties(&p0again, 0));
  EXPECT_EQ(0, std::memcmp(&p0.uuid, &p0again.uuid, sizeof p0.uuid));
  // A fresh thread has no context until the runtime needs one.
  std::thread([] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    ASSERT_EQ(cudaSuccess, cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &q));
    auto get = reinterpret_cast<decltype(&cuCtxGetCurrent)>(fn);
    CUcontext c = reinterpret_cast<CUcontext>(1);
    ASSERT_EQ(CUDA_SUCCESS, get(&c));
    EXPECT_EQ(nullptr, c);
    void* d;
    ASSERT_EQ(cudaSuccess, cudaMalloc(&d, 8));
    ASSERT_EQ(CUDA_SUCCESS, get(&c));
    EXPECT_NE(nullptr, c);
    cudaFree(d);
  }).join();
}

}  // namespace

namespace {

TEST(CudaEmulator, MemoryPools) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool;
  ASSERT_EQ(cudaSuccess, cudaMemPoolCreate(&pool, &props));
  uint64_t keep = 1 << 20;
  EXPECT_EQ(cudaSuccess, cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  cudaStream_t s;
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void* p = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMallocFromPoolAsync(&p, 100, pool, s));
  cudaPointerAttributes a;
  ASSERT_EQ(cudaSuccess, cudaPointerGetAttributes(&a, p));
  EXPECT_EQ(cudaMemoryTypeDevice, a.type);
  ASSERT_EQ(cudaSuccess, cudaFreeAsync(p, s));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  EXPECT_EQ(cudaSuccess, cudaMemPoolDestroy(pool));
  EXPECT_EQ(cudaErrorInvalidValue, cudaMallocFromPoolAsync(&p, 100, pool, s)) << "a destroyed pool";
  cudaGetLastError();
  props.location.id = 99;
  EXPECT_EQ(cudaErrorInvalidDevice, cudaMemPoolCreate(&pool, &props));
  cudaGetLastError();
  cudaStreamDestroy(s);
}

}  // namespace

namespace {

TEST(CudaEmulator, DestroyedStreamsFinishTheirWorkAndCountForDeviceSync) {
  cudaStream_t s;
  ASSERT_EQ(cudaSuccess, cudaStreamCreate(&s));
  Gate gate;
  gate.block(s);
  std::atomic<bool> ran{false};
  ASSERT_EQ(cudaSuccess, cudaLaunchHostFunc(s, [](void* f) { static_cast<std::atomic<bool>*>(f)->store(true); }, &ran));
  ASSERT_EQ(cudaSuccess, cudaStreamDestroy(s));
  EXPECT_EQ(cudaErrorInvalidResourceHandle, cudaStreamQuery(s)) << "the handle is dead at once";
  cudaGetLastError();
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate.release();
  });
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  EXPECT_TRUE(ran.load()) << "cudaDeviceSynchronize returned before a destroyed stream's work ran";
  opener.join();
}

}  // namespace
