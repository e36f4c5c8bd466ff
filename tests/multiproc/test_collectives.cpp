// weft_mp_collectives: every collective of weft.h against a single-process reference.
//
// Run under weftrun; every rank runs the same case list (collectives_cases.h) in the same order.
// Each rank generates every rank's input from (case seed, rank, index), so it computes the
// expected output locally. A wrong element prints the rank, collective, dtype, op, count,
// algorithm, mode, root, the first wrong index with expected and got, how many were wrong, and a
// command that repeats only that case. A weft call that returns an error stops the rank (exit
// 1) because the ranks would no longer agree on what comes next.
//
// Options (identical on every rank):
//   --full                 the whole product (also WEFT_TEST_FULL=1)
//   --part=small,variants,large,barrier
//   --coll=allreduce,...  --dtype=f32,...  --op=sum,...  --size=0,7,1000003,16MiB
//   --algo=ring,...  --inplace=0|1  --async=0|1  --root=first|last  --input=exact|random|special|raw
//   --list                 print the cases (no communication; --ranks=N, default WEFT_WORLD_SIZE or 4)
//   --coverage             check the README's coverage claims on the case lists for 1-8 ranks
// WEFT_TEST_INJECT=1 corrupts every result before it is checked (inject.h) and then passes only
// when every corrupted case failed.
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "collectives_cases.h"
#include "collectives_coverage.h"
#include "inject.h"
#include "inputs.h"
#include "mp_common.h"
#include "reference.h"

namespace mpt {
namespace {

constexpr unsigned char kGarbage = 0xCD;  // what receive buffers hold before the call
constexpr unsigned char kGuard = 0xA5;    // bytes around every buffer
constexpr size_t kGuardBytes = 64;

// A buffer with guard bytes on both sides, to catch writes past its ends.
class Buf {
 public:
  Buf() = default;
  explicit Buf(size_t bytes, unsigned char fill = kGarbage) : bytes_(bytes), mem_(bytes + 2 * kGuardBytes, fill) {
    for (size_t i = 0; i < kGuardBytes; ++i) mem_[i] = mem_[kGuardBytes + bytes + i] = kGuard;
  }
  unsigned char* data() { return mem_.data() + kGuardBytes; }
  const unsigned char* data() const { return mem_.data() + kGuardBytes; }
  size_t bytes() const { return bytes_; }
  bool guards_ok() const {
    for (size_t i = 0; i < kGuardBytes; ++i)
      if (mem_[i] != kGuard || mem_[kGuardBytes + bytes_ + i] != kGuard) return false;
    return true;
  }

 private:
  size_t bytes_ = 0;
  std::vector<unsigned char> mem_;
};

struct Ctx {
  World world;
  std::map<std::string, weft_comm_t> comms;  // "allreduce/ring" -> communicator
  int failures = 0;
  int cases_run = 0;
  bool injected = false;  // the current case corrupted something on this rank (inject.h)
  bool quiet = false;     // injection mode: failures are expected, print only the missed ones
};

// Collects the wrong elements of one buffer and prints one line for them.
class Check {
 public:
  Check(Ctx& ctx, const Case& c, const char* what) : ctx_(ctx), c_(c), what_(what) {}
  ~Check() { flush(); }

  void bits(size_t idx, uint64_t got, uint64_t expected) {
    if (got == expected) return;
    note(idx, format_value(c_.dt, expected), format_value(c_.dt, got));
  }
  void reduced(size_t idx, uint64_t got, const Expectation& e, Compare cmp) {
    if (e.matches(c_.dt, static_cast<weft_op_t>(c_.op), cmp, ctx_.world.size, got)) return;
    if (rule_.empty()) rule_ = Expectation::rule(c_.dt, static_cast<weft_op_t>(c_.op), cmp, ctx_.world.size);
    note(idx, format_value(c_.dt, e.bits), format_value(c_.dt, got));
  }
  void byte_untouched(size_t byte_idx, unsigned char got) {
    if (got == kGarbage) return;
    char e[16], g[16];
    std::snprintf(e, sizeof e, "0x%02x", kGarbage);
    std::snprintf(g, sizeof g, "0x%02x", got);
    note(byte_idx, std::string(e) + " (untouched)", g);
    unit_ = "byte";
  }
  void problem(const std::string& text) {
    ctx_.failures++;
    if (ctx_.quiet) return;
    logf("FAIL %s | %s: %s | repro: %s", c_.describe(ctx_.world.size).c_str(), what_, text.c_str(),
         c_.repro(ctx_.world.size).c_str());
  }

