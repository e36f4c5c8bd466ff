// Collective entry points: validate every argument, route by where the buffers live
// (core/device/device_api.h: device memory -> NCCL or staging, host memory -> the core
// algorithm), then run through launch() / launch_device() (blocking or as a request).
#include "capi/src/handles.h"
#include "capi/src/launch.h"
#include "capi/src/shim.h"
#include "capi/src/validate.h"
#include "core/collectives/collectives.h"
#include "core/device/device_api.h"

using namespace weft;
using namespace weft::capi;

namespace {

const char* bytes_at(const void* base, size_t bytes) { return static_cast<const char*>(base) + bytes; }

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_allreduce(const void* sendbuf, void* recvbuf, size_t count, weft_dtype_t dtype,
                                      weft_op_t op, weft_comm_t comm, void* stream, weft_request_t* request) {
  return guarded(__func__, [&] {
    weft_comm* h = lookup_comm(comm, "comm");
    DType d = check_dtype(dtype);
    ReduceOp o = check_op(op, d);
    size_t bytes = check_bytes(count, d, "count");
    check_buffer(sendbuf, bytes, "sendbuf");
    check_buffer(recvbuf, bytes, "recvbuf");
    check_no_overlap(sendbuf, bytes, recvbuf, bytes, sendbuf == recvbuf, "sendbuf == recvbuf");
    Comm* c = h->comm.get();
    if (on_device(h, stream, {{sendbuf, bytes, "sendbuf"}, {recvbuf, bytes, "recvbuf"}})) {
      return launch_device(h, request, "allreduce", stream,
                           [=](gpu::Launch& l) { gpu::allreduce(l, sendbuf, recvbuf, count, d, o); });
    }
    launch(h, request, "allreduce", [=] { coll::allreduce(*c, sendbuf, recvbuf, count, d, o); });
  });
}

WEFT_API weft_status_t weft_broadcast(void* buf, size_t count, weft_dtype_t dtype, int root, weft_comm_t comm,
                                      void* stream, weft_request_t* request) {
  return guarded(__func__, [&] {
    weft_comm* h = lookup_comm(comm, "comm");
    DType d = check_dtype(dtype);
    check_rank(root, h->comm->size(), "root");
    size_t bytes = check_bytes(count, d, "count");
    check_buffer(buf, bytes, "buf");
    Comm* c = h->comm.get();
    if (on_device(h, stream, {{buf, bytes, "buf"}})) {
      return launch_device(h, request, "broadcast", stream,
                           [=](gpu::Launch& l) { gpu::broadcast(l, buf, count, d, root); });
    }
    launch(h, request, "broadcast", [=] { coll::broadcast(*c, buf, count, d, root); });
  });
}

WEFT_API weft_status_t weft_reduce(const void* sendbuf, void* recvbuf, size_t count, weft_dtype_t dtype, weft_op_t op,
                                   int root, weft_comm_t comm, void* stream, weft_request_t* request) {
  return guarded(__func__, [&] {
    weft_comm* h = lookup_comm(comm, "comm");
    DType d = check_dtype(dtype);
    ReduceOp o = check_op(op, d);
    check_rank(root, h->comm->size(), "root");
    size_t bytes = check_bytes(count, d, "count");
    check_buffer(sendbuf, bytes, "sendbuf");
    if (h->comm->rank() == root) {
      check_buffer(recvbuf, bytes, "recvbuf (at the root)");
      check_no_overlap(sendbuf, bytes, recvbuf, bytes, sendbuf == recvbuf, "sendbuf == recvbuf");
    }
    Comm* c = h->comm.get();
    const size_t rbytes = c->rank() == root ? bytes : 0;  // recvbuf is used at the root only
    if (on_device(h, stream, {{sendbuf, bytes, "sendbuf"}, {recvbuf, rbytes, "recvbuf"}})) {
      return launch_device(h, request, "reduce", stream,
                           [=](gpu::Launch& l) { gpu::reduce(l, sendbuf, recvbuf, count, d, o, root); });
    }
    launch(h, request, "reduce", [=] { coll::reduce(*c, sendbuf, recvbuf, count, d, o, root); });
  });
}

WEFT_API weft_status_t weft_allgather(const void* sendbuf, void* recvbuf, size_t sendcount, weft_dtype_t dtype,
                                      weft_comm_t comm, void* stream, weft_request_t* request) {
  return guarded(__func__, [&] {
    weft_comm* h = lookup_comm(comm, "comm");
    DType d = check_dtype(dtype);
    const int n = h->comm->size(), rank = h->comm->rank();
    size_t bytes = check_bytes(sendcount, d, "sendcount");
    size_t total = check_bytes_times(sendcount, static_cast<size_t>(n), d, "sendcount x nranks");
    check_buffer(sendbuf, bytes, "sendbuf");
    check_buffer(recvbuf, total, "recvbuf");
    bool in_place = sendbuf == bytes_at(recvbuf, bytes * static_cast<size_t>(rank));
    check_no_overlap(sendbuf, bytes, recvbuf, total, in_place, "sendbuf == recvbuf + rank * sendcount");
    Comm* c = h->comm.get();
    if (on_device(h, stream, {{sendbuf, bytes, "sendbuf"}, {recvbuf, total, "recvbuf"}})) {
      return launch_device(h, request, "allgather", stream,
                           [=](gpu::Launch& l) { gpu::allgather(l, sendbuf, recvbuf, sendcount, d); });
    }
    launch(h, request, "allgather", [=] { coll::allgather(*c, sendbuf, recvbuf, sendcount, d); });
  });
}

WEFT_API weft_status_t weft_allgatherv(const void* sendbuf, size_t sendcount, void* recvbuf, const size_t* recvcounts,
                                       const size_t* displs, weft_dtype_t dtype, weft_comm_t comm, void* stream,
                                       weft_request_t* request) {
  return guarded(__func__, [&] {
    weft_comm* h = lookup_comm(comm, "comm");
    DType d = check_dtype(dtype);
    const int n = h->comm->size(), rank = h->comm->rank();
    // Per-thread storage: a blocking call on host memory allocates nothing (alloc-budget.txt);
    // device work and requests take copies of their own.
    thread_local std::vector<size_t> counts, disp;
    copy_counts(counts, recvcounts, n, "recvcounts");
    copy_counts(disp, displs, n, "displs");
    if (counts[static_cast<size_t>(rank)] != sendcount) {
      fail(Status::invalid_argument, "sendcount = %zu but recvcounts[%d] = %zu; they must be equal", sendcount, rank,
           counts[static_cast<size_t>(rank)]);
    }
    size_t bytes = check_bytes(sendcount, d, "sendcount");
    size_t total = check_bytes(extent_of(counts, disp, d, "recvcounts/displs"), d, "recvcounts/displs");
    check_buffer(sendbuf, bytes, "sendbuf");
    check_buffer(recvbuf, total, "recvbuf");
    bool in_place = sendbuf == bytes_at(recvbuf, disp[static_cast<size_t>(rank)] * dtype_size(d));
    check_no_overlap(sendbuf, bytes, recvbuf, total, in_place, "sendbuf == recvbuf + displs[rank]");
    Comm* c = h->comm.get();
    if (on_device(h, stream, {{sendbuf, bytes, "sendbuf"}, {recvbuf, total, "recvbuf"}})) {
      return launch_device(h, request, "allgatherv", stream, [=, counts = counts, disp = disp](gpu::Launch& l) {
        gpu::allgatherv(l, sendbuf, sendcount, recvbuf, counts, disp, d);
      });
    }
    if (!request) {
      // By reference to this thread's storage: the executor may run a blocking call's work on its
      // own thread (behind queued requests), where the name would find that thread's copy. The
      // caller waits, so the references outlive the work.
      launch(h, request, "allgatherv", [&, &counts = counts, &disp = disp] {
        coll::allgatherv(*c, sendbuf, sendcount, recvbuf, counts, disp, d);
      });
      return;
    }
    launch(h, request, "allgatherv", [=, counts = counts, disp = disp] {
      coll::allgatherv(*c, sendbuf, sendcount, recvbuf, counts, disp, d);
    });
  });
}

WEFT_API weft_status_t weft_reduce_scatter(const void* sendbuf, void* recvbuf, size_t recvcount, weft_dtype_t dtype,
                                           weft_op_t op, weft_comm_t comm, void* stream, weft_request_t* request) {
  return guarded(__func__, [&] {
    weft_comm* h = lookup_comm(comm, "comm");
    DType d = check_dtype(dtype);
    ReduceOp o = check_op(op, d);
    const int n = h->comm->size(), rank = h->comm->rank();
    size_t bytes = check_bytes(recvcount, d, "recvcount");
    size_t total = check_bytes_times(recvcount, static_cast<size_t>(n), d, "recvcount x nranks");
    check_buffer(sendbuf, total, "sendbuf");
    check_buffer(recvbuf, bytes, "recvbuf");
    bool in_place = recvbuf == bytes_at(sendbuf, bytes * static_cast<size_t>(rank));
    check_no_overlap(sendbuf, total, recvbuf, bytes, in_place, "recvbuf == sendbuf + rank * recvcount");
    Comm* c = h->comm.get();
    if (on_device(h, stream, {{sendbuf, total, "sendbuf"}, {recvbuf, bytes, "recvbuf"}})) {
      return launch_device(h, request, "reduce_scatter", stream,
                           [=](gpu::Launch& l) { gpu::reduce_scatter(l, sendbuf, recvbuf, recvcount, d, o); });
    }
    launch(h, request, "reduce_scatter", [=] { coll::reduce_scatter(*c, sendbuf, recvbuf, recvcount, d, o); });
  });
}

WEFT_API weft_status_t weft_alltoall(const void* sendbuf, void* recvbuf, size_t count, weft_dtype_t dtype,
                                     weft_comm_t comm, void* stream, weft_request_t* request) {
  return guarded(__func__, [&] {
    weft_comm* h = lookup_comm(comm, "comm");
    DType d = check_dtype(dtype);
    size_t total = check_bytes_times(count, static_cast<size_t>(h->comm->size()), d, "count x nranks");
    check_buffer(sendbuf, total, "sendbuf");
    check_buffer(recvbuf, total, "recvbuf");
    check_no_overlap(sendbuf, total, recvbuf, total, sendbuf == recvbuf, "sendbuf == recvbuf");
    Comm* c = h->comm.get();
    if (on_device(h, stream, {{sendbuf, total, "sendbuf"}, {recvbuf, total, "recvbuf"}})) {
      return launch_device(h, request, "alltoall", stream,
                           [=](gpu::Launch& l) { gpu::alltoall(l, sendbuf, recvbuf, count, d); });
    }
    launch(h, request, "alltoall", [=] { coll::alltoall(*c, sendbuf, recvbuf, count, d); });
  });
}

WEFT_API weft_status_t weft_alltoallv(const void* sendbuf, const size_t* sendcounts, const size_t* sdispls,
                                      void* recvbuf, const size_t* recvcounts, const size_t* rdispls,
                                      weft_dtype_t dtype, weft_comm_t comm, void* stream, weft_request_t* request) {
  return guarded(__func__, [&] {
    weft_comm* h = lookup_comm(comm, "comm");
    DType d = check_dtype(dtype);
    const int n = h->comm->size();
    // Per-thread storage, as in weft_allgatherv.
    thread_local std::vector<size_t> sc, sd, rc, rd;
    copy_counts(sc, sendcounts, n, "sendcounts");
    copy_counts(sd, sdispls, n, "sdispls");
    copy_counts(rc, recvcounts, n, "recvcounts");
    copy_counts(rd, rdispls, n, "rdispls");
    size_t sbytes = check_bytes(extent_of(sc, sd, d, "sendcounts/sdispls"), d, "sendcounts/sdispls");
    size_t rbytes = check_bytes(extent_of(rc, rd, d, "recvcounts/rdispls"), d, "recvcounts/rdispls");
    check_buffer(sendbuf, sbytes, "sendbuf");
    check_buffer(recvbuf, rbytes, "recvbuf");
    check_no_overlap(sendbuf, sbytes, recvbuf, rbytes, sendbuf == recvbuf, "sendbuf == recvbuf");
    Comm* c = h->comm.get();
    if (on_device(h, stream, {{sendbuf, sbytes, "sendbuf"}, {recvbuf, rbytes, "recvbuf"}})) {
      return launch_device(h, request, "alltoallv", stream,
                           [=, sc = sc, sd = sd, rc = rc, rd = rd](gpu::Launch& l) {
                             gpu::alltoallv(l, sendbuf, sc, sd, recvbuf, rc, rd, d);
                           });
    }
    if (!request) {  // by reference to this thread's storage, as in weft_allgatherv
      launch(h, request, "alltoallv", [&, &sc = sc, &sd = sd, &rc = rc, &rd = rd] {
        coll::alltoallv(*c, sendbuf, sc, sd, recvbuf, rc, rd, d);
      });
      return;
    }
    launch(h, request, "alltoallv", [=, sc = sc, sd = sd, rc = rc, rd = rd] {
      coll::alltoallv(*c, sendbuf, sc, sd, recvbuf, rc, rd, d);
    });
  });
}

WEFT_API weft_status_t weft_gather(const void* sendbuf, void* recvbuf, size_t count, weft_dtype_t dtype, int root,
                                   weft_comm_t comm, void* stream, weft_request_t* request) {
  return guarded(__func__, [&] {
    weft_comm* h = lookup_comm(comm, "comm");
    DType d = check_dtype(dtype);
    check_rank(root, h->comm->size(), "root");
    size_t bytes = check_bytes(count, d, "count");
    size_t total = check_bytes_times(count, static_cast<size_t>(h->comm->size()), d, "count x nranks");
    check_buffer(sendbuf, bytes, "sendbuf");
    if (h->comm->rank() == root) {
      check_buffer(recvbuf, total, "recvbuf (at the root)");
      bool in_place = sendbuf == bytes_at(recvbuf, bytes * static_cast<size_t>(root));
      check_no_overlap(sendbuf, bytes, recvbuf, total, in_place, "sendbuf == recvbuf + root * count at the root");
    }
    Comm* c = h->comm.get();
    const size_t rtotal = c->rank() == root ? total : 0;  // recvbuf is used at the root only
    if (on_device(h, stream, {{sendbuf, bytes, "sendbuf"}, {recvbuf, rtotal, "recvbuf"}})) {
      return launch_device(h, request, "gather", stream,
                           [=](gpu::Launch& l) { gpu::gather(l, sendbuf, recvbuf, count, d, root); });
    }
    launch(h, request, "gather", [=] { coll::gather(*c, sendbuf, recvbuf, count, d, root); });
  });
}

WEFT_API weft_status_t weft_scatter(const void* sendbuf, void* recvbuf, size_t count, weft_dtype_t dtype, int root,
                                    weft_comm_t comm, void* stream, weft_request_t* request) {
  return guarded(__func__, [&] {
    weft_comm* h = lookup_comm(comm, "comm");
    DType d = check_dtype(dtype);
    check_rank(root, h->comm->size(), "root");
    size_t bytes = check_bytes(count, d, "count");
    size_t total = check_bytes_times(count, static_cast<size_t>(h->comm->size()), d, "count x nranks");
    check_buffer(recvbuf, bytes, "recvbuf");
    if (h->comm->rank() == root) {
      check_buffer(sendbuf, total, "sendbuf (at the root)");
      bool in_place = recvbuf == bytes_at(sendbuf, bytes * static_cast<size_t>(root));
      check_no_overlap(sendbuf, total, recvbuf, bytes, in_place, "recvbuf == sendbuf + root * count at the root");
    }
    Comm* c = h->comm.get();
    const size_t stotal = c->rank() == root ? total : 0;  // sendbuf is used at the root only
    if (on_device(h, stream, {{sendbuf, stotal, "sendbuf"}, {recvbuf, bytes, "recvbuf"}})) {
      return launch_device(h, request, "scatter", stream,
                           [=](gpu::Launch& l) { gpu::scatter(l, sendbuf, recvbuf, count, d, root); });
    }
    launch(h, request, "scatter", [=] { coll::scatter(*c, sendbuf, recvbuf, count, d, root); });
  });
}

WEFT_API weft_status_t weft_barrier(weft_comm_t comm, void* stream, weft_request_t* request) {
  return guarded(__func__, [&] {
    weft_comm* h = lookup_comm(comm, "comm");
    Comm* c = h->comm.get();
    if (on_device(h, stream, {})) {
      return launch_device(h, request, "barrier", stream, [](gpu::Launch& l) { gpu::barrier(l); });
    }
    launch(h, request, "barrier", [=] { coll::barrier(*c); });
  });
}

WEFT_API weft_status_t weft_dtype_size(weft_dtype_t dtype, size_t* size) {
  return guarded(__func__, [&] {
    check_out(size, "size");
    *size = 0;
    *size = dtype_size(check_dtype(dtype));
  });
}

}  // extern "C"
