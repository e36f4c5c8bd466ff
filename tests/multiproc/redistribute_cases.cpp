#include "redistribute_cases.h"

#include <algorithm>
#include <cstdio>

#include "inputs.h"
#include "reference.h"

namespace mpt {

using shard::Layout;
using shard::P;
using shard::R;
using shard::S;
using shard::Shape;

const char* view_name(View v) {
  switch (v) {
    case View::contiguous: return "contiguous";
    case View::padded: return "padded";
    case View::transposed: return "transposed";
  }
  return "?";
}

const char* form_name(Form f) {
  switch (f) {
    case Form::blocking: return "blocking";
    case Form::wait: return "wait";
    case Form::poll: return "poll";
  }
  return "?";
}

uint64_t RCase::seed() const { return mix64(hash_str(part.c_str()) ^ (static_cast<uint64_t>(index) * 0x9e37ull)); }

std::string RCase::describe(const std::vector<MeshDef>& meshes) const {
  char buf[512];
  std::snprintf(buf, sizeof buf, "#%d %s: %s %s -> %s %s, global %s, %s, views %s/%s, %s", index, part.c_str(),
                meshes[src_mesh].name.c_str(), shard::layout_name(src).c_str(), meshes[dst_mesh].name.c_str(),
                shard::layout_name(dst).c_str(), shard::shape_name(global).c_str(), dtype_name(dt),
                view_name(src_view), view_name(dst_view), form_name(form));
  return buf;
}

const std::vector<std::string>& all_parts() {
  static const std::vector<std::string> p = {"mesh1d", "mesh2d", "nested", "dtypes", "views", "m2m", "large"};
  return p;
}

namespace {

std::vector<int> iota(int from, int count) {
  std::vector<int> v(count);
  for (int i = 0; i < count; ++i) v[i] = from + i;
  return v;
}

MeshDef def(const std::string& name, std::vector<int> shape, std::vector<int> ranks, bool explicit_ranks) {
  MeshDef d;
  d.name = name;
  d.mesh.shape = std::move(shape);
  d.mesh.ranks = std::move(ranks);
  d.explicit_ranks = explicit_ranks;
  return d;
}

int find_mesh(const std::vector<MeshDef>& meshes, const std::string& name) {
  for (size_t i = 0; i < meshes.size(); ++i)
    if (meshes[i].name == name) return static_cast<int>(i);
  return -1;
}

// The placements a tensor of `ndim` dims can take on one mesh dim in the transition set.
std::vector<weft_placement_t> placements_for(int ndim) {
  std::vector<weft_placement_t> p;
  if (ndim >= 1) p.push_back(S(0));
  if (ndim >= 2) p.push_back(S(1));
  p.push_back(R());
  p.push_back(P(WEFT_SUM));
  p.push_back(P(WEFT_MAX));
  return p;
}

// Every layout over `mdims` mesh dims from placements_for(ndim).
std::vector<Layout> all_layouts(int mdims, int ndim) {
  const std::vector<weft_placement_t> base = placements_for(ndim);
  std::vector<Layout> out = {Layout{}};
  for (int m = 0; m < mdims; ++m) {
    std::vector<Layout> next;
    for (const Layout& l : out)
      for (const weft_placement_t& p : base) {
        Layout x = l;
        x.push_back(p);
        next.push_back(x);
      }
    out = next;
  }
  return out;
}

int differing_dims(const Layout& a, const Layout& b) {
  int n = 0;
  for (size_t m = 0; m < a.size(); ++m) n += !shard::same_placement(a[m], b[m]);
  return n;
}

class Builder {
 public:
  Builder(const CaseFilter& f, std::vector<RCase>* out) : f_(f), out_(out) {}
  void add(const std::string& part, int sm, int dm, const Layout& src, const Layout& dst, const Shape& g,
           weft_dtype_t dt, View sv = View::contiguous, View dv = View::contiguous) {
    RCase c;
    c.part = part;
    c.src_mesh = sm;
    c.dst_mesh = dm;
    c.src = src;
    c.dst = dst;
    c.global = g;
    c.dt = dt;
    c.src_view = sv;
    c.dst_view = dv;
    c.index = next_++;
    c.form = static_cast<Form>(c.index % 3);
    if (!f_.dtypes.empty() &&
        std::find(f_.dtypes.begin(), f_.dtypes.end(), std::string(dtype_name(dt))) == f_.dtypes.end())
      return;
    out_->push_back(c);
  }

