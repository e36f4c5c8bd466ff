// weft_mp_regions: weft_region_apply and weft_ring_shift (weft/training.h) against the test's
// own reference. Run under weftrun; every rank builds the same meshes and cases in the same order.
//
// Reference (sharding_reference.h, written from the headers' prose): the whole tensor is a
// formula of the element's linear index and a seed that also depends on the group (this rank's
// coordinates on the other mesh dims, so a result from the wrong group fails); an all-reduce or
// reduce-scatter input holds terms of it (shard::Data's SUM split: non-negative, small, summing
// exactly in every dtype), and the expected sum is added up here in a plain loop over the
// group's coordinates; chunks are cut by torch.chunk's rule (shard::chunk). Per region and
// direction the test's own table says which side is whole and which this rank's chunk:
//   COPY      fwd whole -> whole (identity)        bwd whole terms -> whole sum
//   REDUCE    fwd whole terms -> whole sum         bwd whole -> whole (identity)
//   SCATTER   fwd whole -> chunk                   bwd chunk -> whole
//   GATHER    fwd chunk -> whole                   bwd whole -> chunk
//   SEQ_GATHER fwd chunk -> whole                  bwd whole terms -> chunk sum
//   SEQ_REDUCE_SCATTER fwd whole terms -> chunk sum  bwd chunk -> whole
// Every case also checks the input is unchanged and that no byte around or between a strided
// view's elements was written.
//
// Parts (--part=a,b; default: all but bench): shapes (every region x direction on the 1-d mesh
// over the world, f32, extents 0, 1, 7 and 64x1000 along split_dim 0, 1 and the last dim of a
// 3-d tensor, 0-d tensors where nothing splits, views and call forms rotating, in == out for
// COPY/REDUCE), dtypes (all 12 for data movement, float + int32 for sums), mesh2d (dp x tp
// meshes, regions over "tp" and over "dp"), ring (weft_ring_shift), bad (rejected calls).
// --full: every dtype on every shape. --case=K with one part repeats one case. --bench: the
// per-call overhead of a 1 KiB all-reduce (region vs weft_allreduce), not a test.
// WEFT_TEST_INJECT=1 corrupts one element of every non-empty result; the program then passes
// only when every corruption was caught ("injected N, caught N").
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>

#include "reference.h"
#include "regions_test.h"

