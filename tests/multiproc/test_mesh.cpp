// Meshes and sharded-tensor handles without redistribution (weft/mesh.h): every query of every
// mesh the redistribution tests use (world meshes of 1-3 dims, meshes over permuted subsets
// with descriptor meshes on the other ranks) against the reference's grid; the communicators
// weft_mesh_comm hands out (size, rank, members in row-major order, a reduction over each);
// weft_mesh_local_shape for every member and layout; and the reference's own claims (the
// split rule's examples from mesh.h, PARTIAL terms that reduce to the value in every order).
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "mp_gtest.h"
#include "redistribute_cases.h"
#include "reference.h"
#include "sharding_reference.h"

using mpt::g_world;
namespace shard = mpt::shard;

namespace {

struct Meshes {
  std::vector<mpt::MeshDef> defs;
  std::vector<weft_mesh_t> handles;
  Meshes() {
    defs = mpt::build_meshes(g_world.size);
    for (const auto& d : defs) {
      weft_mesh_t m = nullptr;
      weft_status_t s = mpt::create_mesh(g_world.comm, d, &m);
      EXPECT_EQ(s, WEFT_OK) << d.name << ": " << mpt::last_error();
      handles.push_back(m);
    }
  }
  ~Meshes() {
    for (weft_mesh_t m : handles) EXPECT_WEFT_OK(weft_mesh_destroy(m));
  }
};

// Every non-empty increasing subset of {0..n-1}, in a fixed order.
std::vector<std::vector<int>> dim_subsets(int n) {
  std::vector<std::vector<int>> out;
  for (int mask = 1; mask < (1 << n); ++mask) {
    std::vector<int> s;
    for (int d = 0; d < n; ++d)
      if (mask & (1 << d)) s.push_back(d);
    out.push_back(s);
  }
  return out;
}

}  // namespace

TEST(Reference, SplitRuleExamplesOfTheHeader) {
  // mesh.h: n = 5, k = 4 gives 2, 2, 1, 0.
  const int64_t want[] = {2, 2, 1, 0};
  for (int i = 0; i < 4; ++i) {
    int64_t s = 0, len = 0;
    shard::chunk(5, 4, i, &s, &len);
    EXPECT_EQ(len, want[i]) << "rank " << i;
    EXPECT_EQ(s, std::min<int64_t>(2 * i, 5));
  }
  // Nested: 7 rows over a 2 x 2 mesh, both dims sharding dim 0: 4 | 3, then 2,2 | 2,1.
  shard::Mesh m{{2, 2}, {0, 1, 2, 3}};
  const int64_t rows[] = {2, 2, 2, 1}, offs[] = {0, 2, 4, 6};
  for (int r = 0; r < 4; ++r) {
    shard::Box b = shard::local_box(m, {shard::S(0), shard::S(0)}, {7, 5}, r);
    EXPECT_EQ(b.shape[0], rows[r]) << "mesh rank " << r;
    EXPECT_EQ(b.offset[0], offs[r]) << "mesh rank " << r;
    EXPECT_EQ(b.shape[1], 5);
  }
}