 private:
  const CaseFilter& f_;
  std::vector<RCase>* out_;
  int next_ = 0;
};

const weft_dtype_t kAllDtypes[] = {WEFT_FLOAT64, WEFT_FLOAT32, WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FP8_E4M3, WEFT_FP8_E5M2,
                                   WEFT_INT8,    WEFT_UINT8,   WEFT_INT32,   WEFT_UINT32,   WEFT_INT64,    WEFT_UINT64};

std::vector<int> meshes_2d(const std::vector<MeshDef>& meshes) {
  std::vector<int> out;
  for (size_t i = 0; i < meshes.size(); ++i)
    if (meshes[i].mesh.ndims() == 2 && meshes[i].name.find("m2m") == std::string::npos)
      out.push_back(static_cast<int>(i));
  return out;
}

void part_mesh1d(Builder& b, int n, const CaseFilter& f) {
  (void)f;
  const std::vector<Shape> shapes = {{},          {0},      {1},    {std::max(1, n - 1)}, {2 * n + 1},
                                     {5, 3},      {1, 2 * n + 1}, {0, 4}, {3, 0},  {n + 1, 2, 3},
                                     {2, 0, 3},   {2, 3, 1, n + 2}};
  for (const Shape& g : shapes) {
    const std::vector<Layout> ls = all_layouts(1, static_cast<int>(g.size()));
    for (const Layout& s : ls)
      for (const Layout& d : ls) b.add("mesh1d", 0, 0, s, d, g, WEFT_FLOAT32);
  }
}

void part_mesh2d(Builder& b, const std::vector<MeshDef>& meshes, const CaseFilter& f) {
  std::vector<int> ms = meshes_2d(meshes);
  if (!f.full) ms.resize(1);
  const std::vector<Shape> shapes = f.full ? std::vector<Shape>{{5, 7}, {1, 3}, {3, 4, 2}, {0, 3}, {2}, {}}
                                           : std::vector<Shape>{{5, 7}, {1, 3}, {3, 4, 2}};
  for (int m : ms)
    for (const Shape& g : shapes) {
      const std::vector<Layout> ls = all_layouts(2, static_cast<int>(g.size()));
      for (const Layout& s : ls)
        for (const Layout& d : ls)
          if (f.full || differing_dims(s, d) <= 1) b.add("mesh2d", m, m, s, d, g, WEFT_FLOAT32);
    }
}

void part_nested(Builder& b, const std::vector<MeshDef>& meshes, const CaseFilter& f) {
  std::vector<int> ms = meshes_2d(meshes);
  if (!f.full) ms.resize(1);
  const std::vector<Layout> l2 = {{S(0), S(0)},      {S(1), S(1)}, {S(0), S(1)}, {S(1), S(0)}, {R(), R()},
                                  {S(0), R()},       {R(), S(0)},  {P(WEFT_SUM), S(0)},       {S(0), P(WEFT_SUM)},
                                  {P(WEFT_MAX), S(1)}};
  for (int m : ms)
    for (const Shape& g : {Shape{7, 5}, Shape{3, 2}})
      for (const Layout& s : l2)
        for (const Layout& d : l2) {
          const bool nest = (s[0].kind == WEFT_SHARD && shard::same_placement(s[0], s[1])) ||
                            (d[0].kind == WEFT_SHARD && shard::same_placement(d[0], d[1]));
          if (nest) b.add("nested", m, m, s, d, g, WEFT_FLOAT32);
        }
  const int m3 = find_mesh(meshes, "2x2x2");
  if (m3 < 0) return;
  const std::vector<Layout> l3 = {{S(0), S(0), S(0)}, {S(0), S(1), S(0)}, {R(), S(0), S(0)},
                                  {P(WEFT_SUM), S(1), S(1)}, {R(), R(), R()}, {S(1), R(), P(WEFT_MAX)}};
  for (const Shape& g : {Shape{9, 5}, Shape{3, 4, 5}})
    for (const Layout& s : l3)
      for (const Layout& d : l3) b.add("nested", m3, m3, s, d, g, WEFT_FLOAT64);
}

void part_dtypes(Builder& b, int n, const std::vector<MeshDef>& meshes, const CaseFilter& f) {
  std::vector<std::pair<Layout, Layout>> t1 = {
      {{S(0)}, {R()}},          {{S(0)}, {S(1)}},         {{S(1)}, {S(0)}},         {{R()}, {S(1)}},
      {{P(WEFT_SUM)}, {R()}},   {{P(WEFT_SUM)}, {S(0)}},  {{P(WEFT_MAX)}, {R()}},   {{P(WEFT_MAX)}, {S(1)}},
      {{R()}, {P(WEFT_SUM)}},   {{R()}, {P(WEFT_MAX)}},   {{P(WEFT_AVG)}, {R()}},   {{P(WEFT_MIN)}, {R()}},
      {{P(WEFT_AVG)}, {S(0)}},  {{P(WEFT_MIN)}, {S(1)}},  {{S(0)}, {P(WEFT_SUM)}},  {{R()}, {P(WEFT_AVG)}},
      {{R()}, {P(WEFT_MIN)}},   {{P(WEFT_SUM)}, {P(WEFT_MAX)}}};
  if (f.full) {
    t1.clear();
    const std::vector<weft_placement_t> all = {S(0), S(1), R(), P(WEFT_SUM), P(WEFT_MAX), P(WEFT_AVG), P(WEFT_MIN)};
    for (const auto& s : all)
      for (const auto& d : all) t1.push_back({{s}, {d}});
  }
  const std::vector<std::pair<Layout, Layout>> t2 = {
      {{S(0), S(1)}, {R(), R()}},                 {{P(WEFT_SUM), S(0)}, {S(1), R()}},
      {{P(WEFT_MAX), P(WEFT_SUM)}, {R(), S(0)}},  {{R(), R()}, {P(WEFT_SUM), P(WEFT_MAX)}},
      {{S(1), R()}, {S(0), S(1)}},                {{S(0), S(0)}, {S(1), R()}},
      {{P(WEFT_SUM), P(WEFT_SUM)}, {P(WEFT_SUM), S(1)}}};
  const int m2 = meshes_2d(meshes).front();
  for (weft_dtype_t dt : kAllDtypes) {
    for (const Shape& g : f.full ? std::vector<Shape>{{2 * n + 1, 3}, {1, 1}, {0, 2}} : std::vector<Shape>{{2 * n + 1, 3}})
      for (const auto& t : t1) b.add("dtypes", 0, 0, t.first, t.second, g, dt);
    for (const auto& t : t2) b.add("dtypes", m2, m2, t.first, t.second, Shape{5, 7}, dt);
  }
}

void part_views(Builder& b, const std::vector<MeshDef>& meshes, const CaseFilter& f) {
  const std::vector<std::pair<Layout, Layout>> t1 = {
      {{S(0)}, {R()}}, {{S(0)}, {S(1)}}, {{P(WEFT_SUM)}, {S(1)}}, {{R()}, {S(0)}}, {{S(1)}, {P(WEFT_MAX)}}};
  const std::vector<std::pair<Layout, Layout>> t2 = {
      {{S(0), S(1)}, {S(1), S(0)}}, {{P(WEFT_SUM), S(1)}, {R(), R()}}, {{S(0), S(0)}, {R(), S(1)}}};
  const int m2 = meshes_2d(meshes).front();
  int k = 0;
  for (View sv : {View::contiguous, View::padded, View::transposed})
    for (View dv : {View::contiguous, View::padded, View::transposed}) {
      // Alternate a 2-byte and an 8-byte dtype so strides are checked in two element sizes.
      const weft_dtype_t dt = (k++ % 2) ? WEFT_BFLOAT16 : WEFT_INT64;
      for (const Shape& g : f.full ? std::vector<Shape>{{5, 7}, {3, 4, 5}, {1, 2}} : std::vector<Shape>{{5, 7}, {3, 4, 5}}) {
        for (const auto& t : t1) b.add("views", 0, 0, t.first, t.second, g, dt, sv, dv);
        for (const auto& t : t2) b.add("views", m2, m2, t.first, t.second, g, dt, sv, dv);
      }
    }
}

// Pieces of a few MiB: the paths a library may take only for large messages (chunking,
// pipelining), with an odd element count so that no split is even.
void part_large(Builder& b, int n, const std::vector<MeshDef>& meshes, const CaseFilter& f) {
  const Shape g1{1000003}, g2{513, 1031};
  const std::vector<std::pair<Layout, Layout>> t1 = {
      {{S(0)}, {R()}}, {{P(WEFT_SUM)}, {S(0)}}, {{P(WEFT_MAX)}, {R()}}, {{R()}, {S(0)}}};
  for (const auto& t : t1) b.add("large", 0, 0, t.first, t.second, g1, WEFT_FLOAT32);
  b.add("large", 0, 0, {S(0)}, {S(1)}, g2, WEFT_BFLOAT16, View::padded, View::transposed);
  b.add("large", 0, 0, {S(1)}, {P(WEFT_SUM)}, g2, WEFT_INT32);
  const int m2 = meshes_2d(meshes).front();
  b.add("large", m2, m2, {S(0), S(1)}, {S(1), S(0)}, g2, WEFT_FLOAT64);
  b.add("large", m2, m2, {P(WEFT_SUM), S(0)}, {R(), R()}, g2, WEFT_FLOAT32);
  if (f.full) b.add("large", m2, m2, {S(0), S(0)}, {P(WEFT_MAX), S(1)}, g2, WEFT_UINT8);
  const int a = find_mesh(meshes, "m2m:4a"), c = find_mesh(meshes, "m2m:2b");
  if (a >= 0 && c >= 0) {
    b.add("large", a, c, {S(0)}, {S(1)}, g2, WEFT_FLOAT32);
    b.add("large", c, a, {P(WEFT_SUM)}, {S(0)}, g2, WEFT_INT64);
  } else if (n >= 2) {
    const int r = find_mesh(meshes, "m2m:rev");
    b.add("large", 0, r, {S(0)}, {S(1)}, g2, WEFT_FLOAT32);
  }
}

void part_m2m(Builder& b, const std::vector<MeshDef>& meshes, const CaseFilter& f) {
  const std::vector<Layout> src1 = {{S(0)}, {S(1)}, {R()}, {P(WEFT_SUM)}};
  const std::vector<Layout> dst1 = {{S(0)}, {S(1)}, {R()}, {P(WEFT_SUM)}, {P(WEFT_MAX)}};
  const std::vector<Layout> src2 = {{S(0), S(1)}, {R(), S(0)}, {S(1), S(1)}, {P(WEFT_SUM), S(0)}};
  const std::vector<Layout> dst2 = {{S(0), S(1)}, {R(), S(0)}, {S(1), S(1)}, {P(WEFT_SUM), S(1)}};
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"w", "m2m:rev"},   {"w", "m2m:one"},   {"m2m:one", "w"},   {"m2m:3a", "m2m:2a"}, {"m2m:2a", "m2m:3a"},
      {"m2m:4a", "m2m:2b"}, {"m2m:2b", "m2m:4a"}, {"m2m:3b", "m2m:5a"}, {"m2m:5a", "m2m:3b"}, {"m2m:4a", "m2m:2c"},
      {"m2m:2c", "m2m:4a"}, {"m2m:3a", "m2m:5b"}, {"m2m:5b", "m2m:3a"}, {"m2m:4a", "m2m:g22"}, {"m2m:g22", "m2m:2b"}};
  const weft_dtype_t dts[] = {WEFT_FLOAT32, WEFT_INT64, WEFT_BFLOAT16, WEFT_UINT8};
  int k = 0;
  for (const auto& pr : pairs) {
    const int sm = find_mesh(meshes, pr.first), dm = find_mesh(meshes, pr.second);
    if (sm < 0 || dm < 0) continue;
    const auto& ss = meshes[sm].mesh.ndims() == 1 ? src1 : src2;
    const auto& ds = meshes[dm].mesh.ndims() == 1 ? dst1 : dst2;
    for (const Shape& g : f.full ? std::vector<Shape>{{7, 5}, {2, 3}, {0, 3}, {1, 9}} : std::vector<Shape>{{7, 5}, {0, 3}})
      for (const Layout& s : ss)
        for (const Layout& d : ds) {
          // Views rotate through all 9 (source, destination) pairings.
          const View sv = static_cast<View>(k % 3), dv = static_cast<View>((k / 3) % 3);
          b.add("m2m", sm, dm, s, d, g, dts[k % 4], sv, dv);
          ++k;
        }
  }
}

}  // namespace