namespace mpt::regions {

// ------------------------------------------------------------------ shared helpers

void fail_case(Env& env, const std::string& what, const std::string& detail) {
  env.failures++;
  if (!env.quiet) logf("FAIL %s | %s", what.c_str(), detail.c_str());
}

void complete(Env& env, const std::string& what, Form form, weft_request_t req) {
  if (!req) {
    fail_case(env, what, "a call with a request pointer left *request NULL");
    return;
  }
  if (form == Form::poll) {
    const double deadline = now_s() + default_timeout_ms() / 1000.0 + 30;
    for (;;) {
      int done = -1;
      const weft_status_t s = weft_test(req, &done);
      if (s == WEFT_OK) break;
      if (s != WEFT_IN_PROGRESS) die("%s: weft_test returned %s: %s", what.c_str(), status_name(s), last_error().c_str());
      if (now_s() > deadline) die("%s: still WEFT_IN_PROGRESS past the deadline", what.c_str());
      sched_yield();
    }
  } else {
    const weft_status_t s = weft_wait(req);
    if (s != WEFT_OK) die("%s: weft_wait returned %s: %s", what.c_str(), status_name(s), last_error().c_str());
  }
  int done = -1;
  const weft_status_t s = weft_test(req, &done);
  if (s != WEFT_OK || done != 1) {
    fail_case(env, what, std::string("weft_test after completion: ") + status_name(s) + " done=" + std::to_string(done));
  }
  MPT_OK(weft_request_free(req));
}

size_t check_elements(Env& env, const std::string& what, const char* name, const LocalBuffer& buf, weft_dtype_t dt,
                      const std::function<uint64_t(const int64_t* idx)>& want) {
  size_t wrong = 0;
  std::string first;
  const size_t nd = static_cast<size_t>(const_cast<LocalBuffer&>(buf).view().ndim);  // view() only reads
  buf.for_each([&](const int64_t* idx) {
    const uint64_t w = want(idx), got = buf.get(idx);
    if (got == w) return;
    if (wrong++ == 0) {
      std::string at = "[";
      for (size_t d = 0; d < nd; ++d) at += (d ? "," : "") + std::to_string(idx[d]);
      first = "local " + at + "]: expected " + format_value(dt, w) + " got " + format_value(dt, got);
    }
  });
  if (wrong) {
    fail_case(env, what, std::string(name) + ": " + std::to_string(wrong) + " of " + std::to_string(buf.numel()) +
                             " elements wrong, first " + first);
  }
  return wrong;
}

void check_memory(Env& env, const std::string& what, const char* name, const LocalBuffer& buf) {
  if (!buf.guards_ok()) fail_case(env, what, std::string(name) + ": bytes around the buffer written");
  size_t first = 0;
  if (const size_t n = buf.gaps_changed(&first)) {
    fail_case(env, what, std::string(name) + ": " + std::to_string(n) + " bytes between elements written (first at " +
                             std::to_string(first) + ")");
  }
}

void maybe_inject(Env& env, LocalBuffer& buf, weft_dtype_t dt) {
  if (!inject_enabled() || buf.numel() == 0) return;
  const std::vector<int64_t> idx = buf.index_of(buf.numel() / 2);
  buf.set(idx.data(), injected_bits(dt, buf.get(idx.data())));
  env.injected = true;
}

const std::vector<weft_dtype_t>& all_dtypes() {
  static const std::vector<weft_dtype_t> v = {WEFT_FLOAT32, WEFT_FLOAT64,  WEFT_FLOAT16, WEFT_BFLOAT16,
                                              WEFT_INT8,    WEFT_UINT8,    WEFT_INT32,   WEFT_UINT32,
                                              WEFT_INT64,   WEFT_UINT64,   WEFT_FP8_E4M3, WEFT_FP8_E5M2};
  return v;
}
const std::vector<weft_dtype_t>& sum_dtypes() {
  static const std::vector<weft_dtype_t> v = {WEFT_FLOAT32,  WEFT_FLOAT64,  WEFT_FLOAT16, WEFT_BFLOAT16,
                                              WEFT_FP8_E4M3, WEFT_FP8_E5M2, WEFT_INT32};
  return v;
}

namespace {

// ------------------------------------------------------------------ the regions' table

enum class Side { whole, chunk };
struct Direction {
  Side in, out;
  bool sum;  // the input holds terms, the output their sum
};
Direction direction_of(weft_region_t r, int backward) {
  const Side W = Side::whole, C = Side::chunk;
  switch (r) {
    case WEFT_REGION_COPY: return backward ? Direction{W, W, true} : Direction{W, W, false};
    case WEFT_REGION_REDUCE: return backward ? Direction{W, W, false} : Direction{W, W, true};
    case WEFT_REGION_SCATTER: return backward ? Direction{C, W, false} : Direction{W, C, false};
    case WEFT_REGION_GATHER: return backward ? Direction{W, C, false} : Direction{C, W, false};
    case WEFT_REGION_SEQ_GATHER: return backward ? Direction{W, C, true} : Direction{C, W, false};
    case WEFT_REGION_SEQ_REDUCE_SCATTER: return backward ? Direction{C, W, false} : Direction{W, C, true};
  }
  die("unknown region %d", static_cast<int>(r));
}
const char* region_text(weft_region_t r) {
  static const char* names[] = {"COPY", "REDUCE", "SCATTER", "GATHER", "SEQ_GATHER", "SEQ_REDUCE_SCATTER"};
  return names[static_cast<int>(r)];
}
constexpr weft_region_t kRegions[] = {WEFT_REGION_COPY,   WEFT_REGION_REDUCE,     WEFT_REGION_SCATTER,
                                      WEFT_REGION_GATHER, WEFT_REGION_SEQ_GATHER, WEFT_REGION_SEQ_REDUCE_SCATTER};

struct Case {
  std::string part;
  int mesh = 0, dim = 0;
  weft_region_t region = WEFT_REGION_COPY;
  int backward = 0;
  weft_dtype_t dt = WEFT_FLOAT32;
  shard::Shape whole;
  int split_dim = 0;
  View in_view = View::contiguous, out_view = View::contiguous;
  bool in_place = false;
  Form form = Form::blocking;
  int index = 0;

