// A communicator's device state (core's DeviceState): its GPU, NCCL communicator (or none: then
// device buffers are staged), its own CUDA streams, and pools of events and pinned buffers.
// Made by attach() while the communicator is created; owned by the Comm.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/comm/comm.h"
#include "core/comm/device_state.h"
#include "transports/cuda/cuda_util.h"

namespace weft::gpu {

class NcclComm;
struct SplitDevice;

// Every world rank's GPU, exchanged once when the root communicator is created and shared by
// all communicators split from it (a rank keeps its GPU for life).
struct DeviceInfo {
  int32_t device;  // < 0: none
  uint8_t transport_cuda;  // 1: this rank's transport moves CUDA memory itself (a CUDA-enabled UCX)
  uint8_t pad[3];
  uint8_t uuid[16];
};
using DeviceTable = std::vector<DeviceInfo>;  // indexed by world rank

class DeviceContext final : public DeviceState {
 public:
  explicit DeviceContext(int device_count);
  ~DeviceContext() override;
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  void abort() noexcept override;

  // Any GPU visible to this process (if not, no pointer can be device memory).
  bool has_devices() const { return device_count_ > 0; }
  // This communicator's GPU, or < 0 with the reason in why_no_device().
  int device() const { return device_; }
  const std::string& why_no_device() const { return why_no_device_; }
  // NCCL, or nullptr: device buffers are then staged (why_no_nccl() says why).
  NcclComm* nccl() const { return nccl_.get(); }
  const std::string& why_no_nccl() const { return why_no_nccl_; }
  const std::shared_ptr<const DeviceTable>& table() const { return table_; }
  // Whether device buffers between this rank and `peer` of `comm` go to the transport directly:
  // when both ranks' transports move CUDA memory (else they are staged through pinned memory).
  bool direct_transfers_with(const Comm& comm, int peer) const;

  // The communicator's own stream (for calls with a NULL stream): created on first use, blocking
  // with respect to the legacy default stream. The device must be current.
  cudaStream_t stream();
  EventPool& events() { return events_; }
  PinnedPool& pinned() { return pinned_; }
  // 16 bytes of device memory for stream-ordered barriers (NCCL has no barrier).
  void* tiny_buffer();
  // The pool device scratch comes from (device_scratch.h): created on first use, keeping up to
  // 256 MiB of freed memory mapped; nullptr (the default pool) where the driver has no pools.
  // The device must be current.
  cudaMemPool_t scratch_pool();
  // Bytes per staging chunk (WEFT_STAGING_CHUNK_BYTES, default 4 MiB).
  size_t staging_chunk() const { return staging_chunk_; }

 private:
  friend void attach(Comm& comm, const Comm* parent, std::shared_ptr<SplitDevice> split);

  int device_count_ = 0;
  int device_ = -1;
  std::string why_no_device_;
  std::string why_no_nccl_;
  std::shared_ptr<const DeviceTable> table_;
  std::unique_ptr<NcclComm> nccl_;
  size_t staging_chunk_ = 4u << 20;
  std::mutex mutex_;  // lazy members below
  cudaStream_t stream_ = nullptr;
  void* tiny_ = nullptr;
  cudaMemPool_t scratch_pool_ = nullptr;
  bool scratch_pool_tried_ = false;
  EventPool events_;
  PinnedPool pinned_;
};

// The communicator's context, or nullptr (host-only communicator).
DeviceContext* context_of(const Comm& comm);
// Same, throwing Error(unsupported) naming `operation` when the communicator has no GPU.
DeviceContext& require_context(const Comm& comm, const char* operation);

}  // namespace weft::gpu
