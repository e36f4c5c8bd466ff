#include "capi/src/handles.h"

#include "capi/src/registry.h"
#include "core/common/status.h"

namespace weft::capi {
namespace {

// Leaked on purpose: handles may be destroyed from static destructors of user programs.
auto& comms() {
  static auto* r = new Registry<weft_comm, kCommMagic>("a communicator from weft_comm_init*",
                                                       "a live communicator", "destroyed");
  return *r;
}
auto& requests() {
  static auto* r = new Registry<weft_request, kRequestMagic>("a request returned by a weft operation",
                                                             "a live request", "already freed");
  return *r;
}

}  // namespace

weft_comm_t register_comm(std::shared_ptr<Comm> comm) {
  auto h = std::make_unique<weft_comm>();
  h->comm = std::move(comm);
  return comms().add(std::move(h));
}

weft_comm* lookup_comm(weft_comm_t h, const char* arg) { return comms().find(h, arg); }

void unregister_comm(weft_comm_t h) { comms().remove(h); }

weft_request_t register_request(std::unique_ptr<weft_request> r) { return requests().add(std::move(r)); }

weft_request* lookup_request(weft_request_t h, const char* arg) { return requests().find(h, arg); }

void unregister_request(weft_request_t h) { requests().remove(h); }

}  // namespace weft::capi
