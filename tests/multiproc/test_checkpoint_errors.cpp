// Distributed checkpoints that must fail, and how (weft/mesh.h: "Errors name the file and
// tensor"): a flipped byte in a data file (verify and load fail naming file and tensor; a
// tensor stored elsewhere still loads), a truncated data file, a garbage, truncated or empty
// index (the FlatBuffers verifier), a missing tensor, a shape or dtype mismatch at load; at save,
// ranks that disagree on a tensor's shape, a rank that does not pass a tensor it holds part of,
// a bad argument on one rank, and device memory: every rank fails, none returns OK.
#include <algorithm>
#include <memory>

#include "checkpoint_util.h"
#include "mp_gtest.h"

using mpt::g_world;
using namespace ckt;

namespace {

bool has(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

weft_status_t save(const std::string& dir, const std::vector<const Tensor*>& ts) {
  std::vector<const char*> names;
  std::vector<weft_sharded_t> handles;
  for (const Tensor* t : ts) {
    names.push_back(t->spec.name.c_str());
    handles.push_back(t->handle);
  }
  weft_checkpoint_config_t cfg = WEFT_CHECKPOINT_CONFIG_INIT;
  cfg.fsync = 0;
  return weft_checkpoint_save(g_world.comm, dir.c_str(), names.data(), handles.data(), ts.size(), &cfg);
}

weft_status_t load(const std::string& dir, const Tensor& t) {
  const char* name = t.spec.name.c_str();
  return weft_checkpoint_load(dir.c_str(), &name, &t.handle, 1, nullptr);
}

// A checkpoint of "c" (f32 [64], replicated: rank 0's file holds it at bytes [0, 256)) and "ok"
// (f32 [8, 3] sharded over the world: its rank-0 shard, 12 bytes or more, follows at byte 256).
class Damaged : public testing::Test {
 protected:
  void SetUp() override {
    make_mesh(mesh_, g_world.comm, {g_world.size});
    dir_ = shared_tempdir(g_world.comm, "ckpt-bad");
    make_tensor(c_, {"c", WEFT_FLOAT32, {64}, 61}, mesh_, {R()}, false, true);
    make_tensor(ok_, {"ok", WEFT_FLOAT32, {8, 3}, 62}, mesh_, {S(0)}, false, true);
    ASSERT_WEFT_OK(save(dir_, {&c_, &ok_}));
    for (const std::string& f : data_files(dir_, nullptr))
      if (f.size() > 7 && f.compare(f.size() - 7, 7, "-r0.bin") == 0) rank0_file_ = f;
    ASSERT_FALSE(rank0_file_.empty());
  }
  void TearDown() override {
    barrier(g_world.comm);
    if (g_world.rank == 0) remove_tree(dir_);
  }
  // A fresh destination for `name` on the world mesh, replicated: every rank needs every shard.
  std::unique_ptr<Tensor> dest(const Spec& spec) {
    auto t = std::make_unique<Tensor>();
    make_tensor(*t, spec, mesh_, Layout{R()}, false, false);
    return t;
  }
  Mesh mesh_;
  std::string dir_, rank0_file_;
  Tensor c_, ok_;
};

}  // namespace

TEST_F(Damaged, FlippedByteFailsVerifyAndLoadNamingFileAndTensor) {
  if (g_world.rank == 0) flip_byte(dir_ + "/" + rank0_file_, 100);
  barrier(g_world.comm);
  weft_checkpoint_t ck = nullptr;
  ASSERT_WEFT_OK(weft_checkpoint_open(dir_.c_str(), &ck));
  EXPECT_EQ(weft_checkpoint_verify(ck), WEFT_ERR_INVALID_ARGUMENT);
  std::string msg = mpt::last_error();
  EXPECT_TRUE(has(msg, "checksum mismatch") && has(msg, rank0_file_) && has(msg, "'c'")) << msg;
  EXPECT_WEFT_OK(weft_checkpoint_close(ck));

  auto c = dest(c_.spec);
  EXPECT_EQ(load(dir_, *c), WEFT_ERR_INVALID_ARGUMENT);
  msg = mpt::last_error();
  EXPECT_TRUE(has(msg, "checksum mismatch") && has(msg, rank0_file_) && has(msg, "'c'")) << msg;
  // The other tensor's shard in the same file is checked on its own and still loads.
  auto ok = dest(ok_.spec);
  EXPECT_WEFT_OK(load(dir_, *ok));
  std::string first;
  EXPECT_EQ(count_wrong(*ok, &first), 0) << first;
}

TEST_F(Damaged, TruncatedDataFileFails) {
  if (g_world.rank == 0) truncate_file(dir_ + "/" + rank0_file_, 258);  // "c" whole, "ok" cut
  barrier(g_world.comm);
  weft_checkpoint_t ck = nullptr;
  ASSERT_WEFT_OK(weft_checkpoint_open(dir_.c_str(), &ck));
  EXPECT_EQ(weft_checkpoint_verify(ck), WEFT_ERR_INVALID_ARGUMENT);
  std::string msg = mpt::last_error();
  EXPECT_TRUE(has(msg, "truncated") && has(msg, rank0_file_) && has(msg, "'ok'")) << msg;
  EXPECT_WEFT_OK(weft_checkpoint_close(ck));
  auto ok = dest(ok_.spec);
  EXPECT_EQ(load(dir_, *ok), WEFT_ERR_INVALID_ARGUMENT);
  msg = mpt::last_error();
  EXPECT_TRUE(has(msg, "truncated") && has(msg, rank0_file_) && has(msg, "'ok'")) << msg;
  auto c = dest(c_.spec);
  EXPECT_WEFT_OK(load(dir_, *c));
}

TEST_F(Damaged, GarbageTruncatedOrEmptyIndexFailsTheVerifier) {
  const std::string index = dir_ + "/index.weft";
  std::string original;
  {
    FILE* f = std::fopen(index.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) original.append(buf, n);
    std::fclose(f);
  }
  std::string garbage(200, '\0');
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>(i * 37 + 11);
  const std::string damaged[] = {garbage, original.substr(0, original.size() - 7), std::string()};
  for (const std::string& bytes : damaged) {
    barrier(g_world.comm);
    if (g_world.rank == 0) write_file(index, bytes);
    barrier(g_world.comm);
    weft_checkpoint_t ck = nullptr;
    EXPECT_EQ(weft_checkpoint_open(dir_.c_str(), &ck), WEFT_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ck, nullptr);
    std::string msg = mpt::last_error();
    EXPECT_TRUE(has(msg, "FlatBuffers verification") && has(msg, "index.weft")) << msg;
    auto c = dest(c_.spec);
    EXPECT_EQ(load(dir_, *c), WEFT_ERR_INVALID_ARGUMENT);
    msg = mpt::last_error();
    EXPECT_TRUE(has(msg, "FlatBuffers verification") && has(msg, "index.weft")) << msg;
  }
}

TEST_F(Damaged, MissingTensorAndShapeOrDtypeMismatch) {
  auto nope = dest({"nope", WEFT_FLOAT32, {64}, 61});
  EXPECT_EQ(load(dir_, *nope), WEFT_ERR_INVALID_ARGUMENT);
  std::string msg = mpt::last_error();
  EXPECT_TRUE(has(msg, "'nope'") && has(msg, "index.weft")) << msg;

  auto longer = dest({"c", WEFT_FLOAT32, {65}, 61});
  EXPECT_EQ(load(dir_, *longer), WEFT_ERR_MISMATCH);
  msg = mpt::last_error();
  EXPECT_TRUE(has(msg, "'c'") && has(msg, "[64]") && has(msg, "[65]")) << msg;

  auto wider = dest({"c", WEFT_FLOAT64, {64}, 61});
  EXPECT_EQ(load(dir_, *wider), WEFT_ERR_MISMATCH);
  msg = mpt::last_error();
  EXPECT_TRUE(has(msg, "'c'") && has(msg, "float32") && has(msg, "float64")) << msg;
}

TEST(CheckpointSave, RanksDisagreeingOnAShapeFailEverywhere) {
  if (g_world.size < 2) GTEST_SKIP() << "needs 2 ranks";
  Mesh m;
  make_mesh(m, g_world.comm, {g_world.size});
  const std::string dir = shared_tempdir(g_world.comm, "ckpt-mm");
  Tensor x;
  const int64_t n = 4 * g_world.size + (g_world.rank == 1 ? 1 : 0);
  make_tensor(x, {"x", WEFT_FLOAT32, {n}, 71}, m, {S(0)}, false, true);
  EXPECT_EQ(save(dir, {&x}), WEFT_ERR_MISMATCH);
  const std::string msg = mpt::last_error();
  EXPECT_TRUE(has(msg, "'x'") && mpt::mentions_rank(msg, 1)) << msg;
  barrier(g_world.comm);
  if (g_world.rank == 0) {
    // Nothing of the failed save is left: no index, no data file.
    EXPECT_TRUE(list_files(dir).empty()) << list_files(dir).size() << " files left";
    remove_tree(dir);
  }
}

TEST(CheckpointSave, AMemberThatDoesNotPassItsShardIsCaught) {
  if (g_world.size < 2) GTEST_SKIP() << "needs 2 ranks";
  Mesh m;
  make_mesh(m, g_world.comm, {g_world.size});
  const std::string dir = shared_tempdir(g_world.comm, "ckpt-hole");
  Tensor h;
  make_tensor(h, {"h", WEFT_FLOAT32, {2 * g_world.size}, 72}, m, {S(0)}, false, true);
  std::vector<const Tensor*> mine;
  if (g_world.rank != 1) mine.push_back(&h);
  EXPECT_EQ(save(dir, mine), WEFT_ERR_INVALID_ARGUMENT);
  const std::string msg = mpt::last_error();
  EXPECT_TRUE(has(msg, "'h'") && has(msg, "every member")) << msg;
  barrier(g_world.comm);
  if (g_world.rank == 0) remove_tree(dir);
}

TEST(CheckpointSave, ABadArgumentOnOneRankFailsEveryRank) {
  Mesh m;
  make_mesh(m, g_world.comm, {g_world.size});
  const std::string dir = shared_tempdir(g_world.comm, "ckpt-arg");
  Tensor t;
  make_tensor(t, {"t", WEFT_FLOAT32, {4}, 73}, m, {R()}, false, true);
  const int bad = g_world.size - 1;
  const char* names[] = {g_world.rank == bad ? nullptr : "t"};
  weft_checkpoint_config_t cfg = WEFT_CHECKPOINT_CONFIG_INIT;
  EXPECT_EQ(weft_checkpoint_save(g_world.comm, dir.c_str(), names, &t.handle, 1, &cfg), WEFT_ERR_INVALID_ARGUMENT);
  const std::string msg = mpt::last_error();
  EXPECT_TRUE(has(msg, "names[0]")) << msg;
  if (g_world.rank != bad) {
    EXPECT_TRUE(mpt::mentions_rank(msg, bad)) << msg;
  }
  barrier(g_world.comm);
  if (g_world.rank == 0) remove_tree(dir);
}

// Device pieces are staged through host memory (tests/gpu/mp_checkpoint_device.cpp); a piece
// declared CUDA that is host memory is refused before any byte is touched: invalid argument in a
// CUDA build (it is not device memory of GPU device_id), unsupported in one without CUDA.
bool refused_as_declared_device(weft_status_t st, const std::string& msg) {
  const bool right = st == WEFT_ERR_INVALID_ARGUMENT ? has(msg, "host memory")
                     : st == WEFT_ERR_UNSUPPORTED    ? has(msg, "without CUDA")
                                                     : false;
  return right && has(msg, "device memory") && has(msg, "'dev'");
}

TEST(CheckpointSave, DeclaredDeviceMemoryThatIsNotIsRefusedOnEveryRank) {
  Mesh m;
  make_mesh(m, g_world.comm, {g_world.size});
  const std::string dir = shared_tempdir(g_world.comm, "ckpt-dev");
  // A view that claims CUDA memory: the refusal comes before any byte is touched.
  std::vector<float> host(4, 0.0f);
  const int64_t shape[] = {4};
  weft_tensor_t v{host.data(), WEFT_DEVICE_CUDA, 0, 1, WEFT_FLOAT32, shape, nullptr, 0};
  const weft_placement_t rep = R();
  const int64_t global[] = {4};
  weft_sharded_t t = nullptr;
  ASSERT_WEFT_OK(weft_sharded_create(m.handle, 1, global, WEFT_FLOAT32, &rep, &v, nullptr, &t));
  const char* name = "dev";
  weft_status_t st = weft_checkpoint_save(g_world.comm, dir.c_str(), &name, &t, 1, nullptr);
  std::string msg = mpt::last_error();
  EXPECT_TRUE(refused_as_declared_device(st, msg)) << mpt::status_name(st) << ": " << msg;
  // Loading into it: refused after the index is read, before any data is.
  Tensor on_host;
  make_tensor(on_host, {"dev", WEFT_FLOAT32, {4}, 74}, m, {R()}, false, true);
  ASSERT_WEFT_OK(save(dir, {&on_host}));
  st = weft_checkpoint_load(dir.c_str(), &name, &t, 1, nullptr);
  msg = mpt::last_error();
  EXPECT_TRUE(refused_as_declared_device(st, msg)) << mpt::status_name(st) << ": " << msg;
  EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](float x) { return x == 0.0f; }));
  EXPECT_WEFT_OK(weft_sharded_destroy(t));
  barrier(g_world.comm);
  if (g_world.rank == 0) remove_tree(dir);
}

TEST(CheckpointHandle, BadArguments) {
  weft_checkpoint_t ck = nullptr;
  EXPECT_EQ(weft_checkpoint_open(nullptr, &ck), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(mpt::last_error(), "dir")) << mpt::last_error();
  EXPECT_EQ(weft_checkpoint_open("/nonexistent/weft-ckpt", &ck), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(mpt::last_error(), "index.weft")) << mpt::last_error();
  EXPECT_WEFT_OK(weft_checkpoint_close(nullptr));
  size_t n = 0;
  EXPECT_EQ(weft_checkpoint_count(nullptr, &n), WEFT_ERR_INVALID_ARGUMENT);
  weft_checkpoint_config_t cfg = WEFT_CHECKPOINT_CONFIG_INIT;
  cfg.struct_size = 3;
  EXPECT_EQ(weft_checkpoint_load("/tmp", nullptr, nullptr, 0, &cfg), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(mpt::last_error(), "struct_size")) << mpt::last_error();
}
