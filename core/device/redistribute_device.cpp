// Redistribution on device memory (device_api.h: redistribute): the backend and the wait.
//
// Order: every backend call is queued on one stream, the caller's or (NULL stream) the anchor
// communicator's own, and that stream is passed to every launch() and p2p(): with a NULL stream
// launch() would put each group's collective on that group's own stream, unordered with the
// copies between steps. NCCL work is queued on the stream; staged work copies on the stream
// after the earlier work and returns when its results are back on the device.
//
// Completion: a user stream without a request returns once everything is queued. Otherwise an
// event recorded after the last step (and the frees of the temporary buffers) is waited for or
// handed back; its watchdog polls every communicator the steps used (NCCL's asynchronous
// errors, aborts) and at the anchor's deadline aborts their NCCL communicators, so that a stuck
// collective on any mesh group stops and the stream drains, as launch()'s wait does for one.
#include "core/device/redistribute_device.h"

#include <utility>

#include "core/comm/deadline.h"
#include "core/common/backoff.h"
#include "core/device/device_api.h"
#include "core/device/launch.h"
#include "core/device/watchdog.h"
#include "core/sharding/plan.h"
#include "core/sharding/redistribute.h"
#include "core/sharding/sharded.h"
#include "kernels/cuda/strided_copy.h"
#include "transports/cuda/cuda_util.h"
#if WEFT_HAVE_NCCL
#include "core/device/nccl_comm.h"
#endif

namespace weft::gpu {
namespace {

constexpr const char* kOperation = "redistribute";

}  // namespace

DeviceBackend::DeviceBackend(DeviceContext& ctx, cudaStream_t stream) : ctx_(ctx), stream_(stream) {}

DeviceBackend::~DeviceBackend() {
  bool failed = false;
  for (void* p : temps_) failed = cudaFreeAsync(p, stream_) != cudaSuccess || failed;
  if (failed) cudaGetLastError();  // a broken stream or context: nothing more to do here
}

char* DeviceBackend::temp(size_t bytes) {
  if (bytes == 0) return nullptr;
  temps_.reserve(temps_.size() + 1);  // the push_back below cannot fail after the allocation
  cudaMemPool_t pool = ctx_.scratch_pool();
  void* p = nullptr;
  cuda_check(pool ? cudaMallocFromPoolAsync(&p, bytes, pool, stream_) : cudaMallocAsync(&p, bytes, stream_),
             "redistribute: a temporary device buffer (stream-ordered)");
  temps_.push_back(p);
  return static_cast<char*>(p);
}

void DeviceBackend::copy(const kernels::StridedView& dst, const kernels::StridedView& src) {
  kernels::cuda::strided_copy(dst, src, stream_);
}

void DeviceBackend::zero(const kernels::StridedView& dst) { kernels::cuda::strided_zero(dst, stream_); }

void DeviceBackend::note(const std::shared_ptr<Comm>& comm) {
  for (const Used& u : used_) {
    if (u.comm == comm) return;
  }
  used_.push_back({comm, &require_context(*comm, kOperation)});
}

void DeviceBackend::collective(const std::shared_ptr<Comm>& comm, DeviceWork work) {
  note(comm);
  gpu::launch(comm, kOperation, DeviceOp::collective, stream_, false, std::move(work));
}

void DeviceBackend::allgather(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t count,
                              DType dtype) {
  collective(comm, [&](Launch& l) { gpu::allgather(l, send, recv, count, dtype); });
}

void DeviceBackend::alltoall(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t count,
                             DType dtype) {
  collective(comm, [&](Launch& l) { gpu::alltoall(l, send, recv, count, dtype); });
}

void DeviceBackend::alltoall_views(const std::shared_ptr<Comm>& comm, const kernels::StridedView* views, void* recv,
                                   size_t count, DType dtype) {
  // Device collectives take one buffer: pack the blocks on the stream first.
  const size_t elem = dtype_size(dtype);
  const size_t n = static_cast<size_t>(comm->size());
  char* packed = temp(count * elem * n);
  for (size_t q = 0; q < n; ++q) {
    copy(kernels::StridedView::contiguous(packed + q * count * elem, elem, views[q].ndim, views[q].shape), views[q]);
  }
  alltoall(comm, packed, recv, count, dtype);
}

void DeviceBackend::allgatherv(const std::shared_ptr<Comm>& comm, const void* send, size_t sendcount, void* recv,
                               const std::vector<size_t>& counts, const std::vector<size_t>& displs, DType dtype) {
  collective(comm, [&](Launch& l) { gpu::allgatherv(l, send, sendcount, recv, counts, displs, dtype); });
}

void DeviceBackend::allreduce(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t count,
                              DType dtype, ReduceOp op) {
  collective(comm, [&](Launch& l) { gpu::allreduce(l, send, recv, count, dtype, op); });
}

void DeviceBackend::reduce_scatter(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t recvcount,
                                   DType dtype, ReduceOp op) {
  collective(comm, [&](Launch& l) { gpu::reduce_scatter(l, send, recv, recvcount, dtype, op); });
}

void DeviceBackend::reduce(const std::shared_ptr<Comm>& comm, const void* send, void* recv, size_t count, DType dtype,
                           ReduceOp op, int root) {
  collective(comm, [&](Launch& l) { gpu::reduce(l, send, recv, count, dtype, op, root); });
}

void DeviceBackend::alltoallv(const std::shared_ptr<Comm>& comm, const void* send,
                              const std::vector<size_t>& sendcounts, const std::vector<size_t>& sdispls, void* recv,
                              const std::vector<size_t>& recvcounts, const std::vector<size_t>& rdispls,
                              DType dtype) {
  collective(comm, [&](Launch& l) {
    gpu::alltoallv(l, send, sendcounts, sdispls, recv, recvcounts, rdispls, dtype);
  });
}

void DeviceBackend::exchange(const std::shared_ptr<Comm>& comm, const std::vector<Message>& messages) {
  // Point-to-point takes no sequence number, so a rank with nothing to move may stay out.
  if (messages.empty()) return;
  std::vector<P2POp> ops;
  ops.reserve(messages.size());
  for (const Message& m : messages) ops.push_back({m.is_send, m.buf, m.bytes, m.peer});
  note(comm);
  gpu::p2p(comm, kOperation, ops, stream_, false);
}

namespace {

// Completion of a redistribution: an event after its last step on the stream.
class RedistributePending final : public Pending {
 public:
  RedistributePending(std::shared_ptr<Comm> anchor, DeviceContext& ctx, std::vector<DeviceBackend::Used> used,
                      cudaStream_t stream, DeviceSubject what)
      : anchor_(std::move(anchor)), ctx_(ctx), used_(std::move(used)), what_(what), event_(ctx.events().take()) {
    const cudaError_t err = cudaEventRecord(event_, stream);
    if (err != cudaSuccess) {
      ctx_.events().give(event_);
      cuda_check(err, "cudaEventRecord");
    }
  }
  ~RedistributePending() override { ctx_.events().give(event_); }

