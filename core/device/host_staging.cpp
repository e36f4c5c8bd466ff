// device_api.h's staging between device and host memory, for distributed checkpoints: a
// contiguous piece is one cudaMemcpy; a strided one is packed (or unpacked) by
// kernels/cuda/strided_copy.h through a device temporary of at most kTempBytes, chunk by
// chunk, each chunk a run of consecutive elements of the piece's row-major order.
#include <algorithm>
#include <cstdint>
#include <string>

#include "core/common/status.h"
#include "core/device/device_api.h"
#include "core/sharding/checkpoint_files.h"
#include "kernels/cuda/strided_copy.h"
#include "transports/cuda/cuda_util.h"

namespace weft::gpu {
namespace {

constexpr int64_t kTempBytes = int64_t{8} << 20;

// A device temporary, freed with cudaFree (which waits for the work using it).
class DeviceTemp {
 public:
  explicit DeviceTemp(size_t bytes) { cuda_check(cudaMalloc(&p_, bytes), "cudaMalloc for checkpoint staging"); }
  ~DeviceTemp() { cudaFree(p_); }
  DeviceTemp(const DeviceTemp&) = delete;
  DeviceTemp& operator=(const DeviceTemp&) = delete;
  char* get() const { return static_cast<char*>(p_); }

 private:
  void* p_ = nullptr;
};

// Calls f(sub-view, its extent, its first element's row-major index, element count) for chunks of
// at most `max_elems` consecutive elements of v, in order.
template <typename F>
void for_each_chunk(const kernels::StridedView& v, int64_t max_elems, F&& f) {
  const shard::Shape shape(v.shape, v.shape + v.ndim);
  int64_t done = 0;
  auto block = [&](const shard::Shape& off, const shard::Shape& ext) {
    const kernels::StridedView piece = v.sub(off.data(), ext.data());
    const int64_t n = piece.numel();
    f(piece, ext, done, n);
    done += n;
  };
  shard::for_each_block(shape, shard::row_major_strides(shape), max_elems, block);
}

void check_device(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  if (device < 0 || device >= count) {
    fail(Status::invalid_argument, "device_id %d is no CUDA device of this process (%d visible)", device, count);
  }
}

}  // namespace

void check_device_view(const kernels::StridedView& view, int device, const char* name) {
  if (view.numel() == 0) return;
  int64_t last = 0;
  for (int k = 0; k < view.ndim; ++k) last += (view.shape[k] - 1) * view.strides[k];
  const char* ends[2] = {view.base, view.base + static_cast<size_t>(last) * view.elem + view.elem - 1};
  for (const char* p : ends) {
    const MemInfo m = classify(p);
    if (m.kind != MemKind::device || m.device != device) {
      fail(Status::invalid_argument,
           "%s is declared CUDA device memory of GPU %d (device_type WEFT_DEVICE_CUDA, device_id %d), but %p is %s",
           name, device, device, static_cast<const void*>(p),
           m.kind == MemKind::host      ? "host memory"
           : m.kind == MemKind::managed ? "CUDA managed memory, which weft does not move"
                                        : ("device memory of GPU " + std::to_string(m.device)).c_str());
    }
  }
}

void copy_to_host(void* host, const kernels::StridedView& view, int device) {
  const int64_t n = view.numel();
  if (n == 0) return;
  check_device(device);
  DeviceGuard guard(device);
  if (kernels::is_contiguous(view)) {
    cuda_check(cudaMemcpy(host, view.base, static_cast<size_t>(n) * view.elem, cudaMemcpyDeviceToHost),
               "cudaMemcpy of a checkpoint piece to host memory");
    return;
  }
  const int64_t per = std::max<int64_t>(1, kTempBytes / static_cast<int64_t>(view.elem));
  const DeviceTemp temp(static_cast<size_t>(std::min(n, per)) * view.elem);
  auto* out = static_cast<char*>(host);
  for_each_chunk(view, per, [&](const kernels::StridedView& piece, const shard::Shape& ext, int64_t first,
                                int64_t count) {
    kernels::cuda::strided_copy(kernels::StridedView::contiguous(temp.get(), view.elem, view.ndim, ext.data()), piece,
                                nullptr);
    // On the legacy default stream, after the packing kernel.
    cuda_check(cudaMemcpy(out + static_cast<size_t>(first) * view.elem, temp.get(),
                          static_cast<size_t>(count) * view.elem, cudaMemcpyDeviceToHost),
               "cudaMemcpy of a checkpoint piece to host memory");
  });
}

void copy_from_host(const kernels::StridedView& view, const void* host, int device) {
  const int64_t n = view.numel();
  if (n == 0) return;
  check_device(device);
  DeviceGuard guard(device);
  if (kernels::is_contiguous(view)) {
    cuda_check(cudaMemcpy(view.base, host, static_cast<size_t>(n) * view.elem, cudaMemcpyHostToDevice),
               "cudaMemcpy of a checkpoint piece to device memory");
    cuda_check(cudaStreamSynchronize(nullptr), "waiting for a checkpoint piece's copy to device memory");
    return;
  }
  const int64_t per = std::max<int64_t>(1, kTempBytes / static_cast<int64_t>(view.elem));
  const DeviceTemp temp(static_cast<size_t>(std::min(n, per)) * view.elem);
  const auto* in = static_cast<const char*>(host);
  for_each_chunk(view, per, [&](const kernels::StridedView& piece, const shard::Shape& ext, int64_t first,
                                int64_t count) {
    // Stream-ordered after the previous chunk's unpacking kernel, which read the temporary.
    cuda_check(cudaMemcpy(temp.get(), in + static_cast<size_t>(first) * view.elem,
                          static_cast<size_t>(count) * view.elem, cudaMemcpyHostToDevice),
               "cudaMemcpy of a checkpoint piece to device memory");
    kernels::cuda::strided_copy(piece, kernels::StridedView::contiguous(temp.get(), view.elem, view.ndim, ext.data()),
                                nullptr);
  });
  cuda_check(cudaStreamSynchronize(nullptr), "waiting for a checkpoint piece's copy to device memory");
}

}  // namespace weft::gpu
