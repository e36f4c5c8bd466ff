// Multi-process device collectives, run under weftrun (-n 1 to 8): every collective and
// point-to-point call of weft.h on device buffers, for every dtype and op, with a NULL stream,
// a user stream and a request. Every result is checked against the test suite's own
// single-process reference (mp_device_cases.h: tests/multiproc/inputs.h and reference.h, which
// share no code with weft), never against weft's host path or its CPU kernels: a wrong device
// kernel or a wrong device algorithm fails here. Reductions run with exact inputs (small
// integers, exact products, any finite pattern for MIN/MAX, full-range integers that wrap) at
// every size, and with special inputs (NaN, inf, overflow, fp8 saturation) at size 7.
//
// With WEFT_DEVICE=0 every rank of a machine uses GPU 0, so NCCL refuses the communicator and
// the device buffers are staged through pinned memory (the CI of a one-GPU machine); without
// it, ranks on a multi-GPU machine get a GPU each and NCCL. Exits 77 (ctest: skipped) when no
// GPU is visible. WEFT_TEST_INJECT=1 corrupts every result before it is checked (injection.h):
// the program then prints "injected N, caught N" and exits 0 only if every one was caught.
#include <cuda_runtime_api.h>
#include <weft/weft.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rank_device.h"
#include "injection.h"
#include "mp_common.h"
#include "mp_device_cases.h"