  std::string describe(const Env& env) const {
    const MeshInfo& m = env.meshes[static_cast<size_t>(mesh)];
    std::string s = part + "#" + std::to_string(index) + " " + m.name + "/" + m.dims[static_cast<size_t>(dim)] + " " +
                    region_text(region) + (backward ? " bwd " : " fwd ") + dtype_name(dt) + " whole " +
                    shard::shape_name(whole) + " split_dim " + std::to_string(split_dim) + " in " + view_name(in_view);
    s += in_place ? " (in == out)" : std::string(" out ") + view_name(out_view);
    return s + " " + form_name(form) + " | repro: weftrun -n " + std::to_string(env.world.size) +
           " weft_mp_regions --part=" + part + " --case=" + std::to_string(index);
  }
};

struct ShapeCase {
  shard::Shape whole;
  int split_dim;
};

// Extents 0, 1 and 7 (uneven from 2 ranks, empty chunks from 5) along split_dim 0, 1 and the
// last dim of a 3-d tensor, and a large 64 x 1000 tensor along both dims.
const std::vector<ShapeCase>& shapes() {
  static const std::vector<ShapeCase> v = {{{0, 3}, 0}, {{4, 0}, 1},    {{1, 5}, 0},       {{5, 1}, 1},
                                           {{7, 3}, 0}, {{3, 7}, 1},    {{2, 3, 7}, 2},    {{7}, 0},
                                           {{64, 1000}, 0}, {{64, 1000}, 1}};
  return v;
}

class Builder {
 public:
  explicit Builder(std::vector<Case>* out) : out_(out) {}
  void add(Case c) {
    c.index = next_++;
    const int i = c.index;
    c.in_view = static_cast<View>(i % 3);
    c.out_view = c.in_place ? c.in_view : static_cast<View>((i / 3) % 3);
    c.form = static_cast<Form>((i / 9 + i) % 3);
    out_->push_back(std::move(c));
  }
  // Every region x direction of dtype dt on shape s (sums only for sum dtypes); 0-d tensors
  // only where nothing splits.
  void all_directions(Case base, const ShapeCase& s) {
    for (weft_region_t r : kRegions) {
      for (int bwd = 0; bwd < 2; ++bwd) {
        const Direction d = direction_of(r, bwd);
        const bool splits = d.in != d.out;
        if (d.sum && std::find(sum_dtypes().begin(), sum_dtypes().end(), base.dt) == sum_dtypes().end()) continue;
        if (s.whole.empty() && splits) continue;
        Case c = base;
        c.region = r;
        c.backward = bwd;
        c.whole = s.whole;
        c.split_dim = s.whole.empty() ? 99 : s.split_dim;  // ignored where nothing splits
        add(c);
      }
    }
  }
  // in == out for the regions that keep the shape.
  void in_place(Case base, const ShapeCase& s) {
    for (weft_region_t r : {WEFT_REGION_COPY, WEFT_REGION_REDUCE}) {
      for (int bwd = 0; bwd < 2; ++bwd) {
        Case c = base;
        c.region = r;
        c.backward = bwd;
        c.whole = s.whole;
        c.split_dim = s.split_dim;
        c.in_place = true;
        add(c);
      }
    }
  }