std::vector<MeshDef> build_meshes(int n) {
  std::vector<MeshDef> m;
  m.push_back(def("w", {n}, iota(0, n), false));
  bool any = false;
  for (int a = 2; a < n; ++a)
    if (n % a == 0) {
      m.push_back(def(std::to_string(a) + "x" + std::to_string(n / a), {a, n / a}, iota(0, n), false));
      any = true;
    }
  if (!any) {
    m.push_back(def("1x" + std::to_string(n), {1, n}, iota(0, n), false));
    if (n > 1) m.push_back(def(std::to_string(n) + "x1", {n, 1}, iota(0, n), false));
  }
  if (n == 8) m.push_back(def("2x2x2", {2, 2, 2}, iota(0, n), false));
  // Meshes for redistribution between meshes (explicit, often permuted, rank lists).
  if (n >= 2) {
    std::vector<int> rev = iota(0, n);
    std::reverse(rev.begin(), rev.end());
    m.push_back(def("m2m:rev", {n}, rev, true));
    m.push_back(def("m2m:one", {1}, {n - 1}, true));
  }
  if (n >= 3) {
    m.push_back(def("m2m:3a", {3}, {0, 1, 2}, true));
    m.push_back(def("m2m:2a", {2}, {2, 0}, true));
  }
  if (n >= 4) {
    m.push_back(def("m2m:4a", {4}, {0, 1, 2, 3}, true));
    m.push_back(def("m2m:2b", {2}, {3, 1}, true));
    m.push_back(def("m2m:g22", {2, 2}, {3, 2, 1, 0}, true));
  }
  if (n >= 5) {
    m.push_back(def("m2m:3b", {3}, {4, 2, 0}, true));
    m.push_back(def("m2m:5a", {5}, {0, 1, 2, 3, 4}, true));
  }
  if (n >= 6) m.push_back(def("m2m:2c", {2}, {5, 4}, true));         // disjoint from m2m:4a
  if (n >= 8) m.push_back(def("m2m:5b", {5}, {3, 4, 5, 6, 7}, true));  // disjoint from m2m:3a
  return m;
}