  bool test() override {
    if (done_) return true;
    DeviceGuard guard(ctx_.device());
    done_ = poll();
    return done_;
  }

  void wait() override {
    if (done_) return;
    DeviceGuard guard(ctx_.device());
    Deadline deadline(anchor_->config().timeout);
    Backoff backoff;
    while (!poll()) {
      if (deadline.expired()) time_out(deadline.budget());
      backoff.pause();
    }
    done_ = true;
  }

 private:
  // The event's state, with every used communicator's checks (each throws its own failure:
  // an NCCL error, an aborted NCCL communicator, weft_comm_abort).
  bool poll() {
    bool done = event_done(*anchor_, ctx_, event_, what_);
    for (const DeviceBackend::Used& u : used_) {
      if (u.comm != anchor_) done = event_done(*u.comm, *u.ctx, event_, what_) && done;
    }
    return done;
  }

  [[noreturn]] void time_out(std::chrono::milliseconds waited) {
    std::vector<Comm*> stopped;
#if WEFT_HAVE_NCCL
    for (const DeviceBackend::Used& u : used_) {
      if (NcclComm* n = u.ctx->nccl()) {
        n->abort();  // its kernels stop, so the stream drains
        stopped.push_back(u.comm.get());
      }
    }
#endif
    Error e(Status::timeout,
            format("%s: not complete after %lld ms (a rank may have died, hung, or not called weft_redistribute%s)",
                   subject_text(*anchor_, what_).c_str(), static_cast<long long>(waited.count()),
                   stopped.empty() ? "" : "; weft's watchdog aborted the NCCL communicators of the steps"));
    anchor_->mark_broken(e);
    for (Comm* c : stopped) {
      if (c != anchor_.get()) c->mark_broken(e);
    }
    throw e;
  }

  std::shared_ptr<Comm> anchor_;
  DeviceContext& ctx_;
  std::vector<DeviceBackend::Used> used_;
  DeviceSubject what_;
  cudaEvent_t event_;
  bool done_ = false;
};

// "nccl" when every step's communicator has NCCL, "staged" when none has, else both.
const char* path_of(const std::vector<DeviceBackend::Used>& used) {
  bool nccl = false, staged = false;
  for (const DeviceBackend::Used& u : used) (u.ctx->nccl() ? nccl : staged) = true;
  if (nccl && staged) return "nccl+staged";
  return nccl ? "nccl" : "staged";
}

}  // namespace

std::shared_ptr<Pending> redistribute(const shard::Sharded& src, const shard::Sharded& dst, const shard::Plan& plan,
                                      void* stream, bool want_request) {
  if (!src.mesh->member() && !dst.mesh->member()) return nullptr;
  // The mesh's whole communicator, or between meshes the parent (every rank has it).
  const std::shared_ptr<Comm> anchor = src.mesh == dst.mesh ? src.mesh->whole() : src.mesh->parent();
  DeviceContext& ctx = require_context(*anchor, kOperation);
  anchor->throw_if_unusable();
  DeviceGuard guard(ctx.device());
  const cudaStream_t s = stream ? static_cast<cudaStream_t>(stream) : ctx.stream();
  std::vector<DeviceBackend::Used> used;
  {
    DeviceBackend backend(ctx, s);
    shard::redistribute(src, dst, plan, backend);
    used = backend.used();
  }  // the temporary buffers are freed on the stream, after the steps
  if (stream && !want_request) return nullptr;  // stream-ordered, as NCCL
  const DeviceSubject what{kOperation, path_of(used), kNoSequence};
  auto pending = std::make_shared<RedistributePending>(anchor, ctx, std::move(used), s, what);
  if (want_request) return pending;
  pending->wait();
  return nullptr;
}

}  // namespace weft::gpu