 private:
  void note(size_t idx, const std::string& expected, const std::string& got) {
    if (wrong_++ == 0) {
      first_ = idx;
      expected_ = expected;
      got_ = got;
    }
  }
  void flush() {
    if (wrong_ == 0) return;
    char buf[600];
    std::snprintf(buf, sizeof buf, "%zu wrong, first wrong %s index %zu: expected %s got %s%s%s", wrong_, unit_,
                  first_, expected_.c_str(), got_.c_str(), rule_.empty() ? "" : " | rule: ", rule_.c_str());
    problem(buf);
  }
  Ctx& ctx_;
  const Case& c_;
  const char* what_;
  const char* unit_ = "element";
  size_t wrong_ = 0, first_ = 0;
  std::string expected_, got_, rule_;
};

// WEFT_TEST_INJECT=1 (inject.h): corrupt element idx of this rank's result before the check...
void inject_element(Ctx& ctx, const Case& c, void* buf, size_t idx) {
  if (!inject_enabled() || !buf) return;
  store_bits(c.dt, buf, idx, injected_bits(c.dt, load_bits(c.dt, buf, idx)));
  ctx.injected = true;
}

// ... or byte idx of a buffer that must stay untouched (checked byte for byte).
void inject_byte(Ctx& ctx, unsigned char* buf, size_t idx) {
  if (!inject_enabled() || !buf) return;
  buf[idx] ^= 0x80;
  ctx.injected = true;
}

Compare compare_of(const Case& c) { return c.input == Input::random ? Compare::tolerance : Compare::exact; }

// Issues nothing itself: completes an async request (weft_wait, or weft_test polling) and frees
// it; blocking calls have no request.
void complete(Ctx& ctx, const Case& c, weft_request_t req, const char* call) {
  if (!req) return;
  const bool poll = (c.seed() >> 3) & 1;
  if (poll) {
    const double deadline = now_s() + default_timeout_ms() / 1000.0 + 30;
    for (;;) {
      int done = -1;
      weft_status_t s = weft_test(req, &done);
      if (s == WEFT_OK) {
        if (done != 1) Check(ctx, c, call).problem("weft_test returned WEFT_OK but *done = " + std::to_string(done));
        break;
      }
      if (s != WEFT_IN_PROGRESS)
        die("%s: weft_test(%s) returned %s: %s", c.describe(ctx.world.size).c_str(), call, status_name(s),
            last_error().c_str());
      if (done != 0) Check(ctx, c, call).problem("weft_test returned WEFT_IN_PROGRESS but *done = " + std::to_string(done));
      if (now_s() > deadline) die("%s: %s still WEFT_IN_PROGRESS past the deadline", c.describe(ctx.world.size).c_str(), call);
      sched_yield();
    }
  } else {
    weft_status_t s = weft_wait(req);
    if (s != WEFT_OK)
      die("%s: weft_wait(%s) returned %s: %s", c.describe(ctx.world.size).c_str(), call, status_name(s),
          last_error().c_str());
  }
  // A completed request stays completed.
  int done = -1;
  weft_status_t s = weft_test(req, &done);
  if (s != WEFT_OK || done != 1)
    Check(ctx, c, call).problem(std::string("weft_test after completion returned ") + status_name(s) +
                                " done=" + std::to_string(done));
  s = weft_request_free(req);
  if (s != WEFT_OK) die("weft_request_free: %s: %s", status_name(s), last_error().c_str());
}

void call_ok(Ctx& ctx, const Case& c, weft_status_t s, const char* call) {
  if (s != WEFT_OK)
    die("%s returned %s: %s | case: %s | repro: %s", call, status_name(s), last_error().c_str(),
        c.describe(ctx.world.size).c_str(), c.repro(ctx.world.size).c_str());
}

void fill(void* buf, const Source& src, int rank, size_t n, uint64_t base = 0) {
  for (size_t i = 0; i < n; ++i) store_bits(src.dtype(), buf, i, src(rank, base + i));
}

void check_guards(Ctx& ctx, const Case& c, const Buf& b, const char* name) {
  if (!b.guards_ok()) Check(ctx, c, name).problem("bytes written outside the buffer (guard overwritten)");
}

// The send buffer must be unchanged after an out-of-place call.
void check_unchanged(Ctx& ctx, const Case& c, const Buf& b, const Source& src, int rank, size_t n, const char* name,
                     uint64_t base = 0) {
  Check chk(ctx, c, name);
  for (size_t i = 0; i < n; ++i) chk.bits(i, load_bits(c.dt, b.data(), i), src(rank, base + i));
}

// Expected reduction of element idx over all ranks.
Expectation expect_reduce(const Case& c, const Source& src, int n, uint64_t idx, std::vector<uint64_t>& scratch) {
  for (int r = 0; r < n; ++r) scratch[static_cast<size_t>(r)] = src(r, idx);
  return reduce_reference(c.dt, static_cast<weft_op_t>(c.op), scratch.data(), n);
}

weft_comm_t comm_for(Ctx& ctx, const Case& c) {
  const CollInfo& ci = coll_info(c.coll);
  if (!ci.algo_env) return ctx.world.comm;
  return ctx.comms.at(std::string(ci.name) + "/" + c.algo);
}

// A NULL pointer is allowed with a zero count; use it in about half of the zero-size cases.
bool use_null(const Case& c, size_t count) { return count == 0 && (c.seed() & 1); }

// ------------------------------------------------------------------ per collective

void run_allreduce(Ctx& ctx, const Case& c) {
  const int n = ctx.world.size, me = ctx.world.rank;
  const size_t cnt = c.count(n), E = dtype_bytes(c.dt);
  Source src(c.dt, static_cast<weft_op_t>(c.op), c.input, c.seed(), n);
  Buf send(cnt * E), recv(cnt * E);
  fill(send.data(), src, me, cnt);
  const void* sp = send.data();
  void* rp = recv.data();
  if (c.inplace) {
    std::memcpy(recv.data(), send.data(), cnt * E);
    sp = rp;
  }
  if (use_null(c, cnt)) sp = rp = nullptr;
  weft_request_t req = nullptr;
  call_ok(ctx, c, weft_allreduce(sp, rp, cnt, c.dt, static_cast<weft_op_t>(c.op), comm_for(ctx, c), nullptr,
                                 c.async ? &req : nullptr), "weft_allreduce");
  complete(ctx, c, req, "weft_allreduce");
  if (cnt) inject_element(ctx, c, recv.data(), cnt / 2);
  {
    Check chk(ctx, c, "recvbuf");
    std::vector<uint64_t> scratch(static_cast<size_t>(n));
    for (size_t i = 0; i < cnt; ++i)
      chk.reduced(i, load_bits(c.dt, recv.data(), i), expect_reduce(c, src, n, i, scratch), compare_of(c));
  }
  if (!c.inplace) check_unchanged(ctx, c, send, src, me, cnt, "sendbuf (must not change)");
  check_guards(ctx, c, send, "sendbuf");
  check_guards(ctx, c, recv, "recvbuf");
}

void run_broadcast(Ctx& ctx, const Case& c) {
  const int n = ctx.world.size, me = ctx.world.rank, root = c.root(n);
  const size_t cnt = c.count(n), E = dtype_bytes(c.dt);
  Source src(c.dt, WEFT_SUM, c.input, c.seed(), n);
  Buf buf(cnt * E);
  if (me == root) fill(buf.data(), src, root, cnt);
  weft_request_t req = nullptr;
  call_ok(ctx, c, weft_broadcast(use_null(c, cnt) ? nullptr : buf.data(), cnt, c.dt, root, comm_for(ctx, c), nullptr,
                                 c.async ? &req : nullptr), "weft_broadcast");
  complete(ctx, c, req, "weft_broadcast");
  if (cnt) inject_element(ctx, c, buf.data(), cnt / 2);
  {
    Check chk(ctx, c, me == root ? "buf (root: must not change)" : "buf");
    for (size_t i = 0; i < cnt; ++i) chk.bits(i, load_bits(c.dt, buf.data(), i), src(root, i));
  }
  check_guards(ctx, c, buf, "buf");
}

void run_reduce(Ctx& ctx, const Case& c) {
  const int n = ctx.world.size, me = ctx.world.rank, root = c.root(n);
  const size_t cnt = c.count(n), E = dtype_bytes(c.dt);
  Source src(c.dt, static_cast<weft_op_t>(c.op), c.input, c.seed(), n);
  Buf send(cnt * E), recv(cnt * E);
  fill(send.data(), src, me, cnt);
  const void* sp = send.data();
  void* rp = recv.data();
  if (c.inplace) {
    std::memcpy(recv.data(), send.data(), cnt * E);
    sp = rp;
  } else if (me != root && ((c.seed() >> 1) & 1)) {
    rp = nullptr;  // weft.h: recvbuf may be NULL on non-roots
  }
  if (use_null(c, cnt)) sp = rp = nullptr;
  // A non-root's out-of-place recvbuf, when one was passed, must stay untouched; a NULL one
  // leaves nothing to check.
  const bool nonroot_sentinel = me != root && !c.inplace && rp != nullptr;
  weft_request_t req = nullptr;
  call_ok(ctx, c, weft_reduce(sp, rp, cnt, c.dt, static_cast<weft_op_t>(c.op), root, comm_for(ctx, c), nullptr,
                              c.async ? &req : nullptr), "weft_reduce");
  complete(ctx, c, req, "weft_reduce");
  if (me == root && cnt) inject_element(ctx, c, recv.data(), cnt / 2);
  if (nonroot_sentinel && cnt) inject_byte(ctx, recv.data(), cnt * E / 2);
  if (me == root) {
    Check chk(ctx, c, "recvbuf (root)");
    std::vector<uint64_t> scratch(static_cast<size_t>(n));
    for (size_t i = 0; i < cnt; ++i)
      chk.reduced(i, load_bits(c.dt, recv.data(), i), expect_reduce(c, src, n, i, scratch), compare_of(c));
  } else if (nonroot_sentinel) {
    Check chk(ctx, c, "recvbuf on a non-root (weft.h: used on root only)");
    for (size_t b = 0; b < cnt * E; ++b) chk.byte_untouched(b, recv.data()[b]);
  }
  if (!c.inplace) check_unchanged(ctx, c, send, src, me, cnt, "sendbuf (must not change)");
  check_guards(ctx, c, send, "sendbuf");
  check_guards(ctx, c, recv, "recvbuf");
}

void run_allgather(Ctx& ctx, const Case& c) {
  const int n = ctx.world.size, me = ctx.world.rank;
  const size_t cnt = c.count(n), E = dtype_bytes(c.dt);
  Source src(c.dt, WEFT_SUM, c.input, c.seed(), n);
  Buf send(cnt * E), recv(static_cast<size_t>(n) * cnt * E);
  fill(send.data(), src, me, cnt);
  const void* sp = send.data();
  if (c.inplace) {
    unsigned char* mine = recv.data() + static_cast<size_t>(me) * cnt * E;
    std::memcpy(mine, send.data(), cnt * E);
    sp = mine;
  }
  void* rp = recv.data();
  if (use_null(c, cnt)) sp = rp = nullptr;
  weft_request_t req = nullptr;
  call_ok(ctx, c, weft_allgather(sp, rp, cnt, c.dt, comm_for(ctx, c), nullptr, c.async ? &req : nullptr),
          "weft_allgather");
  complete(ctx, c, req, "weft_allgather");
  if (cnt) inject_element(ctx, c, recv.data(), static_cast<size_t>(n) * cnt / 2);
  {
    Check chk(ctx, c, "recvbuf");
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < cnt; ++i) {
        size_t k = static_cast<size_t>(r) * cnt + i;
        chk.bits(k, load_bits(c.dt, recv.data(), k), src(r, i));
      }
  }
  if (!c.inplace) check_unchanged(ctx, c, send, src, me, cnt, "sendbuf (must not change)");
  check_guards(ctx, c, send, "sendbuf");
  check_guards(ctx, c, recv, "recvbuf");
}

// Uneven counts (some zero) and displacements with gaps, sometimes in reverse rank order.
void v_layout(const Case& c, int n, size_t base, std::vector<size_t>& counts, std::vector<size_t>& displs,
              size_t& total) {
  const uint64_t seed = c.seed();
  counts.assign(static_cast<size_t>(n), 0);
  displs.assign(static_cast<size_t>(n), 0);
  for (int r = 0; r < n; ++r) {
    if (base == 0 || (static_cast<uint64_t>(r) + seed) % 3 == 1) continue;
    counts[static_cast<size_t>(r)] = base + (static_cast<uint64_t>(r) * 7 + seed) % 5;
  }
  const bool reverse = (seed >> 2) & 1;
  size_t pos = 0;
  for (int k = 0; k < n; ++k) {
    int r = reverse ? n - 1 - k : k;
    pos += 1 + static_cast<size_t>(r % 3);  // gap before each block
    displs[static_cast<size_t>(r)] = pos;
    pos += counts[static_cast<size_t>(r)];
  }
  total = pos + 2;
}

void run_allgatherv(Ctx& ctx, const Case& c) {
  const int n = ctx.world.size, me = ctx.world.rank;
  const size_t base = c.count(n), E = dtype_bytes(c.dt);
  std::vector<size_t> counts, displs;
  size_t total = 0;
  v_layout(c, n, base, counts, displs, total);
  const size_t mycount = counts[static_cast<size_t>(me)];
  Source src(c.dt, WEFT_SUM, c.input, c.seed(), n);
  Buf send(mycount * E), recv(total * E);
  fill(send.data(), src, me, mycount);
  const void* sp = send.data();
  if (c.inplace) {
    unsigned char* mine = recv.data() + displs[static_cast<size_t>(me)] * E;
    std::memcpy(mine, send.data(), mycount * E);
    sp = mine;
  } else if (mycount == 0 && (c.seed() & 1)) {
    sp = nullptr;
  }
  weft_request_t req = nullptr;
  call_ok(ctx, c, weft_allgatherv(sp, mycount, recv.data(), counts.data(), displs.data(), c.dt, comm_for(ctx, c),
                                  nullptr, c.async ? &req : nullptr), "weft_allgatherv");
  complete(ctx, c, req, "weft_allgatherv");
  for (int k = 0; k < n; ++k) {  // the middle of the first non-empty block from rank n/2 on
    const size_t r = static_cast<size_t>((n / 2 + k) % n);
    if (counts[r] == 0) continue;
    inject_element(ctx, c, recv.data(), displs[r] + counts[r] / 2);
    break;
  }
  {
    Check chk(ctx, c, "recvbuf blocks");
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < counts[static_cast<size_t>(r)]; ++i) {
        size_t k = displs[static_cast<size_t>(r)] + i;
        chk.bits(k, load_bits(c.dt, recv.data(), k), src(r, i));
      }
  }
  {
    // Gaps between the blocks must stay untouched.
    std::vector<char> covered(total, 0);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < counts[static_cast<size_t>(r)]; ++i) covered[displs[static_cast<size_t>(r)] + i] = 1;
    Check chk(ctx, c, "recvbuf gaps between blocks (must not change)");
    for (size_t k = 0; k < total; ++k)
      if (!covered[k])
        for (size_t b = 0; b < E; ++b) chk.byte_untouched(k * E + b, recv.data()[k * E + b]);
  }
  if (!c.inplace) check_unchanged(ctx, c, send, src, me, mycount, "sendbuf (must not change)");
  check_guards(ctx, c, send, "sendbuf");
  check_guards(ctx, c, recv, "recvbuf");
}