namespace {

using weft::gputest::Buffers;
using weft::gputest::DeviceCase;
using weft::gputest::Want;

weft::gputest::World g{};
mpt::InjectTally g_tally;
int g_failures = 0;

// One checked device result, tallied under `key` (injection.h): a failure is printed and
// counted. A corrupted result must mismatch; it is not printed when it does.
void verdict(const std::string& key, bool injected, bool mismatch, const std::string& what,
             const std::string& detail) {
  g_tally.record(key, injected, mismatch);
  if (injected == mismatch) return;
  ++g_failures;
  if (mismatch) {
    std::fprintf(stderr, "rank %d: %s: %s\n", g.rank, what.c_str(), detail.c_str());
  } else {
    std::fprintf(stderr, "rank %d: %s: the corrupted result (WEFT_TEST_INJECT) passed the check\n", g.rank,
                 what.c_str());
  }
}

void call_failed(const std::string& what, weft_status_t st) {
  std::fprintf(stderr, "rank %d: %s failed: %s\n  %s\n", g.rank, what.c_str(), weft_status_string(st),
               weft_last_error());
  ++g_failures;
}

// How the device call is made.
enum class Mode { null_stream, user_stream, request };
const char* mode_name(Mode m) {
  return m == Mode::null_stream ? "NULL stream" : (m == Mode::user_stream ? "user stream" : "request");
}

// Compares a downloaded result with the case's expectation, element by element.
void check(const DeviceCase& c, std::vector<uint8_t>& got, const std::string& what) {
  if (c.recv_count == 0) return;
  const bool injected = weft::gputest::inject(got.data(), c.dt, c.recv_count);
  size_t wrong = 0, first = 0;
  Want first_want;
  uint64_t first_got = 0;
  for (size_t i = 0; i < c.recv_count; ++i) {
    const Want w = c.want(i);
    const uint64_t b = mpt::load_bits(c.dt, got.data(), i);
    const bool ok = w.reduced ? w.expect.matches(c.dt, c.op, c.compare, g.size, b) : b == w.bits;
    if (ok) continue;
    if (wrong++ == 0) {
      first = i;
      first_want = w;
      first_got = b;
    }
  }
  std::string detail;
  if (wrong) {
    const uint64_t want_bits = first_want.reduced ? first_want.expect.bits : first_want.bits;
    detail = std::to_string(wrong) + " of " + std::to_string(c.recv_count) + " elements wrong, first at index " +
             std::to_string(first) + ": expected " + mpt::format_value(c.dt, want_bits) + ", got " +
             mpt::format_value(c.dt, first_got) + " | rule: " +
             (first_want.reduced ? mpt::Expectation::rule(c.dt, c.op, c.compare, g.size) : "bit for bit");
  }
  verdict(c.name.substr(0, c.name.find(' ')) + " " + mpt::dtype_name(c.dt), injected, wrong != 0, what, detail);
}

void run(const DeviceCase& c, Mode mode, cudaStream_t stream) {
  const std::string what = c.name + " (" + mpt::dtype_name(c.dt) + ", " + std::to_string(c.recv_count) +
                           " result elements, " + mode_name(mode) + ")";
  const size_t recv_bytes = c.recv_count * mpt::dtype_bytes(c.dt);
  void *ds = nullptr, *dr = nullptr;
  cudaMalloc(&ds, c.send.size() + 1);
  cudaMalloc(&dr, recv_bytes + 1);
  cudaMemcpy(ds, c.send.data(), c.send.size(), cudaMemcpyHostToDevice);
  cudaMemset(dr, 0, recv_bytes + 1);
  if (c.in_place) cudaMemcpy(dr, ds, std::min(c.send.size(), recv_bytes), cudaMemcpyDeviceToDevice);
  // These may still be landing: cudaMemcpy from pageable memory or between device buffers and
  // cudaMemset return early, and nothing orders the non-blocking user stream after them.
  cudaDeviceSynchronize();
  weft_request_t req = nullptr;
  void* s = mode == Mode::null_stream ? nullptr : stream;
  weft_status_t st = c.call({ds, dr}, s, mode == Mode::request ? &req : nullptr);
  if (st == WEFT_OK && req) st = weft_wait(req);
  if (req) weft_request_free(req);
  if (s) cudaStreamSynchronize(stream);
  std::vector<uint8_t> got(recv_bytes);
  cudaMemcpy(got.data(), dr, recv_bytes, cudaMemcpyDeviceToHost);
  cudaFree(ds);
  cudaFree(dr);
  if (st != WEFT_OK) return call_failed(what, st);
  check(c, got, what);
}

// Compares a float32 device result with its expected values (after injection, if on).
void check_floats(const char* key, std::vector<float> got, const std::vector<float>& want, const std::string& what) {
  if (want.empty()) return;
  const bool injected = weft::gputest::inject(got.data(), WEFT_FLOAT32, got.size());
  size_t first = 0;
  while (first < want.size() && std::memcmp(&got[first], &want[first], sizeof(float)) == 0) ++first;
  const bool mismatch = first < want.size();
  verdict(key, injected, mismatch, what,
          mismatch ? "element " + std::to_string(first) + ": expected " + std::to_string(want[first]) + ", got " +
                         std::to_string(got[first])
                   : "");
}

// Two-way ring exchange in one weft_p2p_batch: send to rank + 1 and rank - 1, receive from
// both, and a message to the rank itself (staged even on the NCCL path), with the given mode.
// Separate weft_send/weft_recv calls here could deadlock on NCCL (weft.h, "Streams").
void ring_p2p_batch(size_t n, Mode mode, cudaStream_t stream) {
  const std::string what = "two-way ring p2p batch of " + std::to_string(n) + " floats (" + mode_name(mode) + ")";
  const size_t bytes = n * 4;
  const int next = (g.rank + 1) % g.size, prev = (g.rank + g.size - 1) % g.size;
  auto value = [](int from, int to, size_t i) {
    return static_cast<float>(from * 1000 + to * 10 + static_cast<int>(i % 7));
  };
  std::vector<float> to_next(n), to_prev(n), to_self(n), want_prev(n), want_next(n);
  for (size_t i = 0; i < n; ++i) {
    to_next[i] = value(g.rank, next, i);
    to_prev[i] = -value(g.rank, prev, i);
    to_self[i] = value(g.rank, g.rank, i) + 0.5f;
    want_prev[i] = value(prev, g.rank, i);
    want_next[i] = -value(next, g.rank, i);
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
                                {WEFT_P2P_SEND, d[2], n, WEFT_FLOAT32, g.rank},
                                {WEFT_P2P_RECV, d[5], n, WEFT_FLOAT32, g.rank}};
  weft_request_t req = nullptr;
  void* s = mode == Mode::null_stream ? nullptr : stream;
  weft_status_t st = weft_p2p_batch(ops, 6, g.comm, s, mode == Mode::request ? &req : nullptr);
  if (st == WEFT_OK && req) st = weft_wait(req);
  weft_request_free(req);
  if (st == WEFT_OK && mode == Mode::user_stream && cudaStreamSynchronize(stream) != cudaSuccess) st = WEFT_ERR_INTERNAL;
  std::vector<float> got[3] = {std::vector<float>(n), std::vector<float>(n), std::vector<float>(n)};
  for (int k = 0; k < 3; ++k) cudaMemcpy(got[k].data(), d[3 + k], bytes, cudaMemcpyDeviceToHost);
  for (void* p : d) cudaFree(p);
  if (st != WEFT_OK) return call_failed(what, st);
  check_floats("p2p_batch f32", got[0], want_prev, what + ", message from the previous rank");
  check_floats("p2p_batch f32", got[1], want_next, what + ", message from the next rank");
  check_floats("p2p_batch f32", got[2], to_self, what + ", message to itself");
}

// Uneven point-to-point, as a pipeline has: rank 0 sends to rank 1, the others stay out. Then
// every rank runs a host-memory and a device collective: point-to-point must not have moved
// the two ranks' collective sequence ahead of the others' (they would never match again).
void uneven_p2p_then_collectives(size_t n, cudaStream_t stream) {
  if (g.size < 2) return;
  const std::string what = "uneven send/recv then collectives (" + std::to_string(n) + " floats)";
  std::vector<float> data(n, 5.0f), got(n, 0.0f);
  void* d = nullptr;
  cudaMalloc(&d, n * 4 + 1);
  cudaMemcpy(d, data.data(), n * 4, cudaMemcpyHostToDevice);
  cudaDeviceSynchronize();  // the copy may still be landing (see run())
  weft_status_t st = WEFT_OK;
  if (g.rank == 0) st = weft_send(d, n, WEFT_FLOAT32, 1, g.comm, stream, nullptr);
  if (g.rank == 1) st = weft_recv(d, n, WEFT_FLOAT32, 0, g.comm, stream, nullptr);
  int host_value = 1, host_sum = 0;
  if (st == WEFT_OK) st = weft_allreduce(&host_value, &host_sum, 1, WEFT_INT32, WEFT_SUM, g.comm, nullptr, nullptr);
  if (st == WEFT_OK) st = weft_allreduce(d, d, n, WEFT_FLOAT32, WEFT_SUM, g.comm, stream, nullptr);
  if (st == WEFT_OK) st = cudaStreamSynchronize(stream) == cudaSuccess ? WEFT_OK : WEFT_ERR_INTERNAL;
  cudaMemcpy(got.data(), d, n * 4, cudaMemcpyDeviceToHost);
  cudaFree(d);
  if (st != WEFT_OK) return call_failed(what, st);
  if (host_sum != g.size) {
    std::fprintf(stderr, "rank %d: %s: host allreduce gave %d, want %d\n", g.rank, what.c_str(), host_sum, g.size);
    ++g_failures;
  }
  // Every rank holds 5.0 (rank 1 received rank 0's 5.0s), so the device sum is 5 * size.
  check_floats("send/recv f32", got, std::vector<float>(n, 5.0f * static_cast<float>(g.size)), what + ", device allreduce");
}

// Split (even and odd ranks; the last rank left out when there are more than two) and a device
// allreduce on the child: with NCCL the child's NCCL communicator is split from the parent's,
// which every parent rank, the left-out one too, must take part in.
void split_then_collective(cudaStream_t stream) {
  const bool left_out = g.size > 2 && g.rank == g.size - 1;
  const int color = left_out ? -1 : g.rank % 2;
  const std::string what = "split (color " + std::to_string(color) + ") then device allreduce";
  weft_comm_t child = nullptr;
  weft_status_t st = weft_comm_split(g.comm, color, g.rank, &child, nullptr);
  float want = 0.0f;
  for (int r = 0; r < g.size; ++r) {
    if (!(g.size > 2 && r == g.size - 1) && r % 2 == color) want += static_cast<float>(r + 1);
  }
  float got = -1.0f;
  if (st == WEFT_OK && child) {
    void* d = nullptr;
    cudaMalloc(&d, 4);
    const float mine = static_cast<float>(g.rank + 1);
    cudaMemcpy(d, &mine, 4, cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();  // the copy may still be landing (see run())
    st = weft_allreduce(d, d, 1, WEFT_FLOAT32, WEFT_SUM, child, stream, nullptr);
    cudaStreamSynchronize(stream);
    cudaMemcpy(&got, d, 4, cudaMemcpyDeviceToHost);
    cudaFree(d);
  }
  weft_comm_destroy(child);
  if (st != WEFT_OK) return call_failed(what, st);
  if (left_out != (child == nullptr)) {
    std::fprintf(stderr, "rank %d: %s: %s\n", g.rank, what.c_str(),
                 left_out ? "a left-out rank got a communicator" : "no communicator");
    ++g_failures;
    return;
  }
  if (!left_out) check_floats("split f32", {got}, {want}, what);
}

}  // namespace

int main() {
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("SKIP: no GPU (%s)\n", err != cudaSuccess ? cudaGetErrorString(err) : "no device visible");
    return 77;
  }
  if (weft_comm_init_from_env(&g.comm, nullptr) != WEFT_OK) {
    std::fprintf(stderr, "weft_comm_init_from_env: %s\n", weft_last_error());
    return 1;
  }
  weft_comm_rank(g.comm, &g.rank);
  weft_comm_size(g.comm, &g.size);
  mpt::set_log_rank(g.rank, g.size);
  // The communicator's GPU: the one its buffers must be on.
  weft::gputest::use_rank_device(g.rank, devices);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);

  const weft_dtype_t dtypes[] = {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FP8_E4M3, WEFT_FP8_E5M2,
                                 WEFT_INT8,    WEFT_UINT8,   WEFT_INT32,   WEFT_UINT32,   WEFT_INT64,    WEFT_UINT64};
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{300001}}) {
    for (weft_dtype_t d : dtypes) {
      std::vector<DeviceCase> cases = weft::gputest::reducing_cases(g, d, n, mpt::Input::exact);
      for (DeviceCase& c : weft::gputest::moving_cases(g, d, n)) cases.push_back(std::move(c));
      if (n == 7 && mpt::is_float(d)) {
        for (DeviceCase& c : weft::gputest::reducing_cases(g, d, n, mpt::Input::special)) cases.push_back(std::move(c));
      }
      // Every mode on one dtype; the others with the request mode (the least synchronous).
      for (Mode m : {Mode::null_stream, Mode::user_stream, Mode::request}) {
        if (d != WEFT_FLOAT32 && m != Mode::request) continue;
        for (const DeviceCase& c : cases) run(c, m, stream);
      }
    }
    for (Mode m : {Mode::null_stream, Mode::user_stream, Mode::request}) ring_p2p_batch(n, m, stream);
    if (n) uneven_p2p_then_collectives(n, stream);
  }
  split_then_collective(stream);
  weft_status_t st = weft_barrier(g.comm, stream, nullptr);
  if (st != WEFT_OK) call_failed("barrier", st);
  cudaStreamSynchronize(stream);
  weft_comm_destroy(g.comm);
  cudaStreamDestroy(stream);
  const std::string who = "rank " + std::to_string(g.rank);
  if (mpt::inject_enabled()) return g_tally.report(false) && g_failures == 0 ? 0 : 1;
  if (g_failures) {
    std::fprintf(stderr, "%s: %d failure(s)\n", who.c_str(), g_failures);
    return 1;
  }
  std::printf("%s: all device results match the reference\n", who.c_str());
  return 0;
}
