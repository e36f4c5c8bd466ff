// Point-to-point on device buffers (device_api.h): a batch of sends and receives posted
// together; weft_send/weft_recv are batches of one.
//
// With NCCL: one ncclGroupStart/ncclSend.../ncclRecv.../ncclGroupEnd on the stream, in issue
// order with the collectives. NCCL gives a communicator's work no independent progress (a send
// occupies the stream until the peer receives, and a pair of ranks is connected only when both
// have issued their side), so a two-way exchange must be one group: one batch.
// Staged (and always to the rank itself): like host point-to-point, posted to UCX at once and
// matched in issue order, with the same tags, so a staged device send pairs with a host-memory
// receive and vice versa. Sends first copy their buffers to pinned memory (after the stream's
// earlier work); receives land in pinned memory and are copied to the device when all of the
// batch's operations have completed. Where both ranks' UCX moves CUDA memory itself (a
// CUDA-enabled UCX: DeviceContext::direct_transfers_with), the device buffers go to UCX as they
// are, after the stream's earlier work, with no pinned copy.
// A batch on the NCCL path sends to itself staged too, so that self messages keep issue order
// with weft_send/weft_recv to self (NCCL pairs a send and a receive to self only inside one
// group). Its staged part is posted before the group is queued: the sends' copies to pinned
// memory then need no NCCL work to finish first.
#include "core/comm/progress.h"
#include "core/comm/user_p2p.h"
#include "core/device/device_api.h"
#include "core/device/launch.h"
#include "core/device/paths.h"
#include "core/device/watchdog.h"
#include "transports/cuda/cuda_util.h"

namespace weft::gpu {
namespace {

class StagedP2P final : public Pending {
 public:
  StagedP2P(std::shared_ptr<Comm> comm, DeviceContext& ctx, const char* operation, std::vector<P2POp> ops,
            void* stream)
      : comm_(std::move(comm)), ctx_(ctx), stream_(stream), what_{operation, "staged", kNoSequence} {
    Comm& c = *comm_;
    DeviceGuard guard(ctx_.device());
    entries_.reserve(ops.size());
    for (const P2POp& o : ops) {
      const bool direct = ctx_.direct_transfers_with(c, o.peer);
      entries_.push_back(Entry{o, direct, direct ? PinnedBuffer() : ctx_.pinned().take(o.bytes),
                               std::make_unique<transport::Op>()});
    }
    // The stream's earlier work must be done before UCX touches a buffer: staged sends copy
    // after it on the stream; direct operations wait for it here.
    cudaStream_t s = this->stream();
    bool wait = false;
    for (Entry& e : entries_) {
      if (!e.op.bytes) continue;
      if (e.direct) {
        wait = true;
      } else if (e.op.is_send) {
        cuda_check(cudaMemcpyAsync(e.pin.data(), e.op.buf, e.op.bytes, cudaMemcpyDeviceToHost, s),
                   "staging: copy from the device");
        wait = true;
      }
    }
    if (wait) wait_stream(c, ctx_, s, what_);
    try {
      for (Entry& e : entries_) {
        post_user_p2p(c, *e.transfer, e.op.is_send, e.op.peer, e.direct ? e.op.buf : e.pin.data(), e.op.bytes);
      }
    } catch (...) {
      release_entries();  // the ones already posted stay with UCX (no destructor runs for us)
      throw;
    }
  }

  ~StagedP2P() override {
    release_entries();
    if (event_) ctx_.events().give(event_);
  }

  // Never blocks: first the transfers, then the copies of staged receives to the device (queued
  // once, followed by an event).
  bool test() override {
    if (done_) return true;
    if (!copies_queued_) {
      if (!all_finished()) comm_->world().transport().progress();
      if (!all_finished()) {
        comm_->throw_if_unusable();
        return false;
      }
      wait_transfers();  // all finished: reports a failed one, does not wait
      queue_copies();
    }
    if (event_) {
      DeviceGuard guard(ctx_.device());
      if (!event_done(*comm_, ctx_, event_, what_)) return false;
    }
    done_ = true;
    return true;
  }

  void wait() override {
    if (done_) return;
    if (!copies_queued_) {
      wait_transfers();
      queue_copies();
    }
    if (event_) {
      DeviceGuard guard(ctx_.device());
      wait_event(*comm_, ctx_, event_, what_);
    }
    done_ = true;
  }

 private:
  struct Entry {
    P2POp op;
    bool direct;      // the device buffer goes to UCX itself
    PinnedBuffer pin;  // staged: the pinned copy
    std::unique_ptr<transport::Op> transfer;
  };

  cudaStream_t stream() { return stream_ ? static_cast<cudaStream_t>(stream_) : ctx_.stream(); }