void run_reduce_scatter(Ctx& ctx, const Case& c) {
  const int n = ctx.world.size, me = ctx.world.rank;
  const size_t cnt = c.count(n), E = dtype_bytes(c.dt), all = static_cast<size_t>(n) * cnt;
  Source src(c.dt, static_cast<weft_op_t>(c.op), c.input, c.seed(), n);
  Buf send(all * E), recv(cnt * E);
  fill(send.data(), src, me, all);
  const void* sp = send.data();
  unsigned char* rp = recv.data();
  if (c.inplace) rp = send.data() + static_cast<size_t>(me) * cnt * E;
  if (use_null(c, cnt)) sp = rp = nullptr;
  weft_request_t req = nullptr;
  call_ok(ctx, c, weft_reduce_scatter(sp, rp, cnt, c.dt, static_cast<weft_op_t>(c.op), comm_for(ctx, c), nullptr,
                                      c.async ? &req : nullptr), "weft_reduce_scatter");
  complete(ctx, c, req, "weft_reduce_scatter");
  if (cnt) inject_element(ctx, c, c.inplace ? send.data() + static_cast<size_t>(me) * cnt * E : recv.data(), cnt / 2);
  {
    const unsigned char* out = c.inplace ? send.data() + static_cast<size_t>(me) * cnt * E : recv.data();
    Check chk(ctx, c, c.inplace ? "sendbuf block of this rank (in-place result)" : "recvbuf");
    std::vector<uint64_t> scratch(static_cast<size_t>(n));
    for (size_t i = 0; i < cnt; ++i)
      chk.reduced(i, load_bits(c.dt, out, i), expect_reduce(c, src, n, static_cast<uint64_t>(me) * cnt + i, scratch),
                  compare_of(c));
  }
  if (!c.inplace) check_unchanged(ctx, c, send, src, me, all, "sendbuf (must not change)");
  check_guards(ctx, c, send, "sendbuf");
  check_guards(ctx, c, recv, "recvbuf");
}

