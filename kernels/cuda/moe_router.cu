// Device MoE router (moe_router.h): the workspace, the launches and the cross-token kernels.
// What each token computes is kernels/cpu/moe_router_ops.h, the CPU twin's own code compiled
// for the device; the orders of the sums and of the capacity ranking are stated there.
#include <cstdint>
#include <vector>

#include "core/common/status.h"
#include "kernels/cpu/moe_router_ops.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/moe_router.h"

namespace weft::kernels::cuda {
namespace {

using namespace detail;
namespace ops = kernels::detail;

// The shape of a call, passed by value to every kernel.
struct RouterShape {
  ops::RouterRowConfig rc;
  size_t tokens;
  size_t row_bytes;  // one token's logits
  size_t sf;         // scratch floats per token
  size_t blocks;     // loss blocks
};

WEFT_HD inline ops::RouterScratch router_token_scratch(const RouterShape& s, float* scratch, int32_t* sidx, size_t t) {
  return ops::router_scratch(scratch + t * s.sf, sidx + t * static_cast<size_t>(s.rc.topk), s.rc.experts,
                             s.rc.topk);
}

// Per token: the forward row into the scratch; with `out`, its k slots also to indices/weights.
WEFT_KERNEL void router_rows_kernel(RouterShape s, const uint8_t* logits, const float* bias, float* scratch,
                                    int32_t* sidx, int32_t* indices, float* weights) {
  const size_t stride = threads_in_grid();
  const size_t k = static_cast<size_t>(s.rc.topk);
  for (size_t t = thread_in_grid(); t < s.tokens; t += stride) {
    const ops::RouterScratch r = router_token_scratch(s, scratch, sidx, t);
    ops::router_row_forward(s.rc, logits + t * s.row_bytes, bias, r);
    if (!indices) continue;
    for (size_t j = 0; j < k; ++j) {
      indices[t * k + j] = r.idx[j];
      weights[t * k + j] = r.w[j];
    }
  }
}

// partial[b*E + e] = sum of p[t, e] over block b's tokens in order (double); partial[B*E + b]
// the same of lse_t^2.
WEFT_KERNEL void router_partials_kernel(RouterShape s, const float* scratch, double* partial) {
  const size_t E = static_cast<size_t>(s.rc.experts);
  const size_t items = s.blocks * (E + 1), stride = threads_in_grid();
  for (size_t i = thread_in_grid(); i < items; i += stride) {
    const bool z = i >= s.blocks * E;
    const size_t b = z ? i - s.blocks * E : i / E, e = z ? 0 : i % E;
    const size_t first = b * ops::kRouterLossBlock;
    const size_t end = s.tokens - first < ops::kRouterLossBlock ? s.tokens : first + ops::kRouterLossBlock;
    double acc = 0.0;
    for (size_t t = first; t < end; ++t) {
      const float* row = scratch + t * s.sf;
      if (z) {
        const double lse = static_cast<double>(row[5 * E + static_cast<size_t>(s.rc.topk) + 2]);
        acc += lse * lse;
      } else {
        acc += static_cast<double>(row[E + e]);
      }
    }
    partial[i] = acc;
  }
}

// sums[e] = the blocks' partials of expert e in block order; sums[E] those of z.
WEFT_KERNEL void router_sums_kernel(RouterShape s, const double* partial, double* sums) {
  const size_t E = static_cast<size_t>(s.rc.experts), stride = threads_in_grid();
  for (size_t i = thread_in_grid(); i <= E; i += stride) {
    double acc = 0.0;
    for (size_t b = 0; b < s.blocks; ++b) acc += partial[i < E ? b * E + i : s.blocks * E + b];
    sums[i] = acc;
  }
}

// counts[e] = the slots of expert e in idx [T, k].
WEFT_KERNEL void router_count_kernel(RouterShape s, const int32_t* idx, int64_t* counts) {
  const size_t n = s.tokens * static_cast<size_t>(s.rc.topk), stride = threads_in_grid();
  for (size_t e = thread_in_grid(); e < static_cast<size_t>(s.rc.experts); e += stride) {
    int64_t c = 0;
    for (size_t i = 0; i < n; ++i) c += idx[i] == static_cast<int32_t>(e) ? 1 : 0;
    counts[e] = c;
  }
}

// BY_POSITION: per expert, its slots in token order, the first `cap` kept.
WEFT_KERNEL void router_keep_position_kernel(RouterShape s, const int32_t* idx, int64_t cap, int32_t* keep) {
  const size_t n = s.tokens * static_cast<size_t>(s.rc.topk), stride = threads_in_grid();
  for (size_t e = thread_in_grid(); e < static_cast<size_t>(s.rc.experts); e += stride) {
    int64_t seen = 0;
    for (size_t i = 0; i < n; ++i) {
      if (idx[i] != static_cast<int32_t>(e)) continue;
      keep[i] = seen < cap ? 1 : 0;
      ++seen;
    }
  }
}

// BY_PROBABILITY: slot i is kept when fewer than `cap` slots of its expert outrank it.
WEFT_KERNEL void router_keep_probability_kernel(RouterShape s, const int32_t* idx, const float* w, int64_t cap,
                                                int32_t* keep) {
  const size_t k = static_cast<size_t>(s.rc.topk), n = s.tokens * k, stride = threads_in_grid();
  for (size_t i = thread_in_grid(); i < n; i += stride) {
    const int32_t e = idx[i];
    int64_t above = 0;
    for (size_t o = 0; o < n && above < cap; ++o) {
      if (idx[o] == e && ops::router_outranks(w[o], o / k, w[i], i / k)) ++above;
    }
    keep[i] = above < cap ? 1 : 0;
  }
}

WEFT_KERNEL void router_apply_drop_kernel(size_t n, const int32_t* keep, int32_t* idx, float* w) {
  const size_t stride = threads_in_grid();
  for (size_t i = thread_in_grid(); i < n; i += stride) {
    if (keep[i]) continue;
    idx[i] = -1;
    w[i] = 0.0f;
  }
}

// q[e], the aux loss's gradient per routing probability (ops::router_aux_grad).
WEFT_KERNEL void router_aux_grad_kernel(RouterShape s, float grad_aux, float coeff, const int64_t* selected,
                                        float* q) {
  const size_t stride = threads_in_grid();
  for (size_t e = thread_in_grid(); e < static_cast<size_t>(s.rc.experts); e += stride) {
    q[e] = ops::router_aux_grad(grad_aux, coeff, s.rc.experts, selected[e], s.tokens, s.rc.topk);
  }
}

// Per token: the forward row again (its scratch), then the gradient row.
WEFT_KERNEL void router_backward_kernel(RouterShape s, const uint8_t* logits, const float* bias, float* scratch,
                                        int32_t* sidx, const int32_t* indices, const float* grad_weights,
                                        const float* q, float zscale, float* grad_logits) {
  const size_t stride = threads_in_grid();
  const size_t k = static_cast<size_t>(s.rc.topk), E = static_cast<size_t>(s.rc.experts);
  for (size_t t = thread_in_grid(); t < s.tokens; t += stride) {
    const ops::RouterScratch r = router_token_scratch(s, scratch, sidx, t);
    const uint8_t* x = logits + t * s.row_bytes;
    ops::router_row_forward(s.rc, x, bias, r);
    const float zl = zscale * r.state[2];
    ops::router_row_backward(s.rc, x, grad_weights ? grad_weights + t * k : nullptr, indices + t * k, q, zl, r,
                             grad_logits + t * E);
  }
}

void router_cuda_ok(cudaError_t err, Status status, const char* what, const char* doing) {
  if (err != cudaSuccess) {
    fail(status, "%s: %s failed: %s (%s)", what, doing, cudaGetErrorName(err), cudaGetErrorString(err));
  }
}

RouterShape router_shape_of(const RouterConfig& c, DType dtype, size_t tokens) {
  const bool limited = c.groups > 1;
  RouterShape s;
  s.rc = ops::RouterRowConfig{c.experts, c.topk, c.score, c.normalize ? 1 : 0, limited ? c.groups : 1,
                              limited ? c.topk_groups : 1, dtype == DType::bf16 ? 1 : 0};
  s.tokens = tokens;
  s.row_bytes = static_cast<size_t>(c.experts) * dtype_size(dtype);
  s.sf = ops::router_scratch_floats(c.experts, c.topk);
  s.blocks = (tokens + ops::kRouterLossBlock - 1) / ops::kRouterLossBlock;
  return s;
}

// One stream-ordered device allocation carved into the call's arrays (8-byte aligned each).
class RouterWorkspace {
 public:
  RouterWorkspace(size_t bytes, void* stream, const char* what) : stream_(static_cast<cudaStream_t>(stream)) {
    router_cuda_ok(cudaMallocAsync(&base_, bytes, stream_), Status::out_of_memory, what, "allocating the workspace");
  }
  ~RouterWorkspace() { cudaFreeAsync(base_, stream_); }
  RouterWorkspace(const RouterWorkspace&) = delete;
  RouterWorkspace& operator=(const RouterWorkspace&) = delete;
  template <class T>
  T* take(size_t count) {
    T* p = reinterpret_cast<T*>(static_cast<uint8_t*>(base_) + used_);
    used_ += (count * sizeof(T) + 7) / 8 * 8;
    return p;
  }
  static size_t bytes_for(size_t count, size_t size) { return (count * size + 7) / 8 * 8; }

