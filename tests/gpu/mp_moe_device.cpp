// Expert-parallel dispatch and combine (weft/moe.h) on CUDA device memory (config.device = 1),
// run under weftrun: every rank dispatches its tokens, applies a simple per-row expert function
// to what it received (on the host, from a copy), combines the results back (weighted, and
// unweighted as dispatch's backward) and runs combine's backward. Staged (every rank on GPU 0) or
// on NCCL (a GPU per rank; emulated: the stand-in), as the environment chooses.
//
// Two references for every result:
//   - the same calls on host memory through weft (config.device = 0): equal bit for bit (the
//     device path must be the host path's twin; weft against weft);
//   - the dense layer written here, from the inputs every rank can compute for every rank: the
//     received rows and their metadata in the documented order (expert-major, then source rank,
//     token, slot; padding per expert_alignment), out[t] = the float32 sum over token t's kept
//     slots in order of w * f(expert, x[t]) rounded once, grad_expert_out = w * grad_out of the
//     row's token rounded once, grad_weights = the float32 dot of grad_out[t] with f(expert, x[t]).
// Cases: FLOAT32, BFLOAT16, FLOAT16; experts that do not divide evenly (the last ranks hold fewer
// or none); a rank with no tokens; dropped slots; expert_alignment 0 and 4; k = 1, 2, 3.
//
// Exits 77 when no GPU is visible. WEFT_TEST_INJECT=1 corrupts one element of every non-empty
// result before it is checked; the program then passes only when every corruption was caught.
//
// fp-contract=off: the reference's float32 loops must round a*b and then +, as weft's kernels do.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <cuda_runtime_api.h>
#include <weft/moe.h>
#include <weft/weft.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "injection.h"
#include "mp_common.h"
#include "rank_device.h"
#include "reference.h"