void run_alltoall(Ctx& ctx, const Case& c) {
  const int n = ctx.world.size, me = ctx.world.rank;
  const size_t cnt = c.count(n), E = dtype_bytes(c.dt), all = static_cast<size_t>(n) * cnt;
  Source src(c.dt, WEFT_SUM, c.input, c.seed(), n);
  Buf send(all * E), recv(all * E);
  fill(send.data(), src, me, all);  // block d, element i = src(me, d*cnt + i) goes to rank d
  const void* sp = send.data();
  unsigned char* rp = recv.data();
  if (c.inplace) rp = send.data();
  if (use_null(c, cnt)) sp = rp = nullptr;
  weft_request_t req = nullptr;
  call_ok(ctx, c, weft_alltoall(sp, rp, cnt, c.dt, comm_for(ctx, c), nullptr, c.async ? &req : nullptr),
          "weft_alltoall");
  complete(ctx, c, req, "weft_alltoall");
  if (cnt) inject_element(ctx, c, c.inplace ? send.data() : recv.data(), all / 2);
  {
    const unsigned char* out = c.inplace ? send.data() : recv.data();
    Check chk(ctx, c, c.inplace ? "buf (in-place result)" : "recvbuf");
    for (int s = 0; s < n; ++s)
      for (size_t i = 0; i < cnt; ++i) {
        size_t k = static_cast<size_t>(s) * cnt + i;
        chk.bits(k, load_bits(c.dt, out, k), src(s, static_cast<uint64_t>(me) * cnt + i));
      }
  }
  if (!c.inplace) check_unchanged(ctx, c, send, src, me, all, "sendbuf (must not change)");
  check_guards(ctx, c, send, "sendbuf");
  check_guards(ctx, c, recv, "recvbuf");
}