// The claim of sharding_reference.h: every order of reducing the PARTIAL dims gives the value,
// with every intermediate between 0 and the dtype's limit (so exact in the dtype).
TEST(Reference, PartialTermsReduceToTheValueInEveryOrder) {
  const std::vector<std::vector<int>> shapes = {{4}, {2, 3}, {3, 2}, {2, 2, 2}, {1, 3}};
  for (weft_dtype_t dt : {WEFT_FP8_E5M2, WEFT_UINT8, WEFT_FLOAT32}) {
    for (const auto& shape : shapes) {
      shard::Mesh mesh{shape, {}};
      const int nd = mesh.ndims();
      // Layouts: every mix of R, P(sum), P(max) per dim, and a single P(avg) or P(min).
      std::vector<shard::Layout> layouts = {shard::Layout(nd, shard::R())};
      for (int m = 0; m < nd; ++m) {
        std::vector<shard::Layout> next;
        for (const auto& l : layouts)
          for (auto p : {shard::R(), shard::P(WEFT_SUM), shard::P(WEFT_MAX)}) {
            auto x = l;
            x[m] = p;
            next.push_back(x);
          }
        layouts = next;
      }
      for (weft_op_t op : {WEFT_AVG, WEFT_MIN}) {
        shard::Layout l(nd, shard::R());
        l[nd - 1] = shard::P(op);
        layouts.push_back(l);
      }
      for (const auto& l : layouts) {
        ASSERT_EQ(shard::check_partial_mix(l), "");
        std::vector<int> pdims;
        for (int m = 0; m < nd; ++m)
          if (l[m].kind == WEFT_PARTIAL) pdims.push_back(m);
        shard::Data data(dt, 99 + nd, {64}, shard::avg_ranks(mesh, l));
        for (int64_t g = 0; g < 64; ++g) {
          std::vector<int64_t> grid(mesh.size());
          for (int r = 0; r < mesh.size(); ++r) {
            grid[r] = data.term(mesh, l, r, g);
            ASSERT_GE(grid[r], 0);
            ASSERT_LE(grid[r], shard::value_limit(dt)) << shard::layout_name(l);
          }
          std::vector<int> order = pdims;
          do {
            // Reduce dim by dim: after each, every coordinate along it holds the result.
            std::vector<int64_t> cur = grid;
            for (int m : order) {
              std::vector<int64_t> nxt = cur;
              for (int r = 0; r < mesh.size(); ++r) {
                int64_t acc = 0;
                const auto grp = mesh.group(r, {m});
                for (size_t i = 0; i < grp.size(); ++i) {
                  const int64_t t = cur[grp[i]];
                  if (i == 0 || l[m].op == WEFT_SUM || l[m].op == WEFT_AVG)
                    acc = i == 0 ? t : acc + t;
                  else
                    acc = l[m].op == WEFT_MAX ? std::max(acc, t) : std::min(acc, t);
                }
                if (l[m].op == WEFT_AVG) {
                  ASSERT_EQ(acc % static_cast<int64_t>(grp.size()), 0);
                  acc /= static_cast<int64_t>(grp.size());
                }
                ASSERT_GE(acc, 0);
                ASSERT_LE(acc, shard::value_limit(dt)) << shard::layout_name(l) << " element " << g;
                nxt[r] = acc;
              }
              cur = nxt;
            }
            for (int r = 0; r < mesh.size(); ++r)
              ASSERT_EQ(cur[r], data.value(g)) << mpt::dtype_name(dt) << " " << shard::layout_name(l) << " element "
                                               << g << " mesh rank " << r;
          } while (std::next_permutation(order.begin(), order.end()));
        }
      }
    }
  }
}

