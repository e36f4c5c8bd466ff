// Point-to-point send/recv. Unlike collectives these are posted to the transport at once (not
// queued behind earlier collectives), so a rank can post a receive and a send and wait for
// both; messages between two ranks of one communicator match in issue order.
#include "capi/src/handles.h"
#include "capi/src/launch.h"
#include "capi/src/shim.h"
#include "capi/src/validate.h"
#include "core/comm/channel.h"
#include "core/comm/progress.h"

using namespace weft;
using namespace weft::capi;

namespace {

weft_status_t post(const char* fn, bool is_send, void* buf, size_t count, const weft_dtype_t& dtype, int peer,
                   weft_comm_t comm, void* stream, weft_request_t* request) {
  return guarded(fn, [&] {
    if (request) *request = nullptr;
    weft_comm* h = lookup_comm(comm, "comm");
    DType d = check_dtype(dtype);
    check_rank(peer, h->comm->size(), "peer");
    size_t bytes = check_bytes(count, d, "count");
    check_buffer(buf, bytes, "buf");
    const char* what = is_send ? "send" : "recv";
    if (on_device(h, stream, {{buf, bytes, "buf"}})) {
      return register_device_request(h, request, what,
                                     gpu::p2p(h->comm, is_send, buf, count, d, peer, stream, request != nullptr));
    }
    Comm& c = *h->comm;
    c.throw_if_unusable();
    auto op = std::make_unique<transport::Op>();
    transport::Transport& t = c.world().transport();
    const int world_peer = c.world_rank_of(peer);
    if (is_send) {
      t.send(*op, world_peer, make_tag(c.id(), c.rank(), kP2PSequence, 0), buf, bytes);
    } else {
      t.recv(*op, world_peer, make_tag(c.id(), peer, kP2PSequence, 0), buf, bytes);
    }
    if (request) {
      auto r = std::make_unique<weft_request>();
      r->comm = h->comm;
      r->operation = what;
      r->op = std::move(op);
      *request = register_request(std::move(r));
      return;
    }
    try {
      wait_ops(c, {op.get()}, {what, "", 0});
    } catch (...) {
      if (!op->finished()) c.world().bury(std::move(op));
      throw;
    }
  });
}

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_send(const void* buf, size_t count, weft_dtype_t dtype, int peer, weft_comm_t comm,
                                 void* stream, weft_request_t* request) {
  return post(__func__, true, const_cast<void*>(buf), count, dtype, peer, comm, stream, request);
}

WEFT_API weft_status_t weft_recv(void* buf, size_t count, weft_dtype_t dtype, int peer, weft_comm_t comm,
                                 void* stream, weft_request_t* request) {
  return post(__func__, false, buf, count, dtype, peer, comm, stream, request);
}

}  // extern "C"