// Count from rank s to rank d. In-place cases use a symmetric matrix so that one layout serves
// as both the send and the receive layout.
size_t a2av_count(const Case& c, size_t base, int s, int d) {
  if (base == 0) return 0;
  const uint64_t seed = c.seed();
  const uint64_t S = static_cast<uint64_t>(s), D = static_cast<uint64_t>(d);
  if (c.inplace) {
    if ((S + D + seed) % 4 == 0) return 0;
    return base + (S * D + S + D + seed) % 7;
  }
  if ((S + 2 * D + seed) % 4 == 0) return 0;
  return base + (3 * S + 5 * D + seed) % 7;
}

void run_alltoallv(Ctx& ctx, const Case& c) {
  const int n = ctx.world.size, me = ctx.world.rank;
  const size_t base = c.count(n), E = dtype_bytes(c.dt);
  const size_t N = static_cast<size_t>(n);
  std::vector<size_t> scounts(N), sdispls(N), rcounts(N), rdispls(N);
  for (int p = 0; p < n; ++p) {
    scounts[static_cast<size_t>(p)] = a2av_count(c, base, me, p);
    rcounts[static_cast<size_t>(p)] = a2av_count(c, base, p, me);
  }
  // Send layout: rank order, gap of 2 after each block. Receive layout: reverse rank order, gap
  // of 1 before each block. In-place: both use the receive layout.
  size_t spos = 0, rpos = 0;
  for (int p = 0; p < n; ++p) {
    sdispls[static_cast<size_t>(p)] = spos;
    spos += scounts[static_cast<size_t>(p)] + 2;
  }
  for (int k = n - 1; k >= 0; --k) {
    rpos += 1;
    rdispls[static_cast<size_t>(k)] = rpos;
    rpos += rcounts[static_cast<size_t>(k)];
  }
  rpos += 1;
  if (c.inplace) {
    sdispls = rdispls;
    spos = rpos;
  }
  Source src(c.dt, WEFT_SUM, c.input, c.seed(), n);
  auto idx_of = [](int dest, size_t i) { return (static_cast<uint64_t>(dest) << 40) | i; };
  Buf send(spos * E), recv(rpos * E);
  for (int d = 0; d < n; ++d)
    for (size_t i = 0; i < scounts[static_cast<size_t>(d)]; ++i)
      store_bits(c.dt, send.data(), sdispls[static_cast<size_t>(d)] + i, src(me, idx_of(d, i)));
  if (c.inplace) std::memcpy(recv.data(), send.data(), spos * E);
  const void* sp = c.inplace ? static_cast<const void*>(recv.data()) : send.data();
  weft_request_t req = nullptr;
  call_ok(ctx, c, weft_alltoallv(sp, scounts.data(), sdispls.data(), recv.data(), rcounts.data(), rdispls.data(), c.dt,
                                 comm_for(ctx, c), nullptr, c.async ? &req : nullptr), "weft_alltoallv");
  complete(ctx, c, req, "weft_alltoallv");
  for (int k = 0; k < n; ++k) {  // the middle of the first non-empty block from rank n/2 on
    const size_t s = static_cast<size_t>((n / 2 + k) % n);
    if (rcounts[s] == 0) continue;
    inject_element(ctx, c, recv.data(), rdispls[s] + rcounts[s] / 2);
    break;
  }
  std::vector<char> covered(rpos, 0);
  {
    Check chk(ctx, c, "recvbuf blocks");
    for (int s = 0; s < n; ++s)
      for (size_t i = 0; i < rcounts[static_cast<size_t>(s)]; ++i) {
        size_t k = rdispls[static_cast<size_t>(s)] + i;
        covered[k] = 1;
        chk.bits(k, load_bits(c.dt, recv.data(), k), src(s, idx_of(me, i)));
      }
  }
  if (!c.inplace) {
    Check chk(ctx, c, "recvbuf gaps between blocks (must not change)");
    for (size_t k = 0; k < rpos; ++k)
      if (!covered[k])
        for (size_t b = 0; b < E; ++b) chk.byte_untouched(k * E + b, recv.data()[k * E + b]);
    Check chk2(ctx, c, "sendbuf (must not change)");
    for (int d = 0; d < n; ++d)
      for (size_t i = 0; i < scounts[static_cast<size_t>(d)]; ++i) {
        size_t k = sdispls[static_cast<size_t>(d)] + i;
        chk2.bits(k, load_bits(c.dt, send.data(), k), src(me, idx_of(d, i)));
      }
  }
  check_guards(ctx, c, send, "sendbuf");
  check_guards(ctx, c, recv, "recvbuf");
}

