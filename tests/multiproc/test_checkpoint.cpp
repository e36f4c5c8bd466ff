// Distributed checkpoints (weft/mesh.h): save on N ranks and load on M ranks with other meshes
// and layouts, for (N, M) in {(4,2), (2,4), (3,5), (1,4)}, every value checked against the
// global tensor generated from its indices and sliced by checkpoint_util's own split rule:
// uneven and empty shards, a 0-dim and an empty tensor, non-contiguous (transposed) pieces on
// both sides, a PARTIAL(sum) tensor stored as its sum, a load into a P(sum) layout, replicated
// tensors stored once (data bytes counted), a resave removing the old files, and descriptors
// (ranks outside a tensor's mesh) taking part in a save. Errors: test_checkpoint_errors.cpp.
#include <algorithm>
#include <memory>

#include "checkpoint_util.h"
#include "mp_gtest.h"

using mpt::g_world;
using namespace ckt;

namespace {

weft_checkpoint_config_t no_fsync() {
  weft_checkpoint_config_t c = WEFT_CHECKPOINT_CONFIG_INIT;
  c.fsync = 0;  // tmpfs-friendly; the fsync path runs in test_checkpoint_kill.cpp
  return c;
}

// A 2-d mesh for n ranks (a dim of 1 where n has no better split).
std::vector<int> grid2(int n) {
  if (n == 4) return {2, 2};
  if (n == 2) return {1, 2};
  return {n, 1};
}

using Tensors = std::vector<std::unique_ptr<Tensor>>;

Tensor& add(Tensors& ts, const Spec& spec, const Mesh& mesh, const Layout& layout, bool transposed, bool fill) {
  ts.push_back(std::make_unique<Tensor>());
  make_tensor(*ts.back(), spec, mesh, layout, transposed, fill);
  return *ts.back();
}

weft_status_t save_all(weft_comm_t comm, const std::string& dir, const Tensors& ts) {
  std::vector<const char*> names;
  std::vector<weft_sharded_t> handles;
  for (const auto& t : ts) {
    names.push_back(t->spec.name.c_str());
    handles.push_back(t->handle);
  }
  const weft_checkpoint_config_t cfg = no_fsync();
  return weft_checkpoint_save(comm, dir.c_str(), names.data(), handles.data(), ts.size(), &cfg);
}

weft_status_t load_all(const std::string& dir, const Tensors& ts) {
  std::vector<const char*> names;
  std::vector<weft_sharded_t> handles;
  for (const auto& t : ts) {
    names.push_back(t->spec.name.c_str());
    handles.push_back(t->handle);
  }
  return weft_checkpoint_load(dir.c_str(), names.data(), handles.data(), ts.size(), nullptr);
}

void expect_values(const Tensors& ts, const char* what) {
  for (const auto& t : ts) {
    std::string first;
    EXPECT_EQ(count_wrong(*t, &first), 0) << what << ": " << first;
  }
}

// The matrix's tensors: name, dtype, shape, and where the save keeps them.
struct Entry {
  Spec spec;
  bool on_2d;
  Layout save, load;
  bool load_2d;
  bool transposed;
};
std::vector<Entry> matrix(int n_save) {
  return {
      {{"w", WEFT_FLOAT32, {7, 5}, 11}, false, {S(0)}, {S(1), R()}, true, false},
      {{"emb", WEFT_BFLOAT16, {3, 4}, 12}, false, {S(0)}, {R(), S(0)}, true, false},
      {{"bias", WEFT_FLOAT64, {5}, 13}, false, {R()}, {S(0), S(0)}, true, false},
      {{"grad", WEFT_FLOAT32, {6, 3}, 14, n_save}, false, {Psum()}, {R(), S(1)}, true, false},
      {{"scalar", WEFT_INT64, {}, 15}, false, {R()}, {R()}, false, false},
      {{"t3", WEFT_UINT8, {4, 3, 2}, 16}, true, {S(2), S(0)}, {S(0), S(1)}, true, true},
      {{"empty", WEFT_FLOAT16, {0, 3}, 17}, false, {S(0)}, {S(1), R()}, true, false},
      {{"k2", WEFT_INT32, {5, 6}, 18}, true, {R(), S(1)}, {S(1)}, false, true},
      // PARTIAL on the second dim of a 2-d mesh: reduced over that dim's groups only.
      {{"g2", WEFT_FLOAT32, {5, 4}, 19, grid2(n_save)[1]}, true, {S(0), Psum()}, {S(1)}, false, true},
  };
}

void save_side(weft_comm_t comm, int n, const std::string& dir) {
  Mesh m1, m2;
  make_mesh(m1, comm, {n});
  make_mesh(m2, comm, grid2(n));
  Tensors ts;
  for (const Entry& e : matrix(n)) add(ts, e.spec, e.on_2d ? m2 : m1, e.save, e.transposed, true);
  ASSERT_WEFT_OK(save_all(comm, dir, ts));
}

void load_side(weft_comm_t comm, int n_save, int m, const std::string& dir) {
  Mesh l1, l2;
  make_mesh(l1, comm, {m});
  make_mesh(l2, comm, grid2(m));
  Tensors ts;
  const std::vector<Entry> entries = matrix(n_save);
  for (const Entry& e : entries) add(ts, e.spec, e.load_2d ? l2 : l1, e.load, e.transposed, false);
  // The same stored tensor into a PARTIAL(sum) layout: the value at coordinate 0, zeros elsewhere.
  add(ts, entries[2].spec, l2, {Psum(), R()}, false, false);
  ASSERT_WEFT_OK(load_all(dir, ts));
  expect_values(ts, "after load");

  // The index lists each tensor with the shards its save layout stores: one per box.
  weft_checkpoint_t ck = nullptr;
  ASSERT_WEFT_OK(weft_checkpoint_open(dir.c_str(), &ck));
  size_t count = 0;
  EXPECT_WEFT_OK(weft_checkpoint_count(ck, &count));
  EXPECT_EQ(count, entries.size());
  for (size_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    weft_dtype_t dt{};
    int ndim = -1;
    int64_t shape[WEFT_TENSOR_MAX_DIMS] = {};
    size_t nshards = 0;
    ASSERT_WEFT_OK(weft_checkpoint_tensor(ck, i, &name, &dt, &ndim, shape, &nshards));
    auto it = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.spec.name == name; });
    ASSERT_NE(it, entries.end()) << name;
    EXPECT_EQ(dt, it->spec.dtype) << name;
    EXPECT_EQ(Shape(shape, shape + ndim), it->spec.global) << name;
    const std::vector<int> mesh_shape = it->on_2d ? grid2(n_save) : std::vector<int>{n_save};
    EXPECT_EQ(nshards, ref_shard_count(it->spec.global, mesh_shape, it->save)) << name;
  }
  EXPECT_WEFT_OK(weft_checkpoint_verify(ck));
  EXPECT_WEFT_OK(weft_checkpoint_close(ck));
}

}  // namespace

