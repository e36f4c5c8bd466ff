// Bad input to the mesh and sharded-tensor calls (weft/mesh.h): each call in the tables returns
// its documented status, leaves a weft_last_error() that names the offending argument, and
// crashes nothing; afterwards the world and the meshes still work (a redistribution runs).
// Every rank makes the same calls in the same order, so collective calls stay in step.
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "mp_gtest.h"
#include "sharding_reference.h"

using mpt::g_world;
namespace shard = mpt::shard;

namespace {

struct BadCall {
  std::string name;
  std::function<weft_status_t()> call;
  std::vector<weft_status_t> expected;  // any of these
  std::vector<std::string> keywords;    // the message names the argument: any of these words
};

void run_table(const std::vector<BadCall>& table) {
  for (const BadCall& b : table) {
    SCOPED_TRACE(b.name);
    const weft_status_t s = b.call();
    const std::string err = mpt::last_error();
    if (std::getenv("WEFT_TEST_VERBOSE")) mpt::logf("%s -> %s: %s", b.name.c_str(), mpt::status_name(s), err.c_str());
    bool ok = false;
    std::string want;
    for (weft_status_t e : b.expected) {
      ok |= s == e;
      want += std::string(want.empty() ? "" : " or ") + mpt::status_name(e);
    }
    EXPECT_TRUE(ok) << b.name << ": returned " << mpt::status_name(s) << ", expected " << want << " (message: \""
                    << err << "\")";
    if (s == WEFT_OK) continue;
    EXPECT_FALSE(err.empty()) << b.name << ": weft_last_error() is empty";
    bool named = b.keywords.empty();
    std::string words;
    for (const std::string& k : b.keywords) {
      named |= mpt::contains_ci(err, k);
      words += (words.empty() ? "\"" : " / \"") + k + "\"";
    }
    EXPECT_TRUE(named) << b.name << ": the message should name the argument (" << words << "): \"" << err << "\"";
  }
}

const std::vector<weft_status_t> kInvalid = {WEFT_ERR_INVALID_ARGUMENT};

bool under_asan() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

// A 1-d world mesh and an S(0) float32 tensor of 2n+1 elements on it, with its local memory.
struct Fixture {
  weft_mesh_t mesh = nullptr;
  int64_t global = 0, local = 0, offset = 0;
  std::vector<float> mem, mem2;
  weft_placement_t s0 = shard::S(0);
  Fixture() {
    const int n = g_world.size;
    EXPECT_WEFT_OK(weft_mesh_create(g_world.comm, 1, &n, nullptr, nullptr, &mesh));
    global = 2 * n + 1;
    EXPECT_WEFT_OK(weft_mesh_local_shape(mesh, &s0, 1, &global, -1, &local, &offset));
    mem.assign(static_cast<size_t>(global) * 2 + 8, 0.f);
    mem2.assign(mem.size(), 0.f);
  }
  ~Fixture() { EXPECT_WEFT_OK(weft_mesh_destroy(mesh)); }
  weft_tensor_t view(int64_t* shape, weft_dtype_t dt = WEFT_FLOAT32, float* data = nullptr) {
    return weft_tensor_t{data ? data : mem.data(), WEFT_DEVICE_CPU, 0, 1, dt, shape, nullptr, 0};
  }
};

}  // namespace