TEST(Mesh, Queries) {
  Meshes ms;
  for (size_t i = 0; i < ms.defs.size(); ++i) {
    const mpt::MeshDef& d = ms.defs[i];
    weft_mesh_t m = ms.handles[i];
    SCOPED_TRACE(d.name);
    int nd = -1;
    int shape[WEFT_MESH_MAX_DIMS] = {0};
    ASSERT_WEFT_OK(weft_mesh_shape(m, &nd, shape));
    ASSERT_EQ(nd, d.mesh.ndims());
    for (int k = 0; k < nd; ++k) EXPECT_EQ(shape[k], d.mesh.shape[k]) << "dim " << k;
    EXPECT_WEFT_OK(weft_mesh_shape(m, nullptr, nullptr));
    const auto names = mpt::dim_names(d);
    for (int k = 0; k < nd; ++k) {
      const char* name = nullptr;
      ASSERT_WEFT_OK(weft_mesh_dim_name(m, k, &name));
      ASSERT_NE(name, nullptr);
      EXPECT_STREQ(name, names[k].c_str());
      int idx = -1;
      EXPECT_WEFT_OK(weft_mesh_dim_index(m, names[k].c_str(), &idx));
      EXPECT_EQ(idx, k);
    }
    int idx = -1;
    EXPECT_EQ(weft_mesh_dim_index(m, "no-such-dim", &idx), WEFT_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mpt::contains_ci(mpt::last_error(), "no-such-dim")) << mpt::last_error();
    const char* name = nullptr;
    EXPECT_EQ(weft_mesh_dim_name(m, nd, &name), WEFT_ERR_INVALID_ARGUMENT);

    const int pos = d.mesh.position_of_parent(g_world.rank);
    int member = -1;
    ASSERT_WEFT_OK(weft_mesh_is_member(m, &member));
    EXPECT_EQ(member, pos >= 0 ? 1 : 0);
    int coords[WEFT_MESH_MAX_DIMS] = {0};
    int mrank = -1;
    if (pos >= 0) {
      ASSERT_WEFT_OK(weft_mesh_coords(m, coords, &mrank));
      EXPECT_EQ(mrank, pos);
      const auto want = d.mesh.coords(pos);
      for (int k = 0; k < nd; ++k) EXPECT_EQ(coords[k], want[k]) << "coordinate " << k;
      EXPECT_WEFT_OK(weft_mesh_coords(m, nullptr, nullptr));
    } else {
      EXPECT_EQ(weft_mesh_coords(m, coords, &mrank), WEFT_ERR_INVALID_ARGUMENT) << "a descriptor mesh has no coordinates";
    }
    for (int r = 0; r < d.mesh.size(); ++r) {
      int parent = -1;
      ASSERT_WEFT_OK(weft_mesh_parent_rank(m, r, &parent));
      EXPECT_EQ(parent, d.mesh.ranks[r]) << "mesh rank " << r;
    }
    int parent = -1;
    EXPECT_EQ(weft_mesh_parent_rank(m, d.mesh.size(), &parent), WEFT_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(weft_mesh_parent_rank(m, -1, &parent), WEFT_ERR_INVALID_ARGUMENT);
  }
}

TEST(Mesh, DimCommunicators) {
  Meshes ms;
  for (size_t i = 0; i < ms.defs.size(); ++i) {
    const mpt::MeshDef& d = ms.defs[i];
    SCOPED_TRACE(d.name);
    const int pos = d.mesh.position_of_parent(g_world.rank);
    for (const auto& dims : dim_subsets(d.mesh.ndims())) {
      weft_comm_t c = nullptr;
      weft_status_t s = weft_mesh_comm(ms.handles[i], dims.data(), static_cast<int>(dims.size()), &c);
      if (pos < 0) {
        EXPECT_EQ(s, WEFT_ERR_INVALID_ARGUMENT) << "weft_mesh_comm on a descriptor mesh";
        continue;
      }
      ASSERT_EQ(s, WEFT_OK) << mpt::last_error();
      const std::vector<int> grp = d.mesh.group(pos, dims);
      int size = -1, rank = -1;
      ASSERT_WEFT_OK(weft_comm_size(c, &size));
      ASSERT_WEFT_OK(weft_comm_rank(c, &rank));
      ASSERT_EQ(size, static_cast<int>(grp.size()));
      EXPECT_EQ(grp[rank], pos) << "rank in the group must follow row-major order over the dims";
      // Every member contributes its parent rank: the sum and the gathered list are the group's.
      int64_t me = g_world.rank, sum = -1;
      ASSERT_WEFT_OK(weft_allreduce(&me, &sum, 1, WEFT_INT64, WEFT_SUM, c, nullptr, nullptr));
      int64_t want = 0;
      for (int r : grp) want += d.mesh.ranks[r];
      EXPECT_EQ(sum, want) << "allreduce of the parent ranks over the group";
      std::vector<int64_t> all(grp.size(), -1);
      ASSERT_WEFT_OK(weft_allgather(&me, all.data(), 1, WEFT_INT64, c, nullptr, nullptr));
      for (size_t k = 0; k < grp.size(); ++k) EXPECT_EQ(all[k], d.mesh.ranks[grp[k]]) << "group member " << k;
      // The handle belongs to the mesh: weft_comm_destroy refuses it and it keeps working.
      EXPECT_EQ(weft_comm_destroy(c), WEFT_ERR_INVALID_ARGUMENT) << "weft_comm_destroy(weft_mesh_comm(...))";
      EXPECT_FALSE(mpt::last_error().empty());
      sum = -1;
      ASSERT_WEFT_OK(weft_allreduce(&me, &sum, 1, WEFT_INT64, WEFT_SUM, c, nullptr, nullptr));
      EXPECT_EQ(sum, want) << "after the refused destroy";
    }
  }
}

TEST(Mesh, LocalShapeForEveryMember) {
  Meshes ms;
  const int n = g_world.size;
  const std::vector<shard::Shape> shapes = {{}, {0}, {1}, {2 * n + 1}, {5, 3}, {1, 7}, {0, 4}, {n + 1, 2, 3}};
  for (size_t i = 0; i < ms.defs.size(); ++i) {
    const mpt::MeshDef& d = ms.defs[i];
    const int nd = d.mesh.ndims();
    const int pos = d.mesh.position_of_parent(g_world.rank);
    for (const auto& g : shapes) {
      const int tnd = static_cast<int>(g.size());
      std::vector<weft_placement_t> base = {shard::R(), shard::P(WEFT_SUM)};
      for (int t = 0; t < tnd; ++t) base.push_back(shard::S(t));
      std::vector<shard::Layout> layouts = {{}};
      for (int m = 0; m < nd; ++m) {
        std::vector<shard::Layout> next;
        for (const auto& l : layouts)
          for (const auto& p : base) {
            auto x = l;
            x.push_back(p);
            next.push_back(x);
          }
        layouts = next;
      }
      for (const auto& l : layouts) {
        SCOPED_TRACE(d.name + " " + shard::layout_name(l) + " " + shard::shape_name(g));
        std::vector<int64_t> shape(std::max(tnd, 1), -1), off(std::max(tnd, 1), -1);
        for (int r = 0; r < d.mesh.size(); ++r) {
          ASSERT_WEFT_OK(weft_mesh_local_shape(ms.handles[i], l.data(), tnd, g.data(), r, shape.data(), off.data()));
          const shard::Box b = shard::local_box(d.mesh, l, g, r);
          for (int t = 0; t < tnd; ++t) {
            EXPECT_EQ(shape[t], b.shape[t]) << "mesh rank " << r << " tensor dim " << t;
            EXPECT_EQ(off[t], b.offset[t]) << "mesh rank " << r << " tensor dim " << t;
          }
        }
        std::fill(shape.begin(), shape.end(), -1);
        weft_status_t s = weft_mesh_local_shape(ms.handles[i], l.data(), tnd, g.data(), -1, shape.data(), nullptr);
        if (pos < 0) {
          EXPECT_EQ(s, WEFT_ERR_INVALID_ARGUMENT) << "mesh_rank -1 on a descriptor mesh";
        } else {
          ASSERT_EQ(s, WEFT_OK) << mpt::last_error();
          const shard::Box b = shard::local_box(d.mesh, l, g, pos);
          for (int t = 0; t < tnd; ++t) EXPECT_EQ(shape[t], b.shape[t]) << "mesh rank -1, tensor dim " << t;
        }
      }
    }
  }
}

// mesh.h: "The mesh keeps its own reference to comm's connections: comm may be destroyed first."
TEST(Mesh, OutlivesItsCommunicator) {
  weft_comm_t dup = nullptr;
  ASSERT_WEFT_OK(weft_comm_dup(g_world.comm, &dup));
  weft_mesh_t m = nullptr;
  const int n = g_world.size;
  ASSERT_WEFT_OK(weft_mesh_create(dup, 1, &n, nullptr, nullptr, &m));
  ASSERT_WEFT_OK(weft_comm_destroy(dup));
  weft_comm_t c = nullptr;
  const int dim0 = 0;
  ASSERT_WEFT_OK(weft_mesh_comm(m, &dim0, 1, &c));
  int64_t one = 1, sum = 0;
  ASSERT_WEFT_OK(weft_allreduce(&one, &sum, 1, WEFT_INT64, WEFT_SUM, c, nullptr, nullptr));
  EXPECT_EQ(sum, n);
  // A redistribution on it still runs: S(0) -> R of 2n+1 int32s.
  const int64_t g = 2 * n + 1;
  const weft_placement_t s0 = shard::S(0), r = shard::R();
  int64_t lshape = 0, loff = 0;
  ASSERT_WEFT_OK(weft_mesh_local_shape(m, &s0, 1, &g, -1, &lshape, &loff));
  std::vector<int32_t> src(std::max<int64_t>(lshape, 1)), dst(g, -1);
  for (int64_t k = 0; k < lshape; ++k) src[k] = static_cast<int32_t>(loff + k);
  weft_tensor_t sv{src.data(), WEFT_DEVICE_CPU, 0, 1, WEFT_INT32, &lshape, nullptr, 0};
  weft_tensor_t dv{dst.data(), WEFT_DEVICE_CPU, 0, 1, WEFT_INT32, &g, nullptr, 0};
  weft_sharded_t hs = nullptr, hd = nullptr;
  ASSERT_WEFT_OK(weft_sharded_create(m, 1, &g, WEFT_INT32, &s0, &sv, nullptr, &hs));
  ASSERT_WEFT_OK(weft_sharded_create(m, 1, &g, WEFT_INT32, &r, &dv, nullptr, &hd));
  ASSERT_WEFT_OK(weft_redistribute(hs, hd, nullptr, nullptr));
  for (int64_t k = 0; k < g; ++k) EXPECT_EQ(dst[k], k) << "element " << k;
  EXPECT_WEFT_OK(weft_sharded_destroy(hs));
  EXPECT_WEFT_OK(weft_sharded_destroy(hd));
  EXPECT_WEFT_OK(weft_mesh_destroy(m));
}

// weft_sharded_local reports the view; weft_sharded_set_local moves the handle to other memory.
TEST(Sharded, LocalAndSetLocal) {
  const int n = g_world.size;
  weft_mesh_t m = nullptr;
  ASSERT_WEFT_OK(weft_mesh_create(g_world.comm, 1, &n, nullptr, nullptr, &m));
  const int64_t g[2] = {2 * n + 1, 3};
  const weft_placement_t r = shard::R(), s1 = shard::S(1);
  int64_t ls[2] = {0, 0}, lo[2] = {0, 0};
  ASSERT_WEFT_OK(weft_mesh_local_shape(m, &s1, 2, g, -1, ls, lo));
  std::vector<double> full(g[0] * g[1]);
  std::iota(full.begin(), full.end(), 0.0);
  std::vector<double> a(std::max<int64_t>(ls[0] * ls[1], 1), -1), b(a.size(), -1);
  weft_tensor_t sv{full.data(), WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT64, g, nullptr, 0};
  weft_tensor_t av{a.data(), WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT64, ls, nullptr, 0};
  weft_tensor_t bv = av;
  bv.data = b.data();
  weft_sharded_t hs = nullptr, hd = nullptr;
  ASSERT_WEFT_OK(weft_sharded_create(m, 2, g, WEFT_FLOAT64, &r, &sv, nullptr, &hs));
  ASSERT_WEFT_OK(weft_sharded_create(m, 2, g, WEFT_FLOAT64, &s1, &av, nullptr, &hd));
  weft_tensor_t got{};
  ASSERT_WEFT_OK(weft_sharded_local(hd, &got));
  EXPECT_EQ(got.data, a.data());
  EXPECT_EQ(got.ndim, 2);
  EXPECT_EQ(got.dtype, WEFT_FLOAT64);
  ASSERT_NE(got.shape, nullptr);
  EXPECT_EQ(got.shape[0], ls[0]);
  EXPECT_EQ(got.shape[1], ls[1]);
  ASSERT_WEFT_OK(weft_sharded_set_local(hd, &bv));
  ASSERT_WEFT_OK(weft_sharded_local(hd, &got));
  EXPECT_EQ(got.data, b.data());
  ASSERT_WEFT_OK(weft_redistribute(hs, hd, nullptr, nullptr));
  for (int64_t i = 0; i < ls[0]; ++i)
    for (int64_t j = 0; j < ls[1]; ++j) {
      EXPECT_EQ(b[i * ls[1] + j], full[i * g[1] + lo[1] + j]) << "[" << i << "," << j << "]";
      EXPECT_EQ(a[i * ls[1] + j], -1) << "the old memory must be left alone";
    }
  EXPECT_WEFT_OK(weft_sharded_destroy(hs));
  EXPECT_WEFT_OK(weft_sharded_destroy(hd));
  EXPECT_WEFT_OK(weft_mesh_destroy(m));
}

// On a rank outside the mesh the handle is a descriptor: its local view has no data.
TEST(Sharded, DescriptorHasNoData) {
  const int n = g_world.size;
  const int last = n - 1, one = 1;
  weft_mesh_config_t cfg = WEFT_MESH_CONFIG_INIT;
  cfg.ranks = &last;
  cfg.nranks = 1;
  weft_mesh_t m = nullptr;
  ASSERT_WEFT_OK(weft_mesh_create(g_world.comm, 1, &one, nullptr, &cfg, &m));
  const int64_t g = 4;
  const weft_placement_t r = shard::R();
  float buf[4] = {0};
  weft_tensor_t v{buf, WEFT_DEVICE_CPU, 0, 1, WEFT_FLOAT32, &g, nullptr, 0};
  weft_sharded_t h = nullptr;
  const bool member = g_world.rank == last;
  ASSERT_WEFT_OK(weft_sharded_create(m, 1, &g, WEFT_FLOAT32, &r, member ? &v : nullptr, nullptr, &h));
  weft_tensor_t got{};
  ASSERT_WEFT_OK(weft_sharded_local(h, &got));
  if (member) {
    EXPECT_EQ(got.data, buf);
  } else {
    EXPECT_EQ(got.data, nullptr);
  }
  EXPECT_WEFT_OK(weft_sharded_destroy(h));
  EXPECT_WEFT_OK(weft_mesh_destroy(m));
}

// common.h: strides "may be any non-negative values". A source whose rows are one row repeated
// (stride 0, what PyTorch's expand() makes) is read, not written: R -> S(0) must deliver it.
TEST(Sharded, BroadcastSourceView) {
  const int n = g_world.size;
  weft_mesh_t m = nullptr;
  ASSERT_WEFT_OK(weft_mesh_create(g_world.comm, 1, &n, nullptr, nullptr, &m));
  const int64_t g[2] = {2 * n + 1, 3}, bstrides[2] = {0, 1};
  const weft_placement_t r = shard::R(), s0 = shard::S(0);
  int64_t ls[2] = {0, 0};
  ASSERT_WEFT_OK(weft_mesh_local_shape(m, &s0, 2, g, -1, ls, nullptr));
  float row[3] = {1.f, 2.f, 3.f};
  std::vector<float> out(std::max<int64_t>(ls[0] * ls[1], 1), -1.f);
  weft_tensor_t sv{row, WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, g, bstrides, 0};
  weft_tensor_t dv{out.data(), WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, ls, nullptr, 0};
  weft_sharded_t hs = nullptr, hd = nullptr;
  ASSERT_WEFT_OK(weft_sharded_create(m, 2, g, WEFT_FLOAT32, &r, &sv, nullptr, &hs));
  ASSERT_WEFT_OK(weft_sharded_create(m, 2, g, WEFT_FLOAT32, &s0, &dv, nullptr, &hd));
  ASSERT_WEFT_OK(weft_redistribute(hs, hd, nullptr, nullptr));
  for (int64_t i = 0; i < ls[0] * ls[1]; ++i) EXPECT_EQ(out[i], row[i % 3]) << "element " << i;
  EXPECT_WEFT_OK(weft_sharded_destroy(hs));
  EXPECT_WEFT_OK(weft_sharded_destroy(hd));
  EXPECT_WEFT_OK(weft_mesh_destroy(m));
}

// common.h: WEFT_DEVICE_CUDA_HOST is pinned host memory, "treated as host memory"; mesh.h: a mix
// of host and device memory in one redistribution is refused, naming src or dst.
TEST(Sharded, DeviceTypes) {
  const int n = g_world.size;
  weft_mesh_t m = nullptr;
  ASSERT_WEFT_OK(weft_mesh_create(g_world.comm, 1, &n, nullptr, nullptr, &m));
  const int64_t g = n;
  const weft_placement_t r = shard::R(), s0 = shard::S(0);
  int32_t mine = g_world.rank;
  std::vector<int32_t> all(n, -1);
  int64_t one = 1;
  weft_tensor_t sv{&mine, WEFT_DEVICE_CUDA_HOST, 0, 1, WEFT_INT32, &one, nullptr, 0};
  weft_tensor_t dv{all.data(), WEFT_DEVICE_CUDA_HOST, 0, 1, WEFT_INT32, &g, nullptr, 0};
  weft_sharded_t hs = nullptr, hd = nullptr;
  ASSERT_WEFT_OK(weft_sharded_create(m, 1, &g, WEFT_INT32, &s0, &sv, nullptr, &hs));
  ASSERT_WEFT_OK(weft_sharded_create(m, 1, &g, WEFT_INT32, &r, &dv, nullptr, &hd));
  ASSERT_WEFT_OK(weft_redistribute(hs, hd, nullptr, nullptr));
  for (int k = 0; k < n; ++k) EXPECT_EQ(all[k], k) << "element " << k;
  EXPECT_WEFT_OK(weft_sharded_destroy(hd));
  // The same with the destination marked as CUDA device memory (host memory in fact): a mix of
  // host and device memory, refused by weft_sharded_create (not device memory) or by
  // weft_redistribute (before any communication, on every rank alike).
  weft_tensor_t cv = dv;
  cv.device_type = WEFT_DEVICE_CUDA;
  weft_status_t s = weft_sharded_create(m, 1, &g, WEFT_INT32, &r, &cv, nullptr, &hd);
  if (s == WEFT_OK) {
    s = weft_redistribute(hs, hd, nullptr, nullptr);
    EXPECT_WEFT_OK(weft_sharded_destroy(hd));
  }
  EXPECT_TRUE(s == WEFT_ERR_UNSUPPORTED || s == WEFT_ERR_INVALID_ARGUMENT)
      << "device memory: " << mpt::status_name(s) << ": " << mpt::last_error();
  const std::string err = mpt::last_error();
  EXPECT_TRUE(mpt::contains_ci(err, "dst") || mpt::contains_ci(err, "device")) << "names dst or the device: " << err;
  EXPECT_WEFT_OK(weft_sharded_destroy(hs));
  EXPECT_WEFT_OK(weft_mesh_destroy(m));
}
