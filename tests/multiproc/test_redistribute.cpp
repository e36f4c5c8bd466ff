// weft_mp_redistribute: weft_redistribute against the single-process reference
// (sharding_reference.h), for the case list of redistribute_cases.h.
//
// Run under weftrun; every rank builds the same meshes and cases in the same order. Each rank
// computes its own expected local piece from the reference, so a wrong element is reported by
// the rank that holds it: the case, the local and global index, expected and got, and a command
// that repeats only that case. Every case also checks that the source's memory is unchanged,
// that no byte between the elements of a strided view or around a buffer was written, and
// weft_redistribute_plan (plan_check.h). A weft call that fails stops the rank (exit 1): the
// ranks would no longer agree on what comes next. The exception is weft_sharded_create: a refused
// view fails its case and every rank skips that case together (all_created).
//
// Options (identical on every rank):
//   --part=mesh1d,mesh2d,nested,dtypes,views,m2m,large   (default: all)
//   --dtype=f32,...   --case=K (with one --part)   --full (also WEFT_TEST_FULL=1)
//   --list            print the cases (no communication; --ranks=N)
// WEFT_TEST_INJECT=1 corrupts one element of every non-empty destination piece after the call
// and before the check (inject.h); the program then passes only when every corruption failed.
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "inject.h"
#include "mp_common.h"
#include "plan_check.h"
#include "redistribute_cases.h"
#include "reference.h"
#include "sharded_buffer.h"
#include "sharding_reference.h"