TEST(Checkpoint, SaveOnNRanksLoadOnM) {
  const std::pair<int, int> pairs[] = {{4, 2}, {2, 4}, {3, 5}, {1, 4}};
  for (auto [n, m] : pairs) {
    if (std::max(n, m) > g_world.size) {
      if (g_world.rank == 0) mpt::logf("skipping save on %d / load on %d: the job has %d ranks", n, m, g_world.size);
      continue;
    }
    SCOPED_TRACE("save on " + std::to_string(n) + " ranks, load on " + std::to_string(m));
    const std::string dir = shared_tempdir(g_world.comm, "ckpt-nm");
    weft_comm_t cs = split_first(g_world.comm, n);
    if (cs) save_side(cs, n, dir);
    barrier(g_world.comm);
    weft_comm_t cl = split_first(g_world.comm, m);
    if (cl) load_side(cl, n, m, dir);
    barrier(g_world.comm);
    if (cs) EXPECT_WEFT_OK(weft_comm_destroy(cs));
    if (cl) EXPECT_WEFT_OK(weft_comm_destroy(cl));
    if (g_world.rank == 0) remove_tree(dir);
  }
}

TEST(Checkpoint, ReplicatedShardsAreStoredOnce) {
  const int w = g_world.size;
  Mesh m1, m2;
  make_mesh(m1, g_world.comm, {w});
  make_mesh(m2, g_world.comm, grid2(w));
  const std::string dir1 = shared_tempdir(g_world.comm, "ckpt-rep");
  const std::string dir2 = shared_tempdir(g_world.comm, "ckpt-rep");
  {
    Tensors ts;
    add(ts, {"r", WEFT_FLOAT64, {10}, 31}, m1, {R()}, false, true);
    ASSERT_WEFT_OK(save_all(g_world.comm, dir1, ts));
  }
  {
    Tensors ts;
    add(ts, {"rs", WEFT_INT32, {6, 4}, 32}, m2, {S(0), R()}, false, true);
    ASSERT_WEFT_OK(save_all(g_world.comm, dir2, ts));
  }
  if (g_world.rank == 0) {
    uint64_t bytes = 0;
    // Held by every rank, written by one: one file of exactly the tensor's 80 bytes.
    EXPECT_EQ(data_files(dir1, &bytes).size(), 1u);
    EXPECT_EQ(bytes, 80u);
    // Replicated along mesh dim 1: one writer per box (coordinate 0 there), 96 bytes in all.
    EXPECT_EQ(data_files(dir2, &bytes).size(), ref_shard_count({6, 4}, grid2(w), {S(0), R()}));
    EXPECT_EQ(bytes, 96u);
  }
  Tensors back;
  add(back, {"rs", WEFT_INT32, {6, 4}, 32}, m1, {S(1)}, true, false);
  ASSERT_WEFT_OK(load_all(dir2, back));
  expect_values(back, "replicated, loaded as S(1)");
  barrier(g_world.comm);
  if (g_world.rank == 0) {
    remove_tree(dir1);
    remove_tree(dir2);
  }
}