 private:
  void* base_ = nullptr;
  cudaStream_t stream_;
  size_t used_ = 0;
};

}  // namespace

void router_forward(const void* logits, DType dtype, size_t tokens, const RouterConfig& c, RouterOutputs& out,
                    void* stream) {
  const char* what = "cuda::router_forward";
  check_router_config(c, dtype, what);
  const RouterShape s = router_shape_of(c, dtype, tokens);
  const size_t E = static_cast<size_t>(c.experts), k = static_cast<size_t>(c.topk), n = tokens * k;
  const auto st = static_cast<cudaStream_t>(stream);
  if (tokens == 0) {
    if (out.tokens_per_expert) {
      router_cuda_ok(cudaMemsetAsync(out.tokens_per_expert, 0, E * sizeof(int64_t), st), Status::transport, what,
              "clearing tokens_per_expert");
    }
    if (out.selected_per_expert) {
      router_cuda_ok(cudaMemsetAsync(out.selected_per_expert, 0, E * sizeof(int64_t), st), Status::transport, what,
              "clearing selected_per_expert");
    }
    out.aux_loss = 0.0f;
    out.z_loss = 0.0f;
    return;
  }
  const bool drop = c.drop != ops::kDropNone;
  const size_t bytes = RouterWorkspace::bytes_for(s.blocks * (E + 1), 8) + RouterWorkspace::bytes_for(E + 1, 8) +
                       RouterWorkspace::bytes_for(E, 8) + RouterWorkspace::bytes_for(tokens * s.sf, 4) +
                       RouterWorkspace::bytes_for(n, 4) + (drop ? RouterWorkspace::bytes_for(n, 4) : 0);
  RouterWorkspace ws(bytes, stream, what);
  double* partial = ws.take<double>(s.blocks * (E + 1));
  double* sums = ws.take<double>(E + 1);
  int64_t* selected = ws.take<int64_t>(E);
  float* scratch = ws.take<float>(tokens * s.sf);
  int32_t* sidx = ws.take<int32_t>(n);
  int32_t* keep = drop ? ws.take<int32_t>(n) : nullptr;

  const Span<const uint8_t> lg{static_cast<const uint8_t*>(logits), tokens * s.row_bytes};
  const Span<const float> bias{c.bias, c.bias ? E : 0};
  const Span<float> scr{scratch, tokens * s.sf};
  const Span<int32_t> ind{out.indices, n};
  const Span<float> wts{out.weights, n};
  launch(&router_rows_kernel, tokens, stream, what, s, lg, bias, scr, Span<int32_t>{sidx, n}, ind, wts);
  launch(&router_partials_kernel, s.blocks * (E + 1), stream, what, s, Span<const float>{scratch, tokens * s.sf},
         Span<double>{partial, s.blocks * (E + 1)});
  launch(&router_sums_kernel, E + 1, stream, what, s, Span<const double>{partial, s.blocks * (E + 1)},
         Span<double>{sums, E + 1});
  launch(&router_count_kernel, E, stream, what, s, Span<const int32_t>{out.indices, n}, Span<int64_t>{selected, E});
  if (drop) {
    const int64_t cap = ops::router_capacity(tokens, c.topk, c.experts, c.capacity_factor);
    const Span<int32_t> kp{keep, n};
    if (c.drop == ops::kDropByPosition) {
      launch(&router_keep_position_kernel, E, stream, what, s, Span<const int32_t>{out.indices, n}, cap, kp);
    } else {
      launch(&router_keep_probability_kernel, n, stream, what, s, Span<const int32_t>{out.indices, n},
             Span<const float>{out.weights, n}, cap, kp);
    }
    launch(&router_apply_drop_kernel, n, stream, what, n, Span<const int32_t>{keep, n}, ind, wts);
  }
  if (out.tokens_per_expert) {
    launch(&router_count_kernel, E, stream, what, s, Span<const int32_t>{out.indices, n},
           Span<int64_t>{out.tokens_per_expert, E});
  }
  if (out.selected_per_expert) {
    router_cuda_ok(cudaMemcpyAsync(out.selected_per_expert, selected, E * sizeof(int64_t), cudaMemcpyDeviceToDevice, st),
            Status::transport, what, "copying selected_per_expert");
  }
  // The losses: the device's sums and counts to the host, then moe_router.h's final formulas.
  std::vector<double> host_sums(E + 1);
  std::vector<int64_t> host_selected(E);
  router_cuda_ok(cudaMemcpyAsync(host_sums.data(), sums, (E + 1) * sizeof(double), cudaMemcpyDeviceToHost, st),
          Status::transport, what, "copying the loss sums to the host");
  router_cuda_ok(cudaMemcpyAsync(host_selected.data(), selected, E * sizeof(int64_t), cudaMemcpyDeviceToHost, st),
          Status::transport, what, "copying the selection counts to the host");
  router_cuda_ok(cudaStreamSynchronize(st), Status::transport, what, "waiting for the stream");
  out.aux_loss = router_aux_loss(host_selected.data(), host_sums.data(), c.experts, tokens, c.topk, c.aux_loss_coeff);
  out.z_loss = router_z_loss(host_sums[E], tokens, c.z_loss_coeff);
}

void router_backward(const void* logits, DType dtype, size_t tokens, const RouterConfig& c, const int32_t* indices,
                     const float* grad_weights, float grad_aux, float grad_z, float* grad_logits, void* stream) {
  const char* what = "cuda::router_backward";
  check_router_config(c, dtype, what);
  if (tokens == 0) return;
  const RouterShape s = router_shape_of(c, dtype, tokens);
  const size_t E = static_cast<size_t>(c.experts), k = static_cast<size_t>(c.topk), n = tokens * k;
  const bool aux = grad_aux != 0.0f && c.aux_loss_coeff != 0.0f;
  const size_t bytes = RouterWorkspace::bytes_for(E, 8) + RouterWorkspace::bytes_for(tokens * s.sf, 4) +
                       RouterWorkspace::bytes_for(n, 4) + RouterWorkspace::bytes_for(E, 4);
  RouterWorkspace ws(bytes, stream, what);
  int64_t* selected = ws.take<int64_t>(E);
  float* scratch = ws.take<float>(tokens * s.sf);
  int32_t* sidx = ws.take<int32_t>(n);
  float* q = ws.take<float>(E);

  const Span<const uint8_t> lg{static_cast<const uint8_t*>(logits), tokens * s.row_bytes};
  const Span<const float> bias{c.bias, c.bias ? E : 0};
  const Span<float> scr{scratch, tokens * s.sf};
  const Span<int32_t> si{sidx, n};
  if (aux) {
    // f_e counts the selection before dropping: the rows' selection, counted, then q.
    launch(&router_rows_kernel, tokens, stream, what, s, lg, bias, scr, si, Span<int32_t>{nullptr, 0},
           Span<float>{nullptr, 0});
    launch(&router_count_kernel, E, stream, what, s, Span<const int32_t>{sidx, n}, Span<int64_t>{selected, E});
    launch(&router_aux_grad_kernel, E, stream, what, s, grad_aux, c.aux_loss_coeff,
           Span<const int64_t>{selected, E}, Span<float>{q, E});
  }
  const float zscale = router_z_grad_scale(grad_z, c.z_loss_coeff, tokens);
  launch(&router_backward_kernel, tokens, stream, what, s, lg, bias, scr, si, Span<const int32_t>{indices, n},
         Span<const float>{grad_weights, grad_weights ? n : 0}, Span<const float>{aux ? q : nullptr, aux ? E : 0},
         zscale, Span<float>{grad_logits, tokens * E});
}

}  // namespace weft::kernels::cuda