namespace mpt {
namespace {

struct Ctx {
  World world;
  std::vector<MeshDef> defs;
  std::vector<weft_mesh_t> meshes;
  int failures = 0;
  int run = 0;
  bool injected = false;
  bool quiet = false;
  bool full = false;
};

std::string repro(const Ctx& ctx, const RCase& c) {
  return "weftrun -n " + std::to_string(ctx.world.size) + " weft_mp_redistribute --part=" + c.part +
         " --case=" + std::to_string(c.index) + (ctx.full ? " --full" : "");
}

void fail(Ctx& ctx, const RCase& c, const std::string& what) {
  ctx.failures++;
  if (ctx.quiet) return;
  logf("FAIL %s | %s | repro: %s", c.describe(ctx.defs).c_str(), what.c_str(), repro(ctx, c).c_str());
}

void complete(Ctx& ctx, const RCase& c, weft_request_t req) {
  if (!req) return;
  if (c.form == Form::poll) {
    const double deadline = now_s() + default_timeout_ms() / 1000.0 + 30;
    for (;;) {
      int done = -1;
      weft_status_t s = weft_test(req, &done);
      if (s == WEFT_OK) break;
      if (s != WEFT_IN_PROGRESS)
        die("%s: weft_test returned %s: %s", c.describe(ctx.defs).c_str(), status_name(s), last_error().c_str());
      if (now_s() > deadline) die("%s: still WEFT_IN_PROGRESS past the deadline", c.describe(ctx.defs).c_str());
      sched_yield();
    }
  } else {
    weft_status_t s = weft_wait(req);
    if (s != WEFT_OK) die("%s: weft_wait returned %s: %s", c.describe(ctx.defs).c_str(), status_name(s), last_error().c_str());
  }
  int done = -1;
  weft_status_t s = weft_test(req, &done);
  if (s != WEFT_OK || done != 1)
    fail(ctx, c, std::string("weft_test after completion returned ") + status_name(s) + " done=" + std::to_string(done));
  MPT_OK(weft_request_free(req));
}

std::string index_text(const int64_t* idx, size_t nd, const shard::Shape* offset = nullptr) {
  std::string s = "[";
  for (size_t d = 0; d < nd; ++d) s += (d ? "," : "") + std::to_string(idx[d] + (offset ? (*offset)[d] : 0));
  return s + "]";
}

// The elements of `buf` against fn(global linear index); one line for all wrong ones.
template <typename Fn>
void check_elements(Ctx& ctx, const RCase& c, const char* what, const LocalBuffer& buf, const shard::Box& box, Fn fn) {
  size_t wrong = 0;
  std::string first;
  const size_t nd = c.global.size();
  std::vector<int64_t> g(nd);
  buf.for_each([&](const int64_t* idx) {
    for (size_t d = 0; d < nd; ++d) g[d] = box.offset[d] + idx[d];
    const uint64_t want = shard::encode_int(c.dt, fn(shard::linear_index(c.global, g.data())));
    const uint64_t got = buf.get(idx);
    if (got == want) return;
    if (wrong++ == 0)
      first = "local " + index_text(idx, nd) + " global " + index_text(g.data(), nd) + ": expected " +
              format_value(c.dt, want) + " got " + format_value(c.dt, got);
  });
  if (wrong)
    fail(ctx, c, std::string(what) + ": " + std::to_string(wrong) + " of " + std::to_string(buf.numel()) +
                     " elements wrong, first " + first);
}

void check_memory(Ctx& ctx, const RCase& c, const char* what, const LocalBuffer& buf) {
  if (!buf.guards_ok()) fail(ctx, c, std::string(what) + ": bytes written outside the buffer (guard overwritten)");
  size_t first = 0;
  if (size_t n = buf.gaps_changed(&first))
    fail(ctx, c, std::string(what) + ": " + std::to_string(n) + " bytes between elements of the strided view written" +
                     " (first at byte " + std::to_string(first) + ")");
}

// weft_sharded_create is not collective, so a rank whose view weft refuses could leave the
// others waiting in weft_redistribute. Every rank (involved in the case or not) therefore says
// whether its handles were made, and the case runs only when all were: a refused view fails
// that case on that rank and the list goes on.
bool all_created(Ctx& ctx, bool mine) {
  int32_t ok = mine ? 1 : 0, all = 0;
  MPT_OK(weft_allreduce(&ok, &all, 1, WEFT_INT32, WEFT_MIN, ctx.world.comm, nullptr, nullptr));
  return all == 1;
}

void run_case(Ctx& ctx, const RCase& c) {
  const MeshDef& sd = ctx.defs[c.src_mesh];
  const MeshDef& dd = ctx.defs[c.dst_mesh];
  const int srank = sd.mesh.position_of_parent(ctx.world.rank);
  const int drank = dd.mesh.position_of_parent(ctx.world.rank);
  if (srank < 0 && drank < 0) {  // not involved: weft_redistribute is collective over the members
    all_created(ctx, true);
    return;
  }
  ctx.run++;
  const bool same = c.src_mesh == c.dst_mesh;
  const int nd = static_cast<int>(c.global.size());
  const shard::Data data(c.dt, c.seed(), c.global, shard::avg_ranks(sd.mesh, c.src));
  const std::string mix = shard::check_partial_mix(c.src) + shard::check_partial_mix(c.dst);
  if (!mix.empty()) die("case list bug: %s: %s", c.describe(ctx.defs).c_str(), mix.c_str());

  shard::Box sbox, dbox;
  std::unique_ptr<LocalBuffer> sbuf, dbuf;
  weft_tensor_t sview{}, dview{};
  if (srank >= 0) {
    sbox = shard::local_box(sd.mesh, c.src, c.global, srank);
    sbuf = std::make_unique<LocalBuffer>(c.dt, sbox.shape, c.src_view);
    std::vector<int64_t> g(nd);
    sbuf->for_each([&](const int64_t* idx) {
      for (int d = 0; d < nd; ++d) g[d] = sbox.offset[d] + idx[d];
      sbuf->set(idx, shard::encode_int(c.dt, data.term(sd.mesh, c.src, srank, shard::linear_index(c.global, g.data()))));
    });
    sview = sbuf->view();
  }
  if (drank >= 0) {
    dbox = shard::local_box(dd.mesh, c.dst, c.global, drank);
    dbuf = std::make_unique<LocalBuffer>(c.dt, dbox.shape, c.dst_view);
    dview = dbuf->view();
  }
  weft_sharded_config_t scfg = WEFT_SHARDED_CONFIG_INIT, dcfg = WEFT_SHARDED_CONFIG_INIT;
  scfg.name = "src";
  dcfg.name = "dst";
  weft_sharded_t hs = nullptr, hd = nullptr;
  weft_status_t s = weft_sharded_create(ctx.meshes[c.src_mesh], nd, c.global.data(), c.dt, c.src.data(),
                                        srank >= 0 ? &sview : nullptr, &scfg, &hs);
  if (s != WEFT_OK) fail(ctx, c, std::string("weft_sharded_create(src) returned ") + status_name(s) + ": " + last_error());
  weft_status_t s2 = weft_sharded_create(ctx.meshes[c.dst_mesh], nd, c.global.data(), c.dt, c.dst.data(),
                                         drank >= 0 ? &dview : nullptr, &dcfg, &hd);
  if (s2 != WEFT_OK) fail(ctx, c, std::string("weft_sharded_create(dst) returned ") + status_name(s2) + ": " + last_error());
  if (!all_created(ctx, s == WEFT_OK && s2 == WEFT_OK)) {
    MPT_OK(weft_sharded_destroy(hs));
    MPT_OK(weft_sharded_destroy(hd));
    return;
  }

  PlanInput pin{&sd.mesh, &dd.mesh, same, &c.src, &c.dst, &c.global, c.dt, srank};
  const std::string plan_problems = check_plan(pin, hs, hd);
  if (!plan_problems.empty()) fail(ctx, c, "weft_redistribute_plan: " + plan_problems);

  weft_request_t req = nullptr;
  s = weft_redistribute(hs, hd, nullptr, c.form == Form::blocking ? nullptr : &req);
  if (s != WEFT_OK)
    die("%s: weft_redistribute returned %s: %s | repro: %s", c.describe(ctx.defs).c_str(), status_name(s),
        last_error().c_str(), repro(ctx, c).c_str());
  if (c.form != Form::blocking && !req) fail(ctx, c, "weft_redistribute with a request pointer left *request NULL");
  complete(ctx, c, req);

  if (dbuf && dbuf->numel() > 0 && inject_enabled()) {
    // inject.h: flip bit width-2 of the middle element (any flipped bit fails a bitwise check).
    const std::vector<int64_t> idx = dbuf->index_of(dbuf->numel() / 2);
    dbuf->set(idx.data(), injected_bits(c.dt, dbuf->get(idx.data())));
    ctx.injected = true;
  }
  if (dbuf) {
    check_elements(ctx, c, "destination", *dbuf, dbox, [&](int64_t lin) {
      return data.expected(sd.mesh, c.src, same, dd.mesh, c.dst, drank, lin);
    });
    check_memory(ctx, c, "destination", *dbuf);
  }
  if (sbuf) {
    check_elements(ctx, c, "source (must be unchanged)", *sbuf, sbox,
                   [&](int64_t lin) { return data.term(sd.mesh, c.src, srank, lin); });
    check_memory(ctx, c, "source", *sbuf);
  }
  MPT_OK(weft_sharded_destroy(hs));
  MPT_OK(weft_sharded_destroy(hd));
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string t;
  while (std::getline(ss, t, ','))
    if (!t.empty()) out.push_back(t);
  return out;
}

}  // namespace
}  // namespace mpt