  void wait_transfers() {
    std::vector<transport::Op*> transfers;
    transfers.reserve(entries_.size());
    for (Entry& e : entries_) transfers.push_back(e.transfer.get());
    wait_ops(*comm_, transfers, {what_.operation, "", 0});
  }

  // Staged receives: pinned memory to the device, on the stream, then an event to wait for.
  void queue_copies() {
    DeviceGuard guard(ctx_.device());
    cudaStream_t s = stream();
    bool copied = false;
    for (Entry& e : entries_) {
      if (e.op.is_send || e.direct || !e.op.bytes) continue;
      cuda_check(cudaMemcpyAsync(e.op.buf, e.pin.data(), e.op.bytes, cudaMemcpyHostToDevice, s),
                 "staging: copy to the device");
      copied = true;
    }
    if (copied) {
      event_ = ctx_.events().take();
      cuda_check(cudaEventRecord(event_, s), "cudaEventRecord");
    }
    copies_queued_ = true;
  }

  // Pinned buffers back to the pool, except where UCX may still use them (an unfinished
  // transfer): those stay alive with the transfer, buried in the world.
  void release_entries() noexcept {
    for (Entry& e : entries_) {
      if (e.transfer && e.transfer->state.load(std::memory_order_acquire) == transport::Op::State::pending) {
        comm_->world().bury(std::move(e.transfer));
        e.pin.release();
      } else {
        ctx_.pinned().give(std::move(e.pin));
      }
    }
  }
  bool all_finished() const {
    for (const Entry& e : entries_)
      if (!e.transfer->finished()) return false;
    return true;
  }

  std::shared_ptr<Comm> comm_;
  DeviceContext& ctx_;
  void* stream_;
  DeviceSubject what_;
  std::vector<Entry> entries_;
  bool copies_queued_ = false;
  cudaEvent_t event_ = nullptr;
  bool done_ = false;
};

// A batch on the NCCL path with operations to self: the NCCL group's completion and the staged
// part's.
class BothPending final : public Pending {
 public:
  BothPending(std::shared_ptr<Pending> staged, std::shared_ptr<Pending> nccl)
      : staged_(std::move(staged)), nccl_(std::move(nccl)) {}
  bool test() override {
    bool a = staged_->test();
    bool b = nccl_->test();
    return a && b;
  }
  void wait() override {
    staged_->wait();
    nccl_->wait();
  }

 private:
  std::shared_ptr<Pending> staged_;
  std::shared_ptr<Pending> nccl_;
};

// Posts a staged batch in issue order with the communicator's queued asynchronous operations
// (its executor): a staged collective queued before it may still be writing the buffers a send
// copies from. Posting does not wait for the transfers, so an irecv + isend pair still works.
std::shared_ptr<StagedP2P> post_staged(const std::shared_ptr<Comm>& comm, DeviceContext& ctx, const char* operation,
                                       std::vector<P2POp> ops, void* stream) {
  std::shared_ptr<StagedP2P> pending;
  comm->executor().run_blocking([&] {
    comm->throw_if_unusable();
    pending = std::make_shared<StagedP2P>(comm, ctx, operation, std::move(ops), stream);
  });
  return pending;
}

std::shared_ptr<Pending> run_staged(const std::shared_ptr<Comm>& comm, DeviceContext& ctx, const char* operation,
                                    std::vector<P2POp> ops, void* stream, bool want_request) {
  auto pending = post_staged(comm, ctx, operation, std::move(ops), stream);
  if (want_request) return pending;
  pending->wait();
  return nullptr;
}

}  // namespace

std::shared_ptr<Pending> p2p(const std::shared_ptr<Comm>& comm, const char* operation, const std::vector<P2POp>& ops,
                             void* stream, bool want_request) {
  DeviceContext& ctx = require_context(*comm, operation);
#if WEFT_HAVE_NCCL
  if (ctx.nccl()) {
    std::vector<P2POp> remote, self;
    for (const P2POp& o : ops) (o.peer == comm->rank() ? self : remote).push_back(o);
    if (!remote.empty() || self.empty()) {
      // The staged part (to self) is posted first, and waited for only after the group is queued
      // (see the top of this file).
      std::shared_ptr<StagedP2P> staged_part;
      if (!self.empty()) staged_part = post_staged(comm, ctx, operation, std::move(self), stream);
      std::shared_ptr<Pending> group = launch(comm, operation, DeviceOp::point_to_point, stream, want_request,
                                              [&remote](Launch& l) { nccl_path::p2p(l, remote); });
      if (!staged_part) return group;
      if (!want_request) {
        staged_part->wait();
        return nullptr;
      }
      return std::make_shared<BothPending>(std::move(staged_part), std::move(group));
    }
    return run_staged(comm, ctx, operation, std::move(self), stream, want_request);
  }
#endif
  return run_staged(comm, ctx, operation, ops, stream, want_request);
}

}  // namespace weft::gpu