void run_gather(Ctx& ctx, const Case& c) {
  const int n = ctx.world.size, me = ctx.world.rank, root = c.root(n);
  const size_t cnt = c.count(n), E = dtype_bytes(c.dt), all = static_cast<size_t>(n) * cnt;
  Source src(c.dt, WEFT_SUM, c.input, c.seed(), n);
  Buf send(cnt * E), recv(all * E);
  fill(send.data(), src, me, cnt);
  const void* sp = send.data();
  void* rp = recv.data();
  if (c.inplace && me == root) {
    unsigned char* mine = recv.data() + static_cast<size_t>(root) * cnt * E;
    std::memcpy(mine, send.data(), cnt * E);
    sp = mine;
  }
  if (me != root && ((c.seed() >> 1) & 1)) rp = nullptr;  // recvbuf: root only
  if (use_null(c, cnt)) sp = rp = nullptr;
  const bool nonroot_sentinel = me != root && rp != nullptr;  // passed although unused: untouched
  weft_request_t req = nullptr;
  call_ok(ctx, c, weft_gather(sp, rp, cnt, c.dt, root, comm_for(ctx, c), nullptr, c.async ? &req : nullptr),
          "weft_gather");
  complete(ctx, c, req, "weft_gather");
  if (me == root && cnt) inject_element(ctx, c, recv.data(), all / 2);
  if (nonroot_sentinel && cnt) inject_byte(ctx, recv.data(), all * E / 2);
  if (me == root) {
    Check chk(ctx, c, "recvbuf (root)");
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < cnt; ++i) {
        size_t k = static_cast<size_t>(r) * cnt + i;
        chk.bits(k, load_bits(c.dt, recv.data(), k), src(r, i));
      }
  } else if (nonroot_sentinel) {
    Check chk(ctx, c, "recvbuf on a non-root (weft.h: root only)");
    for (size_t b = 0; b < all * E; ++b) chk.byte_untouched(b, recv.data()[b]);
  }
  if (!(c.inplace && me == root)) check_unchanged(ctx, c, send, src, me, cnt, "sendbuf (must not change)");
  check_guards(ctx, c, send, "sendbuf");
  check_guards(ctx, c, recv, "recvbuf");
}

void run_scatter(Ctx& ctx, const Case& c) {
  const int n = ctx.world.size, me = ctx.world.rank, root = c.root(n);
  const size_t cnt = c.count(n), E = dtype_bytes(c.dt), all = static_cast<size_t>(n) * cnt;
  Source src(c.dt, WEFT_SUM, c.input, c.seed(), n);
  Buf send(all * E), recv(cnt * E);
  if (me == root) fill(send.data(), src, root, all);  // block r goes to rank r
  const void* sp = send.data();
  unsigned char* rp = recv.data();
  if (c.inplace && me == root) rp = send.data() + static_cast<size_t>(root) * cnt * E;
  if (me != root && ((c.seed() >> 1) & 1)) sp = nullptr;  // sendbuf: root only
  if (use_null(c, cnt)) sp = rp = nullptr;
  const bool nonroot_sentinel = me != root && sp != nullptr;  // passed although unused: untouched
  weft_request_t req = nullptr;
  call_ok(ctx, c, weft_scatter(sp, rp, cnt, c.dt, root, comm_for(ctx, c), nullptr, c.async ? &req : nullptr),
          "weft_scatter");
  complete(ctx, c, req, "weft_scatter");
  // A non-root with a sentinel sendbuf corrupts either its result or the sentinel (one per case,
  // so that each check is proven on its own), chosen by the seed.
  if (nonroot_sentinel && cnt && ((c.seed() >> 6) & 1)) {
    inject_byte(ctx, send.data(), all * E / 2);
  } else if (cnt) {
    inject_element(ctx, c, (c.inplace && me == root) ? send.data() + static_cast<size_t>(root) * cnt * E : recv.data(),
                   cnt / 2);
  }
  {
    const unsigned char* out = (c.inplace && me == root) ? send.data() + static_cast<size_t>(root) * cnt * E : recv.data();
    Check chk(ctx, c, "recvbuf");
    for (size_t i = 0; i < cnt; ++i)
      chk.bits(i, load_bits(c.dt, out, i), src(root, static_cast<uint64_t>(me) * cnt + i));
  }
  if (me == root) {
    check_unchanged(ctx, c, send, src, root, all, "sendbuf (root: must not change)");
  } else if (nonroot_sentinel) {
    Check chk(ctx, c, "sendbuf on a non-root (weft.h: root only)");
    for (size_t b = 0; b < all * E; ++b) chk.byte_untouched(b, send.data()[b]);
  }
  check_guards(ctx, c, send, "sendbuf");
  check_guards(ctx, c, recv, "recvbuf");
}