int main(int argc, char** argv) {
  using namespace mpt;
  CaseFilter f;
  bool list = false;
  int list_ranks = std::atoi(env_or("WEFT_WORLD_SIZE", "4").c_str());
  int only = -1;
  f.full = env_or("WEFT_TEST_FULL", "0") == "1";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&](const char* key) { return a.substr(std::strlen(key)); };
    if (a.rfind("--part=", 0) == 0) {
      f.parts = split(val("--part="));
    } else if (a.rfind("--dtype=", 0) == 0) {
      f.dtypes = split(val("--dtype="));
    } else if (a.rfind("--case=", 0) == 0) {
      only = std::atoi(val("--case=").c_str());
    } else if (a.rfind("--ranks=", 0) == 0) {
      list_ranks = std::atoi(val("--ranks=").c_str());
    } else if (a == "--full") {
      f.full = true;
    } else if (a == "--list") {
      list = true;
    } else {
      std::fprintf(stderr, "unknown option %s (see the comment at the top of test_redistribute.cpp)\n", a.c_str());
      return 2;
    }
  }
  for (const std::string& p : f.parts)
    if (std::find(all_parts().begin(), all_parts().end(), p) == all_parts().end()) {
      std::fprintf(stderr, "unknown part %s\n", p.c_str());
      return 2;
    }
  if (only >= 0 && f.parts.size() != 1) {
    std::fprintf(stderr, "--case needs exactly one --part\n");
    return 2;
  }
  if (list) {
    const std::vector<MeshDef> defs = build_meshes(list_ranks);
    std::map<std::string, int> per_part;
    for (const RCase& c : build_cases(list_ranks, defs, f)) {
      if (only >= 0 && c.index != only) continue;
      std::printf("%s\n", c.describe(defs).c_str());
      per_part[c.part]++;
    }
    for (const auto& [p, k] : per_part) std::printf("part %s: %d cases at %d ranks\n", p.c_str(), k, list_ranks);
    return 0;
  }

  Ctx ctx;
  ctx.world = init_world();
  ctx.full = f.full;
  ctx.defs = build_meshes(ctx.world.size);
  for (const MeshDef& d : ctx.defs) {
    weft_mesh_t m = nullptr;
    weft_status_t s = create_mesh(ctx.world.comm, d, &m);
    if (s != WEFT_OK) die("weft_mesh_create(%s): %s: %s", d.name.c_str(), status_name(s), last_error().c_str());
    ctx.meshes.push_back(m);
  }
  std::vector<RCase> cases = build_cases(ctx.world.size, ctx.defs, f);
  const bool inject = inject_enabled();
  ctx.quiet = inject && !std::getenv("WEFT_TEST_VERBOSE");
  InjectTally tally;
  if (ctx.world.rank == 0)
    logf("%zu cases on %d ranks, %zu meshes%s%s", cases.size(), ctx.world.size, ctx.defs.size(),
         f.full ? " (full matrix)" : "", inject ? " with WEFT_TEST_INJECT=1: every corrupted case must fail" : "");
  std::string part;
  double t0 = now_s();
  auto end_part = [&]() {
    if (!part.empty() && ctx.world.rank == 0) logf("part %s: %.2f s", part.c_str(), now_s() - t0);
  };
  for (const RCase& c : cases) {
    if (only >= 0 && c.index != only) continue;
    if (c.part != part) {
      end_part();
      part = c.part;
      t0 = now_s();
    }
    if (std::getenv("WEFT_TEST_VERBOSE")) logf("case %s", c.describe(ctx.defs).c_str());
    const int before = ctx.failures;
    ctx.injected = false;
    run_case(ctx, c);
    if (inject) {
      const bool failed = ctx.failures > before;
      tally.record(c.part + " " + dtype_name(c.dt), ctx.injected, failed);
      if (ctx.injected && !failed)
        logf("MISSED: the corrupted result passed its checks | %s | repro: WEFT_TEST_INJECT=1 %s",
             c.describe(ctx.defs).c_str(), repro(ctx, c).c_str());
    }
  }
  end_part();
  for (weft_mesh_t m : ctx.meshes) MPT_OK(weft_mesh_destroy(m));
  MPT_OK(weft_comm_destroy(ctx.world.comm));
  if (inject) return tally.report(std::getenv("WEFT_TEST_VERBOSE") != nullptr) ? 0 : 1;
  if (ctx.failures) {
    logf("%d FAILURES in %d cases", ctx.failures, ctx.run);
    return 1;
  }
  logf("all %d cases passed", ctx.run);
  return 0;
}
