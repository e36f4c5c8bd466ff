// Self-check of the stand-in NCCL (fake_nccl.cpp) on the CUDA emulator: one process, with
// nranks=1 communicators and with two threads acting as two ranks on two emulated devices
// (WEFT_EMU_DEVICES=2, set by the test's environment).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "reference.h"  // tests/multiproc: the suite's own codecs

namespace {

using Clock = std::chrono::steady_clock;

// Polls a communicator until it leaves ncclInProgress (or 20 s pass).
ncclResult_t settle(ncclComm_t c) {
  const auto end = Clock::now() + std::chrono::seconds(20);
  ncclResult_t state = ncclInProgress;
  while (Clock::now() < end) {
    if (ncclCommGetAsyncError(c, &state) != ncclSuccess) return ncclInternalError;
    if (state != ncclInProgress) return state;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return state;
}

// Accepts ncclSuccess, or ncclInProgress followed by ncclSuccess.
// A non-blocking split's handle: written by NCCL's thread, possibly after the parent's state
// said the split is over (as NCCL 2.28.3 did); nullptr if not within 20 s.
ncclComm_t wait_handle(ncclComm_t* slot) {
  const auto end = Clock::now() + std::chrono::seconds(20);
  ncclComm_t h = nullptr;
  while (!(h = __atomic_load_n(slot, __ATOMIC_ACQUIRE)) && Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return h;
}

void expect_issued(ncclResult_t r, ncclComm_t c) {
  ASSERT_TRUE(r == ncclSuccess || r == ncclInProgress) << ncclGetErrorString(r) << ": " << ncclGetLastError(c);
  if (r == ncclInProgress) {
    ASSERT_EQ(ncclSuccess, settle(c)) << ncclGetLastError(c);
  }
}

ncclComm_t make_comm(int nranks, const ncclUniqueId& id, int rank, bool blocking) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = blocking ? 1 : 0;
  ncclComm_t c = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&c, nranks, id, rank, &config);
  EXPECT_TRUE(r == ncclSuccess || r == ncclInProgress) << ncclGetLastError(nullptr);
  if (c && r == ncclInProgress) {
    EXPECT_EQ(ncclSuccess, settle(c)) << ncclGetLastError(nullptr);
  }
  return c;
}

struct DevBuf {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DevBuf(size_t n) : bytes(n) { EXPECT_EQ(cudaSuccess, cudaMalloc(&p, n ? n : 1)); }
  ~DevBuf() { cudaFree(p); }
  void put(const void* host, size_t n, size_t at = 0) {
    EXPECT_EQ(cudaSuccess, cudaMemcpy(static_cast<char*>(p) + at, host, n, cudaMemcpyHostToDevice));
  }
  std::vector<char> get(size_t n, size_t at = 0) const {
    std::vector<char> out(n);
    EXPECT_EQ(cudaSuccess, cudaMemcpy(out.data(), static_cast<char*>(p) + at, n, cudaMemcpyDeviceToHost));
    return out;
  }
  char* at(size_t off) const { return static_cast<char*>(p) + off; }
};

// Two threads as ranks 0 and 1 of one unique id, on devices 0 and 1.
void two_ranks(const std::function<void(int rank, const ncclUniqueId& id)>& body) {
  ncclUniqueId id;
  ASSERT_EQ(ncclSuccess, ncclGetUniqueId(&id));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ASSERT_EQ(cudaSuccess, cudaSetDevice(r));
      body(r, id);
    });
  }
  for (std::thread& t : threads) t.join();
}

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

// The narrow float types as the test reference (tests/multiproc/reference.h) knows them.
weft_dtype_t narrow_type(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16: return WEFT_FLOAT16;
    case ncclBfloat16: return WEFT_BFLOAT16;
    case ncclFloat8e4m3: return WEFT_FP8_E4M3;
    default: return WEFT_FP8_E5M2;
  }
}

void encode(ncclDataType_t t, void* buf, size_t i, double v) {
  switch (t) {
    case ncclInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); break;
    case ncclUint8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); break;
    case ncclInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case ncclUint32: static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(v); break;
    case ncclInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case ncclUint64: static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(v); break;
    case ncclFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case ncclFloat64: static_cast<double*>(buf)[i] = v; break;
    case ncclFloat16: case ncclBfloat16: case ncclFloat8e4m3: case ncclFloat8e5m2: {
      const weft_dtype_t d = narrow_type(t);
      mpt::store_bits(d, buf, i, mpt::encode_float(d, v, d == WEFT_FP8_E4M3 || d == WEFT_FP8_E5M2));
      break;
    }
    default: break;
  }
}

