#include "sharding_reference.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "inputs.h"
#include "mp_common.h"
#include "reference.h"

namespace mpt::shard {

weft_placement_t S(int dim) { return weft_placement_t{WEFT_SHARD, dim, WEFT_SUM}; }
weft_placement_t R() { return weft_placement_t{WEFT_REPLICATE, 0, WEFT_SUM}; }
weft_placement_t P(weft_op_t op) { return weft_placement_t{WEFT_PARTIAL, 0, op}; }

bool same_placement(const weft_placement_t& a, const weft_placement_t& b) {
  if (a.kind != b.kind) return false;
  if (a.kind == WEFT_SHARD) return a.dim == b.dim;
  if (a.kind == WEFT_PARTIAL) return a.op == b.op;
  return true;
}

std::string placement_name(const weft_placement_t& p) {
  switch (p.kind) {
    case WEFT_SHARD: return "S(" + std::to_string(p.dim) + ")";
    case WEFT_REPLICATE: return "R";
    case WEFT_PARTIAL: return std::string("P(") + op_name(p.op) + ")";
  }
  return "?";
}

std::string layout_name(const Layout& l) {
  std::string s = "[";
  for (size_t i = 0; i < l.size(); ++i) s += (i ? "," : "") + placement_name(l[i]);
  return s + "]";
}

std::string shape_name(const Shape& s) {
  std::string out = "{";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "}";
}

std::string layout_arg(const Layout& l) {
  std::string s;
  for (size_t i = 0; i < l.size(); ++i) {
    const weft_placement_t& p = l[i];
    s += i ? "," : "";
    if (p.kind == WEFT_SHARD) s += "S" + std::to_string(p.dim);
    if (p.kind == WEFT_REPLICATE) s += "R";
    if (p.kind == WEFT_PARTIAL) s += std::string("P") + op_name(p.op);
  }
  return s;
}

bool parse_layout(const std::string& text, Layout* out) {
  out->clear();
  std::stringstream ss(text);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    if (tok == "R") {
      out->push_back(R());
    } else if (tok.size() >= 2 && tok[0] == 'S') {
      out->push_back(S(std::atoi(tok.c_str() + 1)));
    } else if (tok == "Psum" || tok == "Pmax" || tok == "Pmin" || tok == "Pavg" || tok == "Pprod") {
      const std::string o = tok.substr(1);
      out->push_back(P(o == "sum" ? WEFT_SUM : o == "max" ? WEFT_MAX : o == "min" ? WEFT_MIN
                       : o == "avg" ? WEFT_AVG : WEFT_PROD));
    } else {
      return false;
    }
  }
  return !out->empty();
}

int Mesh::size() const {
  int n = 1;
  for (int s : shape) n *= s;
  return n;
}

std::vector<int> Mesh::coords(int mesh_rank) const {
  std::vector<int> c(shape.size());
  for (int d = ndims() - 1; d >= 0; --d) {
    c[d] = mesh_rank % shape[d];
    mesh_rank /= shape[d];
  }
  return c;
}

int Mesh::mesh_rank_of(const std::vector<int>& c) const {
  int r = 0;
  for (int d = 0; d < ndims(); ++d) r = r * shape[d] + c[d];
  return r;
}

int Mesh::position_of_parent(int parent_rank) const {
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] == parent_rank) return static_cast<int>(i);
  return -1;
}

std::vector<int> Mesh::group(int mesh_rank, const std::vector<int>& dims) const {
  // Row-major over the chosen dims: enumerate their coordinates with the last varying fastest.
  std::vector<int> c = coords(mesh_rank);
  int count = 1;
  for (int d : dims) count *= shape[d];
  std::vector<int> out;
  for (int i = 0; i < count; ++i) {
    int rest = i;
    for (int k = static_cast<int>(dims.size()) - 1; k >= 0; --k) {
      c[dims[k]] = rest % shape[dims[k]];
      rest /= shape[dims[k]];
    }
    out.push_back(mesh_rank_of(c));
  }
  return out;
}

void chunk(int64_t n, int k, int i, int64_t* start, int64_t* len) {
  const int64_t c = (n + k - 1) / k;
  const int64_t s = std::min<int64_t>(i * c, n);
  const int64_t e = std::min<int64_t>((i + 1) * c, n);
  *start = s;
  *len = e - s;
}

int64_t Box::numel() const { return shard::numel(shape); }

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

