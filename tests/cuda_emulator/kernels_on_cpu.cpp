// kernels/cuda's entry points in a CUDA-emulated build (emulator.h): the same argument checks,
// the arithmetic of the CPU twins (kernels/cpu), run on the stream like a kernel, through the
// emulator's view of device memory. The GPU kernels themselves are tested against the twins
// by tests/gpu/test_kernels.cpp on a real GPU; here the point is the code around them.
#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/common/status.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/fill.h"
#include "kernels/cuda/order_key.h"
#include "kernels/cuda/reduce.h"
#include "tests/cuda_emulator/emulator.h"

namespace weft::kernels::cuda {
namespace {

template <class F>
void launch(void* stream, const char* what, F&& body) {
  cudaError_t err = emu::enqueue(static_cast<cudaStream_t>(stream), std::forward<F>(body));
  if (err != cudaSuccess) fail(Status::transport, "%s: launch failed: %s", what, cudaGetErrorName(err));
}

template <class T>
T* view(T* p, size_t bytes) {
  return static_cast<T*>(emu::host_view(p, bytes));
}

void check_float(const void* dst, const void* src, size_t count, DType dtype, const char* what) {
  if (!dtype_is_float(dtype)) fail(Status::invalid_argument, "%s: dtype %s is not a float type", what, dtype_name(dtype));
  if (count != 0 && (!dst || !src)) fail(Status::invalid_argument, "%s: null buffer with count %zu", what, count);
}

template <class U>
U key_of_bits(U b) {
  constexpr U kSign = U{1} << (sizeof(U) * 8 - 1);
  return (b & kSign) ? static_cast<U>(~b) : static_cast<U>(b | kSign);
}

template <class U>
U bits_of_key(U k) {
  constexpr U kSign = U{1} << (sizeof(U) * 8 - 1);
  return (k & kSign) ? static_cast<U>(k & ~kSign) : static_cast<U>(~k);
}

}  // namespace

void widen_to_f32(float* dst, const void* src, DType src_type, size_t count, void* stream, float scale) {
  if (count == 0) return;
  launch(stream, "cuda::widen_to_f32", [=] {
    float* d = view(dst, count * sizeof(float));
    kernels::widen_to_f32(d, view(src, count * dtype_size(src_type)), src_type, count);
    if (scale != 1.0f) {
      for (size_t i = 0; i < count; ++i) d[i] *= scale;
    }
  });
}

void narrow_from_f32(void* dst, DType dst_type, const float* src, size_t count, void* stream, float scale) {
  if (count == 0) return;
  launch(stream, "cuda::narrow_from_f32", [=] {
    const float* s = view(src, count * sizeof(float));
    std::vector<float> scaled;
    if (scale != 1.0f) {
      scaled.assign(s, s + count);
      for (float& x : scaled) x *= scale;
      s = scaled.data();
    }
    kernels::narrow_from_f32(view(dst, count * dtype_size(dst_type)), dst_type, s, count);
  });
}

void fill(void* dst, size_t elem_bytes, const void* value, size_t count, void* stream) {
  if (count == 0) return;
  if (!dst || !value) fail(Status::invalid_argument, "cuda::fill: null buffer or value with count %zu", count);
  if (elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4 && elem_bytes != 8) {
    fail(Status::invalid_argument, "cuda::fill: element size %zu is not 1, 2, 4 or 8", elem_bytes);
  }
  uint64_t v = 0;
  std::memcpy(&v, value, elem_bytes);  // a kernel argument: taken at launch
  launch(stream, "cuda::fill", [=] {
    char* d = view(static_cast<char*>(dst), count * elem_bytes);
    for (size_t i = 0; i < count; ++i) std::memcpy(d + i * elem_bytes, &v, elem_bytes);
  });
}

void copy(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0 || dst == src) return;
  if (!dst || !src) fail(Status::invalid_argument, "cuda::copy: null buffer with %zu bytes", bytes);
  cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) {
    fail(Status::transport, "cuda::copy of %zu bytes failed: %s (%s)", bytes, cudaGetErrorName(err),
         cudaGetErrorString(err));
  }
}