double decode(ncclDataType_t t, const void* buf, size_t i) {
  switch (t) {
    case ncclInt8: return static_cast<const int8_t*>(buf)[i];
    case ncclUint8: return static_cast<const uint8_t*>(buf)[i];
    case ncclInt32: return static_cast<const int32_t*>(buf)[i];
    case ncclUint32: return static_cast<const uint32_t*>(buf)[i];
    case ncclInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case ncclUint64: return static_cast<double>(static_cast<const uint64_t*>(buf)[i]);
    case ncclFloat32: return static_cast<const float*>(buf)[i];
    case ncclFloat64: return static_cast<const double*>(buf)[i];
    case ncclFloat16: case ncclBfloat16: case ncclFloat8e4m3: case ncclFloat8e5m2:
      return mpt::decode_float(narrow_type(t), mpt::load_bits(narrow_type(t), buf, i));
    default: return 0;
  }
}

TEST(FakeNccl, VersionErrorsAndGroups) {
  int v = 0;
  ASSERT_EQ(ncclSuccess, ncclGetVersion(&v));
  EXPECT_EQ(22800, v);
  EXPECT_STREQ("no error", ncclGetErrorString(ncclSuccess));
  EXPECT_EQ(ncclInvalidUsage, ncclGroupEnd());
  EXPECT_EQ(ncclSuccess, ncclGroupStart());
  EXPECT_EQ(ncclSuccess, ncclGroupStart());
  EXPECT_EQ(ncclSuccess, ncclGroupEnd());
  EXPECT_EQ(ncclSuccess, ncclGroupEnd());
  EXPECT_EQ(ncclInvalidArgument, ncclAllReduce(nullptr, nullptr, 1, ncclFloat32, ncclSum, nullptr, nullptr));
  EXPECT_NE(nullptr, std::strstr(ncclGetLastError(nullptr), "NULL"));
}

TEST(FakeNccl, OneRankBlockingChecksArguments) {
  ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  ncclUniqueId id;
  ASSERT_EQ(ncclSuccess, ncclGetUniqueId(&id));
  ncclComm_t c = nullptr;
  ASSERT_EQ(ncclSuccess, ncclCommInitRank(&c, 1, id, 0));
  int n = 0, rank = -1, dev = -1;
  EXPECT_EQ(ncclSuccess, ncclCommCount(c, &n));
  EXPECT_EQ(ncclSuccess, ncclCommUserRank(c, &rank));
  EXPECT_EQ(ncclSuccess, ncclCommCuDevice(c, &dev));
  EXPECT_EQ(1, n);
  EXPECT_EQ(0, rank);
  EXPECT_EQ(0, dev);

  const float in[4] = {1, 2, 3, 4};
  DevBuf d(sizeof in);
  d.put(in, sizeof in);
  EXPECT_EQ(ncclSuccess, ncclAllReduce(d.p, d.p, 4, ncclFloat32, ncclSum, c, nullptr));
  std::vector<char> out = d.get(sizeof in);  // cudaMemcpy waits for the default stream
  EXPECT_EQ(0, std::memcmp(out.data(), in, sizeof in));

  EXPECT_EQ(ncclInvalidArgument, ncclAllReduce(d.p, d.p, 4, ncclNumTypes, ncclSum, c, nullptr));
  EXPECT_EQ(ncclInvalidArgument, ncclAllReduce(d.p, d.p, 4, ncclFloat32, ncclNumOps, c, nullptr));
  EXPECT_EQ(ncclInvalidArgument, ncclBroadcast(d.p, d.p, 4, ncclFloat32, 1, c, nullptr));
  EXPECT_EQ(ncclInvalidArgument, ncclSend(d.p, 4, ncclFloat32, -1, c, nullptr));
  float host[4];
  EXPECT_EQ(ncclInvalidArgument, ncclAllReduce(host, d.p, 4, ncclFloat32, ncclSum, c, nullptr));
  EXPECT_NE(nullptr, std::strstr(ncclGetLastError(c), "not device memory")) << ncclGetLastError(c);
  // An error inside a group fails the group; nothing of it runs.
  EXPECT_EQ(ncclSuccess, ncclGroupStart());
  EXPECT_EQ(ncclInvalidArgument, ncclAllReduce(host, d.p, 4, ncclFloat32, ncclSum, c, nullptr));
  EXPECT_EQ(ncclInvalidArgument, ncclGroupEnd());

  // Send and receive to itself pair up inside one group.
  DevBuf r(sizeof in);
  EXPECT_EQ(ncclSuccess, ncclGroupStart());
  EXPECT_EQ(ncclSuccess, ncclSend(d.p, 4, ncclFloat32, 0, c, nullptr));
  EXPECT_EQ(ncclSuccess, ncclRecv(r.p, 4, ncclFloat32, 0, c, nullptr));
  EXPECT_EQ(ncclSuccess, ncclGroupEnd());
  out = r.get(sizeof in);
  EXPECT_EQ(0, std::memcmp(out.data(), in, sizeof in));

  EXPECT_EQ(ncclSuccess, ncclCommDestroy(c));
  EXPECT_EQ(ncclInvalidArgument, ncclCommCount(c, &n));  // a destroyed handle is refused
}