 private:
  std::vector<Case>* out_;
  int next_ = 0;
};

std::vector<Case> build_cases(const Env& env, const std::string& part, bool full) {
  std::vector<Case> out;
  Builder b(&out);
  Case base;
  base.part = part;
  if (part == "shapes") {
    for (weft_dtype_t dt : full ? all_dtypes() : std::vector<weft_dtype_t>{WEFT_FLOAT32}) {
      base.dt = dt;
      b.all_directions(base, {{}, 0});
      for (const ShapeCase& s : shapes()) b.all_directions(base, s);
      for (const ShapeCase& s : {ShapeCase{{7, 3}, 0}, ShapeCase{{64, 1000}, 1}, ShapeCase{{0, 3}, 0}}) b.in_place(base, s);
    }
  } else if (part == "dtypes") {
    int k = 0;
    for (weft_dtype_t dt : all_dtypes()) {
      base.dt = dt;
      b.all_directions(base, k++ % 2 ? ShapeCase{{7, 3}, 0} : ShapeCase{{3, 2, 5}, 2});
      b.in_place(base, {{5, 2}, 1});
    }
  } else if (part == "mesh2d") {
    for (size_t m = 0; m < env.meshes.size(); ++m) {
      if (env.meshes[m].dims.size() != 2) continue;
      base.mesh = static_cast<int>(m);
      for (int dim = 0; dim < 2; ++dim) {
        base.dim = dim;
        base.dt = WEFT_FLOAT32;
        b.all_directions(base, {{7, 3}, 0});
        base.dt = WEFT_BFLOAT16;
        b.all_directions(base, {{2, 3, 5}, 2});
        b.in_place(base, {{3, 5}, 1});
      }
    }
  }
  return out;
}

// ------------------------------------------------------------------ one case

void run_case(Env& env, const Case& c) {
  const std::string what = c.describe(env);
  const MeshInfo& M = env.meshes[static_cast<size_t>(c.mesh)];
  const int pos = M.position(env.world.rank);
  const int k = M.ref.shape[static_cast<size_t>(c.dim)];
  const int me = M.ref.coords(pos)[static_cast<size_t>(c.dim)];
  const Direction dir = direction_of(c.region, c.backward);
  env.run++;

  // The group's own tensor: the seed mixes in the position of its coordinate-0 member.
  const uint64_t seed = mix64(hash_str(what.c_str()) ^ static_cast<uint64_t>(M.along(pos, c.dim, 0) + 1));
  const shard::Data data(c.dt, seed, c.whole);
  shard::Layout partial(M.dims.size(), shard::R());
  partial[static_cast<size_t>(c.dim)] = shard::P(WEFT_SUM);
  // The chunk of this rank: torch.chunk's rule along split_dim.
  const size_t nd = c.whole.size();
  shard::Shape offset(nd, 0), chunk = c.whole;
  if (!c.whole.empty()) {
    const auto sd = static_cast<size_t>(c.split_dim);
    shard::chunk(c.whole[sd], k, me, &offset[sd], &chunk[sd]);
  }
  auto global_linear = [&](const int64_t* idx, Side side) {
    std::vector<int64_t> g(nd);
    for (size_t d = 0; d < nd; ++d) g[d] = idx[d] + (side == Side::chunk ? offset[d] : 0);
    return shard::linear_index(c.whole, g.data());
  };
  auto input = [&](int64_t lin) {
    return shard::encode_int(c.dt, dir.sum ? data.term(M.ref, partial, pos, lin) : data.value(lin));
  };
  auto expected = [&](int64_t lin) {
    if (!dir.sum) return shard::encode_int(c.dt, data.value(lin));
    int64_t s = 0;
    for (int j = 0; j < k; ++j) s += data.term(M.ref, partial, M.along(pos, c.dim, j), lin);
    return shard::encode_int(c.dt, s);
  };

  LocalBuffer in(c.dt, dir.in == Side::whole ? c.whole : chunk, c.in_view);
  in.for_each([&](const int64_t* idx) { in.set(idx, input(global_linear(idx, dir.in))); });
  std::unique_ptr<LocalBuffer> out_own;
  if (!c.in_place) out_own = std::make_unique<LocalBuffer>(c.dt, dir.out == Side::whole ? c.whole : chunk, c.out_view);
  LocalBuffer& out = c.in_place ? in : *out_own;
  const weft_tensor_t tin = in.view(), tout = out.view();

  weft_request_t req = nullptr;
  const weft_status_t s = weft_region_apply(M.handle, M.dims[static_cast<size_t>(c.dim)].c_str(), c.region, c.backward,
                                            c.split_dim, &tin, &tout, nullptr, c.form == Form::blocking ? nullptr : &req);
  if (s != WEFT_OK) die("%s: weft_region_apply returned %s: %s", what.c_str(), status_name(s), last_error().c_str());
  if (c.form != Form::blocking) complete(env, what, c.form, req);

  maybe_inject(env, out, c.dt);
  check_elements(env, what, "out", out, c.dt, [&](const int64_t* idx) { return expected(global_linear(idx, dir.out)); });
  check_memory(env, what, "out", out);
  if (!c.in_place) {
    check_elements(env, what, "in (must be unchanged)", in, c.dt,
                   [&](const int64_t* idx) { return input(global_linear(idx, dir.in)); });
    check_memory(env, what, "in", in);
  }
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string t;
  while (std::getline(ss, t, ','))
    if (!t.empty()) out.push_back(t);
  return out;
}

// The world as a 1-d mesh with dim "tp", and for an even world of 4+ ranks a 2 x n/2 mesh
// ("dp", "tp"), both over the ranks in order.
std::vector<MeshInfo> make_meshes(const World& w) {
  std::vector<MeshInfo> out;
  auto make = [&](std::vector<int> shape, std::vector<std::string> dims, std::string name) {
    MeshInfo m;
    m.name = std::move(name);
    m.dims = std::move(dims);
    m.ref.shape = shape;
    for (int r = 0; r < w.size; ++r) m.ref.ranks.push_back(r);
    std::vector<const char*> names;
    for (const std::string& d : m.dims) names.push_back(d.c_str());
    MPT_OK(weft_mesh_create(w.comm, static_cast<int>(shape.size()), shape.data(), names.data(), nullptr, &m.handle));
    out.push_back(std::move(m));
  };
  make({w.size}, {"tp"}, "w" + std::to_string(w.size));
  if (w.size >= 4 && w.size % 2 == 0) make({2, w.size / 2}, {"dp", "tp"}, "2x" + std::to_string(w.size / 2));
  return out;
}

}  // namespace
}  // namespace mpt::regions