TEST(MeshBadInput, Create) {
  weft_comm_t w = g_world.comm;
  const int n = g_world.size;
  weft_mesh_t m = nullptr;
  auto create = [&](int nd, std::vector<int> shape, std::vector<const char*> names, const weft_mesh_config_t* cfg) {
    weft_status_t s = weft_mesh_create(w, nd, shape.data(), names.empty() ? nullptr : names.data(), cfg, &m);
    if (s == WEFT_OK) weft_mesh_destroy(m);
    return s;
  };
  weft_mesh_config_t small = WEFT_MESH_CONFIG_INIT;
  small.struct_size = 3;
  std::vector<int> dup_ranks(n, 0);
  weft_mesh_config_t dupr = WEFT_MESH_CONFIG_INIT;
  dupr.ranks = dup_ranks.data();
  dupr.nranks = dup_ranks.size();
  const int out_of_range = n;
  weft_mesh_config_t oor = WEFT_MESH_CONFIG_INIT;
  oor.ranks = &out_of_range;
  oor.nranks = 1;
  const int zero = 0;
  weft_mesh_config_t short_list = WEFT_MESH_CONFIG_INIT;
  short_list.ranks = &zero;
  short_list.nranks = 1;
  const std::string long_name(WEFT_MESH_MAX_NAME + 1, 'x');
  run_table({
      {"shape product n+1", [&] { return create(1, {n + 1}, {}, nullptr); }, kInvalid, {"shape"}},
      {"shape product 2n (2-d)", [&] { return create(2, {2, n}, {"dp", "tp"}, nullptr); }, kInvalid, {"shape"}},
      {"a zero dim", [&] { return create(2, {0, n}, {"dp", "tp"}, nullptr); }, kInvalid, {"shape"}},
      {"ndims 0", [&] { return create(0, {n}, {}, nullptr); }, kInvalid, {"ndims"}},
      {"ndims > WEFT_MESH_MAX_DIMS", [&] { return create(WEFT_MESH_MAX_DIMS + 1, {1, 1, 1, 1, n}, {}, nullptr); },
       kInvalid, {"ndims"}},
      {"duplicate dim names", [&] { return create(2, {1, n}, {"dp", "dp"}, nullptr); }, kInvalid, {"name", "dp"}},
      {"empty dim name", [&] { return create(2, {1, n}, {"dp", ""}, nullptr); }, kInvalid, {"name"}},
      {"NULL dim name", [&] { return create(2, {1, n}, {"dp", nullptr}, nullptr); }, kInvalid, {"name"}},
      {"dim name too long", [&] { return create(2, {1, n}, {"dp", long_name.c_str()}, nullptr); }, kInvalid, {"name"}},
      {"config struct_size 3", [&] { return create(1, {n}, {}, &small); }, kInvalid, {"struct_size", "config"}},
      {"duplicate ranks", [&] { return create(1, {n}, {}, &dupr); }, n > 1 ? kInvalid : std::vector<weft_status_t>{WEFT_OK},
       {"rank"}},
      {"rank out of range", [&] { return create(1, {1}, {}, &oor); }, kInvalid, {"rank"}},
      {"nranks != shape product", [&] { return create(1, {2}, {}, &short_list); }, kInvalid, {"rank", "shape"}},
      {"NULL comm", [&] { return weft_mesh_create(nullptr, 1, &n, nullptr, nullptr, &m); }, kInvalid, {"comm"}},
      {"NULL shape", [&] { return weft_mesh_create(w, 1, nullptr, nullptr, nullptr, &m); }, kInvalid, {"shape"}},
      {"NULL out", [&] { return weft_mesh_create(w, 1, &n, nullptr, nullptr, nullptr); }, kInvalid, {"mesh"}},
      {"weft_mesh_destroy(NULL) is fine", [&] { return weft_mesh_destroy(nullptr); }, {WEFT_OK}, {}},
  });
}

// mesh.h: "MISMATCH when ranks passed different shapes". Rank 0 asks for a 1 x n mesh, the
// others for n: every rank must get WEFT_ERR_MISMATCH (not a hang, not a mesh).
TEST(MeshBadInput, RanksDisagreeOnTheShape) {
  const int n = g_world.size;
  if (n < 2) GTEST_SKIP() << "needs two ranks to disagree";
  const int shape2[2] = {1, n};
  weft_mesh_t m = nullptr;
  run_table({{"rank 0 passes 1 x n, the others n", [&] {
                weft_status_t s = g_world.rank == 0 ? weft_mesh_create(g_world.comm, 2, shape2, nullptr, nullptr, &m)
                                                    : weft_mesh_create(g_world.comm, 1, &n, nullptr, nullptr, &m);
                if (s == WEFT_OK) weft_mesh_destroy(m);
                return s;
              }, {WEFT_ERR_MISMATCH}, {"shape"}}});
  // The world still works afterwards.
  int64_t one = 1, sum = 0;
  ASSERT_WEFT_OK(weft_allreduce(&one, &sum, 1, WEFT_INT64, WEFT_SUM, g_world.comm, nullptr, nullptr));
  EXPECT_EQ(sum, n);
}

