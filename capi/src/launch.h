// Where an operation runs: blocking calls go through the communicator's executor on this
// thread; asynchronous calls are queued and handed back as a weft_request_t. Operations on
// device buffers go to core/device instead (NCCL or staging, stream-ordered).
#pragma once

#include <initializer_list>
#include <memory>

#include "capi/src/handles.h"
#include "core/device/device_api.h"

namespace weft::capi {

// A queued task as a request on comm (the asynchronous half of launch(), and ZeRO's gather).
weft_request_t register_task_request(std::shared_ptr<Comm> comm, const char* operation, std::shared_ptr<Task> task);

// Blocking calls run inline without a heap allocation (the work stays a lambda); a request
// wraps it in a queued task.
template <class Work>
void launch(weft_comm* h, weft_request_t* request, const char* operation, Work&& work) {
  Comm& comm = *h->comm;
  comm.throw_if_unusable();
  if (!request) {
    // Checked again when the work runs: an abort may arrive while it waits behind queued work.
    comm.executor().run_blocking([&] {
      comm.throw_if_unusable();
      work();
    });
    return;
  }
  // One allocation for the task and the work (Executor::submit). The work may hold the
  // communicator by pointer: it runs on that communicator's own executor, which finishes its
  // queued work before the communicator is gone. Checked again when the work runs: an abort may
  // arrive while it is queued. The request stays NULL if queueing fails.
  *request = nullptr;
  Comm* c = &comm;
  std::shared_ptr<Task> task = comm.executor().submit([c, work = std::forward<Work>(work)]() mutable {
    c->throw_if_unusable();
    work();
  });
  *request = register_task_request(h->comm, operation, std::move(task));
}

// True when the call's buffers are device memory (gpu::route's rule, which also rejects mixed
// memory, managed memory, the wrong GPU, and a stream with host memory).
bool on_device(weft_comm* h, void* stream, std::initializer_list<gpu::BufferRef> buffers);
// Runs device work (gpu::launch) and, when request is not NULL, returns its request.
void launch_device(weft_comm* h, weft_request_t* request, const char* operation, void* stream,
                   gpu::DeviceWork work);
// Registers a device operation's completion as a weft_request_t (nothing when pending is NULL).
void register_device_request(weft_comm* h, weft_request_t* request, const char* operation,
                             std::shared_ptr<gpu::Pending> pending);

}  // namespace weft::capi
