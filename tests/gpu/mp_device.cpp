// Multi-process device collectives, run under weftrun (-n 1, 2, 4): every collective and
// point-to-point call of weft.h on device buffers, with a NULL stream, a user stream, and a
// request, compared with the same call on host buffers (the host path, checked against plain
// references by tests/multiproc). Inputs are small integers, so float sums are exact in any
// order and the two paths must agree bit for bit; float AVG alone is compared with a tolerance
// (NCCL's ncclAvg scales before it sums).
//
// With WEFT_DEVICE=0 every rank of a machine uses GPU 0, so NCCL refuses the communicator and
// the device buffers are staged through pinned memory (the CI of a one-GPU machine); without
// it, ranks on a multi-GPU machine get a GPU each and NCCL. Exits 77 (ctest: skipped) when no
// GPU is visible.
#include <cuda_runtime_api.h>
#include <weft/weft.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/common/dtype.h"
#include "kernels/cpu/convert.h"

namespace {

int g_rank = 0, g_size = 1, g_failures = 0;
weft_comm_t g_comm = nullptr;

#define MP_CHECK(call)                                                                                    \
  do {                                                                                                  \
    weft_status_t st_ = (call);                                                                         \
    if (st_ != WEFT_OK) {                                                                               \
      std::fprintf(stderr, "rank %d: %s failed: %s\n  %s\n", g_rank, #call, weft_status_string(st_),    \
                   weft_last_error());                                                                   \
      ++g_failures;                                                                                     \
      return;                                                                                           \
    }                                                                                                   \
  } while (0)

size_t esize(weft_dtype_t d) { return weft::dtype_size(static_cast<weft::DType>(d)); }
bool is_float(weft_dtype_t d) { return weft::dtype_is_float(static_cast<weft::DType>(d)); }
bool is_unsigned(weft_dtype_t d) { return d == WEFT_UINT8 || d == WEFT_UINT32 || d == WEFT_UINT64; }

// Small integer v stored as dtype d.
void put(void* dst, weft_dtype_t d, int v) {
  switch (d) {
    case WEFT_FLOAT64: { double x = v; std::memcpy(dst, &x, 8); return; }
    case WEFT_INT8: case WEFT_UINT8: { int8_t x = static_cast<int8_t>(v); std::memcpy(dst, &x, 1); return; }
    case WEFT_INT32: case WEFT_UINT32: { int32_t x = v; std::memcpy(dst, &x, 4); return; }
    case WEFT_INT64: case WEFT_UINT64: { int64_t x = v; std::memcpy(dst, &x, 8); return; }
    default: {
      float f = static_cast<float>(v);
      weft::kernels::narrow_from_f32(dst, static_cast<weft::DType>(d), &f, 1);
    }
  }
}

double get(const void* src, weft_dtype_t d) {
  if (d == WEFT_FLOAT64) { double x; std::memcpy(&x, src, 8); return x; }
  float f;
  weft::kernels::widen_to_f32(&f, src, static_cast<weft::DType>(d), 1);
  return f;
}

// Inputs: small integers, distinct per rank and element; identical on all ranks for AVG (so
// the mean is exact), {1, 2, -1} for PROD.
std::vector<uint8_t> inputs(weft_dtype_t d, size_t n, int salt, weft_op_t op) {
  std::vector<uint8_t> v(n * esize(d));
  for (size_t i = 0; i < n; ++i) {
    int x;
    if (op == WEFT_AVG) {
      x = static_cast<int>((i * 7 + static_cast<size_t>(salt)) % 9) - (is_unsigned(d) ? 0 : 4);
    } else if (op == WEFT_PROD) {
      static const int choices[] = {1, 2, -1, 1};
      x = choices[(i + static_cast<size_t>(g_rank * 3 + salt)) % 4];
      if (is_unsigned(d) && x < 0) x = 1;
    } else {
      x = static_cast<int>((i * 5 + static_cast<size_t>(g_rank * 11 + salt)) % 8) - (is_unsigned(d) ? 0 : 3);
    }
    put(&v[i * esize(d)], d, x);
  }
  return v;
}

struct Buffers {
  void* send;
  void* recv;
};

// How the device call is made.
enum class Mode { null_stream, user_stream, request };
const char* mode_name(Mode m) {
  return m == Mode::null_stream ? "NULL stream" : (m == Mode::user_stream ? "user stream" : "request");
}

using Call = std::function<weft_status_t(Buffers b, void* stream, weft_request_t* req)>;

struct Case {
  std::string name;
  weft_dtype_t dtype;
  std::vector<uint8_t> send;  // this rank's input
  size_t recv_bytes;
  bool in_place;              // the call uses recv as its input (send is copied into recv first)
  bool tolerant;              // float AVG
  Call call;
};

void run(const Case& c, Mode mode, cudaStream_t stream) {
  const std::string what = c.name + " (" + weft::dtype_name(static_cast<weft::DType>(c.dtype)) + ", " +
                           mode_name(mode) + ")";
  // Host path: the expected result.
  std::vector<uint8_t> hs(c.send), hr(c.recv_bytes, 0);
  if (c.in_place && !hs.empty() && !hr.empty()) std::memcpy(hr.data(), hs.data(), std::min(hs.size(), hr.size()));
  MP_CHECK(c.call({hs.data(), hr.data()}, nullptr, nullptr));
  // Device path.
  void *ds = nullptr, *dr = nullptr;
  cudaMalloc(&ds, c.send.size() + 1);
  cudaMalloc(&dr, c.recv_bytes + 1);
  cudaMemcpy(ds, c.send.data(), c.send.size(), cudaMemcpyHostToDevice);
  cudaMemset(dr, 0, c.recv_bytes + 1);
  if (c.in_place) cudaMemcpy(dr, ds, std::min(c.send.size(), c.recv_bytes), cudaMemcpyDeviceToDevice);
  weft_request_t req = nullptr;
  void* s = mode == Mode::null_stream ? nullptr : stream;
  weft_status_t st = c.call({ds, dr}, s, mode == Mode::request ? &req : nullptr);
  if (st == WEFT_OK && req) st = weft_wait(req);
  if (req) weft_request_free(req);
  if (s) cudaStreamSynchronize(stream);
  std::vector<uint8_t> got(c.recv_bytes);
  cudaMemcpy(got.data(), dr, c.recv_bytes, cudaMemcpyDeviceToHost);
  cudaFree(ds);
  cudaFree(dr);
  if (st != WEFT_OK) {
    std::fprintf(stderr, "rank %d: %s failed: %s\n  %s\n", g_rank, what.c_str(), weft_status_string(st),
                 weft_last_error());
    ++g_failures;
    return;
  }
  const size_t e = esize(c.dtype);
  for (size_t i = 0; i < c.recv_bytes; i += e) {
    if (std::memcmp(&got[i], &hr[i], e) == 0) continue;
    if (c.tolerant) {
      double w = get(&hr[i], c.dtype), g = get(&got[i], c.dtype);
      double tol = c.dtype == WEFT_FLOAT64 ? 1e-12 : (c.dtype == WEFT_FLOAT32 ? 1e-6 : 0.07);
      if (std::fabs(w - g) <= tol * std::fmax(1.0, std::fabs(w))) continue;
    }
    std::fprintf(stderr, "rank %d: %s: element %zu differs from the host path (%g vs %g)\n", g_rank, what.c_str(),
                 i / e, get(&got[i], c.dtype), get(&hr[i], c.dtype));
    ++g_failures;
    return;
  }
}

std::vector<Case> cases(weft_dtype_t d, size_t n) {
  const size_t e = esize(d), N = static_cast<size_t>(g_size);
  const int root = g_size - 1;
  std::vector<Case> out;
  for (weft_op_t op : {WEFT_SUM, WEFT_PROD, WEFT_MIN, WEFT_MAX, WEFT_AVG}) {
    const bool tol = op == WEFT_AVG && is_float(d);
    const std::string o = std::string(" ") + weft::op_name(static_cast<weft::ReduceOp>(op));
    out.push_back({"allreduce" + o, d, inputs(d, n, 1, op), n * e, false, tol, [=](Buffers b, void* s, weft_request_t* r) {
                     return weft_allreduce(b.send, b.recv, n, d, op, g_comm, s, r);
                   }});
    out.push_back({"allreduce in place" + o, d, inputs(d, n, 2, op), n * e, true, tol,
                   [=](Buffers b, void* s, weft_request_t* r) {
                     return weft_allreduce(b.recv, b.recv, n, d, op, g_comm, s, r);
                   }});
    out.push_back({"reduce" + o, d, inputs(d, n, 3, op), n * e, false, tol, [=](Buffers b, void* s, weft_request_t* r) {
                     return weft_reduce(b.send, b.recv, n, d, op, root, g_comm, s, r);
                   }});
    out.push_back({"reduce_scatter" + o, d, inputs(d, n * N, 4, op), n * e, false, tol,
                   [=](Buffers b, void* s, weft_request_t* r) {
                     return weft_reduce_scatter(b.send, b.recv, n, d, op, g_comm, s, r);
                   }});
  }
  out.push_back({"broadcast", d, inputs(d, n, 5, WEFT_SUM), n * e, true, false, [=](Buffers b, void* s, weft_request_t* r) {
                   return weft_broadcast(b.recv, n, d, 1 % g_size, g_comm, s, r);
                 }});
  out.push_back({"allgather", d, inputs(d, n, 6, WEFT_SUM), n * N * e, false, false,
                 [=](Buffers b, void* s, weft_request_t* r) { return weft_allgather(b.send, b.recv, n, d, g_comm, s, r); }});
  out.push_back({"alltoall", d, inputs(d, n * N, 7, WEFT_SUM), n * N * e, false, false,
                 [=](Buffers b, void* s, weft_request_t* r) { return weft_alltoall(b.send, b.recv, n, d, g_comm, s, r); }});
  out.push_back({"alltoall in place", d, inputs(d, n * N, 8, WEFT_SUM), n * N * e, true, false,
                 [=](Buffers b, void* s, weft_request_t* r) { return weft_alltoall(b.recv, b.recv, n, d, g_comm, s, r); }});
  out.push_back({"gather", d, inputs(d, n, 9, WEFT_SUM), n * N * e, false, false, [=](Buffers b, void* s, weft_request_t* r) {
                   return weft_gather(b.send, b.recv, n, d, root, g_comm, s, r);
                 }});
  out.push_back({"scatter", d, inputs(d, n * N, 10, WEFT_SUM), n * e, false, false, [=](Buffers b, void* s, weft_request_t* r) {
                   return weft_scatter(b.send, b.recv, n, d, root, g_comm, s, r);
                 }});
  // Uneven counts: rank q sends (q + 2p) % 3 * n / 2 + 1 elements to rank p (all ranks agree).
  auto count = [n](int from, int to) { return static_cast<size_t>((from + 2 * to) % 3) * (n / 2) + (n ? 1 : 0); };
  std::vector<size_t> gc(N), gd(N), sc(N), sd(N), rc(N), rd(N);
  size_t gtot = 0, stot = 0, rtot = 0;
  for (size_t p = 0; p < N; ++p) {
    gc[p] = count(static_cast<int>(p), 0);
    gd[p] = gtot;
    gtot += gc[p];
    sc[p] = count(g_rank, static_cast<int>(p));
    sd[p] = stot;
    stot += sc[p];
    rc[p] = count(static_cast<int>(p), g_rank);
    rd[p] = rtot;
    rtot += rc[p];
  }
  const size_t mine = gc[static_cast<size_t>(g_rank)];
  out.push_back({"allgatherv", d, inputs(d, mine, 11, WEFT_SUM), gtot * e, false, false,
                 [=](Buffers b, void* s, weft_request_t* r) {
                   return weft_allgatherv(b.send, mine, b.recv, gc.data(), gd.data(), d, g_comm, s, r);
                 }});
  out.push_back({"alltoallv", d, inputs(d, stot, 12, WEFT_SUM), rtot * e, false, false,
                 [=](Buffers b, void* s, weft_request_t* r) {
                   return weft_alltoallv(b.send, sc.data(), sd.data(), b.recv, rc.data(), rd.data(), d, g_comm, s, r);
                 }});
  return out;
}

// Two-way ring exchange in one weft_p2p_batch: send to rank + 1 and rank - 1, receive from
// both, and a message to the rank itself (staged even on the NCCL path), with the given mode.
// Separate weft_send/weft_recv calls here could deadlock on NCCL (weft.h, "Streams").
void ring_p2p_batch(size_t n, Mode mode, cudaStream_t stream) {
  const size_t bytes = n * 4;
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  auto value = [](int from, int to, size_t i) {
    return static_cast<float>(from * 1000 + to * 10 + static_cast<int>(i % 7));
  };
  std::vector<float> to_next(n), to_prev(n), to_self(n), want_prev(n), want_next(n), got(n);
  for (size_t i = 0; i < n; ++i) {
    to_next[i] = value(g_rank, next, i);
    to_prev[i] = -value(g_rank, prev, i);
    to_self[i] = value(g_rank, g_rank, i) + 0.5f;
    want_prev[i] = value(prev, g_rank, i);
    want_next[i] = -value(next, g_rank, i);
  }
  void* d[6] = {};  // sends: next, prev, self; receives: from prev, from next, from self
  for (void*& p : d) cudaMalloc(&p, bytes + 1);
  cudaMemcpy(d[0], to_next.data(), bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(d[1], to_prev.data(), bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(d[2], to_self.data(), bytes, cudaMemcpyHostToDevice);
  for (int k = 3; k < 6; ++k) cudaMemset(d[k], 0, bytes);
  cudaDeviceSynchronize();
  // Per direction the order is next, prev, self, so that with 1 or 2 ranks (where those are the
  // same peer) the messages still pair up as intended (issue order per pair and direction).
  const weft_p2p_op_t ops[6] = {{WEFT_P2P_RECV, d[3], n, WEFT_FLOAT32, prev},
                                {WEFT_P2P_SEND, d[0], n, WEFT_FLOAT32, next},
                                {WEFT_P2P_SEND, d[1], n, WEFT_FLOAT32, prev},
                                {WEFT_P2P_RECV, d[4], n, WEFT_FLOAT32, next},
                                {WEFT_P2P_SEND, d[2], n, WEFT_FLOAT32, g_rank},
                                {WEFT_P2P_RECV, d[5], n, WEFT_FLOAT32, g_rank}};
  weft_request_t req = nullptr;
  void* s = mode == Mode::null_stream ? nullptr : stream;
  weft_status_t st = weft_p2p_batch(ops, 6, g_comm, s, mode == Mode::request ? &req : nullptr);
  if (st == WEFT_OK && req) st = weft_wait(req);
  weft_request_free(req);
  if (st == WEFT_OK && mode == Mode::user_stream && cudaStreamSynchronize(stream) != cudaSuccess) st = WEFT_ERR_INTERNAL;
  bool ok = st == WEFT_OK;
  const std::vector<float>* want[3] = {&want_prev, &want_next, &to_self};
  for (int k = 0; k < 3 && ok; ++k) {
    cudaMemcpy(got.data(), d[3 + k], bytes, cudaMemcpyDeviceToHost);
    ok = got == *want[k];
  }
  for (void* p : d) cudaFree(p);
  if (!ok) {
    std::fprintf(stderr, "rank %d: two-way ring p2p batch of %zu floats (%s) failed: %s\n", g_rank, n,
                 mode_name(mode), st != WEFT_OK ? weft_last_error() : "wrong data");
    ++g_failures;
  }
}

// Uneven point-to-point, as a pipeline has: rank 0 sends to rank 1, the others stay out. Then
// every rank runs a host-memory and a device collective: point-to-point must not have moved
// the two ranks' collective sequence ahead of the others' (they would never match again).
void uneven_p2p_then_collectives(size_t n, cudaStream_t stream) {
  if (g_size < 2) return;
  std::vector<float> data(n, 5.0f), got(n, 0.0f);
  void* d = nullptr;
  cudaMalloc(&d, n * 4 + 1);
  cudaMemcpy(d, data.data(), n * 4, cudaMemcpyHostToDevice);
  weft_status_t st = WEFT_OK;
  if (g_rank == 0) st = weft_send(d, n, WEFT_FLOAT32, 1, g_comm, stream, nullptr);
  if (g_rank == 1) st = weft_recv(d, n, WEFT_FLOAT32, 0, g_comm, stream, nullptr);
  int host_value = 1, host_sum = 0;
  if (st == WEFT_OK) st = weft_allreduce(&host_value, &host_sum, 1, WEFT_INT32, WEFT_SUM, g_comm, nullptr, nullptr);
  if (st == WEFT_OK) st = weft_allreduce(d, d, n, WEFT_FLOAT32, WEFT_SUM, g_comm, stream, nullptr);
  if (st == WEFT_OK) st = cudaStreamSynchronize(stream) == cudaSuccess ? WEFT_OK : WEFT_ERR_INTERNAL;
  cudaMemcpy(got.data(), d, n * 4, cudaMemcpyDeviceToHost);
  cudaFree(d);
  // Every rank holds 5.0 (rank 1 received rank 0's 5.0s), so the device sum is 5 * size.
  const bool ok = st == WEFT_OK && host_sum == g_size &&
                  std::all_of(got.begin(), got.end(), [](float x) { return x == 5.0f * static_cast<float>(g_size); });
  if (!ok) {
    std::fprintf(stderr, "rank %d: uneven send/recv then collectives (%zu floats) failed: %s\n", g_rank, n,
                 st != WEFT_OK ? weft_last_error() : "wrong data");
    ++g_failures;
  }
}

// Split (even and odd ranks; the last rank left out when there are more than two) and a device
// allreduce on the child: with NCCL the child's NCCL communicator is split from the parent's,
// which every parent rank, the left-out one too, must take part in.
void split_then_collective(cudaStream_t stream) {
  const bool left_out = g_size > 2 && g_rank == g_size - 1;
  const int color = left_out ? -1 : g_rank % 2;
  weft_comm_t child = nullptr;
  weft_status_t st = weft_comm_split(g_comm, color, g_rank, &child, nullptr);
  float want = 0.0f;
  for (int r = 0; r < g_size; ++r) {
    if (!(g_size > 2 && r == g_size - 1) && r % 2 == color) want += static_cast<float>(r + 1);
  }
  float got = -1.0f;
  if (st == WEFT_OK && child) {
    void* d = nullptr;
    cudaMalloc(&d, 4);
    const float mine = static_cast<float>(g_rank + 1);
    cudaMemcpy(d, &mine, 4, cudaMemcpyHostToDevice);
    st = weft_allreduce(d, d, 1, WEFT_FLOAT32, WEFT_SUM, child, stream, nullptr);
    cudaStreamSynchronize(stream);
    cudaMemcpy(&got, d, 4, cudaMemcpyDeviceToHost);
    cudaFree(d);
  }
  weft_comm_destroy(child);
  const bool ok = st == WEFT_OK && (left_out ? child == nullptr : got == want);
  if (!ok) {
    std::fprintf(stderr, "rank %d: split (color %d) then device allreduce failed: %s (got %g, want %g)\n", g_rank,
                 color, st != WEFT_OK ? weft_last_error() : "wrong result", got, want);
    ++g_failures;
  }
}

}  // namespace

int main() {
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("SKIP: no GPU (%s)\n", err != cudaSuccess ? cudaGetErrorString(err) : "no device visible");
    return 77;
  }
  if (weft_comm_init_from_env(&g_comm, nullptr) != WEFT_OK) {
    std::fprintf(stderr, "weft_comm_init_from_env: %s\n", weft_last_error());
    return 1;
  }
  weft_comm_rank(g_comm, &g_rank);
  weft_comm_size(g_comm, &g_size);
  // The communicator's GPU: the one its buffers must be on.
  int device = 0;
  if (const char* v = std::getenv("WEFT_DEVICE")) device = std::atoi(v);
  else device = g_rank % devices;  // one host: local rank == rank
  cudaSetDevice(device);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);