TEST(MeshBadInput, Queries) {
  Fixture f;
  int v = 0;
  const char* name = nullptr;
  weft_comm_t c = nullptr;
  const int d01[] = {0, 0};
  const int d_neg[] = {-1};
  const int d1 = 1;
  const int d11[] = {1, 1}, d10[] = {1, 0};
  weft_mesh_t m2 = nullptr;  // 1 x n
  const int shape2[2] = {1, g_world.size};
  ASSERT_WEFT_OK(weft_mesh_create(g_world.comm, 2, shape2, nullptr, nullptr, &m2));
  run_table({
      {"weft_mesh_shape(NULL)", [&] { return weft_mesh_shape(nullptr, &v, nullptr); }, kInvalid, {"mesh"}},
      {"weft_mesh_dim_name(NULL)", [&] { return weft_mesh_dim_name(nullptr, 0, &name); }, kInvalid, {"mesh"}},
      {"weft_mesh_dim_name(dim -1)", [&] { return weft_mesh_dim_name(f.mesh, -1, &name); }, kInvalid, {"dim"}},
      {"weft_mesh_dim_index(NULL name)", [&] { return weft_mesh_dim_index(f.mesh, nullptr, &v); }, kInvalid, {"name"}},
      {"weft_mesh_is_member(NULL)", [&] { return weft_mesh_is_member(nullptr, &v); }, kInvalid, {"mesh"}},
      {"weft_mesh_coords(NULL)", [&] { return weft_mesh_coords(nullptr, &v, &v); }, kInvalid, {"mesh"}},
      {"weft_mesh_parent_rank(NULL)", [&] { return weft_mesh_parent_rank(nullptr, 0, &v); }, kInvalid, {"mesh"}},
      {"weft_mesh_comm(NULL)", [&] { return weft_mesh_comm(nullptr, d01, 1, &c); }, kInvalid, {"mesh"}},
      {"weft_mesh_comm(dims repeated)", [&] { return weft_mesh_comm(m2, d11, 2, &c); }, kInvalid, {"dim"}},
      {"weft_mesh_comm(dims decreasing)", [&] { return weft_mesh_comm(m2, d10, 2, &c); }, kInvalid, {"dim"}},
      {"weft_mesh_comm(too many dims)", [&] { return weft_mesh_comm(f.mesh, d01, 2, &c); }, kInvalid, {"dim"}},
      {"weft_mesh_comm(dim -1)", [&] { return weft_mesh_comm(f.mesh, d_neg, 1, &c); }, kInvalid, {"dim"}},
      {"weft_mesh_comm(dim out of range)", [&] { return weft_mesh_comm(f.mesh, &d1, 1, &c); }, kInvalid, {"dim"}},
  });
  EXPECT_WEFT_OK(weft_mesh_destroy(m2));
}

