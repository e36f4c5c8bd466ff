// Point-to-point on device buffers (device_api.h).
//
// With NCCL: ncclSend/ncclRecv on the stream, in issue order with the collectives (NCCL's rule:
// a send occupies its stream until the peer receives, so two ranks that both send first on one
// stream wait for each other).
// Staged (and always to the rank itself): like host point-to-point, posted to UCX at once and
// matched in issue order, with the same tags, so a staged device send pairs with a host-memory
// receive and vice versa. A send first copies the buffer to pinned memory (after the stream's
// earlier work); a receive lands in pinned memory and is copied to the device when it completes.
#include "core/comm/channel.h"
#include "core/comm/progress.h"
#include "transports/nccl/cuda_util.h"
#include "transports/nccl/device_api.h"
#include "transports/nccl/launch.h"
#include "transports/nccl/paths.h"
#include "transports/nccl/watchdog.h"

namespace weft::gpu {
namespace {

class StagedP2P final : public Pending {
 public:
  StagedP2P(std::shared_ptr<Comm> comm, DeviceContext& ctx, bool is_send, void* buf, size_t bytes, int peer,
            void* stream)
      : comm_(std::move(comm)),
        ctx_(ctx),
        is_send_(is_send),
        buf_(buf),
        bytes_(bytes),
        stream_(stream),
        what_{is_send ? "send" : "recv", "staged", kNoSequence},
        op_(std::make_unique<transport::Op>()) {
    Comm& c = *comm_;
    DeviceGuard guard(ctx_.device());
    pin_ = ctx_.pinned().take(bytes);
    transport::Transport& t = c.world().transport();
    const int world_peer = c.world_rank_of(peer);
    if (is_send) {
      cudaStream_t s = this->stream();
      if (bytes) {
        cuda_check(cudaMemcpyAsync(pin_.data(), buf, bytes, cudaMemcpyDeviceToHost, s), "staging: copy from the device");
        wait_stream(c, ctx_, s, what_);
      }
      t.send(*op_, world_peer, make_tag(c.id(), c.rank(), kP2PSequence, 0), pin_.data(), bytes);
    } else {
      t.recv(*op_, world_peer, make_tag(c.id(), peer, kP2PSequence, 0), pin_.data(), bytes);
    }
  }

  ~StagedP2P() override {
    if (op_ && op_->state.load(std::memory_order_acquire) == transport::Op::State::pending) {
      // UCX may still use the pinned buffer: keep both alive rather than free under it.
      comm_->world().bury(std::move(op_));
      pin_.release();
    } else {
      ctx_.pinned().give(std::move(pin_));
    }
  }

  bool test() override {
    if (done_) return true;
    if (!op_->finished()) comm_->world().transport().progress();
    if (!op_->finished()) {
      comm_->throw_if_unusable();
      return false;
    }
    wait();
    return true;
  }

  void wait() override {
    if (done_) return;
    wait_ops(*comm_, {op_.get()}, {what_.operation, "", 0});
    if (!is_send_ && bytes_) {
      DeviceGuard guard(ctx_.device());
      cudaStream_t s = stream();
      cuda_check(cudaMemcpyAsync(buf_, pin_.data(), bytes_, cudaMemcpyHostToDevice, s), "staging: copy to the device");
      wait_stream(*comm_, ctx_, s, what_);
    }
    done_ = true;
  }

 private:
  cudaStream_t stream() { return stream_ ? static_cast<cudaStream_t>(stream_) : ctx_.stream(); }

  std::shared_ptr<Comm> comm_;
  DeviceContext& ctx_;
  bool is_send_;
  void* buf_;
  size_t bytes_;
  void* stream_;
  DeviceSubject what_;
  std::unique_ptr<transport::Op> op_;
  PinnedBuffer pin_;
  bool done_ = false;
};

}  // namespace

std::shared_ptr<Pending> p2p(const std::shared_ptr<Comm>& comm, bool is_send, void* buf, size_t count, DType dtype,
                             int peer, void* stream, bool want_request) {
  const char* what = is_send ? "send" : "recv";
  DeviceContext& ctx = require_context(*comm, what);
  const size_t bytes = count * dtype_size(dtype);
#if WEFT_HAVE_NCCL
  // To itself a rank goes staged: NCCL pairs a send and a receive to self only inside one group,
  // which two separate weft calls are not.
  if (ctx.nccl() && peer != comm->rank()) {
    return launch(comm, what, DeviceOp::point_to_point, stream, want_request,
                  [=](Launch& l) { nccl_path::p2p(l, is_send, buf, bytes, peer); });
  }
#endif
  comm->throw_if_unusable();
  auto pending = std::make_shared<StagedP2P>(comm, ctx, is_send, buf, bytes, peer, stream);
  if (want_request) return pending;
  pending->wait();
  return nullptr;
}

}  // namespace weft::gpu