Box local_box(const Mesh& mesh, const Layout& layout, const Shape& global, int mesh_rank) {
  Box b;
  b.offset.assign(global.size(), 0);
  b.shape = global;
  const std::vector<int> c = mesh.coords(mesh_rank);
  // Left to right over the mesh dims: each SHARD(d) splits the current chunk of tensor dim d.
  for (int m = 0; m < mesh.ndims(); ++m) {
    if (layout[m].kind != WEFT_SHARD) continue;
    const int d = layout[m].dim;
    int64_t s = 0, len = 0;
    chunk(b.shape[d], mesh.shape[m], c[m], &s, &len);
    b.offset[d] += s;
    b.shape[d] = len;
  }
  return b;
}

int64_t overlap_numel(const Box& a, const Box& b) {
  int64_t n = 1;
  for (size_t d = 0; d < a.shape.size(); ++d) {
    const int64_t lo = std::max(a.offset[d], b.offset[d]);
    const int64_t hi = std::min(a.offset[d] + a.shape[d], b.offset[d] + b.shape[d]);
    n *= std::max<int64_t>(0, hi - lo);
  }
  return n;
}

int64_t linear_index(const Shape& global, const int64_t* idx) {
  int64_t l = 0;
  for (size_t d = 0; d < global.size(); ++d) l = l * global[d] + idx[d];
  return l;
}

int64_t value_limit(weft_dtype_t dt) {
  switch (dt) {
    case WEFT_FP8_E5M2: return 8;     // integers exact up to 8
    case WEFT_FP8_E4M3: return 16;    // integers exact up to 16
    case WEFT_BFLOAT16: return 256;   // 8 significant bits
    case WEFT_INT8: return 120;
    case WEFT_UINT8: return 250;
    default: return 1000;             // f16 (exact to 2048), f32, f64, 32/64-bit integers
  }
}

uint64_t encode_int(weft_dtype_t dt, int64_t v) {
  if (is_float(dt)) return encode_float(dt, static_cast<double>(v), false);
  const size_t bytes = dtype_bytes(dt);
  const uint64_t mask = bytes == 8 ? ~uint64_t{0} : ((uint64_t{1} << (8 * bytes)) - 1);
  return static_cast<uint64_t>(v) & mask;
}

std::string check_partial_mix(const Layout& l) {
  int partial = 0, avg = 0, mn = 0, mx = 0;
  for (const weft_placement_t& p : l) {
    if (p.kind != WEFT_PARTIAL) continue;
    ++partial;
    avg += p.op == WEFT_AVG;
    mn += p.op == WEFT_MIN;
    mx += p.op == WEFT_MAX;
    if (p.op == WEFT_PROD) return "P(prod) has no reference terms";
  }
  if (mn && mx) return "MIN and MAX in one layout";
  if ((avg || mn) && partial > 1) return "AVG/MIN must be the only PARTIAL dim";
  return "";
}

Data::Data(weft_dtype_t dt, uint64_t seed, Shape global, int avg_ranks)
    : dt_(dt), seed_(seed), global_(std::move(global)),
      limit_(is_float(dt) ? value_limit(dt) : value_limit(dt) / std::max(1, avg_ranks)) {}

int avg_ranks(const Mesh& mesh, const Layout& l) {
  int k = 1;
  for (int m = 0; m < mesh.ndims(); ++m)
    if (l[m].kind == WEFT_PARTIAL && l[m].op == WEFT_AVG) k *= mesh.shape[m];
  return k;
}

int64_t Data::value(int64_t linear) const {
  return static_cast<int64_t>(hash3(seed_, 0x7a1, static_cast<uint64_t>(linear)) % static_cast<uint64_t>(limit_ + 1));
}

