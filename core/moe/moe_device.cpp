#include "core/moe/moe_device.h"

#include <algorithm>

#include "core/common/status.h"
#include "core/device/device_api.h"

#ifdef WEFT_HAVE_CUDA
#include <cuda_runtime_api.h>

// launch.h is core/device's view of one device operation; the MoE row kernels need its stream,
// the one the all-to-all-v is ordered on.
#include "core/device/launch.h"
#include "kernels/cuda/moe_rows.h"
#include "transports/cuda/cuda_util.h"
#endif

namespace weft::moe {

int device_of(Comm& comm) { return gpu::device_id(comm); }

#ifdef WEFT_HAVE_CUDA
using gpu::cuda_check;

namespace {

size_t total(const std::vector<size_t>& v) {
  size_t s = 0;
  for (size_t c : v) s += c;
  return s;
}

std::vector<size_t> times(const std::vector<size_t>& counts, size_t unit) {
  std::vector<size_t> v(counts);
  for (size_t& c : v) c *= unit;
  return v;
}

std::vector<size_t> prefix(const std::vector<size_t>& counts, size_t unit) {
  std::vector<size_t> d(counts.size());
  size_t at = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    d[i] = at;
    at += counts[i] * unit;
  }
  return d;
}

// A persistent device copy of a host array (nothing for an empty one), queued on the stream of
// the operation that reads it. Not cudaMemcpy: from pageable memory it returns before the
// bytes reach the device, unordered with a non-blocking stream (an H100 read the plan as zeros).
// The runtime stages a pageable source before cudaMemcpyAsync returns, so v may go at once.
template <class T>
std::shared_ptr<void> upload(Comm& comm, const std::vector<T>& v, void* stream) {
  if (v.empty()) return nullptr;
  std::shared_ptr<void> d = gpu::device_buffer(comm, v.size() * sizeof(T));
  cuda_check(cudaMemcpyAsync(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice,
                             static_cast<cudaStream_t>(stream)),
             "uploading an MoE plan");
  return d;
}

// Grows one of the handle's reusable device buffers to at least `bytes`.
void* reserve(Comm& comm, std::shared_ptr<void>& buf, size_t& have, size_t bytes) {
  if (bytes > have) {
    buf = gpu::device_buffer(comm, bytes);
    have = bytes;
  }
  return buf.get();
}

template <class T>
const T* ptr(const std::shared_ptr<void>& p) {
  return static_cast<const T*>(p.get());
}

// The rows listed by h.send go to their ranks (one per token and destination); what arrives
// lands in h.dev.recv, source-major. Runs inside a launch.
void exchange_tokens(gpu::Launch& l, Handle& h, const void* rows_of, size_t hidden, DType dtype) {
  const size_t row_bytes = hidden * dtype_size(dtype);
  const size_t sent = h.send.send_tokens.size();
  kernels::cuda::gather_rows(h.dev.send.get(), rows_of, ptr<int64_t>(h.dev.send_tokens), sent, hidden, dtype,
                             l.stream_ptr());
  gpu::alltoallv(l, h.dev.send.get(), times(h.send.tokens_to, row_bytes), prefix(h.send.tokens_to, row_bytes),
                 h.dev.recv.get(), times(h.recv.tokens_from, row_bytes), prefix(h.recv.tokens_from, row_bytes),
                 DType::u8);
}

}  // namespace

void routing_to_host(const int32_t* indices, const float* weights, size_t n, void* stream,
                     std::vector<int32_t>& host_indices, std::vector<float>& host_weights) {
  host_indices.resize(n);
  host_weights.resize(n);
  if (!n) return;
  cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "waiting for the stream that made the routing");
  cuda_check(cudaMemcpy(host_indices.data(), indices, n * sizeof(int32_t), cudaMemcpyDeviceToHost),
             "copying the routing indices to the host");
  cuda_check(cudaMemcpy(host_weights.data(), weights, n * sizeof(float), cudaMemcpyDeviceToHost),
             "copying the routing weights to the host");
}