TEST(FakeNccl, NonBlockingReportsInProgress) {
  setenv("WEFT_FAKE_NCCL_LAUNCH_DELAY_US", "50000", 1);
  ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  ncclUniqueId id;
  ASSERT_EQ(ncclSuccess, ncclGetUniqueId(&id));
  ncclComm_t c = make_comm(1, id, 0, false);
  ASSERT_NE(nullptr, c);
  const int32_t in[3] = {7, 8, 9};
  DevBuf d(sizeof in);
  d.put(in, sizeof in);
  EXPECT_EQ(ncclInProgress, ncclAllReduce(d.p, d.p, 3, ncclInt32, ncclMax, c, nullptr));
  // Used again before ncclCommGetAsyncError said ncclSuccess: NCCL refuses.
  EXPECT_EQ(ncclInvalidArgument, ncclAllReduce(d.p, d.p, 3, ncclInt32, ncclMax, c, nullptr));
  EXPECT_NE(nullptr, std::strstr(ncclGetLastError(c), "before the previous operation")) << ncclGetLastError(c);
  EXPECT_EQ(ncclSuccess, settle(c));
  std::vector<char> out = d.get(sizeof in);
  EXPECT_EQ(0, std::memcmp(out.data(), in, sizeof in));
  EXPECT_EQ(ncclInProgress, ncclCommFinalize(c));
  EXPECT_EQ(ncclSuccess, settle(c));
  EXPECT_EQ(ncclSuccess, ncclCommDestroy(c));
  unsetenv("WEFT_FAKE_NCCL_LAUNCH_DELAY_US");
}

TEST(FakeNccl, TwoRanksReduceEveryTypeAndOp) {
  const ncclDataType_t types[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,     ncclInt64,     ncclUint64,
                                  ncclFloat16, ncclBfloat16, ncclFloat32, ncclFloat64, ncclFloat8e4m3, ncclFloat8e5m2};
  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  constexpr size_t kCount = 12;
  auto value = [](int rank, size_t i) { return rank == 0 ? double(i % 4 + 1) : double(i % 3 + 2); };
  two_ranks([&](int rank, const ncclUniqueId& id) {
    ncclComm_t c = make_comm(2, id, rank, false);
    ASSERT_NE(nullptr, c);
    cudaStream_t s;
    ASSERT_EQ(cudaSuccess, cudaStreamCreate(&s));
    for (ncclDataType_t t : types) {
      const size_t esz = type_size(t);
      std::vector<char> host(kCount * esz);
      for (size_t i = 0; i < kCount; ++i) encode(t, host.data(), i, value(rank, i));
      DevBuf send(host.size()), recv(host.size());
      send.put(host.data(), host.size());
      for (ncclRedOp_t op : ops) {
        expect_issued(ncclAllReduce(send.p, recv.p, kCount, t, op, c, s), c);
        ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
        std::vector<char> out = recv.get(host.size());
        const bool is_float = t >= ncclFloat16;
        const double tol = t == ncclFloat8e5m2 ? 0.25 : t == ncclFloat8e4m3 ? 0.125 : 0.0;
        for (size_t i = 0; i < kCount; ++i) {
          const double a = value(0, i), b = value(1, i);
          double want = 0;
          switch (op) {
            case ncclSum: want = a + b; break;
            case ncclProd: want = a * b; break;
            case ncclMax: want = std::max(a, b); break;
            case ncclMin: want = std::min(a, b); break;
            default: want = is_float ? (a + b) / 2 : std::trunc((a + b) / 2); break;
          }
          EXPECT_NEAR(want, decode(t, out.data(), i), tol * want) << "type " << t << " op " << op << " i " << i;
        }
      }
    }
    EXPECT_EQ(cudaSuccess, cudaStreamDestroy(s));
    EXPECT_EQ(ncclInProgress, ncclCommFinalize(c));
    EXPECT_EQ(ncclSuccess, settle(c));
    EXPECT_EQ(ncclSuccess, ncclCommDestroy(c));
  });
}

