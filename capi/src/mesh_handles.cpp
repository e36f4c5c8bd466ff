#include "capi/src/mesh_handles.h"

#include "capi/src/registry.h"
#include "capi/src/shim.h"
#include "capi/src/validate.h"
#include "core/common/status.h"

namespace weft::capi {
namespace {

// Leaked on purpose, like the communicator registry.
auto& meshes() {
  static auto* r = new Registry<weft_mesh, kMeshMagic>("a mesh from weft_mesh_create", "a live mesh", "destroyed");
  return *r;
}
auto& shardeds() {
  static auto* r = new Registry<weft_sharded, kShardedMagic>("a sharded tensor from weft_sharded_create",
                                                             "a live sharded tensor", "destroyed");
  return *r;
}

}  // namespace

weft_mesh_t register_mesh(std::unique_ptr<weft_mesh> m) { return meshes().add(std::move(m)); }
weft_mesh* lookup_mesh(weft_mesh_t h, const char* arg) { return meshes().find(h, arg); }
void unregister_mesh(weft_mesh_t h) { meshes().remove(h); }

weft_sharded_t register_sharded(std::unique_ptr<weft_sharded> s) { return shardeds().add(std::move(s)); }
weft_sharded* lookup_sharded(weft_sharded_t h, const char* arg) { return shardeds().find(h, arg); }
void unregister_sharded(weft_sharded_t h) { shardeds().remove(h); }

shard::Layout read_layout(const weft_placement_t* placements, int ndims, int tensor_ndim) {
  if (!placements) fail(Status::invalid_argument, "placements is NULL; expected one placement per mesh dim");
  shard::Layout layout(static_cast<size_t>(ndims));
  for (int m = 0; m < ndims; ++m) {
    const weft_placement_t& p = placements[m];
    const int kind = enum_bits(p.kind);
    if (kind < WEFT_REPLICATE || kind > WEFT_PARTIAL) {
      fail(Status::invalid_argument, "placements[%d].kind is %d; expected WEFT_REPLICATE, WEFT_SHARD or WEFT_PARTIAL",
           m, kind);
    }
    shard::Placement& q = layout[static_cast<size_t>(m)];
    q.kind = static_cast<shard::Kind>(kind);
    if (q.is_shard()) q.dim = p.dim;
    if (q.is_partial()) {
      const int op = enum_bits(p.op);
      if (op >= WEFT_PLUGIN_ID_BASE) {
        fail(Status::unsupported, "placements[%d].op is %d, a custom reduction operator; a Partial placement "
             "takes the built-in operators only: making a Partial tensor fills the other ranks' terms with the "
             "operator's identity (0 for sum, 1 for prod, ...), which weft cannot know for a custom operator", m, op);
      }
      if (!op_valid(op)) fail(Status::invalid_argument, "placements[%d].op is %d; not a weft_op_t", m, op);
      q.op = static_cast<ReduceOp>(op);
    }
  }
  shard::validate(layout, tensor_ndim);
  return layout;
}

shard::Shape read_shape(int ndim, const int64_t* shape, const char* arg) {
  if (ndim < 0 || ndim > WEFT_TENSOR_MAX_DIMS) {
    fail(Status::invalid_argument, "ndim is %d; tensors have 0 to %d dims", ndim, WEFT_TENSOR_MAX_DIMS);
  }
  if (ndim > 0 && !shape) fail(Status::invalid_argument, "%s is NULL with ndim %d", arg, ndim);
  shard::Shape s(static_cast<size_t>(ndim));
  for (int d = 0; d < ndim; ++d) {
    if (shape[d] < 0) fail(Status::invalid_argument, "%s[%d] is %lld; extents are >= 0", arg, d,
                           static_cast<long long>(shape[d]));
    s[static_cast<size_t>(d)] = shape[d];
  }
  return s;
}

void read_local_view(const weft_tensor_t* local, shard::Sharded& t, const char* arg, weft_sharded& out) {
  const DType dtype = t.dtype;
  const shard::Box box = t.box_of(-1);
  if (!local) fail(Status::invalid_argument, "%s is NULL; a member of the mesh passes its local piece", arg);
  const int ndim = static_cast<int>(box.shape.size());
  const DType d = check_dtype(local->dtype, "local->dtype");
  if (d != dtype) {
    fail(Status::invalid_argument, "%s->dtype is %s but the tensor's dtype is %s", arg, dtype_name(d),
         dtype_name(dtype));
  }
  if (local->ndim != ndim) {
    fail(Status::invalid_argument, "%s->ndim is %d but the tensor has %d dims", arg, local->ndim, ndim);
  }
  if (ndim > 0 && !local->shape) fail(Status::invalid_argument, "%s->shape is NULL", arg);
  for (int k = 0; k < ndim; ++k) {
    if (local->shape[k] != box.shape[static_cast<size_t>(k)]) {
      std::string want, got;
      for (int j = 0; j < ndim; ++j) {
        want += (j ? "," : "") + std::to_string(box.shape[static_cast<size_t>(j)]);
        got += (j ? "," : "") + std::to_string(local->shape[j]);
      }
      fail(Status::invalid_argument, "%s->shape is [%s] but this rank's piece in the layout is [%s]", arg,
           got.c_str(), want.c_str());
    }
  }
  const int dev = enum_bits(local->device_type);
  if (dev != WEFT_DEVICE_CPU && dev != WEFT_DEVICE_CUDA && dev != WEFT_DEVICE_CUDA_HOST) {
    fail(Status::invalid_argument, "%s->device_type is %d; expected WEFT_DEVICE_CPU, _CUDA or _CUDA_HOST", arg, dev);
  }
  const size_t elem = dtype_size(dtype);
  kernels::StridedView v;
  v.elem = elem;
  v.ndim = ndim;
  int64_t numel = 1;
  int64_t expect = 1;
  for (int k = ndim - 1; k >= 0; --k) {
    v.shape[k] = local->shape[k];
    const int64_t st = local->strides ? local->strides[k] : expect;
    if (st < 0) fail(Status::invalid_argument, "%s->strides[%d] is %lld; strides are >= 0", arg, k,
                     static_cast<long long>(st));
    v.strides[k] = st;
    expect *= local->shape[k];
    numel *= local->shape[k];
  }
  if (numel > 0 && !local->data) fail(Status::invalid_argument, "%s->data is NULL for a non-empty piece", arg);
  v.base = static_cast<char*>(local->data) + local->byte_offset;
  t.local = v;
  t.on_device = dev == WEFT_DEVICE_CUDA;
  t.device = t.on_device ? local->device_id : -1;
  out.view = *local;
  for (int k = 0; k < ndim; ++k) {
    out.shape[static_cast<size_t>(k)] = local->shape[k];
    out.strides[static_cast<size_t>(k)] = v.strides[k];
  }
  out.has_strides = local->strides != nullptr;
  out.view.shape = out.shape.data();
  out.view.strides = out.has_strides ? out.strides.data() : nullptr;
}

void check_writable(const shard::Sharded& t, const char* arg) {
  const kernels::StridedView& v = t.local;
  if (v.numel() == 0) return;
  for (int k = 0; k < v.ndim; ++k) {
    if (v.strides[k] == 0 && v.shape[k] > 1) {
      fail(Status::invalid_argument,
           "%s ('%s') has stride 0 on dim %d (extent %lld): weft writes it, and its elements would share addresses",
           arg, t.name.c_str(), k, static_cast<long long>(v.shape[k]));
    }
  }
}

}  // namespace weft::capi