// Ring exchange: rank r sends to r+1 and receives from r-1.
void run_sendrecv(Ctx& ctx, const Case& c) {
  const int n = ctx.world.size, me = ctx.world.rank;  // n >= 2: build_cases skips 1 rank
  const int to = (me + 1) % n, from = (me + n - 1) % n;
  const size_t cnt = c.count(n), E = dtype_bytes(c.dt);
  Source src(c.dt, WEFT_SUM, c.input, c.seed(), n);
  Buf send(cnt * E), recv(cnt * E);
  fill(send.data(), src, me, cnt);
  void* sp = send.data();
  void* rp = recv.data();
  if (use_null(c, cnt)) sp = rp = nullptr;
  weft_comm_t comm = comm_for(ctx, c);
  if (c.async) {
    weft_request_t rreq = nullptr, sreq = nullptr;
    const bool recv_first = (c.seed() >> 4) & 1;
    if (recv_first) call_ok(ctx, c, weft_recv(rp, cnt, c.dt, from, comm, nullptr, &rreq), "weft_recv");
    call_ok(ctx, c, weft_send(sp, cnt, c.dt, to, comm, nullptr, &sreq), "weft_send");
    if (!recv_first) call_ok(ctx, c, weft_recv(rp, cnt, c.dt, from, comm, nullptr, &rreq), "weft_recv");
    if ((c.seed() >> 5) & 1) {
      complete(ctx, c, rreq, "weft_recv");
      complete(ctx, c, sreq, "weft_send");
    } else {
      complete(ctx, c, sreq, "weft_send");
      complete(ctx, c, rreq, "weft_recv");
    }
  } else if (me % 2 == 0) {
    call_ok(ctx, c, weft_send(sp, cnt, c.dt, to, comm, nullptr, nullptr), "weft_send");
    call_ok(ctx, c, weft_recv(rp, cnt, c.dt, from, comm, nullptr, nullptr), "weft_recv");
  } else {
    call_ok(ctx, c, weft_recv(rp, cnt, c.dt, from, comm, nullptr, nullptr), "weft_recv");
    call_ok(ctx, c, weft_send(sp, cnt, c.dt, to, comm, nullptr, nullptr), "weft_send");
  }
  if (cnt) inject_element(ctx, c, recv.data(), cnt / 2);
  {
    Check chk(ctx, c, "recv buf");
    for (size_t i = 0; i < cnt; ++i) chk.bits(i, load_bits(c.dt, recv.data(), i), src(from, i));
  }
  check_unchanged(ctx, c, send, src, me, cnt, "send buf (must not change)");
  check_guards(ctx, c, send, "send buf");
  check_guards(ctx, c, recv, "recv buf");
}

void run_barrier(Ctx& ctx, const Case& c) {
  weft_request_t req = nullptr;
  call_ok(ctx, c, weft_barrier(comm_for(ctx, c), nullptr, c.async ? &req : nullptr), "weft_barrier");
  complete(ctx, c, req, "weft_barrier");
}

void run_case(Ctx& ctx, const Case& c) {
  switch (c.coll) {
    case Coll::allreduce: run_allreduce(ctx, c); break;
    case Coll::broadcast: run_broadcast(ctx, c); break;
    case Coll::reduce: run_reduce(ctx, c); break;
    case Coll::allgather: run_allgather(ctx, c); break;
    case Coll::allgatherv: run_allgatherv(ctx, c); break;
    case Coll::reduce_scatter: run_reduce_scatter(ctx, c); break;
    case Coll::alltoall: run_alltoall(ctx, c); break;
    case Coll::alltoallv: run_alltoallv(ctx, c); break;
    case Coll::gather: run_gather(ctx, c); break;
    case Coll::scatter: run_scatter(ctx, c); break;
    case Coll::sendrecv: run_sendrecv(ctx, c); break;
    case Coll::barrier: run_barrier(ctx, c); break;
  }
  ctx.cases_run++;
}

// Nobody leaves a barrier before the last rank arrives: the last rank sleeps 300 ms before
// entering; everybody else must spend >= 200 ms inside (100 ms of slack for skew). For every
// barrier algorithm, blocking and async.
void barrier_semantics(Ctx& ctx) {
  const int n = ctx.world.size, me = ctx.world.rank;
  if (n == 1) return;
  for (const char* algo : coll_info(Coll::barrier).algos) {
    weft_comm_t comm = ctx.comms.at(std::string("barrier/") + algo);
    for (int async = 0; async < 2; ++async) {
      MPT_OK(weft_barrier(comm, nullptr, nullptr));
      if (me == n - 1) sleep_ms(300);
      double t0 = now_s();
      if (async) {
        weft_request_t req = nullptr;
        MPT_OK(weft_barrier(comm, nullptr, &req));
        MPT_OK(weft_wait(req));
        MPT_OK(weft_request_free(req));
      } else {
        MPT_OK(weft_barrier(comm, nullptr, nullptr));
      }
      double dt = now_s() - t0;
      if (me != n - 1 && dt < 0.2) {
        ctx.failures++;
        logf("FAIL barrier semantics (algo=%s, %s): left the barrier after %.0f ms although rank %d entered it 300 ms "
             "late | repro: build/bin/weftrun -n %d build/bin/weft_mp_collectives --part=barrier",
             algo, async ? "async" : "blocking", dt * 1000, n - 1, n);
      }
    }
  }
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

[[noreturn]] void usage(const char* bad) {
  std::fprintf(stderr, "weft_mp_collectives: unknown option %s (see the comment at the top of test_collectives.cpp)\n", bad);
  std::exit(2);
}

}  // namespace
}  // namespace mpt