std::vector<std::string> dim_names(const MeshDef& d) {
  switch (d.mesh.ndims()) {
    case 1: return {"d0"};
    case 2: return d.explicit_ranks ? std::vector<std::string>{"a", "b"} : std::vector<std::string>{"dp", "tp"};
    case 3: return {"pp", "dp", "tp"};
  }
  return {};
}

weft_status_t create_mesh(weft_comm_t comm, const MeshDef& d, weft_mesh_t* out) {
  const std::vector<std::string> names = dim_names(d);
  std::vector<const char*> ptrs;
  for (const std::string& s : names) ptrs.push_back(s.c_str());
  weft_mesh_config_t cfg = WEFT_MESH_CONFIG_INIT;
  cfg.ranks = d.mesh.ranks.data();
  cfg.nranks = d.mesh.ranks.size();
  // 1-d meshes pass NULL names (the default "d0"); world meshes pass no config (all ranks).
  return weft_mesh_create(comm, d.mesh.ndims(), d.mesh.shape.data(), d.mesh.ndims() == 1 ? nullptr : ptrs.data(),
                          d.explicit_ranks ? &cfg : nullptr, out);
}

std::vector<RCase> build_cases(int n, const std::vector<MeshDef>& meshes, const CaseFilter& f) {
  std::vector<RCase> out;
  const std::vector<std::string>& parts = f.parts.empty() ? all_parts() : f.parts;
  // A case's index counts within its part, so "--part=P --case=K" names it whatever else is
  // filtered.
  for (const std::string& p : all_parts()) {
    if (std::find(parts.begin(), parts.end(), p) == parts.end()) continue;
    Builder b(f, &out);
    if (p == "mesh1d") part_mesh1d(b, n, f);
    if (p == "mesh2d") part_mesh2d(b, meshes, f);
    if (p == "nested") part_nested(b, meshes, f);
    if (p == "dtypes") part_dtypes(b, n, meshes, f);
    if (p == "views") part_views(b, meshes, f);
    if (p == "m2m") part_m2m(b, meshes, f);
    if (p == "large") part_large(b, n, meshes, f);
  }
  return out;
}

}  // namespace mpt