TEST(Checkpoint, ResaveReplacesTheOldFiles) {
  Mesh m1;
  make_mesh(m1, g_world.comm, {g_world.size});
  const std::string dir = shared_tempdir(g_world.comm, "ckpt-resave");
  std::vector<std::string> first_files;
  {
    Tensors ts;
    add(ts, {"p", WEFT_FLOAT32, {11, 3}, 41}, m1, {S(0)}, false, true);
    ASSERT_WEFT_OK(save_all(g_world.comm, dir, ts));
    first_files = data_files(dir, nullptr);
  }
  {
    Tensors ts;
    add(ts, {"p", WEFT_FLOAT32, {11, 3}, 42}, m1, {S(0)}, false, true);
    ASSERT_WEFT_OK(save_all(g_world.comm, dir, ts));
  }
  if (g_world.rank == 0) {
    const std::vector<std::string> now = list_files(dir);
    for (const std::string& f : first_files) {
      EXPECT_EQ(std::count(now.begin(), now.end(), f), 0) << f << " of the first save is still there";
    }
    for (const std::string& f : now) {
      EXPECT_TRUE(f == "index.weft" || f.rfind("data-", 0) == 0) << "unexpected file " << f;
    }
  }
  Tensors back;
  add(back, {"p", WEFT_FLOAT32, {11, 3}, 42}, m1, {R()}, true, false);
  ASSERT_WEFT_OK(load_all(dir, back));
  expect_values(back, "the second save");
  barrier(g_world.comm);
  if (g_world.rank == 0) remove_tree(dir);
}

TEST(Checkpoint, RanksOutsideAMeshPassDescriptors) {
  if (g_world.size < 2) GTEST_SKIP() << "needs 2 ranks";
  // A mesh of every rank but 0, in reverse order: rank 0 (which writes the index) holds none of
  // the data and passes a descriptor.
  std::vector<int> ranks;
  for (int r = g_world.size - 1; r >= 1; --r) ranks.push_back(r);
  Mesh sub, all;
  make_mesh(sub, g_world.comm, {static_cast<int>(ranks.size())}, &ranks);
  make_mesh(all, g_world.comm, {g_world.size});
  const std::string dir = shared_tempdir(g_world.comm, "ckpt-desc");
  {
    Tensors ts;
    add(ts, {"d", WEFT_FLOAT32, {9, 2}, 51}, sub, {S(0)}, false, true);
    add(ts, {"e", WEFT_UINT8, {3}, 52}, all, {R()}, false, true);
    ASSERT_WEFT_OK(save_all(g_world.comm, dir, ts));
  }
  Tensors back;
  add(back, {"d", WEFT_FLOAT32, {9, 2}, 51}, all, {S(1)}, false, false);
  add(back, {"e", WEFT_UINT8, {3}, 52}, all, {S(0)}, false, false);
  ASSERT_WEFT_OK(load_all(dir, back));
  expect_values(back, "saved from a sub-mesh");
  barrier(g_world.comm);
  if (g_world.rank == 0) remove_tree(dir);
}