  const weft_dtype_t dtypes[] = {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FP8_E4M3,
                                 WEFT_FP8_E5M2, WEFT_INT8,   WEFT_UINT8,   WEFT_INT32,    WEFT_INT64};
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{300001}}) {
    for (weft_dtype_t d : dtypes) {
      // Every mode on one dtype; the others with the request mode (the least synchronous).
      for (Mode m : {Mode::null_stream, Mode::user_stream, Mode::request}) {
        if (d != WEFT_FLOAT32 && m != Mode::request) continue;
        for (const Case& c : cases(d, n)) run(c, m, stream);
      }
    }
    for (Mode m : {Mode::null_stream, Mode::user_stream, Mode::request}) ring_p2p_batch(n, m, stream);
    if (n) uneven_p2p_then_collectives(n, stream);
  }
  split_then_collective(stream);
  weft_status_t st = weft_barrier(g_comm, stream, nullptr);
  if (st != WEFT_OK) {
    std::fprintf(stderr, "rank %d: barrier: %s\n", g_rank, weft_last_error());
    ++g_failures;
  }
  cudaStreamSynchronize(stream);
  weft_comm_destroy(g_comm);
  cudaStreamDestroy(stream);
  if (g_failures) {
    std::fprintf(stderr, "rank %d: %d failure(s)\n", g_rank, g_failures);
    return 1;
  }
  std::printf("rank %d: all device collectives match the host path\n", g_rank);
  return 0;
}
