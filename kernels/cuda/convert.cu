// Device float32 <-> f16 / bf16 / fp8 conversions with an optional float32 scale.
#include "kernels/cuda/convert.h"
#include "kernels/cuda/convert_ops.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/fill.h"

namespace weft::kernels::cuda {
namespace {

using namespace detail;

void check_convert_args(const void* dst, const void* src, size_t count, const char* what) {
  if (count != 0 && (!dst || !src)) fail(Status::invalid_argument, "%s: null buffer with count %zu", what, count);
}

}  // namespace

void widen_to_f32(float* dst, const void* src, DType src_type, size_t count, void* stream, float scale) {
  check_convert_args(dst, src, count, "cuda::widen_to_f32");
  if (count == 0) return;
  if (src_type == DType::f32 && scale == 1.0f) return copy(dst, src, count * sizeof(float), stream);
  bool known = with_codec(src_type, [&](auto codec) {
    using C = decltype(codec);
    map1(dst, static_cast<const typename C::Storage*>(src), count, Widen<C>{scale}, stream, "widen_to_f32");
  });
  if (!known) {
    fail(Status::invalid_argument, "cuda::widen_to_f32: dtype %d is not a float type narrower than f32",
         static_cast<int>(src_type));
  }
}

void narrow_from_f32(void* dst, DType dst_type, const float* src, size_t count, void* stream, float scale) {
  check_convert_args(dst, src, count, "cuda::narrow_from_f32");
  if (count == 0) return;
  if (dst_type == DType::f32 && scale == 1.0f) return copy(dst, src, count * sizeof(float), stream);
  bool known = with_codec(dst_type, [&](auto codec) {
    using C = decltype(codec);
    map1(static_cast<typename C::Storage*>(dst), src, count, Narrow<C>{scale}, stream, "narrow_from_f32");
  });
  if (!known) {
    fail(Status::invalid_argument, "cuda::narrow_from_f32: dtype %d is not a float type narrower than f32",
         static_cast<int>(dst_type));
  }
}

}  // namespace weft::kernels::cuda
