#include "capi/src/launch.h"

namespace weft::capi {

void launch(weft_comm* h, weft_request_t* request, const char* operation, std::function<void()> work) {
  std::shared_ptr<Comm> comm = h->comm;
  comm->throw_if_unusable();
  // Checked again when the work runs: an abort may arrive while it is queued.
  auto guarded_work = [comm, work = std::move(work)] {
    comm->throw_if_unusable();
    work();
  };
  if (!request) {
    comm->executor().run_blocking(std::move(guarded_work));
    return;
  }
  *request = nullptr;
  auto r = std::make_unique<weft_request>();
  r->comm = comm;
  r->operation = operation;
  r->task = comm->executor().submit(std::move(guarded_work));
  *request = register_request(std::move(r));
}

}  // namespace weft::capi
