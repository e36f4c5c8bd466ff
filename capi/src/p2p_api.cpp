// Point-to-point: weft_p2p_batch, and weft_send/weft_recv as batches of one. Unlike collectives
// these are posted to the transport at once (not queued behind earlier collectives), so a rank
// can post receives and sends and wait for them; messages between two ranks of one
// communicator match in issue order per direction (same tag for every message of a sender on a
// communicator: the transport matches in posting order).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "capi/src/handles.h"
#include "capi/src/launch.h"
#include "capi/src/p2p_run.h"
#include "capi/src/shim.h"
#include "capi/src/validate.h"
#include "core/comm/op_pool.h"
#include "core/comm/user_p2p.h"

using namespace weft;
using namespace weft::capi;

// weft_p2p_op_t is an array element, so its layout is the ABI (weft.h): pinned here for LP64,
// the layout every binding mirrors.
#if UINTPTR_MAX == 0xffffffffffffffffu
static_assert(sizeof(weft_p2p_op_t) == 32 && offsetof(weft_p2p_op_t, kind) == 0 && offsetof(weft_p2p_op_t, buf) == 8 &&
                  offsetof(weft_p2p_op_t, count) == 16 && offsetof(weft_p2p_op_t, dtype) == 24 &&
                  offsetof(weft_p2p_op_t, peer) == 28,
              "weft_p2p_op_t's layout is frozen for WEFT_ABI_VERSION 1");
#endif

namespace {

// Checks one operation; `prefix` is "" or "ops[i]." (argument names in messages).
void add_op(P2PBatch& b, const Comm& c, bool is_send, void* buf, size_t count, const weft_dtype_t& dtype, int peer,
            const std::string& prefix) {
  DType d = check_dtype(dtype, (prefix + "dtype").c_str());
  check_rank(peer, c.size(), (prefix + "peer").c_str());
  size_t bytes = check_bytes(count, d, (prefix + "count").c_str());
  check_buffer(buf, bytes, (prefix + "buf").c_str());
  b.ops.push_back({is_send, buf, bytes, peer});
  b.names.push_back(prefix + "buf");
}

// A receive may not overlap any other buffer of the batch (sends may share memory).
void check_batch_overlap(const P2PBatch& b) {
  thread_local std::vector<size_t> order;  // storage reused per thread (see scratch_refs)
  order.clear();
  for (size_t i = 0; i < b.ops.size(); ++i)
    if (b.ops[i].bytes) order.push_back(i);
  auto start = [&](size_t i) { return reinterpret_cast<uintptr_t>(b.ops[i].buf); };
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return start(x) < start(y); });
  // Sweep by start address: the furthest-reaching buffer so far, and receive so far.
  size_t far_any = SIZE_MAX, far_recv = SIZE_MAX;
  auto end = [&](size_t i) { return start(i) + b.ops[i].bytes; };
  for (size_t i : order) {
    size_t other = SIZE_MAX;
    if (!b.ops[i].is_send && far_any != SIZE_MAX && start(i) < end(far_any)) other = far_any;
    if (b.ops[i].is_send && far_recv != SIZE_MAX && start(i) < end(far_recv)) other = far_recv;
    if (other != SIZE_MAX) {
      size_t lo = std::min(i, other), hi = std::max(i, other);
      fail(Status::invalid_argument, "ops[%zu].buf and ops[%zu].buf overlap and ops[%zu] is a receive; a receive's "
           "buffer must not overlap another buffer of the batch", lo, hi, b.ops[i].is_send ? other : i);
    }
    if (far_any == SIZE_MAX || end(i) > end(far_any)) far_any = i;
    if (!b.ops[i].is_send && (far_recv == SIZE_MAX || end(i) > end(far_recv))) far_recv = i;
  }
}

}  // namespace

