// Tensor, sequence and context parallel communication (weft/training.h): weft_region_apply, a
// redistribution over one mesh dim (core/training/regions.h) run by the same code as
// weft_redistribute (sharded_run.h), and weft_ring_shift, one point-to-point batch over the
// dim's group run by the same code as weft_p2p_batch (p2p_run.h).
#include <string>

#include "capi/src/handles.h"
#include "capi/src/launch.h"
#include "capi/src/mesh_handles.h"
#include "capi/src/p2p_run.h"
#include "capi/src/sharded_run.h"
#include "capi/src/shim.h"
#include "capi/src/training_handles.h"
#include "capi/src/validate.h"
#include "core/training/regions.h"
#include "weft/training.h"

using namespace weft;
using namespace weft::capi;

namespace {

// A weft_tensor_t as a strided view; `arg` names it in messages ("in", "recv").
training::RegionTensor read_tensor(const weft_tensor_t* t, const char* arg) {
  if (!t) fail(Status::invalid_argument, "%s is NULL; expected a tensor view", arg);
  training::RegionTensor r;
  r.dtype = check_dtype(t->dtype, (std::string(arg) + "->dtype").c_str());
  if (t->ndim < 0 || t->ndim > WEFT_TENSOR_MAX_DIMS) {
    fail(Status::invalid_argument, "%s->ndim is %d; tensors have 0 to %d dims", arg, t->ndim, WEFT_TENSOR_MAX_DIMS);
  }
  if (t->ndim > 0 && !t->shape) fail(Status::invalid_argument, "%s->shape is NULL with ndim %d", arg, t->ndim);
  const int dev = enum_bits(t->device_type);
  if (dev != WEFT_DEVICE_CPU && dev != WEFT_DEVICE_CUDA && dev != WEFT_DEVICE_CUDA_HOST) {
    fail(Status::invalid_argument, "%s->device_type is %d; expected WEFT_DEVICE_CPU, _CUDA or _CUDA_HOST", arg, dev);
  }
  kernels::StridedView& v = r.view;
  v.elem = dtype_size(r.dtype);
  v.ndim = t->ndim;
  int64_t expect = 1;
  for (int k = t->ndim - 1; k >= 0; --k) {
    if (t->shape[k] < 0) {
      fail(Status::invalid_argument, "%s->shape[%d] is %lld; extents are >= 0", arg, k,
           static_cast<long long>(t->shape[k]));
    }
    const int64_t st = t->strides ? t->strides[k] : expect;
    if (st < 0) {
      fail(Status::invalid_argument, "%s->strides[%d] is %lld; strides are >= 0", arg, k, static_cast<long long>(st));
    }
    v.shape[k] = t->shape[k];
    v.strides[k] = st;
    expect *= t->shape[k];
  }
  if (v.numel() > 0 && !t->data) fail(Status::invalid_argument, "%s->data is NULL for a non-empty tensor", arg);
  v.base = static_cast<char*>(t->data) + t->byte_offset;
  r.on_device = dev == WEFT_DEVICE_CUDA;
  r.device = r.on_device ? t->device_id : -1;
  return r;
}

// The mesh and this rank's communicator along the dim called `dim` (a member's).
struct DimGroup {
  weft_mesh* mesh;
  int dim;
  weft_comm* comm;
};
DimGroup dim_group(weft_mesh_t mesh, const char* dim) {
  weft_mesh* m = lookup_mesh(mesh, "mesh");
  if (!m->mesh->member()) {
    fail(Status::invalid_argument, "mesh: this rank is not a member of the mesh (a descriptor), so it has no group "
         "along a mesh dim");
  }
  const int d = mesh_dim_named(*m->mesh, dim, "dim");
  return {m, d, m->groups[1u << d]};
}

// The number of elements of a contiguous view, refusing other strides (`arg` names it).
size_t contiguous_count(const kernels::StridedView& v, const char* arg, int rank) {
  int64_t expect = 1;
  for (int k = v.ndim - 1; k >= 0; --k) {
    if (v.shape[k] > 1 && v.strides[k] != expect) {
      fail(Status::invalid_argument,
           "%s is not contiguous on rank %d (strides[%d] is %lld, row-major needs %lld); a ring shift sends and "
           "receives whole contiguous buffers",
           arg, rank, k, static_cast<long long>(v.strides[k]), static_cast<long long>(expect));
    }
    expect *= v.shape[k];
  }
  return static_cast<size_t>(v.numel());
}

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_region_apply(weft_mesh_t mesh, const char* dim, weft_region_t region, int backward,
                                         int split_dim, const weft_tensor_t* in, const weft_tensor_t* out,
                                         void* stream, weft_request_t* request) {
  return guarded(__func__, [&] {
    if (request) *request = nullptr;
    const DimGroup g = dim_group(mesh, dim);
    const int r = enum_bits(region);
    if (r < 0 || r >= training::kNumRegions) {
      fail(Status::invalid_argument, "region %d is not a weft_region_t (expected 0..%d, WEFT_REGION_COPY .. "
           "WEFT_REGION_SEQ_REDUCE_SCATTER)", r, training::kNumRegions - 1);
    }
    if (backward != 0 && backward != 1) {
      fail(Status::invalid_argument, "backward is %d; expected 0 (the region's forward) or 1 (its backward)", backward);
    }
    const training::RegionTensor tin = read_tensor(in, "in");
    const training::RegionTensor tout = read_tensor(out, "out");
    const training::RegionOp op = training::region_op(static_cast<training::Region>(r), backward == 1);
    training::RegionCall call = training::make_region_call(g.mesh->mesh, g.dim, op, split_dim, tin, tout);
    if (op == training::RegionOp::identity && training::same_view(tin.view, tout.view)) {
      // Nothing moves; the memory rules still hold, and a request completes after the work
      // queued before it on the group, as every operation on it does.
      on_device_pair(*g.comm->comm, *call.in, "in", *call.out, "out", stream);
      launch(g.comm, request, "region_apply", [] {});
      return;
    }
    run_plan(g.comm, "region_apply", "region operation", std::move(call.in), "in", std::move(call.out), "out",
             std::move(call.plan), stream, request);
  });
}

WEFT_API weft_status_t weft_ring_shift(weft_mesh_t mesh, const char* dim, int shift, const weft_tensor_t* send,
                                       const weft_tensor_t* recv, void* stream, weft_request_t* request) {
  return guarded(__func__, [&] {
    if (request) *request = nullptr;
    const DimGroup g = dim_group(mesh, dim);
    const Comm& c = *g.comm->comm;
    const int rank = g.mesh->mesh->parent()->rank();
    const training::RegionTensor s = read_tensor(send, "send");
    const training::RegionTensor r = read_tensor(recv, "recv");
    if (s.dtype != r.dtype) {
      fail(Status::invalid_argument, "recv->dtype is %s but send->dtype is %s on rank %d; a ring shift keeps the dtype",
           dtype_name(r.dtype), dtype_name(s.dtype), rank);
    }
    const size_t scount = contiguous_count(s.view, "send", rank);
    const size_t rcount = contiguous_count(r.view, "recv", rank);
    const size_t elem = dtype_size(s.dtype);
    const int64_t k = c.size();
    const int64_t step = ((static_cast<int64_t>(shift) % k) + k) % k;  // any int, negative too
    if (step == 0 && scount != rcount) {
      fail(Status::invalid_argument,
           "recv has %zu elements but send has %zu on rank %d: shift %d is a multiple of the %lld ranks along '%s', so "
           "this rank receives its own send",
           rcount, scount, rank, shift, static_cast<long long>(k), dim);
    }
    const auto a = s.view.byte_span();
    const auto z = r.view.byte_span();
    if (a.first < a.second && z.first < z.second && a.first < z.second && z.first < a.second) {
      fail(Status::invalid_argument, "send and recv overlap on rank %d; recv is written while send is read", rank);
    }
    P2PBatch b;
    const int me = c.rank();
    b.ops.push_back({true, s.view.base, scount * elem, static_cast<int>((me + step) % k)});
    b.ops.push_back({false, r.view.base, rcount * elem, static_cast<int>((me - step + k) % k)});
    b.names = {"send", "recv"};
    run_p2p(g.comm, "ring_shift", b, stream, request);
  });
}

}  // extern "C"
