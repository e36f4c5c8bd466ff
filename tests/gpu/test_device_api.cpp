// The device path through the C ABI on a single-rank communicator (weft_get_unique_id +
// weft_comm_init, no launcher): NCCL for one rank, staging (WEFT_NCCL=0), stream and request
// semantics, the routing rule's refusals, abort, and the watchdog's timeout.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <weft/weft.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpu_test_util.h"

namespace {

using weft::gputest::DeviceBuffer;

weft_comm_t make_comm(int64_t timeout_ms = 0) {
  weft_unique_id_t id;
  if (weft_get_unique_id(&id) != WEFT_OK) return nullptr;
  weft_comm_config_t cfg = WEFT_COMM_CONFIG_INIT;
  cfg.timeout_ms = timeout_ms;
  weft_comm_t comm = nullptr;
  if (weft_comm_init(&comm, &id, 0, 1, &cfg) != WEFT_OK) return nullptr;
  return comm;
}

// The NCCL weft loads by default: the stand-in in a CUDA-emulated build (tests/gpu/CMakeLists.txt).
#ifndef WEFT_TEST_NCCL_LIBRARY
#define WEFT_TEST_NCCL_LIBRARY "libnccl.so.2"
#endif

bool nccl_loadable() {
  void* lib = dlopen(std::getenv("WEFT_NCCL_LIBRARY") ? std::getenv("WEFT_NCCL_LIBRARY") : WEFT_TEST_NCCL_LIBRARY,
                     RTLD_NOW | RTLD_LOCAL);
  return lib != nullptr;
}

class DeviceApi : public ::testing::TestWithParam<bool> {  // param: staged (WEFT_NCCL=0)
 protected:
  void SetUp() override {
    WEFT_REQUIRE_GPU();
    if (GetParam()) {
      setenv("WEFT_NCCL", "0", 1);
    } else {
      unsetenv("WEFT_NCCL");
    }
    comm_ = make_comm();
    ASSERT_NE(comm_, nullptr) << weft_last_error();
  }
  void TearDown() override {
    if (comm_) {
      EXPECT_EQ(WEFT_OK, weft_comm_destroy(comm_)) << weft_last_error();
    }
    unsetenv("WEFT_NCCL");
  }
  weft_comm_t comm_ = nullptr;
};

std::vector<float> iota(size_t n, float base) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i % 1000);
  return v;
}