namespace {

// Storage a blocking call reuses, per thread, so that a steady stream of blocking sends,
// receives and batches on host memory allocates nothing (tests/multiproc/alloc-budget.txt).
// run_p2p never nests: nothing it calls can call back into weft.
thread_local std::vector<gpu::BufferRef> scratch_refs;
thread_local OwnedOps scratch_posted;

// The batch a blocking call's arguments are checked into, emptied (storage reused per thread,
// as above; weft_send/weft_recv and weft_p2p_batch never nest, so they may share it).
P2PBatch& scratch_batch() {
  thread_local P2PBatch b;
  b.ops.clear();
  b.names.clear();
  return b;
}

// Posts every operation of `b` into `posted` (empty on entry). On a failed post the ones
// already posted are handed back (the unfinished to the graveyard) and the error goes on.
void post_all(Comm& c, const P2PBatch& b, OwnedOps& posted) {
  try {
    for (const gpu::P2POp& o : b.ops) {
      posted.push_back(take_pooled_op());
      post_user_p2p(c, *posted.back(), o.is_send, o.peer, o.buf, o.bytes);
    }
  } catch (...) {
    bury_unfinished(c, posted);
    throw;
  }
}

}  // namespace

void weft::capi::run_p2p(weft_comm* h, const char* what, const P2PBatch& b, void* stream, weft_request_t* request) {
  std::vector<gpu::BufferRef>& refs = scratch_refs;
  refs.clear();
  for (size_t i = 0; i < b.ops.size(); ++i) refs.push_back({b.ops[i].buf, b.ops[i].bytes, b.names[i].c_str()});
  if (gpu::route(*h->comm, stream, refs) == gpu::Route::device) {
    register_device_request(h, request, what, gpu::p2p(h->comm, what, b.ops, stream, request != nullptr));
    return;
  }
  Comm& c = *h->comm;
  c.throw_if_unusable();
  if (request) {  // the request owns its operations until weft_wait/weft_request_free
    OwnedOps posted;
    posted.reserve(b.ops.size());
    post_all(c, b, posted);
    auto r = std::make_unique<weft_request>();
    r->comm = h->comm;
    r->operation = what;
    r->ops = std::move(posted);
    *request = register_request(std::move(r));
    return;
  }
  OwnedOps& posted = scratch_posted;
  post_all(c, b, posted);
  try {
    wait_owned(c, posted, what);
  } catch (...) {
    bury_unfinished(c, posted);
    throw;
  }
  bury_unfinished(c, posted);  // all finished: back to this thread's pool
}

namespace {

weft_status_t post(const char* fn, bool is_send, void* buf, size_t count, const weft_dtype_t& dtype, int peer,
                   weft_comm_t comm, void* stream, weft_request_t* request) {
  return guarded(fn, [&] {
    if (request) *request = nullptr;
    weft_comm* h = lookup_comm(comm, "comm");
    P2PBatch& b = scratch_batch();
    add_op(b, *h->comm, is_send, buf, count, dtype, peer, "");
    run_p2p(h, is_send ? "send" : "recv", b, stream, request);
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

WEFT_API weft_status_t weft_p2p_batch(const weft_p2p_op_t* ops, size_t nops, weft_comm_t comm, void* stream,
                                      weft_request_t* request) {
  return guarded(__func__, [&] {
    if (request) *request = nullptr;
    weft_comm* h = lookup_comm(comm, "comm");
    if (!ops && nops) fail(Status::invalid_argument, "ops is NULL but nops = %zu; expected an array of nops operations", nops);
    P2PBatch& b = scratch_batch();
    for (size_t i = 0; i < nops; ++i) {
      const weft_p2p_op_t& o = ops[i];
      const std::string prefix = "ops[" + std::to_string(i) + "].";
      const int kind = enum_bits(o.kind);
      if (kind != WEFT_P2P_SEND && kind != WEFT_P2P_RECV) {
        fail(Status::invalid_argument, "ops[%zu].kind %d is not a weft_p2p_kind_t (expected %d = WEFT_P2P_SEND or "
             "%d = WEFT_P2P_RECV)", i, kind, WEFT_P2P_SEND, WEFT_P2P_RECV);
      }
      add_op(b, *h->comm, kind == WEFT_P2P_SEND, o.buf, o.count, o.dtype, o.peer, prefix);
    }
    check_batch_overlap(b);
    run_p2p(h, "p2p_batch", b, stream, request);
  });
}

}  // extern "C"
