// weft_mp_regions, second file: weft_ring_shift against the reference, the calls weft_region_apply
// and weft_ring_shift must refuse, and the per-call overhead measurement (--bench).
//
// Ring shifts: along every dim of every mesh, rank coordinate c sends c+1 rows (so a receive's
// size follows its sender: from = c - shift mod k sends from+1 rows), shifts +1, -1, 2, 0, k+1,
// -(2k+1) and INT_MIN/INT_MAX (any int is taken mod the group size), blocking, waited and
// polled; one with a request overlapped with local work; and a full ring of k steps of +1 (and of
// -1) that must bring every rank's block home, each step's block checked on the way. A block's
// values are a hash of (seed, the group, the sending coordinate, the index), so a block from the
// wrong sender or group fails.
#include <sched.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "reference.h"
#include "regions_test.h"

namespace mpt::regions {
namespace {

constexpr int64_t kRow = 3;  // elements per row of a block

struct Ring {
  const MeshInfo* mesh;
  int dim;
  int pos, k, me;
  uint64_t seed;  // the case's and the group's

  Ring(const Env& env, const MeshInfo& m, int d, uint64_t case_seed)
      : mesh(&m), dim(d), pos(m.position(env.world.rank)), k(m.ref.shape[static_cast<size_t>(d)]),
        me(m.ref.coords(pos)[static_cast<size_t>(d)]),
        seed(mix64(case_seed ^ static_cast<uint64_t>(m.along(pos, d, 0) + 1))) {}
  int mod(int64_t x) const { return static_cast<int>(((x % k) + k) % k); }
  const char* dim_name() const { return mesh->dims[static_cast<size_t>(dim)].c_str(); }
  // Element i of the block sent by coordinate `origin`.
  uint64_t value(weft_dtype_t dt, int origin, int64_t i) const {
    const auto limit = static_cast<uint64_t>(shard::value_limit(dt));
    return shard::encode_int(dt, static_cast<int64_t>(hash3(seed, static_cast<uint64_t>(origin), static_cast<uint64_t>(i)) % (limit + 1)));
  }
  void fill(LocalBuffer& b, weft_dtype_t dt, int origin) const {
    int64_t i = 0;
    b.for_each([&](const int64_t* idx) { b.set(idx, value(dt, origin, i++)); });
  }
  size_t check(Env& env, const std::string& what, const char* name, const LocalBuffer& b, weft_dtype_t dt,
               int origin) const {
    int64_t i = 0;
    return check_elements(env, what, name, b, dt, [&](const int64_t*) { return value(dt, origin, i++); });
  }
};

// A block of `rows` rows: 2-d {rows, kRow}, or flat (only the count must match the sender's).
shard::Shape block_shape(int rows, bool flat) {
  return flat ? shard::Shape{rows * kRow} : shard::Shape{rows, kRow};
}

void shift_case(Env& env, const MeshInfo& m, int dim, weft_dtype_t dt, int shift, Form form, bool overlap, int index) {
  const std::string what = "ring#" + std::to_string(index) + " " + m.name + "/" + m.dims[static_cast<size_t>(dim)] +
                           " " + dtype_name(dt) + " shift " + std::to_string(shift) + " " + form_name(form) +
                           (overlap ? " overlapped with local work" : "") + " | repro: weftrun -n " +
                           std::to_string(env.world.size) + " weft_mp_regions --part=ring --case=" + std::to_string(index);
  const Ring r(env, m, dim, hash_str(what.c_str()));
  const int from = r.mod(static_cast<int64_t>(r.me) - shift);
  LocalBuffer send(dt, block_shape(r.me + 1, false), View::contiguous);
  LocalBuffer recv(dt, block_shape(from + 1, index % 2 == 1), View::contiguous);
  r.fill(send, dt, r.me);
  const weft_tensor_t ts = send.view(), tr = recv.view();
  weft_request_t req = nullptr;
  env.run++;
  const weft_status_t s =
      weft_ring_shift(m.handle, r.dim_name(), shift, &ts, &tr, nullptr, form == Form::blocking ? nullptr : &req);
  if (s != WEFT_OK) die("%s: weft_ring_shift returned %s: %s", what.c_str(), status_name(s), last_error().c_str());
  if (overlap) {
    // Local work while the transfer runs (ring attention computes on the current block here).
    volatile uint64_t acc = 0;
    for (int i = 0; i < 200000; ++i) acc = acc + mix64(static_cast<uint64_t>(i));
  }
  if (form != Form::blocking) complete(env, what, form, req);
  const int before = env.failures;
  env.injected = false;
  maybe_inject(env, recv, dt);
  r.check(env, what, "recv", recv, dt, from);
  check_memory(env, what, "recv", recv);
  r.check(env, what, "send (must be unchanged)", send, dt, r.me);
  check_memory(env, what, "send", send);
  if (inject_enabled()) {
    env.tally.record(std::string("ring ") + dtype_name(dt), env.injected, env.failures > before);
    if (env.injected && env.failures == before) logf("MISSED: the corrupted result passed its checks | %s", what.c_str());
  }
}

// k steps of `shift` (+1 or -1): each step's block is the one that started `t` places before
// (after) this rank, and the last one is this rank's own.
void full_ring(Env& env, const MeshInfo& m, int dim, int shift, int index) {
  const std::string what = "ring#" + std::to_string(index) + " " + m.name + "/" + m.dims[static_cast<size_t>(dim)] +
                           " full ring of shift " + std::to_string(shift);
  const Ring r(env, m, dim, hash_str(what.c_str()));
  const weft_dtype_t dt = WEFT_FLOAT32;
  auto cur = std::make_unique<LocalBuffer>(dt, block_shape(r.me + 1, false), View::contiguous);
  r.fill(*cur, dt, r.me);
  env.run++;
  for (int t = 1; t <= r.k; ++t) {
    const int origin = r.mod(static_cast<int64_t>(r.me) - static_cast<int64_t>(t) * shift);
    auto next = std::make_unique<LocalBuffer>(dt, block_shape(origin + 1, false), View::contiguous);
    const weft_tensor_t ts = cur->view(), tr = next->view();
    weft_request_t req = nullptr;
    const weft_status_t s = weft_ring_shift(m.handle, r.dim_name(), shift, &ts, &tr, nullptr, t % 2 ? &req : nullptr);
    if (s != WEFT_OK) die("%s: step %d: weft_ring_shift returned %s: %s", what.c_str(), t, status_name(s), last_error().c_str());
    if (req) complete(env, what, Form::wait, req);
    r.check(env, what + " step " + std::to_string(t), "recv", *next, dt, origin);
    cur = std::move(next);
  }
  // Home again: this rank's own block.
  r.check(env, what + " (after the whole ring)", "the block", *cur, dt, r.me);
}

}  // namespace

void run_ring_part(Env& env, bool full, int only) {
  int index = 0;
  const std::vector<weft_dtype_t> dtypes =
      full ? all_dtypes() : std::vector<weft_dtype_t>{WEFT_FLOAT32, WEFT_BFLOAT16, WEFT_INT8, WEFT_FLOAT64};
  for (const MeshInfo& m : env.meshes) {
    for (int dim = 0; dim < static_cast<int>(m.dims.size()); ++dim) {
      const int k = m.ref.shape[static_cast<size_t>(dim)];
      for (weft_dtype_t dt : dtypes) {
        std::vector<int> shifts = {1, -1, 2, 0};
        if (dt == WEFT_FLOAT32) shifts.insert(shifts.end(), {k + 1, -(2 * k + 1), INT_MIN, INT_MAX});
        for (int shift : shifts) {
          const int i = index++;
          if (only < 0 || only == i) shift_case(env, m, dim, dt, shift, static_cast<Form>(i % 3), false, i);
        }
      }
      for (int shift : {1, -1}) {
        const int i = index++;
        if (only < 0 || only == i) shift_case(env, m, dim, WEFT_FLOAT32, shift, Form::poll, true, i);
      }
      for (int shift : {1, -1}) {
        const int i = index++;
        if (only < 0 || only == i) full_ring(env, m, dim, shift, i);
      }
    }
  }
}

// ------------------------------------------------------------------ bad input

namespace {

struct Bad {
  const char* what;
  std::function<weft_status_t()> call;
  std::vector<std::string> names;  // each must appear in weft_last_error()
};

std::string shape_str(std::initializer_list<int64_t> s) {
  std::string t = "[";
  for (int64_t x : s) t += (t.size() > 1 ? "," : "") + std::to_string(x);
  return t + "]";
}

}  // namespace

void run_bad_input_part(Env& env) {
  const MeshInfo& m = env.meshes[0];
  const int k = env.world.size, me = env.world.rank;
  int64_t start = 0, len = 0;
  shard::chunk(7, k, me, &start, &len);
  std::vector<float> a(64), b(6 * static_cast<size_t>(k) + 64);
  std::vector<int32_t> ints(64);
  const int64_t whole[2] = {7, 3}, wrong_out[2] = {6, 3}, wide[2] = {7, 4}, chunk[2] = {len, 3};
  const int64_t tstrides[2] = {1, 2}, two_by_three[2] = {2, 3};
  auto view = [](void* p, const int64_t* shape, weft_dtype_t dt = WEFT_FLOAT32, const int64_t* strides = nullptr) {
    return weft_tensor_t{p, WEFT_DEVICE_CPU, 0, 2, dt, shape, strides, 0};
  };
  const weft_tensor_t w_in = view(a.data(), whole), w_out = view(b.data(), whole);
  const weft_tensor_t c_in = view(a.data(), chunk), bad_out = view(b.data(), wrong_out);
  const weft_tensor_t wide_out = view(b.data(), wide), i_out = view(ints.data(), whole, WEFT_INT32);
  // A chunk inside the whole output, where an in-place all-gather would put it: 2k rows, so that
  // every rank's chunk is non-empty and every rank refuses the call.
  const int64_t even_whole[2] = {2 * k, 3}, two_rows[2] = {2, 3};
  const weft_tensor_t c_inside = view(b.data() + 6 * me, two_rows), even_out = view(b.data(), even_whole);
  const weft_tensor_t t_recv = view(b.data(), two_by_three, WEFT_FLOAT32, tstrides);
  const weft_tensor_t s6 = view(a.data(), two_by_three), r6 = view(b.data(), two_by_three);
  const weft_tensor_t r6i = view(ints.data(), two_by_three, WEFT_INT32);
  const weft_tensor_t r6_overlap = view(a.data() + 2, two_by_three);
  const int64_t five[1] = {5};
  const weft_tensor_t r5 = weft_tensor_t{b.data(), WEFT_DEVICE_CPU, 0, 1, WEFT_FLOAT32, five, nullptr, 0};
  const std::string rank_text = "rank " + std::to_string(me);
  const std::string chunk_text = shape_str({len, 3});
  auto apply = [&](weft_region_t r, int bwd, int sd, const weft_tensor_t* in, const weft_tensor_t* out,
                   const char* dim = "tp") { return weft_region_apply(m.handle, dim, r, bwd, sd, in, out, nullptr, nullptr); };
  auto ring = [&](int shift, const weft_tensor_t* s, const weft_tensor_t* r, const char* dim = "tp") {
    return weft_ring_shift(m.handle, dim, shift, s, r, nullptr, nullptr);
  };
  const std::vector<Bad> table = {
      {"keep-chunk out of the whole's shape", [&] { return apply(WEFT_REGION_SCATTER, 0, 0, &w_in, &bad_out); },
       {"out", "[6,3]", chunk_text, rank_text}},
      {"all-gather out wider than in", [&] { return apply(WEFT_REGION_GATHER, 0, 0, &c_in, &wide_out); },
       {"out", "[7,4]", "[7,3]", rank_text}},
      {"reduce-scatter out whole", [&] { return apply(WEFT_REGION_SEQ_REDUCE_SCATTER, 0, 0, &w_in, &bad_out); },
       {"out", "[6,3]", chunk_text, rank_text}},
      {"all-reduce out of another shape", [&] { return apply(WEFT_REGION_REDUCE, 0, 0, &w_in, &wide_out); },
       {"out", "[7,4]", "[7,3]", rank_text}},
      {"dtypes differ", [&] { return apply(WEFT_REGION_COPY, 0, 0, &w_in, &i_out); }, {"out->dtype", "in->dtype"}},
      {"split_dim 2 of a 2-d tensor", [&] { return apply(WEFT_REGION_GATHER, 1, 2, &w_in, &c_in); }, {"split_dim"}},
      {"split_dim -1", [&] { return apply(WEFT_REGION_SEQ_GATHER, 0, -1, &c_in, &w_out); }, {"split_dim"}},
      // A constant straight into the call, as a C caller would pass an int: loading an enum
      // object holding 99 would itself be undefined behaviour (UBSan's enum check).
      {"region 99", [&] { return weft_region_apply(m.handle, "tp", static_cast<weft_region_t>(99), 0, 0, &w_in, &w_out,
                                                   nullptr, nullptr); }, {"region"}},
      {"backward 2", [&] { return apply(WEFT_REGION_COPY, 2, 0, &w_in, &w_out); }, {"backward"}},
      {"unknown dim", [&] { return apply(WEFT_REGION_COPY, 0, 0, &w_in, &w_out, "xx"); }, {"dim", "xx"}},
      {"NULL dim", [&] { return apply(WEFT_REGION_COPY, 0, 0, &w_in, &w_out, nullptr); }, {"dim"}},
      {"NULL in", [&] { return apply(WEFT_REGION_REDUCE, 0, 0, nullptr, &w_out); }, {"in"}},
      {"NULL out", [&] { return apply(WEFT_REGION_REDUCE, 0, 0, &w_in, nullptr); }, {"out"}},
      {"NULL mesh", [&] { return weft_region_apply(nullptr, "tp", WEFT_REGION_COPY, 0, 0, &w_in, &w_out, nullptr, nullptr); },
       {"mesh"}},
      {"gather into memory overlapping in", [&] { return apply(WEFT_REGION_GATHER, 0, 0, &c_inside, &even_out); },
       {"in", "out", "overlap"}},
      {"ring: NULL send", [&] { return ring(1, nullptr, &r6); }, {"send"}},
      {"ring: strided recv", [&] { return ring(1, &s6, &t_recv); }, {"recv", "contiguous"}},
      {"ring: dtypes differ", [&] { return ring(1, &s6, &r6i); }, {"recv->dtype", "send->dtype"}},
      {"ring: unknown dim", [&] { return ring(1, &s6, &r6, "cp"); }, {"dim", "cp"}},
      {"ring: send and recv overlap", [&] { return ring(1, &s6, &r6_overlap); }, {"send", "recv", "overlap"}},
      {"ring: shift k to itself, sizes differ", [&] { return ring(k, &s6, &r5); }, {"recv", "send"}},
  };
  for (const Bad& t : table) {
    env.run++;
    const weft_status_t s = t.call();
    const std::string msg = last_error();
    if (s != WEFT_ERR_INVALID_ARGUMENT) {
      fail_case(env, std::string("bad input: ") + t.what,
                std::string("returned ") + status_name(s) + ", expected WEFT_ERR_INVALID_ARGUMENT: " + msg);
      continue;
    }
    for (const std::string& n : t.names) {
      if (msg.find(n) == std::string::npos) fail_case(env, std::string("bad input: ") + t.what, "message does not name '" + n + "': " + msg);
    }
  }
  // Nothing was left half done: the group still reduces.
  float one = 1, sum = 0;
  const int64_t scalar_shape[1] = {1};
  const weft_tensor_t x{&one, WEFT_DEVICE_CPU, 0, 1, WEFT_FLOAT32, scalar_shape, nullptr, 0};
  const weft_tensor_t y{&sum, WEFT_DEVICE_CPU, 0, 1, WEFT_FLOAT32, scalar_shape, nullptr, 0};
  MPT_OK(weft_region_apply(m.handle, "tp", WEFT_REGION_REDUCE, 0, 0, &x, &y, nullptr, nullptr));
  if (sum != static_cast<float>(k)) fail_case(env, "bad input: afterwards", "a REDUCE of 1 gave " + std::to_string(sum));
}

// ------------------------------------------------------------------ overhead (--bench)

void run_bench(Env& env, int iterations) {
  const MeshInfo& m = env.meshes[0];
  const int dims[1] = {0};
  weft_comm_t group = nullptr;
  MPT_OK(weft_mesh_comm(m.handle, dims, 1, &group));
  std::vector<float> in(256, 1.0f), out(256);  // 1 KiB
  const int64_t n[1] = {256};
  const weft_tensor_t ti{in.data(), WEFT_DEVICE_CPU, 0, 1, WEFT_FLOAT32, n, nullptr, 0};
  const weft_tensor_t to{out.data(), WEFT_DEVICE_CPU, 0, 1, WEFT_FLOAT32, n, nullptr, 0};
  // weft_redistribute_plan makes the plan each call (no cache): what planning a 1-dim change
  // costs, for comparison with the step weft_region_apply builds directly.
  weft_placement_t p = WEFT_PLACEMENT_REPLICATE_INIT, r = WEFT_PLACEMENT_REPLICATE_INIT;
  p.kind = WEFT_PARTIAL;
  weft_sharded_t hs = nullptr, hd = nullptr;
  MPT_OK(weft_sharded_create(m.handle, 1, n, WEFT_FLOAT32, &p, &ti, nullptr, &hs));
  MPT_OK(weft_sharded_create(m.handle, 1, n, WEFT_FLOAT32, &r, &to, nullptr, &hd));
  struct Row {
    const char* name;
    std::function<void()> call;
    double best = 1e30;
  };
  std::vector<Row> rows = {
      {"weft_allreduce 1 KiB f32 (group comm)", [&] {
         MPT_OK(weft_allreduce(in.data(), out.data(), 256, WEFT_FLOAT32, WEFT_SUM, group, nullptr, nullptr));
       }},
      {"weft_region_apply REDUCE fwd 1 KiB", [&] {
         MPT_OK(weft_region_apply(m.handle, "tp", WEFT_REGION_REDUCE, 0, 0, &ti, &to, nullptr, nullptr));
       }},
      {"weft_redistribute P->R 1 KiB (cached plan)", [&] { MPT_OK(weft_redistribute(hs, hd, nullptr, nullptr)); }},
      {"weft_region_apply COPY fwd 1 KiB (local copy)", [&] {
         MPT_OK(weft_region_apply(m.handle, "tp", WEFT_REGION_COPY, 0, 0, &ti, &to, nullptr, nullptr));
       }},
      {"weft_redistribute_plan P->R (make_plan, local)", [&] {
         size_t steps = 0;
         MPT_OK(weft_redistribute_plan(hs, hd, nullptr, 0, &steps));
       }},
  };
  for (int round = 0; round < 5; ++round) {
    for (Row& row : rows) {
      MPT_OK(weft_barrier(env.world.comm, nullptr, nullptr));
      for (int i = 0; i < iterations / 10; ++i) row.call();  // warm-up
      const double t0 = now_s();
      for (int i = 0; i < iterations; ++i) row.call();
      row.best = std::min(row.best, (now_s() - t0) / iterations);
    }
  }
  if (env.world.rank == 0) {
    for (const Row& row : rows) logf("bench %-48s %8.2f us/call (best of 5 rounds of %d)", row.name, row.best * 1e6, iterations);
  }
  MPT_OK(weft_sharded_destroy(hs));
  MPT_OK(weft_sharded_destroy(hd));
}

}  // namespace mpt::regions