std::vector<float> download_f32(const DeviceBuffer& b) {
  auto bytes = b.download();
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

// One rank: every collective copies its input (avg of one value is the value).
TEST_P(DeviceApi, EveryCollectiveOnOneRank) {
  const size_t n = 3 * 1000 * 1000 + 7;  // above the staging chunk: several chunks
  auto in = iota(n, 1.0f);
  DeviceBuffer s(n * 4), r(n * 4);
  ASSERT_TRUE(s.get() && r.get());
  s.upload(in.data());
  auto expect_copy = [&](const char* what) {
    EXPECT_EQ(in, download_f32(r)) << what;
    cudaMemset(r.get(), 0, n * 4);
  };
  for (weft_op_t op : {WEFT_SUM, WEFT_PROD, WEFT_MIN, WEFT_MAX, WEFT_AVG}) {
    ASSERT_EQ(WEFT_OK, weft_allreduce(s.get(), r.get(), n, WEFT_FLOAT32, op, comm_, nullptr, nullptr))
        << weft_last_error();
    expect_copy("allreduce");
  }
  ASSERT_EQ(WEFT_OK, weft_reduce(s.get(), r.get(), n, WEFT_FLOAT32, WEFT_SUM, 0, comm_, nullptr, nullptr));
  expect_copy("reduce");
  ASSERT_EQ(WEFT_OK, weft_reduce_scatter(s.get(), r.get(), n, WEFT_FLOAT32, WEFT_MAX, comm_, nullptr, nullptr));
  expect_copy("reduce_scatter");
  ASSERT_EQ(WEFT_OK, weft_allgather(s.get(), r.get(), n, WEFT_FLOAT32, comm_, nullptr, nullptr));
  expect_copy("allgather");
  size_t counts[1] = {n}, displs[1] = {0};
  ASSERT_EQ(WEFT_OK, weft_allgatherv(s.get(), n, r.get(), counts, displs, WEFT_FLOAT32, comm_, nullptr, nullptr));
  expect_copy("allgatherv");
  ASSERT_EQ(WEFT_OK, weft_alltoall(s.get(), r.get(), n, WEFT_FLOAT32, comm_, nullptr, nullptr));
  expect_copy("alltoall");
  ASSERT_EQ(WEFT_OK, weft_alltoallv(s.get(), counts, displs, r.get(), counts, displs, WEFT_FLOAT32, comm_, nullptr,
                                    nullptr));
  expect_copy("alltoallv");
  ASSERT_EQ(WEFT_OK, weft_gather(s.get(), r.get(), n, WEFT_FLOAT32, 0, comm_, nullptr, nullptr));
  expect_copy("gather");
  ASSERT_EQ(WEFT_OK, weft_scatter(s.get(), r.get(), n, WEFT_FLOAT32, 0, comm_, nullptr, nullptr));
  expect_copy("scatter");
  cudaMemcpy(r.get(), s.get(), n * 4, cudaMemcpyDeviceToDevice);
  ASSERT_EQ(WEFT_OK, weft_broadcast(r.get(), n, WEFT_FLOAT32, 0, comm_, nullptr, nullptr));
  expect_copy("broadcast");
  ASSERT_EQ(WEFT_OK, weft_barrier(comm_, nullptr, nullptr)) << weft_last_error();
}

// Low precision on one rank: the value is widened and rounded back, unchanged.
TEST_P(DeviceApi, LowPrecisionRoundTrips) {
  const size_t n = 100001;
  std::vector<uint16_t> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = static_cast<uint16_t>(0x3c00 + (i % 0x3ff));  // f16 1.0 .. 2.0
  DeviceBuffer s(n * 2), r(n * 2);
  ASSERT_TRUE(s.get() && r.get());
  s.upload(h.data());
  for (weft_dtype_t d : {WEFT_FLOAT16, WEFT_BFLOAT16}) {
    for (weft_op_t op : {WEFT_SUM, WEFT_MIN, WEFT_AVG}) {
      ASSERT_EQ(WEFT_OK, weft_allreduce(s.get(), r.get(), n, d, op, comm_, nullptr, nullptr)) << weft_last_error();
      auto got = r.download();
      EXPECT_EQ(0, std::memcmp(got.data(), h.data(), n * 2)) << "dtype " << d << " op " << op;
    }
  }
}

TEST_P(DeviceApi, UserStreamIsStreamOrderedAndRequestsComplete) {
  const size_t n = 1 << 22;
  auto in = iota(n, 5.0f);
  DeviceBuffer s(n * 4), r(n * 4);
  ASSERT_TRUE(s.get() && r.get());
  cudaStream_t stream;
  WEFT_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // The input is written on the stream just before: the collective must see it.
  WEFT_CUDA_OK(cudaMemcpyAsync(s.get(), in.data(), n * 4, cudaMemcpyHostToDevice, stream));
  ASSERT_EQ(WEFT_OK, weft_allreduce(s.get(), r.get(), n, WEFT_FLOAT32, WEFT_SUM, comm_, stream, nullptr))
      << weft_last_error();
  std::vector<float> out(n);
  WEFT_CUDA_OK(cudaMemcpyAsync(out.data(), r.get(), n * 4, cudaMemcpyDeviceToHost, stream));
  WEFT_CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_EQ(in, out);

  weft_request_t req = nullptr;
  cudaMemsetAsync(r.get(), 0, n * 4, stream);
  ASSERT_EQ(WEFT_OK, weft_allreduce(s.get(), r.get(), n, WEFT_FLOAT32, WEFT_MAX, comm_, stream, &req));
  ASSERT_NE(req, nullptr);
  int done = 0;
  weft_status_t st;
  while ((st = weft_test(req, &done)) == WEFT_IN_PROGRESS) std::this_thread::yield();
  ASSERT_EQ(WEFT_OK, st) << weft_last_error();
  EXPECT_EQ(done, 1);
  EXPECT_EQ(WEFT_OK, weft_wait(req));
  EXPECT_EQ(WEFT_OK, weft_request_free(req));
  // Complete per the request: readable from another stream without waiting on `stream`.
  EXPECT_EQ(in, download_f32(r));
  cudaStreamDestroy(stream);
}

TEST_P(DeviceApi, NullStreamCallsReturnComplete) {
  const size_t n = 1 << 22;
  auto in = iota(n, 9.0f);
  DeviceBuffer s(n * 4), r(n * 4);
  ASSERT_TRUE(s.get() && r.get());
  s.upload(in.data());
  cudaStream_t other;
  WEFT_CUDA_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  ASSERT_EQ(WEFT_OK, weft_allreduce(s.get(), r.get(), n, WEFT_FLOAT32, WEFT_SUM, comm_, nullptr, nullptr));
  std::vector<float> out(n);
  WEFT_CUDA_OK(cudaMemcpyAsync(out.data(), r.get(), n * 4, cudaMemcpyDeviceToHost, other));
  WEFT_CUDA_OK(cudaStreamSynchronize(other));
  EXPECT_EQ(in, out);
  cudaStreamDestroy(other);
}

TEST_P(DeviceApi, PointToPointToSelf) {
  const size_t n = 12345;
  auto in = iota(n, 3.0f);
  DeviceBuffer s(n * 4), r(n * 4);
  ASSERT_TRUE(s.get() && r.get());
  s.upload(in.data());
  weft_request_t rr = nullptr, sr = nullptr;
  cudaStream_t a, b;
  WEFT_CUDA_OK(cudaStreamCreate(&a));
  WEFT_CUDA_OK(cudaStreamCreate(&b));
  // Receive and send on separate streams (a send through NCCL holds its stream until received).
  ASSERT_EQ(WEFT_OK, weft_recv(r.get(), n, WEFT_FLOAT32, 0, comm_, a, &rr)) << weft_last_error();
  ASSERT_EQ(WEFT_OK, weft_send(s.get(), n, WEFT_FLOAT32, 0, comm_, b, &sr)) << weft_last_error();
  EXPECT_EQ(WEFT_OK, weft_wait(sr)) << weft_last_error();
  EXPECT_EQ(WEFT_OK, weft_wait(rr)) << weft_last_error();
  weft_request_free(sr);
  weft_request_free(rr);
  EXPECT_EQ(in, download_f32(r));
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

// weft_p2p_batch on device memory to the rank itself (staged on every path): two messages each
// way in one call, matched in order; blocking with a NULL stream, then a request on a user
// stream. A batch mixing host and device buffers is refused naming both ops.
TEST_P(DeviceApi, PointToPointBatchToSelf) {
  const size_t n = 12345, m = 77;
  auto in1 = iota(n, 3.0f), in2 = iota(m, -5.0f);
  DeviceBuffer s1(n * 4), s2(m * 4), r1(n * 4), r2(m * 4);
  ASSERT_TRUE(s1.get() && s2.get() && r1.get() && r2.get());
  s1.upload(in1.data());
  s2.upload(in2.data());
  const weft_p2p_op_t ops[4] = {{WEFT_P2P_RECV, r1.get(), n, WEFT_FLOAT32, 0},
                                {WEFT_P2P_SEND, s1.get(), n, WEFT_FLOAT32, 0},
                                {WEFT_P2P_SEND, s2.get(), m, WEFT_FLOAT32, 0},
                                {WEFT_P2P_RECV, r2.get(), m, WEFT_FLOAT32, 0}};
  ASSERT_EQ(WEFT_OK, weft_p2p_batch(ops, 4, comm_, nullptr, nullptr)) << weft_last_error();
  EXPECT_EQ(in1, download_f32(r1));
  EXPECT_EQ(in2, download_f32(r2));

  cudaStream_t stream;
  WEFT_CUDA_OK(cudaStreamCreate(&stream));
  WEFT_CUDA_OK(cudaMemset(r1.get(), 0, n * 4));
  WEFT_CUDA_OK(cudaMemset(r2.get(), 0, m * 4));
  weft_request_t req = nullptr;
  ASSERT_EQ(WEFT_OK, weft_p2p_batch(ops, 4, comm_, stream, &req)) << weft_last_error();
  EXPECT_EQ(WEFT_OK, weft_wait(req)) << weft_last_error();
  weft_request_free(req);
  EXPECT_EQ(in1, download_f32(r1));
  EXPECT_EQ(in2, download_f32(r2));
  cudaStreamDestroy(stream);

  std::vector<float> host(m, 1.0f);
  const weft_p2p_op_t mixed[2] = {{WEFT_P2P_SEND, s2.get(), m, WEFT_FLOAT32, 0},
                                  {WEFT_P2P_RECV, host.data(), m, WEFT_FLOAT32, 0}};
  EXPECT_EQ(WEFT_ERR_UNSUPPORTED, weft_p2p_batch(mixed, 2, comm_, nullptr, nullptr));
  EXPECT_NE(std::string(weft_last_error()).find("ops[1].buf is host memory but ops[0].buf is CUDA device memory"),
            std::string::npos)
      << weft_last_error();
}

TEST_P(DeviceApi, RoutingRefusesMixedManagedAndStreamWithHostMemory) {
  const size_t n = 1024;
  DeviceBuffer d(n * 4);
  ASSERT_TRUE(d.get());
  std::vector<float> host(n, 1.0f);
  EXPECT_EQ(WEFT_ERR_UNSUPPORTED, weft_allreduce(host.data(), d.get(), n, WEFT_FLOAT32, WEFT_SUM, comm_, nullptr, nullptr));
  EXPECT_NE(std::string(weft_last_error()).find("sendbuf is host memory but recvbuf is CUDA device memory"),
            std::string::npos)
      << weft_last_error();
  float* managed = nullptr;
  WEFT_CUDA_OK(cudaMallocManaged(reinterpret_cast<void**>(&managed), n * 4));
  EXPECT_EQ(WEFT_ERR_UNSUPPORTED, weft_allreduce(managed, managed, n, WEFT_FLOAT32, WEFT_SUM, comm_, nullptr, nullptr));
  EXPECT_NE(std::string(weft_last_error()).find("managed"), std::string::npos) << weft_last_error();
  cudaFree(managed);
  cudaStream_t stream;
  WEFT_CUDA_OK(cudaStreamCreate(&stream));
  EXPECT_EQ(WEFT_ERR_UNSUPPORTED, weft_allreduce(host.data(), host.data(), n, WEFT_FLOAT32, WEFT_SUM, comm_, stream, nullptr));
  EXPECT_NE(std::string(weft_last_error()).find("stream is not NULL but sendbuf is host memory"), std::string::npos)
      << weft_last_error();
  // Pinned host memory is host memory too.
  float* pinned = nullptr;
  WEFT_CUDA_OK(cudaMallocHost(reinterpret_cast<void**>(&pinned), n * 4));
  EXPECT_EQ(WEFT_OK, weft_allreduce(pinned, pinned, n, WEFT_FLOAT32, WEFT_SUM, comm_, nullptr, nullptr));
  EXPECT_EQ(WEFT_ERR_UNSUPPORTED, weft_allreduce(pinned, d.get(), n, WEFT_FLOAT32, WEFT_SUM, comm_, nullptr, nullptr));
  cudaFreeHost(pinned);
  cudaStreamDestroy(stream);
}

TEST_P(DeviceApi, BufferOrStreamOfAnotherGpuIsRefused) {
  int count = 0;
  cudaGetDeviceCount(&count);
  if (count < 2) GTEST_SKIP() << "needs two GPUs (this machine has " << count << ")";
  int mine = -1;
  cudaPointerAttributes attr{};
  DeviceBuffer probe(4);
  cudaPointerGetAttributes(&attr, probe.get());
  mine = attr.device;
  WEFT_CUDA_OK(cudaSetDevice(mine == 0 ? 1 : 0));
  {
    DeviceBuffer other(4096);
    cudaStream_t s;
    WEFT_CUDA_OK(cudaStreamCreate(&s));
    EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT,
              weft_allreduce(other.get(), other.get(), 16, WEFT_FLOAT32, WEFT_SUM, comm_, nullptr, nullptr));
    EXPECT_NE(std::string(weft_last_error()).find("sendbuf is on CUDA device"), std::string::npos) << weft_last_error();
    WEFT_CUDA_OK(cudaSetDevice(mine));
    DeviceBuffer here(4096);
    EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT,
              weft_allreduce(here.get(), here.get(), 16, WEFT_FLOAT32, WEFT_SUM, comm_, s, nullptr));
    EXPECT_NE(std::string(weft_last_error()).find("stream belongs to CUDA device"), std::string::npos)
        << weft_last_error();
    cudaStreamDestroy(s);
  }
}

