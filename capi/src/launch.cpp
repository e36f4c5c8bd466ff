#include "capi/src/launch.h"

namespace weft::capi {

weft_request_t register_task_request(std::shared_ptr<Comm> comm, const char* operation, std::shared_ptr<Task> task) {
  auto r = std::make_unique<weft_request>();
  r->comm = std::move(comm);
  r->operation = operation;
  r->task = std::move(task);
  return register_request(std::move(r));
}

}  // namespace weft::capi

namespace weft::capi {

bool on_device(weft_comm* h, void* stream, std::initializer_list<gpu::BufferRef> buffers) {
  return gpu::route(*h->comm, stream, buffers) == gpu::Route::device;
}

void launch_device(weft_comm* h, weft_request_t* request, const char* operation, void* stream,
                   gpu::DeviceWork work) {
  if (request) *request = nullptr;
  std::shared_ptr<gpu::Pending> pending =
      gpu::launch(h->comm, operation, gpu::DeviceOp::collective, stream, request != nullptr, std::move(work));
  register_device_request(h, request, operation, std::move(pending));
}

void register_device_request(weft_comm* h, weft_request_t* request, const char* operation,
                             std::shared_ptr<gpu::Pending> pending) {
  if (!request || !pending) return;
  auto r = std::make_unique<weft_request>();
  r->comm = h->comm;
  r->operation = operation;
  r->device = std::move(pending);
  *request = register_request(std::move(r));
}

}  // namespace weft::capi
