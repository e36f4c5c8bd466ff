// weft_wait / weft_test / weft_request_free.
#include "capi/src/handles.h"
#include "capi/src/shim.h"
#include "core/comm/user_p2p.h"

using namespace weft;
using namespace weft::capi;

namespace {

// Waits for a point-to-point request; on failure the ops UCX still holds are parked.
void wait_p2p(weft_request* r) {
  if (r->failure) throw *r->failure;  // a failed request stays failed
  if (r->ops.empty()) return;
  try {
    wait_owned(*r->comm, r->ops, r->operation);
  } catch (const Error& e) {
    bury_unfinished(*r->comm, r->ops);
    r->failure = e;
    throw;
  } catch (...) {
    bury_unfinished(*r->comm, r->ops);
    throw;
  }
}

void wait_request(weft_request* r) {
  if (r->device) {
    r->device->wait();
  } else if (r->task) {
    r->task->wait();
    r->task->rethrow();
  } else {
    wait_p2p(r);
  }
}

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_wait(weft_request_t request) {
  return guarded(__func__, [&] { wait_request(lookup_request(request, "request")); });
}

WEFT_API weft_status_t weft_test(weft_request_t request, int* done) {
  bool pending = false;
  weft_status_t st = guarded(__func__, [&] {
    if (done) *done = 0;
    weft_request* r = lookup_request(request, "request");
    if (r->device) {
      pending = !r->device->test();
    } else if (r->task) {
      pending = !r->task->done();
      if (!pending) r->task->rethrow();
    } else if (r->failure) {
      wait_p2p(r);  // reports the earlier failure again
    } else if (!r->ops.empty()) {
      if (!all_finished(r->ops)) r->comm->world().transport().progress();
      pending = !all_finished(r->ops);
      if (pending) r->comm->throw_if_unusable();
      else wait_p2p(r);  // validates size and status; returns at once
    }
    if (!pending && done) *done = 1;
  });
  return (st == WEFT_OK && pending) ? WEFT_IN_PROGRESS : st;
}

WEFT_API weft_status_t weft_request_free(weft_request_t request) {
  if (!request) return WEFT_OK;
  weft_status_t st = guarded(__func__, [&] {
    weft_request* r = lookup_request(request, "request");
    try {
      wait_request(r);
    } catch (...) {
      unregister_request(request);
      throw;
    }
    unregister_request(request);
  });
  return st;
}

}  // extern "C"
