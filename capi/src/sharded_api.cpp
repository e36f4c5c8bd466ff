// Sharded tensors and redistribution (weft/mesh.h): argument checks, then core/sharding.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>

#include "capi/src/handles.h"
#include "capi/src/mesh_handles.h"
#include "capi/src/sharded_run.h"
#include "capi/src/shim.h"
#include "capi/src/validate.h"
#include "core/sharding/plan.h"

using namespace weft;
using namespace weft::capi;

namespace {

std::string shape_text(const shard::Shape& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
  return t + "]";
}

// The two sides of a redistribution, checked: one tensor, meshes of one parent.
void check_pair(const shard::Sharded& s, const shard::Sharded& d) {
  if (s.global != d.global) {
    fail(Status::invalid_argument, "src ('%s') has global shape %s but dst ('%s') has %s; they must describe one tensor",
         s.name.c_str(), shape_text(s.global).c_str(), d.name.c_str(), shape_text(d.global).c_str());
  }
  if (s.dtype != d.dtype) {
    fail(Status::invalid_argument, "src ('%s') is %s but dst ('%s') is %s", s.name.c_str(), dtype_name(s.dtype),
         d.name.c_str(), dtype_name(d.dtype));
  }
  if (s.mesh != d.mesh && s.mesh->parent() != d.mesh->parent()) {
    fail(Status::invalid_argument,
         "src's and dst's meshes were made from different parent communicators; a redistribution between two meshes "
         "needs both made from one communicator");
  }
  const auto a = s.local.byte_span();
  const auto b = d.local.byte_span();
  if (a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second) {
    fail(Status::invalid_argument, "src's and dst's local memory overlap; redistribution writes dst while reading src");
  }
}

// The plan from s into d: made once per (source, destination) pair of handles and kept in d.
std::shared_ptr<const shard::Plan> cached_plan(const weft_sharded& s, weft_sharded& d) {
  std::lock_guard<std::mutex> lock(d.plans->mutex);
  if (!d.plans->plan || d.plans->src_serial != s.serial) {
    d.plans->plan = std::make_shared<const shard::Plan>(shard::make_plan(*s.tensor, *d.tensor));
    d.plans->src_serial = s.serial;
  }
  return d.plans->plan;
}

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_sharded_create(weft_mesh_t mesh, int ndim, const int64_t* global_shape, weft_dtype_t dtype,
                                           const weft_placement_t* placements, const weft_tensor_t* local,
                                           const weft_sharded_config_t* config, weft_sharded_t* tensor) {
  return guarded(__func__, [&] {
    check_out(tensor, "tensor");
    *tensor = nullptr;
    weft_mesh* m = lookup_mesh(mesh, "mesh");
    if (config && (config->struct_size < sizeof(size_t) || config->struct_size > sizeof(weft_sharded_config_t))) {
      fail(Status::invalid_argument, "config->struct_size is %zu; initialise it with WEFT_SHARDED_CONFIG_INIT",
           config->struct_size);
    }
    auto h = std::make_unique<weft_sharded>();
    static std::atomic<uint64_t> serials{0};
    h->serial = ++serials;
    auto made = std::make_shared<shard::Sharded>();
    shard::Sharded& t = *made;
    t.mesh = m->mesh;
    t.global = read_shape(ndim, global_shape, "global_shape");
    t.dtype = check_dtype(dtype);
    t.layout = read_layout(placements, m->mesh->ndims(), ndim);
    if (config && config->struct_size >= offsetof(weft_sharded_config_t, name) + sizeof(char*) && config->name) {
      t.name = config->name;
    }
    if (m->mesh->member()) {
      read_local_view(local, t, "local", *h);
    } else if (local) {
      fail(Status::invalid_argument, "local is not NULL but this rank is not a member of the mesh; a descriptor "
           "tensor has no local piece");
    }
    h->tensor = std::move(made);
    *tensor = register_sharded(std::move(h));
  });
}

WEFT_API weft_status_t weft_sharded_destroy(weft_sharded_t tensor) {
  if (!tensor) return WEFT_OK;
  return guarded(__func__, [&] {
    lookup_sharded(tensor, "tensor");
    unregister_sharded(tensor);
  });
}

WEFT_API weft_status_t weft_sharded_local(weft_sharded_t tensor, weft_tensor_t* local) {
  return guarded(__func__, [&] {
    weft_sharded* h = lookup_sharded(tensor, "tensor");
    check_out(local, "local");
    *local = h->view;
  });
}

WEFT_API weft_status_t weft_sharded_set_local(weft_sharded_t tensor, const weft_tensor_t* local) {
  return guarded(__func__, [&] {
    weft_sharded* h = lookup_sharded(tensor, "tensor");
    if (!h->tensor->mesh->member()) {
      fail(Status::invalid_argument, "tensor is a descriptor (this rank is not a member of its mesh): no local piece");
    }
    // A new object, so a redistribution already queued keeps the view it was issued with; the
    // handle changes only once the view is checked.
    auto t = std::make_shared<shard::Sharded>(*h->tensor);
    weft_sharded next;
    read_local_view(local, *t, "local", next);
    h->tensor = std::move(t);
    h->view = next.view;
    h->shape = next.shape;
    h->strides = next.strides;
    h->has_strides = next.has_strides;
    h->view.shape = h->shape.data();
    h->view.strides = h->has_strides ? h->strides.data() : nullptr;
  });
}

WEFT_API weft_status_t weft_redistribute(weft_sharded_t src, weft_sharded_t dst, void* stream,
                                         weft_request_t* request) {
  return guarded(__func__, [&] {
    if (request) *request = nullptr;
    weft_sharded* s = lookup_sharded(src, "src");
    weft_sharded* d = lookup_sharded(dst, "dst");
    check_pair(*s->tensor, *d->tensor);
    check_writable(*d->tensor, "dst");
    // Shared, never changed in place: later set_local calls do not reach queued work.
    std::shared_ptr<const shard::Sharded> sa = s->tensor;
    std::shared_ptr<const shard::Sharded> sb = d->tensor;
    const shard::Sharded& a = *sa;
    const shard::Sharded& b = *sb;
    if (!a.mesh->member() && !b.mesh->member()) return;  // not involved
    // Where the work runs: the mesh's own communicator, or between meshes the parent's.
    std::shared_ptr<Comm> anchor = a.mesh == b.mesh ? a.mesh->whole() : a.mesh->parent();
    weft_comm proxy{kCommMagic, anchor, true};
    run_plan(&proxy, "redistribute", "redistribution", std::move(sa), "src", std::move(sb), "dst",
             cached_plan(*s, *d), stream, request);
  });
}

WEFT_API weft_status_t weft_redistribute_plan(weft_sharded_t src, weft_sharded_t dst, weft_redistribute_step_t* steps,
                                              size_t capacity, size_t* nsteps) {
  return guarded(__func__, [&] {
    weft_sharded* s = lookup_sharded(src, "src");
    weft_sharded* d = lookup_sharded(dst, "dst");
    check_out(nsteps, "nsteps");
    check_pair(*s->tensor, *d->tensor);
    const shard::Plan plan = shard::make_plan(*s->tensor, *d->tensor);
    *nsteps = plan.steps.size();
    if (!steps) return;
    auto to_c = [](const shard::Placement& p) {
      weft_placement_t c{};
      c.kind = static_cast<weft_placement_kind_t>(p.kind);
      c.dim = p.is_shard() ? p.dim : 0;
      c.op = static_cast<weft_op_t>(p.is_partial() ? p.op : ReduceOp::sum);
      return c;
    };
    for (size_t i = 0; i < std::min(capacity, plan.steps.size()); ++i) {
      const shard::Step& st = plan.steps[i];
      weft_redistribute_step_t& o = steps[i];
      o.kind = static_cast<weft_redistribute_kind_t>(st.kind);
      o.mesh_dim = st.mesh_dim;
      o.from = to_c(st.from);
      o.to = to_c(st.to);
      o.bytes_sent = st.bytes_sent;
      o.max_bytes_sent = st.max_bytes_sent;
    }
  });
}

}  // extern "C"