int main(int argc, char** argv) {
  using namespace mpt;
  Filter f;
  bool list = false, coverage = false;
  int list_ranks = std::atoi(env_or("WEFT_WORLD_SIZE", "4").c_str());
  f.full = env_or("WEFT_TEST_FULL", "0") == "1";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* name) -> const char* {
      size_t l = std::strlen(name);
      if (a.compare(0, l, name) == 0 && a.size() > l && a[l] == '=') return argv[i] + l + 1;
      return nullptr;
    };
    if (a == "--full") f.full = true;
    else if (a == "--list") list = true;
    else if (a == "--coverage") coverage = true;
    else if (const char* v = val("--ranks")) list_ranks = std::atoi(v);
    else if (const char* v = val("--coll")) f.colls = split_list(v);
    else if (const char* v = val("--dtype")) f.dtypes = split_list(v);
    else if (const char* v = val("--op")) f.ops = split_list(v);
    else if (const char* v = val("--size")) f.sizes = split_list(v);
    else if (const char* v = val("--algo")) f.algos = split_list(v);
    else if (const char* v = val("--input")) f.inputs = split_list(v);
    else if (const char* v = val("--part")) f.parts = split_list(v);
    else if (const char* v = val("--inplace")) f.inplace = std::atoi(v);
    else if (const char* v = val("--async")) f.async = std::atoi(v);
    else if (const char* v = val("--root")) f.rootsel = std::string(v) == "last" ? 1 : 0;
    else usage(argv[i]);
  }
  const bool want_barrier_part = f.parts.empty() || std::find(f.parts.begin(), f.parts.end(), "barrier") != f.parts.end();

  if (list) {
    for (const Case& c : build_cases(list_ranks, f)) std::printf("%s\n", c.describe(list_ranks).c_str());
    return 0;
  }
  if (coverage) {
    int unmet = 0;
    for (int r = 1; r <= 8; ++r) unmet += check_coverage(r);
    return unmet ? 1 : 0;
  }

  Ctx ctx;
  ctx.world = init_world();
  const int n = ctx.world.size;
  // One communicator per forced algorithm, made with the variable set (it is read at creation).
  for (const CollInfo& ci : all_colls()) {
    if (!ci.algo_env) continue;
    for (const char* a : ci.algos) {
      const bool noshm = std::strcmp(a, "auto-noshm") == 0;
      setenv(ci.algo_env, noshm ? "auto" : a, 1);
      if (noshm) setenv("WEFT_SHM", "0", 1);
      weft_comm_t dup = nullptr;
      weft_status_t s = weft_comm_dup(ctx.world.comm, &dup);
      unsetenv(ci.algo_env);
      unsetenv("WEFT_SHM");
      if (s != WEFT_OK) die("weft_comm_dup with %s=%s: %s: %s", ci.algo_env, a, status_name(s), last_error().c_str());
      ctx.comms[std::string(ci.name) + "/" + a] = dup;
    }
  }

  const std::vector<Case> cases = build_cases(n, f);
  const bool inject = inject_enabled();
  ctx.quiet = inject && !std::getenv("WEFT_TEST_VERBOSE");
  InjectTally tally;
  if (ctx.world.rank == 0) {
    logf("%zu cases on %d ranks%s%s", cases.size(), n, f.full ? " (full product)" : "",
         inject ? " with WEFT_TEST_INJECT=1: every case that corrupts a result must fail" : "");
    if (n == 1 && (f.colls.empty() || std::find(f.colls.begin(), f.colls.end(), "sendrecv") != f.colls.end()))
      logf("skipped: sendrecv at 1 rank (no peer; sending to oneself is probed by weft_mp_bad_input)");
  }
  std::string part;
  double t_part = now_s();
  int fail_part = 0;
  size_t n_part = 0;
  auto end_part = [&]() {
    if (!part.empty() && ctx.world.rank == 0)
      logf("part %s: %zu cases, %.2f s, %d failures on rank 0", part.c_str(), n_part, now_s() - t_part,
           ctx.failures - fail_part);
  };
  for (const Case& c : cases) {
    if (part != c.part) {
      end_part();
      part = c.part;
      t_part = now_s();
      fail_part = ctx.failures;
      n_part = 0;
    }
    if (std::getenv("WEFT_TEST_VERBOSE")) logf("case %s", c.describe(n).c_str());
    const int before = ctx.failures;
    ctx.injected = false;
    run_case(ctx, c);
    ++n_part;
    if (inject) {
      const bool failed = ctx.failures > before;
      tally.record(std::string(coll_info(c.coll).name) + " " + (c.coll == Coll::barrier ? "-" : dtype_name(c.dt)),
                   ctx.injected, failed);
      if (ctx.injected && !failed)
        logf("MISSED: the corrupted result passed its checks | %s | repro: WEFT_TEST_INJECT=1 %s",
             c.describe(n).c_str(), c.repro(n).c_str());
    }
  }
  end_part();
  if (inject) {
    // Nothing to corrupt in the barrier part; the verdict is the tally's.
    for (auto& kv : ctx.comms) MPT_OK(weft_comm_destroy(kv.second));
    MPT_OK(weft_comm_destroy(ctx.world.comm));
    return tally.report(std::getenv("WEFT_TEST_VERBOSE") || ctx.world.rank == 0) ? 0 : 1;
  }
  if (want_barrier_part && !f.full && n == 1) {
    if (ctx.world.rank == 0) logf("skipped: part barrier at 1 rank (nobody to wait for)");
  } else if (want_barrier_part && !f.full) {
    double t0 = now_s();
    barrier_semantics(ctx);
    if (ctx.world.rank == 0) logf("part barrier: %.2f s", now_s() - t0);
  }

  for (auto& kv : ctx.comms) MPT_OK(weft_comm_destroy(kv.second));
  MPT_OK(weft_comm_destroy(ctx.world.comm));
  if (ctx.failures) {
    logf("%d FAILURES in %d cases", ctx.failures, ctx.cases_run);
    return 1;
  }
  logf("all %d cases passed", ctx.cases_run);
  return 0;
}