int main(int argc, char** argv) {
  using namespace mpt;
  using namespace mpt::regions;
  std::vector<std::string> parts = {"shapes", "dtypes", "mesh2d", "ring", "bad"};
  bool full = env_or("WEFT_TEST_FULL", "0") == "1";
  int only = -1, bench = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--part=", 0) == 0) {
      parts = split(a.substr(7));
    } else if (a.rfind("--case=", 0) == 0) {
      only = std::atoi(a.c_str() + 7);
    } else if (a == "--full") {
      full = true;
    } else if (a.rfind("--bench", 0) == 0) {
      bench = a.size() > 8 ? std::atoi(a.c_str() + 8) : 2000;
      parts.clear();
    } else {
      std::fprintf(stderr, "unknown option %s (see the comment at the top of test_regions.cpp)\n", a.c_str());
      return 2;
    }
  }
  if (only >= 0 && parts.size() != 1) {
    std::fprintf(stderr, "--case needs exactly one --part\n");
    return 2;
  }
  Env env;
  env.world = init_world();
  env.full = full;
  env.meshes = make_meshes(env.world);
  const bool inject = inject_enabled();
  env.quiet = inject && !std::getenv("WEFT_TEST_VERBOSE");
  for (const std::string& part : parts) {
    const double t0 = now_s();
    const int before_run = env.run;
    if (part == "ring") {
      run_ring_part(env, full, only);
    } else if (part == "bad") {
      if (!inject) run_bad_input_part(env);  // nothing to corrupt there
    } else {
      for (const Case& c : build_cases(env, part, full)) {
        if (only >= 0 && c.index != only) continue;
        if (std::getenv("WEFT_TEST_VERBOSE")) logf("case %s", c.describe(env).c_str());
        const int before = env.failures;
        env.injected = false;
        run_case(env, c);
        if (inject) {
          const bool failed = env.failures > before;
          env.tally.record(part + " " + dtype_name(c.dt), env.injected, failed);
          if (env.injected && !failed) logf("MISSED: the corrupted result passed its checks | %s", c.describe(env).c_str());
        }
      }
    }
    if (env.world.rank == 0) logf("part %s: %d cases, %.2f s", part.c_str(), env.run - before_run, now_s() - t0);
  }
  if (bench) run_bench(env, bench);
  for (MeshInfo& m : env.meshes) MPT_OK(weft_mesh_destroy(m.handle));
  MPT_OK(weft_comm_destroy(env.world.comm));
  if (inject && !bench) return env.tally.report(std::getenv("WEFT_TEST_VERBOSE") != nullptr) ? 0 : 1;
  if (env.failures) {
    logf("%d FAILURES in %d cases", env.failures, env.run);
    return 1;
  }
  logf("all %d cases passed", env.run);
  return 0;
}
