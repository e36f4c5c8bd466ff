// launch(): issue order, streams and completion of device operations (device_api.h).
//
// Stream semantics (stated in weft.h):
//  - stream == NULL: the communicator's own stream (blocking with respect to the legacy default
//    stream, so work the caller queued there first is ordered before); a call without a request
//    waits for completion, with the watchdog, before returning.
//  - stream given, no request: stream-ordered, as NCCL: the call returns once the work is queued
//    (staging is host-driven and returns when done, which is also stream-ordered).
//  - a request completes when the stream reaches the end of the work (a CUDA event); weft_test
//    queries it, weft_wait waits for it with the watchdog.
// Work runs through the communicator's executor, so device and host operations keep issue
// order; a device call made while asynchronous host operations are queued waits for them.
#include <string>

#include "core/comm/executor.h"
#include "core/device/device_api.h"
#include "core/device/launch.h"
#include "core/device/watchdog.h"
#include "transports/cuda/cuda_util.h"
#if WEFT_HAVE_NCCL
#include "core/device/nccl_comm.h"
#endif

namespace weft::gpu {

Launch::Launch(Comm& comm, DeviceContext& ctx, void* user_stream, const char* operation, DeviceOp kind)
    : comm_(comm),
      ctx_(ctx),
      stream_(user_stream ? static_cast<cudaStream_t>(user_stream) : ctx.stream()),
      internal_(user_stream == nullptr),
      operation_(operation) {
  if (ctx.nccl() && kind == DeviceOp::collective) channel_.emplace(comm, operation, "nccl");
}

DeviceSubject Launch::subject() const {
  return {operation_, ctx_.nccl() ? "nccl" : "staged", channel_ ? channel_->sequence() : kNoSequence};
}

void Launch::check(coll::CallSignature sig) {
  if (!channel_ || !comm_.config().check_collectives) return;
  std::string name = std::string(sig.operation) + " (device)";
  sig.operation = name.c_str();
  coll::check_signature(*channel_, sig);
}

namespace {

// Completion of NCCL work: an event recorded on the stream after it.
class EventPending final : public Pending {
 public:
  EventPending(std::shared_ptr<Comm> comm, DeviceContext& ctx, const Launch& l)
      : comm_(std::move(comm)), ctx_(ctx), what_(l.subject()), event_(ctx.events().take()) {
    cudaError_t err = cudaEventRecord(event_, l.stream());
    if (err != cudaSuccess) {
      ctx_.events().give(event_);
      cuda_check(err, "cudaEventRecord");
    }
  }
  ~EventPending() override { ctx_.events().give(event_); }

  // On the user's thread (weft_test / weft_wait): the device guard keeps an abort or a failure
  // from making NCCL or CUDA calls with another device (or none) current.
  bool test() override {
    if (done_) return true;
    DeviceGuard guard(ctx_.device());
    done_ = event_done(*comm_, ctx_, event_, what_);
    return done_;
  }
  void wait() override {
    if (done_) return;
    DeviceGuard guard(ctx_.device());
    wait_event(*comm_, ctx_, event_, what_);
    done_ = true;
  }

 private:
  std::shared_ptr<Comm> comm_;
  DeviceContext& ctx_;
  DeviceSubject what_;
  cudaEvent_t event_;
  bool done_ = false;
};

// Completion of staged work: it runs on the executor's thread and ends with its copies done.
class TaskPending final : public Pending {
 public:
  explicit TaskPending(std::shared_ptr<Task> task) : task_(std::move(task)) {}
  bool test() override {
    if (!task_->done()) return false;
    task_->rethrow();
    return true;
  }
  void wait() override {
    task_->wait();
    task_->rethrow();
  }

 private:
  std::shared_ptr<Task> task_;
};

}  // namespace

std::shared_ptr<Pending> launch(const std::shared_ptr<Comm>& comm, const char* operation, DeviceOp kind, void* stream,
                                bool want_request, DeviceWork work) {
  DeviceContext& ctx = require_context(*comm, operation);
  comm->throw_if_unusable();
  if (!ctx.nccl() && want_request) {
    // Staging is driven by the host: run it on the executor's thread.
    auto task = comm->executor().submit([comm, &ctx, operation, kind, stream, work = std::move(work)] {
      comm->throw_if_unusable();
      DeviceGuard guard(ctx.device());
      Launch l(*comm, ctx, stream, operation, kind);
      work(l);
    });
    return std::make_shared<TaskPending>(std::move(task));
  }
  std::shared_ptr<Pending> result;
  comm->executor().run_blocking([&] {
    comm->throw_if_unusable();
    DeviceGuard guard(ctx.device());
    Launch l(*comm, ctx, stream, operation, kind);
#if WEFT_HAVE_NCCL
    // An earlier stream-ordered operation may have failed since: report it now.
    if (NcclComm* n = l.nccl()) n->check(*comm, l.subject());
#endif
    work(l);
    if (!l.nccl()) return;  // staged: complete already
    if (want_request) {
      result = std::make_shared<EventPending>(comm, ctx, l);
    } else if (l.internal_stream()) {
      wait_stream(*comm, ctx, l.stream(), l.subject());
    }
  });
  return result;
}

}  // namespace weft::gpu
