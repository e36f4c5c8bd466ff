#include "core/device/device_context.h"

#include <cerrno>
#include <cstdlib>

#include "core/common/log.h"
#include "core/common/status.h"
#include "core/device/nccl_comm.h"

namespace weft::gpu {

DeviceContext::DeviceContext(int device_count) : device_count_(device_count) {
  if (const char* v = std::getenv("WEFT_STAGING_CHUNK_BYTES"); v && *v) {
    errno = 0;
    char* end = nullptr;
    unsigned long long b = std::strtoull(v, &end, 10);
    if (errno || end == v || *end || b < 4096 || b > (1ull << 30)) {
      log(LogLevel::warn, "WEFT_STAGING_CHUNK_BYTES='%s' ignored; expected 4096 .. 1073741824", v);
    } else {
      staging_chunk_ = static_cast<size_t>(b);
    }
  }
}

DeviceContext::~DeviceContext() {
  if (device_ < 0 || (!nccl_ && !tiny_ && !stream_ && !scratch_pool_)) return;
  try {
    // With the communicator's device current: NCCL restores "the current device" with its own
    // runtime, which on a thread without one would make a context on GPU 0.
    DeviceGuard guard(device_);
    // NCCL first: finalizing flushes work that may still use the streams and buffers below.
    nccl_.reset();
    if (tiny_) cudaFree(tiny_);
    // Outstanding allocations (none once the streams are done) would keep it alive until freed.
    if (scratch_pool_) cudaMemPoolDestroy(scratch_pool_);
    if (stream_) cudaStreamDestroy(stream_);
    cudaGetLastError();
  } catch (const Error&) {
    // The device is gone (or the driver shut down at exit): nothing left to free.
  }
}

void DeviceContext::abort() noexcept {
  if (nccl_) nccl_->abort();
}

cudaStream_t DeviceContext::stream() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!stream_) cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamDefault), "creating the communicator's stream");
  return stream_;
}

void* DeviceContext::tiny_buffer() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!tiny_) {
    tiny_ = cuda_malloc_zeroed(16, "allocating the barrier buffer");
  }
  return tiny_;
}

bool DeviceContext::direct_transfers_with(const Comm& comm, int peer) const {
  if (!table_) return false;
  const DeviceTable& t = *table_;
  return t[static_cast<size_t>(comm.world_rank_of(comm.rank()))].transport_cuda &&
         t[static_cast<size_t>(comm.world_rank_of(peer))].transport_cuda;
}

cudaMemPool_t DeviceContext::scratch_pool() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (scratch_pool_tried_) return scratch_pool_;
  scratch_pool_tried_ = true;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device_;
  if (cudaMemPoolCreate(&scratch_pool_, &props) != cudaSuccess) {
    cudaGetLastError();
    scratch_pool_ = nullptr;
    log(LogLevel::info, "no memory pool of weft's own on CUDA device %d: scratch comes from the default pool", device_);
    return nullptr;
  }
  uint64_t keep = uint64_t{256} << 20;
  if (cudaMemPoolSetAttribute(scratch_pool_, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess) {
    cudaGetLastError();  // the pool still works, trimming at every synchronisation
  }
  return scratch_pool_;
}

DeviceContext* context_of(const Comm& comm) { return dynamic_cast<DeviceContext*>(comm.device()); }

DeviceContext& require_context(const Comm& comm, const char* operation) {
  DeviceContext* ctx = context_of(comm);
  if (!ctx || ctx->device() < 0) {
    fail(Status::unsupported, "%s on device memory: %s has no GPU (%s)", operation, comm.describe().c_str(),
         ctx ? ctx->why_no_device().c_str() : "no device state");
  }
  return *ctx;
}

}  // namespace weft::gpu