void reduce(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op, void* stream) {
  if (!dtype_valid(static_cast<int>(dtype))) {
    fail(Status::invalid_argument, "cuda::reduce: invalid dtype %d", static_cast<int>(dtype));
  }
  if (op == ReduceOp::avg || !op_valid(static_cast<int>(op))) {
    fail(Status::invalid_argument, "cuda::reduce: op %d is not sum, prod, min or max (avg is sum then divide_by)",
         static_cast<int>(op));
  }
  if (count == 0) return;
  if (!dst || !a || !b) fail(Status::invalid_argument, "cuda::reduce: null buffer with count %zu", count);
  const size_t bytes = count * dtype_size(dtype);
  launch(stream, "cuda::reduce", [=] {
    kernels::reduce(view(dst, bytes), view(a, bytes), view(b, bytes), count, dtype, op);
  });
}

void divide_by(void* buf, size_t count, DType dtype, int n, void* stream) {
  if (!dtype_valid(static_cast<int>(dtype))) {
    fail(Status::invalid_argument, "cuda::divide_by: invalid dtype %d", static_cast<int>(dtype));
  }
  if (n < 1) fail(Status::invalid_argument, "cuda::divide_by: divisor %d is not positive", n);
  if (count == 0) return;
  if (!buf) fail(Status::invalid_argument, "cuda::divide_by: null buffer with count %zu", count);
  launch(stream, "cuda::divide_by",
         [=] { kernels::divide_by(view(buf, count * dtype_size(dtype)), count, dtype, n); });
}

void to_order_key(void* dst, const void* src, DType dtype, size_t count, ReduceOp op, void* stream) {
  check_float(dst, src, count, dtype, "cuda::to_order_key");
  if (op != ReduceOp::min && op != ReduceOp::max) {
    fail(Status::invalid_argument, "cuda::to_order_key: op %s is not min or max", op_name(op));
  }
  if (count == 0) return;
  const bool for_max = op == ReduceOp::max;
  launch(stream, "cuda::to_order_key", [=] {
    if (dtype == DType::f64) {
      const double* s = view(static_cast<const double*>(src), count * 8);
      uint64_t* d = view(static_cast<uint64_t*>(dst), count * 8);
      for (size_t i = 0; i < count; ++i) {
        d[i] = s[i] != s[i] ? (for_max ? ~uint64_t{0} : 0) : key_of_bits(std::bit_cast<uint64_t>(s[i]));
      }
      return;
    }
    std::vector<float> wide(count);
    kernels::widen_to_f32(wide.data(), view(src, count * dtype_size(dtype)), dtype, count);
    uint32_t* d = view(static_cast<uint32_t*>(dst), count * 4);
    for (size_t i = 0; i < count; ++i) {
      d[i] = wide[i] != wide[i] ? (for_max ? ~uint32_t{0} : 0) : key_of_bits(std::bit_cast<uint32_t>(wide[i]));
    }
  });
}

void from_order_key(void* dst, DType dtype, const void* src, size_t count, void* stream) {
  check_float(dst, src, count, dtype, "cuda::from_order_key");
  if (count == 0) return;
  launch(stream, "cuda::from_order_key", [=] {
    if (dtype == DType::f64) {
      const uint64_t* s = view(static_cast<const uint64_t*>(src), count * 8);
      double* d = view(static_cast<double*>(dst), count * 8);
      for (size_t i = 0; i < count; ++i) d[i] = std::bit_cast<double>(bits_of_key(s[i]));
      return;
    }
    const uint32_t* s = view(static_cast<const uint32_t*>(src), count * 4);
    std::vector<float> wide(count);
    for (size_t i = 0; i < count; ++i) wide[i] = std::bit_cast<float>(bits_of_key(s[i]));
    kernels::narrow_from_f32(view(dst, count * dtype_size(dtype)), dtype, wide.data(), count);
  });
}

}  // namespace weft::kernels::cuda
