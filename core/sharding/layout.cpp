#include "core/sharding/layout.h"

#include <algorithm>

#include "core/common/status.h"

namespace weft::shard {

std::string describe(const Placement& p) {
  switch (p.kind) {
    case Kind::replicate: return "R";
    case Kind::shard: return "S(" + std::to_string(p.dim) + ")";
    case Kind::partial: return std::string("P(") + op_name(p.op) + ")";
  }
  return "?";
}

std::string describe(const Layout& layout) {
  std::string s = "[";
  for (size_t i = 0; i < layout.size(); ++i) s += (i ? ", " : "") + describe(layout[i]);
  return s + "]";
}

int64_t Box::numel() const {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

Box intersect(const Box& a, const Box& b) {
  Box r;
  r.offset.resize(a.offset.size());
  r.shape.resize(a.shape.size());
  for (size_t d = 0; d < a.shape.size(); ++d) {
    const int64_t lo = std::max(a.offset[d], b.offset[d]);
    const int64_t hi = std::min(a.offset[d] + a.shape[d], b.offset[d] + b.shape[d]);
    r.offset[d] = lo;
    r.shape[d] = std::max<int64_t>(0, hi - lo);
  }
  return r;
}

Range chunk(int64_t n, int64_t k, int64_t i) {
  const int64_t c = k > 0 ? (n + k - 1) / k : n;
  const int64_t begin = std::min(i * c, n);
  return {begin, std::min(begin + c, n)};
}

Box local_box(const Shape& global, const std::vector<int>& mesh_shape, const Layout& layout,
              const std::vector<int>& coords) {
  Box box{Shape(global.size(), 0), global};
  for (size_t m = 0; m < layout.size(); ++m) {
    if (!layout[m].is_shard()) continue;
    const auto d = static_cast<size_t>(layout[m].dim);
    const Range r = chunk(box.shape[d], mesh_shape[m], coords[m]);
    box.offset[d] += r.begin;
    box.shape[d] = r.end - r.begin;
  }
  return box;
}

void validate(const Layout& layout, int tensor_ndim) {
  for (size_t m = 0; m < layout.size(); ++m) {
    const Placement& p = layout[m];
    if (p.is_shard() && (p.dim < 0 || p.dim >= tensor_ndim)) {
      fail(Status::invalid_argument, "placements[%zu] is SHARD(%d) but the tensor has %d dims (expected 0..%d)", m,
           p.dim, tensor_ndim, tensor_ndim - 1);
    }
    if (p.is_partial() && p.op == ReduceOp::prod) {
      fail(Status::invalid_argument,
           "placements[%zu] is PARTIAL(prod); PARTIAL takes sum, avg, min or max (a product cannot be split)", m);
    }
  }
}

std::vector<int> shard_dims_of(const Layout& layout, int d) {
  std::vector<int> dims;
  for (size_t m = 0; m < layout.size(); ++m) {
    if (layout[m].is_shard() && layout[m].dim == d) dims.push_back(static_cast<int>(m));
  }
  return dims;
}

}  // namespace weft::shard