int64_t Data::term_at(const Mesh& mesh, const Layout& layout, const std::vector<int>& c, int64_t linear) const {
  int64_t x = value(linear);
  const uint64_t g = static_cast<uint64_t>(linear);
  // The hash of the coordinates on PARTIAL dims only: a term must not depend on where the
  // member sits along SHARD/REPLICATE dims.
  uint64_t pc = 0x51;
  for (int m = 0; m < mesh.ndims(); ++m)
    if (layout[m].kind == WEFT_PARTIAL) pc = mix64(pc * 31 + static_cast<uint64_t>(c[m]) + 1);
  // 1. Linear splits, in mesh-dim order.
  for (int m = 0; m < mesh.ndims(); ++m) {
    const weft_placement_t& p = layout[m];
    if (p.kind != WEFT_PARTIAL || (p.op != WEFT_SUM && p.op != WEFT_AVG)) continue;
    const int k = mesh.shape[m], i = c[m];
    const uint64_t h = hash3(seed_, 0x100 + static_cast<uint64_t>(m), g);
    if (p.op == WEFT_SUM) {
      // One member takes a random share, the rest is spread evenly (rotated by the hash).
      const int64_t first = static_cast<int64_t>(h % static_cast<uint64_t>(x + 1));
      const int64_t rest = x - first;
      const int hold = static_cast<int>(h % static_cast<uint64_t>(k));
      const int rot = static_cast<int>((h >> 20) % static_cast<uint64_t>(k));
      x = (i == hold ? first : 0) + rest / k + (((i + rot) % k) < rest % k ? 1 : 0);
    } else if (k >= 2) {
      // AVG: x + d on one member, x - d on the next, x elsewhere.
      const int up = static_cast<int>(h % static_cast<uint64_t>(k));
      const int down = (up + 1) % k;
      const int64_t d = std::min<int64_t>({x, limit_ - x, static_cast<int64_t>(1 + (h >> 8) % 3)});
      x += i == up ? d : i == down ? -d : 0;
    }
  }
  // 2. MAX / MIN dims: members off the designated coordinate move away from the result.
  bool off_max = false, off_min = false;
  for (int m = 0; m < mesh.ndims(); ++m) {
    const weft_placement_t& p = layout[m];
    if (p.kind != WEFT_PARTIAL || (p.op != WEFT_MAX && p.op != WEFT_MIN)) continue;
    const uint64_t h = hash3(seed_, 0x200 + static_cast<uint64_t>(m), g);
    const int star = static_cast<int>(h % static_cast<uint64_t>(mesh.shape[m]));
    if (c[m] != star) (p.op == WEFT_MAX ? off_max : off_min) = true;
  }
  const uint64_t hd = hash3(seed_ ^ pc, 0x300, g);
  if (off_max) x -= static_cast<int64_t>(hd % static_cast<uint64_t>(x + 1));
  if (off_min) x += static_cast<int64_t>(hd % static_cast<uint64_t>(limit_ - x + 1));
  return x;
}

int64_t Data::term(const Mesh& mesh, const Layout& layout, int mesh_rank, int64_t linear) const {
  return term_at(mesh, layout, mesh.coords(mesh_rank), linear);
}

int64_t Data::reduce_terms(const Mesh& mesh, const Layout& layout, std::vector<int>& c,
                           const std::vector<int>& reduce, size_t next, int64_t linear) const {
  if (next == reduce.size()) return term_at(mesh, layout, c, linear);
  const int m = reduce[next];
  const weft_op_t op = layout[m].op;
  int64_t acc = 0;
  for (int i = 0; i < mesh.shape[m]; ++i) {
    c[m] = i;
    const int64_t t = reduce_terms(mesh, layout, c, reduce, next + 1, linear);
    if (i == 0 || op == WEFT_SUM || op == WEFT_AVG) {
      acc = i == 0 ? t : acc + t;
    } else {
      acc = op == WEFT_MAX ? std::max(acc, t) : std::min(acc, t);
    }
  }
  if (op == WEFT_AVG) {
    if (acc % mesh.shape[m] != 0) die("reference: AVG terms of element %lld do not average exactly", (long long)linear);
    acc /= mesh.shape[m];
  }
  return acc;
}

int64_t Data::expected(const Mesh& src_mesh, const Layout& src, bool same_mesh, const Mesh& dst_mesh,
                       const Layout& dst, int dst_rank, int64_t linear) const {
  const std::vector<int> dc = dst_mesh.coords(dst_rank);
  std::vector<int> c(src_mesh.ndims(), 0);
  std::vector<int> reduce;
  for (int m = 0; m < src_mesh.ndims(); ++m) {
    if (src[m].kind != WEFT_PARTIAL) continue;
    const bool kept = same_mesh && same_placement(src[m], dst[m]);
    if (kept) {
      c[m] = dc[m];
    } else {
      reduce.push_back(m);
    }
  }
  int64_t v = reduce_terms(src_mesh, src, c, reduce, 0, linear);
  for (int m = 0; m < dst_mesh.ndims(); ++m) {
    const bool kept = same_mesh && same_placement(src[m], dst[m]);
    if (dst[m].kind == WEFT_PARTIAL && !kept && dst[m].op == WEFT_SUM && dc[m] != 0) v = 0;
  }
  return v;
}

uint64_t single_dim_bytes(const Mesh& mesh, const Layout& src, const Layout& dst, const Shape& global,
                          weft_dtype_t dt, int dim, int mesh_rank) {
  const Box mine = local_box(mesh, src, global, mesh_rank);
  int64_t elems = 0;
  for (int peer : mesh.group(mesh_rank, {dim})) {
    if (peer == mesh_rank) continue;
    elems += overlap_numel(mine, local_box(mesh, dst, global, peer));
  }
  return static_cast<uint64_t>(elems) * dtype_bytes(dt);
}

}  // namespace mpt::shard