void device_dispatch_rows(Moe& moe, Handle& h, const void* x, void* stream) {
  Comm& comm = moe.comm();
  const MoeConfig& cfg = moe.config();
  const size_t row_bytes = cfg.hidden * dtype_size(cfg.dtype);
  h.dev.send_tokens = upload(comm, h.send.send_tokens, stream);
  h.dev.slot_row = upload(comm, h.send.slot_row, stream);
  h.dev.weights = upload(comm, h.weights, stream);
  h.dev.gather_index = upload(comm, h.recv.gather_index, stream);
  h.dev.return_row = upload(comm, h.recv.return_row, stream);
  h.dev.row_weight = upload(comm, h.recv.row_weight, stream);
  const size_t rows = h.recv.rows();
  // The exchange buffers serve every later call too. Sent: tokens (dispatch, combine's
  // backward) or the expert rows going back (combine); received: tokens (combine keeps what
  // comes back in a buffer of its own).
  reserve(comm, h.dev.send, h.dev.send_bytes, std::max(h.send.send_tokens.size(), total(h.recv.pairs_from)) * row_bytes);
  reserve(comm, h.dev.recv, h.dev.recv_bytes, total(h.recv.tokens_from) * row_bytes);
  if (rows) h.dev.received = gpu::device_buffer(comm, rows * row_bytes);
  gpu::launch(moe.comm_ptr(), "weft_moe_dispatch", gpu::DeviceOp::collective, stream, false, [&](gpu::Launch& l) {
    exchange_tokens(l, h, x, cfg.hidden, cfg.dtype);
    kernels::cuda::gather_rows(h.dev.received.get(), h.dev.recv.get(), ptr<int64_t>(h.dev.gather_index), rows,
                               cfg.hidden, cfg.dtype, l.stream_ptr());
    gpu::settle_copies(l);
  });
}

void device_combine(Moe& moe, Handle& h, const void* expert_out, bool weighted, void* out, void* stream) {
  Comm& comm = moe.comm();
  const MoeConfig& cfg = moe.config();
  const size_t row_bytes = cfg.hidden * dtype_size(cfg.dtype);
  const size_t back_rows = h.recv.return_row.size(), got_rows = total(h.send.pairs_to);
  // Kept for combine_backward when weighted; a fresh buffer so an earlier one stays intact.
  std::shared_ptr<void> back = got_rows ? gpu::device_buffer(comm, got_rows * row_bytes) : nullptr;
  gpu::launch(moe.comm_ptr(), "weft_moe_combine", gpu::DeviceOp::collective, stream, false, [&](gpu::Launch& l) {
    kernels::cuda::gather_rows(h.dev.send.get(), expert_out, ptr<int64_t>(h.dev.return_row), back_rows, cfg.hidden,
                               cfg.dtype, l.stream_ptr());
    gpu::alltoallv(l, h.dev.send.get(), times(h.recv.pairs_from, row_bytes), prefix(h.recv.pairs_from, row_bytes),
                   back.get(), times(h.send.pairs_to, row_bytes), prefix(h.send.pairs_to, row_bytes), DType::u8);
    kernels::cuda::combine_rows(out, back.get(), ptr<int64_t>(h.dev.slot_row), weighted ? ptr<float>(h.dev.weights) : nullptr,
                                h.tokens, h.topk, cfg.hidden, cfg.dtype, l.stream_ptr());
    gpu::settle_copies(l);
  });
  if (weighted) {
    h.dev.returned = std::move(back);
    h.has_returned = true;
  }
}

void device_combine_backward(Moe& moe, Handle& h, const void* grad_out, void* grad_expert_out, float* grad_weights,
                             void* stream) {
  const MoeConfig& cfg = moe.config();
  gpu::launch(moe.comm_ptr(), "weft_moe_combine_backward", gpu::DeviceOp::collective, stream, false,
              [&](gpu::Launch& l) {
                exchange_tokens(l, h, grad_out, cfg.hidden, cfg.dtype);
                kernels::cuda::scale_gather_rows(grad_expert_out, h.dev.recv.get(), ptr<int64_t>(h.dev.gather_index),
                                                 ptr<float>(h.dev.row_weight), h.recv.rows(), cfg.hidden, cfg.dtype,
                                                 l.stream_ptr());
                if (grad_weights) {
                  kernels::cuda::dot_rows(grad_weights, grad_out, h.dev.returned.get(), ptr<int64_t>(h.dev.slot_row),
                                          h.tokens, h.topk, cfg.hidden, cfg.dtype, l.stream_ptr());
                }
                gpu::settle_copies(l);
              });
}

#else  // a build without CUDA: weft_moe_create refuses config.device = 1 before any of these.

namespace {
[[noreturn]] void no_cuda() {
  fail(Status::unsupported, "MoE on device memory (config.device = 1), but this weft was built without CUDA "
                            "(WEFT_WITH_CUDA=OFF): use host memory (device = 0)");
}
}  // namespace

void routing_to_host(const int32_t*, const float*, size_t, void*, std::vector<int32_t>&, std::vector<float>&) { no_cuda(); }
void device_dispatch_rows(Moe&, Handle&, const void*, void*) { no_cuda(); }
void device_combine(Moe&, Handle&, const void*, bool, void*, void*) { no_cuda(); }
void device_combine_backward(Moe&, Handle&, const void*, void*, float*, void*) { no_cuda(); }

#endif

}  // namespace weft::moe
