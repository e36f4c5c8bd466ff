#include "capi/src/handles.h"

#include "capi/src/registry.h"
#include "core/common/status.h"

namespace weft::capi {
namespace {

// Leaked on purpose: handles may be destroyed from static destructors of user programs.
Registry<weft_comm>& comms() {
  static auto* r = new Registry<weft_comm>();
  return *r;
}
Registry<weft_request>& requests() {
  static auto* r = new Registry<weft_request>();
  return *r;
}

}  // namespace

weft_comm_t register_comm(std::shared_ptr<Comm> comm) {
  auto* h = new weft_comm{kCommMagic, std::move(comm)};
  comms().add(h);
  return h;
}

weft_comm* lookup_comm(weft_comm_t h, const char* arg) {
  if (!h) fail(Status::invalid_argument, "%s is NULL; expected a communicator from weft_comm_init*", arg);
  if (!comms().contains(h) || h->magic != kCommMagic) {
    fail(Status::invalid_argument, "%s (%p) is not a live communicator: destroyed, or not made by weft", arg,
         static_cast<void*>(h));
  }
  return h;
}

void unregister_comm(weft_comm_t h) {
  if (comms().remove(h)) {
    h->magic = 0;
    delete h;
  }
}

weft_request_t register_request(std::unique_ptr<weft_request> r) {
  r->magic = kRequestMagic;
  weft_request* h = r.release();
  requests().add(h);
  return h;
}

weft_request* lookup_request(weft_request_t h, const char* arg) {
  if (!h) fail(Status::invalid_argument, "%s is NULL; expected a request returned by a weft operation", arg);
  if (!requests().contains(h) || h->magic != kRequestMagic) {
    fail(Status::invalid_argument, "%s (%p) is not a live request: already freed, or not made by weft", arg,
         static_cast<void*>(h));
  }
  return h;
}

void unregister_request(weft_request_t h) {
  if (requests().remove(h)) {
    h->magic = 0;
    delete h;
  }
}

}  // namespace weft::capi
