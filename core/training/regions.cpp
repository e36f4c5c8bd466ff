#include "core/training/regions.h"

#include <string>

#include "core/common/status.h"

namespace weft::training {
namespace {

std::string shape_text(const int64_t* s, int n) {
  std::string t = "[";
  for (int i = 0; i < n; ++i) {
    if (i) t.push_back(',');
    t.append(std::to_string(s[i]));
  }
  t.push_back(']');
  return t;
}
std::string shape_text(const shard::Shape& s) { return shape_text(s.data(), static_cast<int>(s.size())); }

shard::Placement placement(shard::Kind kind, int split_dim) {
  shard::Placement p;
  p.kind = kind;
  if (kind == shard::Kind::shard) p.dim = split_dim;
  if (kind == shard::Kind::partial) p.op = ReduceOp::sum;
  return p;
}

// What in and out hold along the mesh dim, and the step between them.
struct Transition {
  shard::Kind from, to;
  shard::StepKind step;
};
Transition transition_of(RegionOp op) {
  using K = shard::Kind;
  using S = shard::StepKind;
  switch (op) {
    case RegionOp::identity: return {K::replicate, K::replicate, S::local};
    case RegionOp::allreduce: return {K::partial, K::replicate, S::allreduce};
    case RegionOp::keep_chunk: return {K::replicate, K::shard, S::local};
    case RegionOp::allgather: return {K::shard, K::replicate, S::allgather};
    case RegionOp::reduce_scatter: return {K::partial, K::shard, S::reduce_scatter};
  }
  fail(Status::internal, "region op %d", static_cast<int>(op));
}

// Where the shape messages say who this rank is.
struct Who {
  const mesh::Mesh& mesh;
  int dim;
  std::string text() const {
    const auto d = static_cast<size_t>(dim);
    return format("rank %d, coordinate %d of %d along mesh dim '%s'", mesh.parent()->rank(), mesh.coords()[d],
                  mesh.shape()[d], mesh.names()[d].c_str());
  }
};

bool same_shape(const kernels::StridedView& v, const shard::Shape& s) {
  for (int k = 0; k < v.ndim; ++k) {
    if (v.shape[k] != s[static_cast<size_t>(k)]) return false;
  }
  return true;
}

// The shape each side must have; fails naming the side that differs, the expected and the
// actual shape, and this rank.
void check_shapes(const Who& who, RegionOp op, int split_dim, const RegionTensor& in, const RegionTensor& out,
                  const shard::Box& in_box, const shard::Box& out_box) {
  const int nd = in.view.ndim;
  const std::string in_text = shape_text(in.view.shape, nd);
  const std::string out_text = shape_text(out.view.shape, nd);
  if (op == RegionOp::allgather) {
    // out is the whole tensor (it gave the global shape): in's dims but split_dim's extent.
    const auto sd = static_cast<size_t>(split_dim);
    shard::Shape want(in.view.shape, in.view.shape + nd);
    want[sd] = out.view.shape[split_dim];
    if (!same_shape(out.view, want)) {
      fail(Status::invalid_argument,
           "out has shape %s but expected %s: an all-gather along split_dim %d keeps every other dim of in %s (%s)",
           out_text.c_str(), shape_text(want).c_str(), split_dim, in_text.c_str(), who.text().c_str());
    }
    if (!same_shape(in.view, in_box.shape)) {
      fail(Status::invalid_argument,
           "in has shape %s but expected %s: this rank's chunk along split_dim %d of out %s (%lld elements over %d "
           "ranks, torch.chunk's rule); in or out has the wrong extent (%s)",
           in_text.c_str(), shape_text(in_box.shape).c_str(), split_dim, out_text.c_str(),
           static_cast<long long>(out.view.shape[split_dim]), who.mesh.shape()[static_cast<size_t>(who.dim)],
           who.text().c_str());
    }
    return;
  }
  // in is the whole tensor (it gave the global shape); out is what the op makes of it.
  if (!same_shape(out.view, out_box.shape)) {
    const std::string role =
        region_splits(op)
            ? format("this rank's chunk along split_dim %d of in %s for a %s (chunks of ceil(%lld / %d), torch.chunk's "
                     "rule)",
                     split_dim, in_text.c_str(), region_op_name(op),
                     static_cast<long long>(in.view.shape[split_dim]), who.mesh.shape()[static_cast<size_t>(who.dim)])
            : format("in's shape: %s keeps it", region_op_name(op));
    fail(Status::invalid_argument, "out has shape %s but expected %s, %s (%s)", out_text.c_str(),
         shape_text(out_box.shape).c_str(), role.c_str(), who.text().c_str());
  }
}

std::shared_ptr<const shard::Sharded> side(const std::shared_ptr<mesh::Mesh>& mesh, const shard::Shape& global,
                                           const shard::Layout& layout, const RegionTensor& t, const char* name) {
  auto s = std::make_shared<shard::Sharded>();
  s->mesh = mesh;
  s->global = global;
  s->dtype = t.dtype;
  s->layout = layout;
  s->name = name;
  s->local = t.view;
  s->on_device = t.on_device;
  s->device = t.device;
  return s;
}

}  // namespace

const char* region_name(Region r) {
  switch (r) {
    case Region::copy: return "WEFT_REGION_COPY";
    case Region::reduce: return "WEFT_REGION_REDUCE";
    case Region::scatter: return "WEFT_REGION_SCATTER";
    case Region::gather: return "WEFT_REGION_GATHER";
    case Region::seq_gather: return "WEFT_REGION_SEQ_GATHER";
    case Region::seq_reduce_scatter: return "WEFT_REGION_SEQ_REDUCE_SCATTER";
  }
  return "?";
}

RegionOp region_op(Region r, bool backward) {
  switch (r) {
    case Region::copy: return backward ? RegionOp::allreduce : RegionOp::identity;
    case Region::reduce: return backward ? RegionOp::identity : RegionOp::allreduce;
    case Region::scatter: return backward ? RegionOp::allgather : RegionOp::keep_chunk;
    case Region::gather: return backward ? RegionOp::keep_chunk : RegionOp::allgather;
    case Region::seq_gather: return backward ? RegionOp::reduce_scatter : RegionOp::allgather;
    case Region::seq_reduce_scatter: return backward ? RegionOp::allgather : RegionOp::reduce_scatter;
  }
  fail(Status::internal, "region %d", static_cast<int>(r));
}

const char* region_op_name(RegionOp op) {
  switch (op) {
    case RegionOp::identity: return "identity";
    case RegionOp::allreduce: return "all-reduce (sum)";
    case RegionOp::keep_chunk: return "local slice (keep this rank's chunk)";
    case RegionOp::allgather: return "all-gather";
    case RegionOp::reduce_scatter: return "reduce-scatter (sum)";
  }
  return "?";
}

bool region_splits(RegionOp op) {
  return op == RegionOp::keep_chunk || op == RegionOp::allgather || op == RegionOp::reduce_scatter;
}

bool same_view(const kernels::StridedView& a, const kernels::StridedView& b) {
  if (a.base != b.base || a.ndim != b.ndim || a.elem != b.elem) return false;
  for (int k = 0; k < a.ndim; ++k) {
    // The stride of a dim of extent 1 never moves to another element.
    if (a.shape[k] != b.shape[k] || (a.shape[k] > 1 && a.strides[k] != b.strides[k])) return false;
  }
  return true;
}

RegionCall make_region_call(const std::shared_ptr<mesh::Mesh>& mesh, int dim, RegionOp op, int split_dim,
                            const RegionTensor& in, const RegionTensor& out) {
  const Who who{*mesh, dim};
  if (in.dtype != out.dtype) {
    fail(Status::invalid_argument, "out->dtype is %s but in->dtype is %s; a region keeps the dtype (%s)",
         dtype_name(out.dtype), dtype_name(in.dtype), who.text().c_str());
  }
  const int nd = in.view.ndim;
  if (out.view.ndim != nd) {
    fail(Status::invalid_argument, "out has %d dims (shape %s) but in has %d (shape %s); a region keeps them (%s)",
         out.view.ndim, shape_text(out.view.shape, out.view.ndim).c_str(), nd,
         shape_text(in.view.shape, nd).c_str(), who.text().c_str());
  }
  if (region_splits(op) && (split_dim < 0 || split_dim >= nd)) {
    fail(Status::invalid_argument, "split_dim is %d but in has %d dims (expected 0..%d): %s splits along it (%s)",
         split_dim, nd, nd - 1, region_op_name(op), who.text().c_str());
  }

  // Layouts: every mesh dim REPLICATE but `dim`.
  const Transition tr = transition_of(op);
  const size_t md = static_cast<size_t>(dim);
  shard::Layout in_layout(static_cast<size_t>(mesh->ndims())), out_layout = in_layout;
  in_layout[md] = placement(tr.from, split_dim);
  out_layout[md] = placement(tr.to, split_dim);

  // The whole tensor is the gathered side's: out for an all-gather, in otherwise.
  const kernels::StridedView& whole = op == RegionOp::allgather ? out.view : in.view;
  const shard::Shape global(whole.shape, whole.shape + nd);
  const int pos = mesh->position();
  const shard::Box in_box = mesh->box_of(pos, global, in_layout);
  const shard::Box out_box = mesh->box_of(pos, global, out_layout);
  check_shapes(who, op, split_dim, in, out, in_box, out_box);

  // A view without elements may have any strides (common.h).
  for (int k = 0; k < nd && out.view.numel() > 0; ++k) {
    if (out.view.shape[k] > 1 && out.view.strides[k] == 0) {
      fail(Status::invalid_argument,
           "out has stride 0 on dim %d (extent %lld): weft writes it, and its elements would share addresses", k,
           static_cast<long long>(out.view.shape[k]));
    }
  }
  const auto a = in.view.byte_span();
  const auto b = out.view.byte_span();
  if (a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second &&
      !(region_in_place_ok(op) && same_view(in.view, out.view))) {
    fail(Status::invalid_argument,
         "in and out overlap (%s; %s); only identity and all-reduce run in place, and only with in and out the same "
         "view (same address, shape and strides)",
         region_op_name(op), who.text().c_str());
  }

  RegionCall call;
  call.op = op;
  call.in = side(mesh, global, in_layout, in, "in");
  call.out = side(mesh, global, out_layout, out, "out");
  auto plan = std::make_shared<shard::Plan>();
  if (op != RegionOp::identity) {
    // The one step shard::make_plan picks for a single changed mesh dim whose other dims are
    // REPLICATE (its collective beats, or ties with, the exchange it also prices), built
    // directly: pricing the exchange walks every pair of mesh members on every call.
    shard::Step s;
    s.kind = tr.step;
    s.mesh_dim = dim;
    s.from = in_layout[md];
    s.to = out_layout[md];
    s.before = in_layout;
    s.after = out_layout;
    plan->steps.push_back(std::move(s));
  }
  call.plan = std::move(plan);
  return call;
}

}  // namespace weft::training