TEST(MeshBadInput, LayoutsAndViews) {
  Fixture f;
  const int64_t g2[2] = {5, 3};
  int64_t ls[2], lo[2];
  const weft_placement_t s2 = shard::S(2), prod = shard::P(WEFT_PROD), sneg = shard::S(-1);
  weft_placement_t badkind = shard::R();
  badkind.kind = static_cast<weft_placement_kind_t>(7);
  weft_placement_t badop = shard::P(WEFT_SUM);
  badop.op = static_cast<weft_op_t>(42);
  weft_sharded_t t = nullptr;
  auto create = [&](const weft_placement_t* p, int nd, const int64_t* g, weft_dtype_t dt, const weft_tensor_t* v) {
    weft_status_t s = weft_sharded_create(f.mesh, nd, g, dt, p, v, nullptr, &t);
    if (s == WEFT_OK) weft_sharded_destroy(t);
    return s;
  };
  int64_t right = f.local, wrong = f.local + 1, neg = -1;
  weft_tensor_t good = f.view(&right);
  weft_tensor_t bad_shape = f.view(&wrong);
  weft_tensor_t bad_dtype = f.view(&right, WEFT_FLOAT64);
  weft_tensor_t bad_ndim = good;
  bad_ndim.ndim = 2;
  weft_tensor_t null_data = good;
  null_data.data = nullptr;
  const int64_t too_many[WEFT_TENSOR_MAX_DIMS + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  run_table({
      {"local_shape: SHARD of tensor dim 2 of a 2-d tensor",
       [&] { return weft_mesh_local_shape(f.mesh, &s2, 2, g2, 0, ls, lo); }, kInvalid, {"dim", "placement"}},
      {"local_shape: SHARD of tensor dim -1", [&] { return weft_mesh_local_shape(f.mesh, &sneg, 2, g2, 0, ls, lo); },
       kInvalid, {"dim", "placement"}},
      {"local_shape: PARTIAL(PROD)", [&] { return weft_mesh_local_shape(f.mesh, &prod, 2, g2, 0, ls, lo); }, kInvalid,
       {"prod", "op", "placement"}},
      {"local_shape: bad placement kind", [&] { return weft_mesh_local_shape(f.mesh, &badkind, 2, g2, 0, ls, lo); },
       kInvalid, {"kind", "placement"}},
      {"local_shape: bad op", [&] { return weft_mesh_local_shape(f.mesh, &badop, 2, g2, 0, ls, lo); }, kInvalid,
       {"op", "placement"}},
      {"local_shape: mesh_rank out of range",
       [&] { return weft_mesh_local_shape(f.mesh, &f.s0, 2, g2, g_world.size, ls, lo); }, kInvalid, {"mesh_rank", "rank"}},
      {"local_shape: negative global dim", [&] { return weft_mesh_local_shape(f.mesh, &f.s0, 1, &neg, 0, ls, lo); },
       kInvalid, {"shape"}},
      {"local_shape: ndim > WEFT_TENSOR_MAX_DIMS",
       [&] { return weft_mesh_local_shape(f.mesh, &f.s0, WEFT_TENSOR_MAX_DIMS + 1, too_many, 0, nullptr, nullptr); },
       kInvalid, {"ndim"}},
      {"local_shape: NULL placements", [&] { return weft_mesh_local_shape(f.mesh, nullptr, 2, g2, 0, ls, lo); },
       kInvalid, {"placement"}},
      {"sharded_create: SHARD of a dim that does not exist", [&] { return create(&s2, 1, &f.global, WEFT_FLOAT32, &good); },
       kInvalid, {"dim", "placement"}},
      {"sharded_create: PARTIAL(PROD)", [&] { return create(&prod, 1, &f.global, WEFT_FLOAT32, &good); }, kInvalid,
       {"prod", "op", "placement"}},
      {"sharded_create: local shape differs from the layout's", [&] { return create(&f.s0, 1, &f.global, WEFT_FLOAT32, &bad_shape); },
       kInvalid, {"shape", "local"}},
      {"sharded_create: view dtype differs", [&] { return create(&f.s0, 1, &f.global, WEFT_FLOAT32, &bad_dtype); },
       kInvalid, {"dtype"}},
      {"sharded_create: view ndim differs", [&] { return create(&f.s0, 1, &f.global, WEFT_FLOAT32, &bad_ndim); },
       kInvalid, {"ndim", "local"}},
      {"sharded_create: bad dtype", [&] { return create(&f.s0, 1, &f.global, static_cast<weft_dtype_t>(99), &good); },
       kInvalid, {"dtype"}},
      {"sharded_create: NULL local on a member", [&] { return create(&f.s0, 1, &f.global, WEFT_FLOAT32, nullptr); },
       kInvalid, {"local"}},
      {"sharded_create: NULL mesh", [&] {
         return weft_sharded_create(nullptr, 1, &f.global, WEFT_FLOAT32, &f.s0, &good, nullptr, &t);
       }, kInvalid, {"mesh"}},
      {"sharded_create: NULL out", [&] {
         return weft_sharded_create(f.mesh, 1, &f.global, WEFT_FLOAT32, &f.s0, &good, nullptr, nullptr);
       }, kInvalid, {"tensor"}},
      {"weft_sharded_destroy(NULL) is fine", [&] { return weft_sharded_destroy(nullptr); }, {WEFT_OK}, {}},
  });
  // A NULL data pointer is only wrong where the piece has elements (ranks with an empty shard
  // may pass NULL or not; mesh.h does not say).
  if (right > 0)
    run_table({{"sharded_create: NULL data in the view of a non-empty piece",
                [&] { return create(&f.s0, 1, &f.global, WEFT_FLOAT32, &null_data); }, kInvalid, {"data", "local"}}});
}

TEST(MeshBadInput, Redistribute) {
  Fixture f;
  int64_t right = f.local, whole = f.global, other = f.global + 1, other_local = 0;
  const weft_placement_t r = shard::R();
  ASSERT_WEFT_OK(weft_mesh_local_shape(f.mesh, &f.s0, 1, &other, -1, &other_local, nullptr));
  weft_tensor_t sv = f.view(&right);
  weft_tensor_t dv = f.view(&whole, WEFT_FLOAT32, f.mem2.data());
  weft_tensor_t ov = f.view(&other, WEFT_FLOAT32, f.mem2.data());
  weft_tensor_t dv64 = f.view(&whole, WEFT_FLOAT64, f.mem2.data());
  // Overlap must be wrong on every rank (a rank whose check passes would enter the collective
  // alone): a REPLICATE source and a REPLICATE destination on the same memory, offset by one.
  weft_tensor_t rsv = f.view(&whole);
  weft_tensor_t overlap = f.view(&whole, WEFT_FLOAT32, f.mem.data() + 1);
  weft_sharded_t src = nullptr, dst = nullptr, dst_shape = nullptr, dst_dtype = nullptr, dst_over = nullptr;
  weft_sharded_t src_r = nullptr, bcast = nullptr;
  ASSERT_WEFT_OK(weft_sharded_create(f.mesh, 1, &f.global, WEFT_FLOAT32, &r, &rsv, nullptr, &src_r));
  ASSERT_WEFT_OK(weft_sharded_create(f.mesh, 1, &f.global, WEFT_FLOAT32, &f.s0, &sv, nullptr, &src));
  ASSERT_WEFT_OK(weft_sharded_create(f.mesh, 1, &f.global, WEFT_FLOAT32, &r, &dv, nullptr, &dst));
  ASSERT_WEFT_OK(weft_sharded_create(f.mesh, 1, &other, WEFT_FLOAT32, &r, &ov, nullptr, &dst_shape));
  ASSERT_WEFT_OK(weft_sharded_create(f.mesh, 1, &f.global, WEFT_FLOAT64, &r, &dv64, nullptr, &dst_dtype));
  ASSERT_WEFT_OK(weft_sharded_create(f.mesh, 1, &f.global, WEFT_FLOAT32, &r, &overlap, nullptr, &dst_over));

  // Two meshes from two different parent communicators (two dups of the world).
  weft_comm_t da = nullptr, db = nullptr;
  ASSERT_WEFT_OK(weft_comm_dup(g_world.comm, &da));
  ASSERT_WEFT_OK(weft_comm_dup(g_world.comm, &db));
  const int n = g_world.size;
  weft_mesh_t ma = nullptr, mb = nullptr;
  ASSERT_WEFT_OK(weft_mesh_create(da, 1, &n, nullptr, nullptr, &ma));
  ASSERT_WEFT_OK(weft_mesh_create(db, 1, &n, nullptr, nullptr, &mb));
  weft_tensor_t sva = f.view(&right), dvb = f.view(&whole, WEFT_FLOAT32, f.mem2.data());
  weft_sharded_t sa = nullptr, dbh = nullptr;
  ASSERT_WEFT_OK(weft_sharded_create(ma, 1, &f.global, WEFT_FLOAT32, &f.s0, &sva, nullptr, &sa));
  ASSERT_WEFT_OK(weft_sharded_create(mb, 1, &f.global, WEFT_FLOAT32, &r, &dvb, nullptr, &dbh));

  weft_redistribute_step_t steps[8];
  size_t ns = 0;
  weft_tensor_t wrong_shape = f.view(&other_local);
  weft_tensor_t wrong_dtype = sv;
  wrong_dtype.dtype = WEFT_INT32;
  int fake_stream = 0;
  run_table({
      {"meshes from different parent communicators", [&] { return weft_redistribute(sa, dbh, nullptr, nullptr); },
       kInvalid, {"mesh", "communicator", "parent"}},
      {"plan: meshes from different parents", [&] { return weft_redistribute_plan(sa, dbh, steps, 8, &ns); }, kInvalid,
       {"mesh", "communicator", "parent"}},
      {"global shapes differ", [&] { return weft_redistribute(src, dst_shape, nullptr, nullptr); }, kInvalid, {"shape"}},
      {"plan: global shapes differ", [&] { return weft_redistribute_plan(src, dst_shape, steps, 8, &ns); }, kInvalid,
       {"shape"}},
      {"dtypes differ", [&] { return weft_redistribute(src, dst_dtype, nullptr, nullptr); }, kInvalid,
       {"dtype", "float64"}},
      {"dst view with stride 0 (common.h: refused where weft writes)", [&] {
         const int64_t zero_stride = 0;
         weft_tensor_t bv = f.view(&whole, WEFT_FLOAT32, f.mem2.data());
         bv.strides = &zero_stride;
         // Refused by weft_sharded_create or, at the latest, by weft_redistribute (every rank
         // alike); the handle is destroyed after the table so the message stays the last one.
         weft_status_t st = weft_sharded_create(f.mesh, 1, &f.global, WEFT_FLOAT32, &r, &bv, nullptr, &bcast);
         return st != WEFT_OK ? st : weft_redistribute(src, bcast, nullptr, nullptr);
       }, kInvalid, {"stride"}},
      {"src and dst memory overlap", [&] { return weft_redistribute(src_r, dst_over, nullptr, nullptr); }, kInvalid,
       {"overlap"}},
      {"a stream with host memory", [&] { return weft_redistribute(src, dst, &fake_stream, nullptr); },
       {WEFT_ERR_UNSUPPORTED, WEFT_ERR_INVALID_ARGUMENT}, {"stream"}},
      {"NULL src", [&] { return weft_redistribute(nullptr, dst, nullptr, nullptr); }, kInvalid, {"src"}},
      {"NULL dst", [&] { return weft_redistribute(src, nullptr, nullptr, nullptr); }, kInvalid, {"dst"}},
      {"plan: NULL src", [&] { return weft_redistribute_plan(nullptr, dst, steps, 8, &ns); }, kInvalid, {"src"}},
      {"plan: NULL nsteps", [&] { return weft_redistribute_plan(src, dst, steps, 8, nullptr); }, kInvalid, {"nsteps"}},
      {"set_local: shape differs", [&] { return weft_sharded_set_local(src, &wrong_shape); },
       other_local == right ? std::vector<weft_status_t>{WEFT_OK} : kInvalid, {"shape", "local"}},
      {"set_local: dtype differs", [&] { return weft_sharded_set_local(src, &wrong_dtype); }, kInvalid, {"dtype"}},
      {"set_local: NULL tensor", [&] { return weft_sharded_set_local(nullptr, &sv); }, kInvalid, {"tensor"}},
      {"weft_sharded_local(NULL)", [&] {
         weft_tensor_t v{};
         return weft_sharded_local(nullptr, &v);
       }, kInvalid, {"tensor"}},
  });
  // After all that, the handles still work: S(0) -> R.
  ASSERT_WEFT_OK(weft_sharded_set_local(src, &sv));
  for (int64_t k = 0; k < f.local; ++k) f.mem[k] = static_cast<float>(f.offset + k);
  ASSERT_WEFT_OK(weft_redistribute(src, dst, nullptr, nullptr));
  for (int64_t k = 0; k < f.global; ++k) EXPECT_EQ(f.mem2[k], static_cast<float>(k)) << "element " << k;
  for (weft_sharded_t h : {src, src_r, bcast, dst, dst_shape, dst_dtype, dst_over, sa, dbh}) EXPECT_WEFT_OK(weft_sharded_destroy(h));
  EXPECT_WEFT_OK(weft_mesh_destroy(ma));
  EXPECT_WEFT_OK(weft_mesh_destroy(mb));
  EXPECT_WEFT_OK(weft_comm_destroy(da));
  EXPECT_WEFT_OK(weft_comm_destroy(db));
}

TEST(MeshBadInput, DestroyedHandles) {
  if (under_asan()) GTEST_SKIP() << "reads freed memory on purpose (weft.h: caught where still readable)";
  const int n = g_world.size;
  weft_mesh_t m = nullptr;
  ASSERT_WEFT_OK(weft_mesh_create(g_world.comm, 1, &n, nullptr, nullptr, &m));
  const int64_t g = 3;
  const weft_placement_t r = shard::R();
  float buf[3] = {0, 0, 0};
  weft_tensor_t v{buf, WEFT_DEVICE_CPU, 0, 1, WEFT_FLOAT32, &g, nullptr, 0};
  weft_sharded_t a = nullptr, b = nullptr;
  ASSERT_WEFT_OK(weft_sharded_create(m, 1, &g, WEFT_FLOAT32, &r, &v, nullptr, &a));
  float buf2[3] = {0, 0, 0};
  weft_tensor_t v2 = v;
  v2.data = buf2;
  ASSERT_WEFT_OK(weft_sharded_create(m, 1, &g, WEFT_FLOAT32, &r, &v2, nullptr, &b));
  ASSERT_WEFT_OK(weft_sharded_destroy(a));
  int nd = 0;
  weft_tensor_t out{};
  run_table({
      {"weft_sharded_local(destroyed)", [&] { return weft_sharded_local(a, &out); }, kInvalid, {"tensor"}},
      {"weft_redistribute(destroyed src)", [&] { return weft_redistribute(a, b, nullptr, nullptr); }, kInvalid, {"src"}},
      {"weft_redistribute(destroyed dst)", [&] { return weft_redistribute(b, a, nullptr, nullptr); }, kInvalid, {"dst"}},
  });
  ASSERT_WEFT_OK(weft_sharded_destroy(b));
  ASSERT_WEFT_OK(weft_mesh_destroy(m));
  run_table({
      {"weft_mesh_shape(destroyed)", [&] { return weft_mesh_shape(m, &nd, nullptr); }, kInvalid, {"mesh"}},
      {"weft_sharded_create(destroyed mesh)", [&] {
         weft_sharded_t t = nullptr;
         return weft_sharded_create(m, 1, &g, WEFT_FLOAT32, &r, &v, nullptr, &t);
       }, kInvalid, {"mesh"}},
  });
}