TEST_P(DeviceApi, AbortFailsLaterDeviceCalls) {
  DeviceBuffer d(4096);
  ASSERT_TRUE(d.get());
  ASSERT_EQ(WEFT_OK, weft_allreduce(d.get(), d.get(), 16, WEFT_FLOAT32, WEFT_SUM, comm_, nullptr, nullptr));
  std::thread t([&] { EXPECT_EQ(WEFT_OK, weft_comm_abort(comm_)); });
  t.join();
  EXPECT_EQ(WEFT_ERR_ABORTED, weft_allreduce(d.get(), d.get(), 16, WEFT_FLOAT32, WEFT_SUM, comm_, nullptr, nullptr));
}

// Send and receive buffers side by side in one allocation, as a caching allocator hands out
// tensors, in both orders: the second starts exactly where the first ends. Staging must keep
// them apart (core/device/mirror.cpp: an MoE dispatch received stale rows on an H100 when the
// receive buffer began at the end of the send buffer's pinned copy).
TEST_P(DeviceApi, AdjacentBuffersOfOneAllocation) {
  const size_t n = 1024;
  const std::vector<float> in = iota(n, 3.0f);
  DeviceBuffer both(2 * n * 4);
  ASSERT_TRUE(both.get());
  for (bool send_first : {true, false}) {
    float* s = both.get<float>() + (send_first ? 0 : n);
    float* r = both.get<float>() + (send_first ? n : 0);
    std::vector<float> init(2 * n, -1.0f);
    std::copy(in.begin(), in.end(), init.begin() + (send_first ? 0 : n));
    auto received = [&] {
      const std::vector<float> all = download_f32(both);
      return std::vector<float>(all.begin() + (send_first ? n : 0), all.begin() + (send_first ? 2 * n : n));
    };
    const std::string order = send_first ? " (send first)" : " (receive first)";
    size_t counts[1] = {n}, displs[1] = {0};
    const std::vector<std::pair<const char*, std::function<weft_status_t()>>> calls = {
        {"allreduce", [&] { return weft_allreduce(s, r, n, WEFT_FLOAT32, WEFT_SUM, comm_, nullptr, nullptr); }},
        {"allgather", [&] { return weft_allgather(s, r, n, WEFT_FLOAT32, comm_, nullptr, nullptr); }},
        {"allgatherv", [&] { return weft_allgatherv(s, n, r, counts, displs, WEFT_FLOAT32, comm_, nullptr, nullptr); }},
        {"alltoall", [&] { return weft_alltoall(s, r, n, WEFT_FLOAT32, comm_, nullptr, nullptr); }},
        {"alltoallv",
         [&] { return weft_alltoallv(s, counts, displs, r, counts, displs, WEFT_FLOAT32, comm_, nullptr, nullptr); }},
        {"gather", [&] { return weft_gather(s, r, n, WEFT_FLOAT32, 0, comm_, nullptr, nullptr); }},
        {"scatter", [&] { return weft_scatter(s, r, n, WEFT_FLOAT32, 0, comm_, nullptr, nullptr); }},
    };
    for (const auto& [name, call] : calls) {
      both.upload(init.data());
      ASSERT_EQ(WEFT_OK, call()) << name << order << ": " << weft_last_error();
      EXPECT_EQ(in, received()) << name << order;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, DeviceApi, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Staged" : "NcclOrStaged"; });

// The watchdog: a stream held up by a host function never reaches the collective, so the wait
// must end at the deadline with WEFT_ERR_TIMEOUT naming the operation, and the stream is let go.
void CUDART_CB hold(void* flag) {
  auto* f = static_cast<std::atomic<int>*>(flag);
  while (f->load() == 0) std::this_thread::yield();
}

TEST(DeviceWatchdog, TimesOutAndNamesTheOperation) {
  WEFT_REQUIRE_GPU();
  for (bool staged : {false, true}) {
    if (staged) setenv("WEFT_NCCL", "0", 1);
    weft_comm_t comm = make_comm(1000);
    ASSERT_NE(comm, nullptr) << weft_last_error();
    DeviceBuffer d(4096);
    cudaStream_t s;
    WEFT_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    std::atomic<int> release{0};
    WEFT_CUDA_OK(cudaLaunchHostFunc(s, hold, &release));
    // Let the stream go well after the deadline, from another thread: aborting NCCL may itself
    // wait for the stream, so the test must not hold it forever.
    std::thread releaser([&] {
      std::this_thread::sleep_for(std::chrono::seconds(4));
      release = 1;
    });
    weft_request_t req = nullptr;
    weft_status_t st = weft_allreduce(d.get(), d.get(), 16, WEFT_FLOAT32, WEFT_SUM, comm, s, &req);
    if (st == WEFT_OK) st = weft_wait(req);
    EXPECT_EQ(WEFT_ERR_TIMEOUT, st) << (staged ? "staged: " : "") << weft_last_error();
    EXPECT_NE(std::string(weft_last_error()).find("allreduce"), std::string::npos) << weft_last_error();
    releaser.join();
    cudaStreamSynchronize(s);
    if (req) weft_request_free(req);
    EXPECT_NE(WEFT_OK, weft_allreduce(d.get(), d.get(), 16, WEFT_FLOAT32, WEFT_SUM, comm, s, nullptr))
        << "a timed-out communicator stays unusable";
    weft_comm_destroy(comm);
    cudaStreamDestroy(s);
    unsetenv("WEFT_NCCL");
  }
}

// A single-rank communicator gets NCCL whenever the library loads (WEFT_DEBUG=info is set for
// this test binary by ctest, so the choice is logged).
TEST(DeviceNccl, SingleRankCommunicatorUsesNccl) {
  WEFT_REQUIRE_GPU();
  if (!nccl_loadable()) GTEST_SKIP() << "libnccl.so.2 cannot be loaded here";
  const char* dbg = std::getenv("WEFT_DEBUG");
  if (!dbg || std::string(dbg).find("info") == std::string::npos) GTEST_SKIP() << "run with WEFT_DEBUG=info";
  testing::internal::CaptureStderr();
  weft_comm_t comm = make_comm();
  std::string log = testing::internal::GetCapturedStderr();
  ASSERT_NE(comm, nullptr) << weft_last_error();
  EXPECT_NE(log.find("through NCCL"), std::string::npos) << log;
  weft_comm_destroy(comm);
}

// Split and dup of a communicator with NCCL split its NCCL communicator (ncclCommSplit) instead
// of making one from scratch, and the children work on device memory; a rank left out (color
// < 0) takes part in the split and gets no communicator.
TEST(DeviceNccl, SplitAndDupSplitTheNcclCommunicator) {
  WEFT_REQUIRE_GPU();
  if (!nccl_loadable()) GTEST_SKIP() << "libnccl.so.2 cannot be loaded here";
  const char* dbg = std::getenv("WEFT_DEBUG");
  if (!dbg || std::string(dbg).find("info") == std::string::npos) GTEST_SKIP() << "run with WEFT_DEBUG=info";
  weft_comm_t comm = make_comm();
  ASSERT_NE(comm, nullptr) << weft_last_error();
  testing::internal::CaptureStderr();
  weft_comm_t split = nullptr, dup = nullptr, none = reinterpret_cast<weft_comm_t>(1);
  const weft_status_t st_split = weft_comm_split(comm, 3, 0, &split, nullptr);
  const weft_status_t st_dup = weft_comm_dup(comm, &dup);
  const weft_status_t st_none = weft_comm_split(comm, -1, 0, &none, nullptr);
  std::string log = testing::internal::GetCapturedStderr();
  ASSERT_EQ(WEFT_OK, st_split) << weft_last_error();
  ASSERT_EQ(WEFT_OK, st_dup) << weft_last_error();
  ASSERT_EQ(WEFT_OK, st_none) << weft_last_error();
  EXPECT_EQ(nullptr, none);
  size_t found = 0;
  for (size_t at = log.find("split from the parent's"); at != std::string::npos;
       at = log.find("split from the parent's", at + 1)) {
    ++found;
  }
  EXPECT_EQ(2u, found) << log;
  DeviceBuffer d(64);
  std::vector<float> ones(16, 1.0f), got(16);
  for (weft_comm_t c : {split, dup}) {
    cudaMemcpy(d.get(), ones.data(), 64, cudaMemcpyHostToDevice);
    ASSERT_EQ(WEFT_OK, weft_allreduce(d.get(), d.get(), 16, WEFT_FLOAT32, WEFT_SUM, c, nullptr, nullptr))
        << weft_last_error();
    cudaMemcpy(got.data(), d.get(), 64, cudaMemcpyDeviceToHost);
    EXPECT_EQ(ones, got);
  }
  weft_comm_destroy(split);
  weft_comm_destroy(dup);
  weft_comm_destroy(comm);
}

}  // namespace