TEST(FakeNccl, TwoRanksCollectivesInPlaceAndPointToPoint) {
  two_ranks([&](int rank, const ncclUniqueId& id) {
    ncclComm_t c = make_comm(2, id, rank, rank == 0);  // one blocking, one not: both work
    ASSERT_NE(nullptr, c);
    constexpr size_t kCount = 5;
    std::vector<int32_t> host(2 * kCount);
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<int32_t>(100 * rank + i);
    DevBuf a(host.size() * 4), b(host.size() * 4);
    auto load = [&] { a.put(host.data(), host.size() * 4); };
    auto got = [&](const DevBuf& d, size_t n, size_t at = 0) {
      std::vector<char> raw = d.get(n * 4, at * 4);
      std::vector<int32_t> v(n);
      std::memcpy(v.data(), raw.data(), n * 4);
      return v;
    };

    // Broadcast from rank 1, in place.
    load();
    expect_issued(ncclBroadcast(a.p, a.p, kCount, ncclInt32, 1, c, nullptr), c);
    std::vector<int32_t> v = got(a, kCount);
    for (size_t i = 0; i < kCount; ++i) EXPECT_EQ(static_cast<int32_t>(100 + i), v[i]);

    // Reduce to rank 0; the other rank passes no receive buffer.
    load();
    expect_issued(ncclReduce(a.p, rank == 0 ? b.p : nullptr, kCount, ncclInt32, ncclSum, 0, c, nullptr), c);
    if (rank == 0) {
      v = got(b, kCount);
      for (size_t i = 0; i < kCount; ++i) EXPECT_EQ(static_cast<int32_t>(100 + 2 * i), v[i]);
    }

    // AllGather in place: this rank's block already sits at its offset.
    load();
    expect_issued(ncclAllGather(a.at(rank * kCount * 4), a.p, kCount, ncclInt32, c, nullptr), c);
    v = got(a, 2 * kCount);
    for (size_t i = 0; i < kCount; ++i) {
      EXPECT_EQ(static_cast<int32_t>(i), v[i]);
      EXPECT_EQ(static_cast<int32_t>(100 + kCount + i), v[kCount + i]);
    }

    // ReduceScatter in place: the result lands in this rank's block.
    load();
    expect_issued(ncclReduceScatter(a.p, a.at(rank * kCount * 4), kCount, ncclInt32, ncclSum, c, nullptr), c);
    v = got(a, kCount, rank * kCount);
    for (size_t i = 0; i < kCount; ++i) {
      const size_t j = rank * kCount + i;
      EXPECT_EQ(static_cast<int32_t>(100 + 2 * j), v[i]);
    }

    // Both ranks send, then receive, in one group, on two streams.
    load();
    cudaStream_t s2;
    ASSERT_EQ(cudaSuccess, cudaStreamCreate(&s2));
    EXPECT_EQ(ncclSuccess, ncclGroupStart());
    EXPECT_EQ(ncclSuccess, ncclSend(a.p, kCount, ncclInt32, 1 - rank, c, nullptr));
    EXPECT_EQ(ncclSuccess, ncclRecv(b.p, kCount, ncclInt32, 1 - rank, c, s2));
    expect_issued(ncclGroupEnd(), c);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s2));
    v = got(b, kCount);
    for (size_t i = 0; i < kCount; ++i) EXPECT_EQ(static_cast<int32_t>(100 * (1 - rank) + i), v[i]);
    EXPECT_EQ(cudaSuccess, cudaStreamDestroy(s2));
    EXPECT_EQ(ncclSuccess, ncclCommDestroy(c));
  });
}

