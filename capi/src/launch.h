// Where an operation runs: blocking calls go through the communicator's executor on this
// thread; asynchronous calls are queued and handed back as a weft_request_t. Operations on
// device buffers go to transports/nccl instead (NCCL or staging, stream-ordered).
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>

#include "capi/src/handles.h"
#include "transports/nccl/device_api.h"

namespace weft::capi {

void launch(weft_comm* h, weft_request_t* request, const char* operation, std::function<void()> work);

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
