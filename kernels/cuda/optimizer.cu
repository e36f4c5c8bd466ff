// Device optimizer step and gradient statistics (optimizer.h): the dispatch and the launches.
// What each element computes and the order of the sums are kernels/cpu/optimizer_ops.h, the
// CPU twin's own code compiled for the device.
#include <cstdint>

#include "kernels/cpu/optimizer_ops.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/float_bits.cuh"
#include "kernels/cuda/optimizer.h"

namespace weft::kernels::cuda {
namespace {

using namespace detail;
namespace ops = kernels::detail;

// One element per thread and step of a grid-stride loop: neighbouring threads touch
// neighbouring elements of every buffer.
template <class U, class GC, class OC, bool Store>
WEFT_KERNEL void optimizer_kernel(ops::OptimizerScalars c, float* master, const typename GC::Storage* grad,
                                  float* s1, float* s2, typename OC::Storage* out, size_t n) {
  const size_t stride = threads_in_grid();
  for (size_t i = thread_in_grid(); i < n; i += stride) {
    ops::optimizer_element<U, GC, OC, Store>(c, i, master, grad, s1, s2, out);
  }
}

// The gradient and parameter dtypes the optimizer takes (check_optimizer_step lets no other by).
template <class Fn>
void with_optimizer_codec(DType d, Fn&& fn) {
  switch (d) {
    case DType::bf16: return fn(Codec<DType::bf16>{});
    case DType::f16: return fn(Codec<DType::f16>{});
    default: return fn(Codec<DType::f32>{});
  }
}

// Partial sum i = (tile i / kStatsLanes, lane i % kStatsLanes): the lane's elements in order.
template <class GC>
WEFT_KERNEL void stats_lanes_kernel(const typename GC::Storage* grad, size_t n, double scale, double* partial,
                                    size_t m) {
  const size_t stride = threads_in_grid();
  for (size_t i = thread_in_grid(); i < m; i += stride) {
    const size_t first = i / ops::kStatsLanes * ops::kStatsTile;
    const size_t count = n - first < ops::kStatsTile ? n - first : ops::kStatsTile;
    double acc = 0.0;
    for (size_t k = i % ops::kStatsLanes; k < count; k += ops::kStatsLanes) {
      acc += ops::scaled_square(GC::widen(grad[first + k]), scale);
    }
    partial[i] = acc;
  }
}

// out[j] = the sum, in order, of in[j*kStatsGroup ...] (up to kStatsGroup of the m values).
WEFT_KERNEL void stats_groups_kernel(const double* in, size_t m, double* out, size_t next) {
  const size_t stride = threads_in_grid();
  for (size_t j = thread_in_grid(); j < next; j += stride) {
    const size_t end = m - j * ops::kStatsGroup < ops::kStatsGroup ? m : (j + 1) * ops::kStatsGroup;
    double sum = 0.0;
    for (size_t i = j * ops::kStatsGroup; i < end; ++i) sum += in[i];
    out[j] = sum;
  }
}

// The last m <= kStatsGroup values, summed in order by one thread, and the flag.
WEFT_KERNEL void stats_final_kernel(const double* in, size_t m, double* out_sum, int* out_nonfinite) {
  if (thread_in_grid() != 0) return;
  double sum = 0.0;
  for (size_t i = 0; i < m; ++i) sum += in[i];
  *out_sum = sum;
  *out_nonfinite = ops::finite_double(sum) ? 0 : 1;
}

// Doubles of workspace: the lanes' partial sums, then every level that is summed again.
size_t stats_workspace_doubles(size_t n) {
  size_t m = ops::stats_tiles(n) * ops::kStatsLanes, total = m;
  while (m > ops::kStatsGroup) {
    m = ops::stats_groups(m);
    total += m;
  }
  return total;
}

void cuda_ok(cudaError_t err, Status status, const char* what, const char* doing) {
  if (err != cudaSuccess) {
    fail(status, "%s: %s failed: %s (%s)", what, doing, cudaGetErrorName(err), cudaGetErrorString(err));
  }
}

}  // namespace

void optimizer_step(const OptimizerStep& s, float* master, const void* grad, DType grad_dtype, float* state1,
                    float* state2, void* param_out, DType param_dtype, size_t n, void* stream) {
  const char* what = "cuda::optimizer_step";
  ops::check_optimizer_step(s, master, grad, grad_dtype, state1, state2, param_out, param_dtype, n, what);
  if (n == 0) return;
  const ops::OptimizerScalars c = ops::optimizer_scalars(s);
  const bool store = param_out && param_out != master;
  ops::with_update(s, [&](auto update) {
    using U = decltype(update);
    // States the update does not use are not passed (the emulated build maps every span).
    const Span<float> m{master, n}, s1{U::kStates >= 1 ? state1 : nullptr, U::kStates >= 1 ? n : 0},
        s2{U::kStates >= 2 ? state2 : nullptr, U::kStates >= 2 ? n : 0};
    with_optimizer_codec(grad_dtype, [&](auto gc) {
      using GC = decltype(gc);
      const Span<const typename GC::Storage> g{static_cast<const typename GC::Storage*>(grad), n};
      if (!store) {
        using OC = Codec<DType::f32>;
        return launch(&optimizer_kernel<U, GC, OC, false>, n, stream, what, c, m, g, s1, s2, Span<float>{nullptr, 0},
                      n);
      }
      with_optimizer_codec(param_dtype, [&](auto oc) {
        using OC = decltype(oc);
        const Span<typename OC::Storage> out{static_cast<typename OC::Storage*>(param_out), n};
        launch(&optimizer_kernel<U, GC, OC, true>, n, stream, what, c, m, g, s1, s2, out, n);
      });
    });
  });
}

size_t grad_stats_workspace_bytes(size_t n) { return n == 0 ? 0 : stats_workspace_doubles(n) * sizeof(double); }

void grad_stats(const void* grad, DType dtype, size_t n, float scale, double* out_sum, int* out_nonfinite,
                void* stream, void* workspace) {
  const char* what = "cuda::grad_stats";
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16) {
    fail(Status::invalid_argument, "%s: gradient dtype %d is not FLOAT32, BFLOAT16 or FLOAT16", what,
         static_cast<int>(dtype));
  }
  if (!out_sum || !out_nonfinite) fail(Status::invalid_argument, "%s: null out_sum or out_nonfinite", what);
  const auto st = static_cast<cudaStream_t>(stream);
  if (n == 0) {
    cuda_ok(cudaMemsetAsync(out_sum, 0, sizeof(double), st), Status::transport, what, "clearing out_sum");
    cuda_ok(cudaMemsetAsync(out_nonfinite, 0, sizeof(int), st), Status::transport, what, "clearing out_nonfinite");
    return;
  }
  if (!grad) fail(Status::invalid_argument, "%s: null gradient buffer with %zu elements", what, n);
  const size_t doubles = stats_workspace_doubles(n);
  void* owned = nullptr;
  if (!workspace) {
    cuda_ok(cudaMallocAsync(&owned, doubles * sizeof(double), st), Status::out_of_memory, what,
            "allocating the workspace (stream-ordered)");
    workspace = owned;
  }
  try {
    auto* level = static_cast<double*>(workspace);
    size_t m = ops::stats_tiles(n) * ops::kStatsLanes;
    with_optimizer_codec(dtype, [&](auto gc) {
      using GC = decltype(gc);
      const Span<const typename GC::Storage> g{static_cast<const typename GC::Storage*>(grad), n};
      launch(&stats_lanes_kernel<GC>, m, stream, what, g, n, static_cast<double>(scale), Span<double>{level, m}, m);
    });
    while (m > ops::kStatsGroup) {
      const size_t next = ops::stats_groups(m);
      launch(&stats_groups_kernel, next, stream, what, Span<const double>{level, m}, m, Span<double>{level + m, next},
             next);
      level += m;
      m = next;
    }
    launch(&stats_final_kernel, 1, stream, what, Span<const double>{level, m}, m, Span<double>{out_sum, 1},
           Span<int>{out_nonfinite, 1});
  } catch (...) {
    if (owned) cudaFreeAsync(owned, st);
    throw;
  }
  if (owned) cuda_ok(cudaFreeAsync(owned, st), Status::transport, what, "freeing the workspace");
}

}  // namespace weft::kernels::cuda