TEST(FakeNccl, TwoRanksSplit) {
  two_ranks([&](int rank, const ncclUniqueId& id) {
    ncclComm_t c = make_comm(2, id, rank, false);
    ASSERT_NE(nullptr, c);
    // Same color, keys reversed: the child's ranks are the parent's, reversed.
    ncclComm_t child = nullptr;
    expect_issued(ncclCommSplit(c, 3, 10 - rank, &child, nullptr), c);
    ASSERT_NE(nullptr, wait_handle(&child));
    EXPECT_EQ(ncclSuccess, settle(child)) << ncclGetLastError(child);
    int n = 0, r = -1;
    EXPECT_EQ(ncclSuccess, ncclCommCount(child, &n));
    EXPECT_EQ(ncclSuccess, ncclCommUserRank(child, &r));
    EXPECT_EQ(2, n);
    EXPECT_EQ(1 - rank, r);
    // The child works: all-gather of the child ranks.
    DevBuf d(2 * sizeof(int32_t));
    const int32_t mine = r;
    d.put(&mine, 4, static_cast<size_t>(r) * 4);
    expect_issued(ncclAllGather(d.at(static_cast<size_t>(r) * 4), d.p, 1, ncclInt32, child, nullptr), child);
    std::vector<char> raw = d.get(8);
    int32_t both[2];
    std::memcpy(both, raw.data(), 8);
    EXPECT_EQ(0, both[0]);
    EXPECT_EQ(1, both[1]);
    // Rank 1 opts out: it gets no communicator; rank 0 gets one of its own.
    ncclComm_t solo = nullptr;
    expect_issued(ncclCommSplit(c, rank == 1 ? NCCL_SPLIT_NOCOLOR : 0, 0, &solo, nullptr), c);
    if (rank == 1) {
      EXPECT_EQ(nullptr, solo);
    } else {
      ASSERT_NE(nullptr, wait_handle(&solo));
      EXPECT_EQ(ncclSuccess, settle(solo));
      EXPECT_EQ(ncclSuccess, ncclCommCount(solo, &n));
      EXPECT_EQ(1, n);
      EXPECT_EQ(ncclSuccess, ncclCommDestroy(solo));
    }
    EXPECT_EQ(ncclSuccess, ncclCommDestroy(child));
    EXPECT_EQ(ncclSuccess, ncclCommDestroy(c));
  });
}

TEST(FakeNccl, DuplicateGpuFailsOnEveryRank) {
  ncclUniqueId id;
  ASSERT_EQ(ncclSuccess, ncclGetUniqueId(&id));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      ncclComm_t c = nullptr;
      ncclResult_t res = ncclCommInitRankConfig(&c, 2, id, r, &config);
      ASSERT_EQ(ncclInProgress, res);
      EXPECT_EQ(ncclInvalidUsage, settle(c));
      EXPECT_EQ(ncclSuccess, ncclCommAbort(c));
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_NE(nullptr, std::strstr(ncclGetLastError(nullptr), "Duplicate GPU")) << ncclGetLastError(nullptr);
}

TEST(FakeNccl, AbortEndsWaits) {
  ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  // A non-blocking init whose peer never comes: abort ends it at once.
  ncclUniqueId id;
  ASSERT_EQ(ncclSuccess, ncclGetUniqueId(&id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t c = nullptr;
  ASSERT_EQ(ncclInProgress, ncclCommInitRankConfig(&c, 2, id, 0, &config));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ncclResult_t state = ncclSuccess;
  EXPECT_EQ(ncclSuccess, ncclCommGetAsyncError(c, &state));
  EXPECT_EQ(ncclInProgress, state);
  auto t0 = Clock::now();
  EXPECT_EQ(ncclSuccess, ncclCommAbort(c));
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1));

  // An all-reduce whose peer never calls it waits on the stream until another thread aborts.
  two_ranks([&](int rank, const ncclUniqueId& id2) {
    ncclComm_t comm = make_comm(2, id2, rank, false);
    ASSERT_NE(nullptr, comm);
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      EXPECT_EQ(ncclSuccess, ncclCommAbort(comm));
      return;
    }
    DevBuf d(16);
    cudaStream_t s;
    ASSERT_EQ(cudaSuccess, cudaStreamCreate(&s));
    expect_issued(ncclAllReduce(d.p, d.p, 4, ncclFloat32, ncclSum, comm, s), comm);
    cudaEvent_t e;
    ASSERT_EQ(cudaSuccess, cudaEventCreate(&e));
    ASSERT_EQ(cudaSuccess, cudaEventRecord(e, s));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(cudaErrorNotReady, cudaEventQuery(e));  // still waiting for rank 1
    std::thread aborter([&] { EXPECT_EQ(ncclSuccess, ncclCommAbort(comm)); });
    aborter.join();
    auto start = Clock::now();
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(s));
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
    EXPECT_EQ(cudaSuccess, cudaEventDestroy(e));
    EXPECT_EQ(cudaSuccess, cudaStreamDestroy(s));
  });
}

TEST(FakeNccl, MismatchedCollectivesAreReported) {
  two_ranks([&](int rank, const ncclUniqueId& id) {
    ncclComm_t c = make_comm(2, id, rank, true);
    ASSERT_NE(nullptr, c);
    DevBuf d(64);
    EXPECT_EQ(ncclSuccess, ncclAllReduce(d.p, d.p, rank == 0 ? 4 : 5, ncclFloat32, ncclSum, c, nullptr));
    EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
    EXPECT_EQ(ncclInvalidUsage, settle(c));
    EXPECT_EQ(ncclSuccess, ncclCommAbort(c));
  });
}

}  // namespace