namespace {

int g_failures = 0, g_injected = 0, g_caught = 0;

#define CUDA_OK(call)                                                    \
  do {                                                                   \
    cudaError_t e_ = (call);                                             \
    if (e_ != cudaSuccess) {                                             \
      mpt::logf("FAIL %s: %s\n", #call, cudaGetErrorString(e_));         \
      std::exit(1);                                                      \
    }                                                                    \
  } while (0)
#define WEFT_OK(call)                                                                         \
  do {                                                                                        \
    weft_status_t s_ = (call);                                                                \
    if (s_ != WEFT_OK) {                                                                      \
      mpt::logf("FAIL %s: %s: %s\n", #call, mpt::status_name(s_), mpt::last_error().c_str()); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

struct Case {
  weft_dtype_t dt;
  int experts, topk;
  size_t hidden, alignment;
};

std::string describe(const Case& c) {
  return std::string(mpt::dtype_name(c.dt)) + " E=" + std::to_string(c.experts) + " k=" + std::to_string(c.topk) +
         " H=" + std::to_string(c.hidden) + " alignment=" + std::to_string(c.alignment);
}

// ---------------------------------------------------------------- every rank's inputs

size_t tokens_of(int rank, int size) { return size > 2 && rank == 1 ? 0 : 5 + 3 * static_cast<size_t>(rank); }

// Slot j of token t on rank r: distinct experts per token, about one slot in five dropped.
int32_t expert_of(const Case& c, int r, size_t t, int j) {
  const size_t h = static_cast<size_t>(r) * 131 + t * 29 + static_cast<size_t>(j) * 7;
  if (h % 5 == 3) return WEFT_MOE_DROPPED;
  return static_cast<int32_t>((static_cast<size_t>(r) * 3 + t * 5 + static_cast<size_t>(j)) % static_cast<size_t>(c.experts));
}
float weight_of(int r, size_t t, int j) {
  return 0.125f + 0.0625f * static_cast<float>((static_cast<size_t>(r) * 7 + t * 3 + static_cast<size_t>(j)) % 13);
}
// Element bits of row t of rank r (x) and of the gradient flowing into combine's output.
uint64_t x_bits(const Case& c, int r, size_t t, size_t h) {
  const double m = static_cast<double>(static_cast<int>((static_cast<size_t>(r) * 31 + t * 17 + h * 7) % 255) - 127);
  return mpt::encode_float(c.dt, m / 64.0, false);
}
uint64_t grad_bits(const Case& c, int r, size_t t, size_t h) {
  const double m = static_cast<double>(static_cast<int>((static_cast<size_t>(r) * 11 + t * 5 + h * 13) % 97) - 48);
  return mpt::encode_float(c.dt, m / 32.0, false);
}

float widen(weft_dtype_t dt, uint64_t bits) { return static_cast<float>(mpt::decode_float(dt, bits)); }
uint64_t narrow(weft_dtype_t dt, float v) { return mpt::encode_float(dt, static_cast<double>(v), false); }

// The expert: row y = f(e, x), elementwise in float32 and rounded to the dtype once.
uint64_t expert_fn(weft_dtype_t dt, int32_t e, uint64_t x) {
  const float s = 1.0f + 0.375f * static_cast<float>(e), b = 0.5f * static_cast<float>(e);
  return narrow(dt, widen(dt, x) * s - b);
}

// Experts held by rank r: torch.chunk's blocks.
bool holds(const Case& c, int r, int size, int32_t e) {
  const int per = (c.experts + size - 1) / size;
  return e >= r * per && e < (r + 1) * per;
}

// ---------------------------------------------------------------- checks

// Compares n elements of got with want(i) bit for bit; with injection, corrupts one first.
template <class Want>
void compare(const Case& c, weft_dtype_t dt, const std::string& what, std::vector<unsigned char> got, size_t n,
             Want want) {
  const bool injected = weft::gputest::inject(got.data(), dt, n);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; ++i) {
    if (mpt::load_bits(dt, got.data(), i) == want(i)) continue;
    if (bad++ == 0) first = i;
  }
  if (injected) {
    ++g_injected;
    g_caught += bad ? 1 : 0;
    return;
  }
  if (bad) {
    ++g_failures;
    mpt::logf("FAIL %s: %s: %zu of %zu elements differ, first %zu (got %s, want %s): does not match the reference\n",
              describe(c).c_str(), what.c_str(), bad, n, first,
              mpt::format_value(dt, mpt::load_bits(dt, got.data(), first)).c_str(),
              mpt::format_value(dt, want(first)).c_str());
  }
}

std::vector<unsigned char> from_device(const void* p, size_t bytes) {
  std::vector<unsigned char> v(bytes + 1);
  if (bytes) CUDA_OK(cudaMemcpy(v.data(), p, bytes, cudaMemcpyDeviceToHost));
  return v;
}

void* to_device(const void* p, size_t bytes) {
  void* d = nullptr;
  CUDA_OK(cudaMalloc(&d, bytes + 16));
  if (bytes) CUDA_OK(cudaMemcpy(d, p, bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaDeviceSynchronize());  // the copy may still be landing; the test's stream is non-blocking
  return d;
}

weft_tensor_t view(void* data, bool device, weft_dtype_t dt, const int64_t* shape) {
  weft_tensor_t t{};
  t.data = data;
  t.device_type = device ? WEFT_DEVICE_CUDA : WEFT_DEVICE_CPU;
  t.device_id = 0;
  if (device) cudaGetDevice(&t.device_id);
  t.ndim = 2;
  t.dtype = dt;
  t.shape = shape;
  return t;
}

// What one path (host or device memory) produced, as host copies.
struct Results {
  size_t rows = 0;
  std::vector<unsigned char> received, out_weighted, out_plain, grad_expert_out, grad_weights;
  std::vector<int32_t> row_expert, row_source_rank;
  std::vector<int64_t> row_source_token;
};

Results run_path(const Case& c, bool device, int rank, int size, weft_comm_t comm) {
  const size_t T = tokens_of(rank, size), H = c.hidden, es = mpt::dtype_bytes(c.dt), k = static_cast<size_t>(c.topk);
  std::vector<unsigned char> x(T * H * es + 1), g(T * H * es + 1);
  std::vector<int32_t> idx(T * k + 1);
  std::vector<float> w(T * k + 1);
  for (size_t t = 0; t < T; ++t) {
    for (size_t h = 0; h < H; ++h) {
      mpt::store_bits(c.dt, x.data(), t * H + h, x_bits(c, rank, t, h));
      mpt::store_bits(c.dt, g.data(), t * H + h, grad_bits(c, rank, t, h));
    }
    for (size_t j = 0; j < k; ++j) {
      idx[t * k + j] = expert_of(c, rank, t, static_cast<int>(j));
      w[t * k + j] = idx[t * k + j] == WEFT_MOE_DROPPED ? 0.0f : weight_of(rank, t, static_cast<int>(j));
    }
  }
  weft_moe_config_t cfg = WEFT_MOE_CONFIG_INIT;
  cfg.experts = c.experts;
  cfg.hidden = H;
  cfg.dtype = c.dt;
  cfg.expert_alignment = c.alignment;
  cfg.device = device ? 1 : 0;
  weft_moe_t moe = nullptr;
  WEFT_OK(weft_moe_create(comm, &cfg, &moe));
  cudaStream_t stream = nullptr;
  if (device) CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* dx = device ? to_device(x.data(), T * H * es) : x.data();
  void* dg = device ? to_device(g.data(), T * H * es) : g.data();
  auto* di = static_cast<int32_t*>(device ? to_device(idx.data(), T * k * 4) : idx.data());
  auto* dw = static_cast<float*>(device ? to_device(w.data(), T * k * 4) : w.data());
  const int64_t tshape[2] = {static_cast<int64_t>(T), static_cast<int64_t>(H)};
  const weft_tensor_t xt = view(dx, device, c.dt, tshape);
  weft_moe_handle_t handle = nullptr;
  WEFT_OK(weft_moe_dispatch(moe, &xt, di, dw, T, c.topk, stream, &handle));
  weft_moe_received_t rec = WEFT_MOE_RECEIVED_INIT;
  WEFT_OK(weft_moe_handle_received(handle, &rec));
  if (device) CUDA_OK(cudaStreamSynchronize(stream));
  Results res;
  res.rows = rec.rows;
  const size_t rb = rec.rows * H * es;
  if (device) {
    res.received = from_device(rec.tokens.data, rb);
  } else {
    res.received.assign(static_cast<const unsigned char*>(rec.tokens.data),
                        static_cast<const unsigned char*>(rec.tokens.data) + rb);
    res.received.push_back(0);
  }
  res.row_expert.assign(rec.row_expert, rec.row_expert + rec.rows);
  res.row_source_rank.assign(rec.row_source_rank, rec.row_source_rank + rec.rows);
  res.row_source_token.assign(rec.row_source_token, rec.row_source_token + rec.rows);
  // The experts, on the host from the copy; padding rows get garbage that combine must ignore.
  std::vector<unsigned char> y(rb + 1, 0x7b);
  for (size_t i = 0; i < rec.rows; ++i) {
    if (res.row_expert[i] < 0) continue;
    for (size_t h = 0; h < H; ++h) {
      const uint64_t v = mpt::load_bits(c.dt, res.received.data(), i * H + h);
      mpt::store_bits(c.dt, y.data(), i * H + h, expert_fn(c.dt, res.row_expert[i], v));
    }
  }
  const int64_t rshape[2] = {static_cast<int64_t>(rec.rows), static_cast<int64_t>(H)};
  void* dy = device ? to_device(y.data(), rb) : y.data();
  const weft_tensor_t yt = view(dy, device, c.dt, rshape);
  std::vector<unsigned char> host_out(T * H * es + 1);
  void* dout = device ? to_device(host_out.data(), T * H * es) : host_out.data();
  const weft_tensor_t ot = view(dout, device, c.dt, tshape);
  for (int weighted : {0, 1}) {
    WEFT_OK(weft_moe_combine(moe, handle, &yt, weighted, &ot, stream));
    if (device) CUDA_OK(cudaStreamSynchronize(stream));
    (weighted ? res.out_weighted : res.out_plain) = device ? from_device(dout, T * H * es) : host_out;
  }
  // Backward (after the weighted combine: the expert outputs it uses are that call's).
  std::vector<unsigned char> gexp(rb + 1, 0x55);
  std::vector<float> gw(T * k + 1, 9.0f);
  void* dgexp = device ? to_device(gexp.data(), rb) : gexp.data();
  auto* dgw = static_cast<float*>(device ? to_device(gw.data(), T * k * 4) : gw.data());
  const weft_tensor_t gt = view(dg, device, c.dt, tshape), get = view(dgexp, device, c.dt, rshape);
  WEFT_OK(weft_moe_combine_backward(moe, handle, &gt, &get, dgw, stream));
  if (device) CUDA_OK(cudaStreamSynchronize(stream));
  res.grad_expert_out = device ? from_device(dgexp, rb) : gexp;
  if (device) {
    res.grad_weights = from_device(dgw, T * k * 4);
  } else {
    res.grad_weights.resize(T * k * 4 + 1);
    std::memcpy(res.grad_weights.data(), gw.data(), T * k * 4);
  }
  WEFT_OK(weft_moe_handle_destroy(handle));
  WEFT_OK(weft_moe_destroy(moe));
  if (device) {
    for (void* p : {dx, dg, static_cast<void*>(di), static_cast<void*>(dw), dy, dout, dgexp, static_cast<void*>(dgw)}) {
      CUDA_OK(cudaFree(p));
    }
    CUDA_OK(cudaStreamDestroy(stream));
  }
  return res;
}

// ---------------------------------------------------------------- the dense reference

struct Row {
  int32_t expert, rank;
  int64_t token;
  int slot;
};

// The rows rank `rank` receives, in the documented order, padding (expert -1) included.
std::vector<Row> expected_rows(const Case& c, int rank, int size) {
  std::vector<Row> rows;
  for (int32_t e = 0; e < c.experts; ++e) {
    if (!holds(c, rank, size, e)) continue;
    size_t n = 0;
    for (int s = 0; s < size; ++s) {
      for (size_t t = 0; t < tokens_of(s, size); ++t) {
        for (int j = 0; j < c.topk; ++j) {
          if (expert_of(c, s, t, j) != e) continue;
          rows.push_back({e, s, static_cast<int64_t>(t), j});
          ++n;
        }
      }
    }
    const size_t a = c.alignment > 1 ? c.alignment : 1;
    for (; n % a != 0; ++n) rows.push_back({-1, -1, -1, -1});
  }
  return rows;
}

void check_case(const Case& c, int rank, int size, weft_comm_t comm) {
  const Results dev = run_path(c, true, rank, size, comm);
  const Results host = run_path(c, false, rank, size, comm);
  const std::vector<Row> want = expected_rows(c, rank, size);
  const size_t T = tokens_of(rank, size), H = c.hidden, k = static_cast<size_t>(c.topk);
  const weft_dtype_t dt = c.dt;
  if (dev.rows != want.size() || host.rows != want.size()) {
    ++g_failures;
    mpt::logf("FAIL %s: received %zu rows (device) and %zu (host), the reference %zu\n", describe(c).c_str(), dev.rows,
              host.rows, want.size());
    return;
  }
  const size_t R = want.size();
  // Metadata (host arrays), as one result of int32 triples: expert, source rank, source token.
  std::vector<unsigned char> meta(3 * R * 4 + 1);
  for (size_t i = 0; i < R; ++i) {
    const int32_t m[3] = {dev.row_expert[i], dev.row_source_rank[i], static_cast<int32_t>(dev.row_source_token[i])};
    std::memcpy(meta.data() + 12 * i, m, 12);
  }
  compare(c, WEFT_INT32, "received rows' expert, source rank and token", meta, 3 * R, [&](size_t i) -> uint64_t {
    const Row& r = want[i / 3];
    const int32_t v = i % 3 == 0 ? r.expert : i % 3 == 1 ? r.rank : static_cast<int32_t>(r.token);
    return static_cast<uint32_t>(v);
  });
  auto received_want = [&](size_t e) -> uint64_t {
    const Row& r = want[e / H];
    return r.expert < 0 ? 0 : x_bits(c, r.rank, static_cast<size_t>(r.token), e % H);
  };
  compare(c, dt, "received rows (device) vs the reference", dev.received, R * H, received_want);
  // The token-side results: out = sum_j w * f(e_j, x_t), rounded once.
  auto out_want = [&](bool weighted) {
    return [&, weighted](size_t e) {
      const size_t t = e / H, h = e % H;
      float acc = 0.0f;
      for (size_t j = 0; j < k; ++j) {
        const int32_t ex = expert_of(c, rank, t, static_cast<int>(j));
        if (ex == WEFT_MOE_DROPPED) continue;
        const float wj = weighted ? weight_of(rank, t, static_cast<int>(j)) : 1.0f;
        acc = acc + wj * widen(dt, expert_fn(dt, ex, x_bits(c, rank, t, h)));
      }
      return narrow(dt, acc);
    };
  };
  compare(c, dt, "weighted combine (device) vs the dense reference", dev.out_weighted, T * H, out_want(true));
  compare(c, dt, "unweighted combine (device) vs the dense reference", dev.out_plain, T * H, out_want(false));
  compare(c, dt, "grad_expert_out (device) vs the reference", dev.grad_expert_out, R * H, [&](size_t e) -> uint64_t {
    const Row& r = want[e / H];
    if (r.expert < 0) return 0;
    const float wj = weight_of(r.rank, static_cast<size_t>(r.token), r.slot);
    return narrow(dt, wj * widen(dt, grad_bits(c, r.rank, static_cast<size_t>(r.token), e % H)));
  });
  compare(c, WEFT_FLOAT32, "grad_weights (device) vs the reference", dev.grad_weights, T * k, [&](size_t s) -> uint64_t {
    const size_t t = s / k;
    const int32_t ex = expert_of(c, rank, t, static_cast<int>(s % k));
    float acc = 0.0f;
    if (ex != WEFT_MOE_DROPPED) {
      for (size_t h = 0; h < H; ++h) {
        acc = acc + widen(dt, grad_bits(c, rank, t, h)) * widen(dt, expert_fn(dt, ex, x_bits(c, rank, t, h)));
      }
    }
    uint32_t u;
    std::memcpy(&u, &acc, 4);
    return u;
  });
  // Device against host memory, bit for bit.
  auto same_as = [](const std::vector<unsigned char>& v, weft_dtype_t d) {
    return [&v, d](size_t i) { return mpt::load_bits(d, v.data(), i); };
  };
  compare(c, dt, "received rows: device vs host path", dev.received, R * H, same_as(host.received, dt));
  compare(c, dt, "weighted combine: device vs host path", dev.out_weighted, T * H, same_as(host.out_weighted, dt));
  compare(c, dt, "unweighted combine: device vs host path", dev.out_plain, T * H, same_as(host.out_plain, dt));
  compare(c, dt, "grad_expert_out: device vs host path", dev.grad_expert_out, R * H, same_as(host.grad_expert_out, dt));
  compare(c, WEFT_FLOAT32, "grad_weights: device vs host path", dev.grad_weights, T * k,
          same_as(host.grad_weights, WEFT_FLOAT32));
}

}  // namespace

int main() {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("no GPU visible: skipped\n");
    return 77;
  }
  mpt::World w = mpt::init_world();
  weft::gputest::use_rank_device(w.rank, ndev);  // the tokens must live on the comm's GPU
  int cases = 0;
  for (weft_dtype_t dt : {WEFT_FLOAT32, WEFT_BFLOAT16, WEFT_FLOAT16}) {
    // E = 6 over 4 ranks: blocks of 2, the last rank holds none; over 2 ranks, 3 each.
    for (const Case& c : {Case{dt, 6, 2, 33, 0}, Case{dt, 6, 3, 64, 4}, Case{dt, 5, 1, 1, 0}}) {
      check_case(c, w.rank, w.size, w.comm);
      ++cases;
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
