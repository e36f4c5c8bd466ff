// Threads of one rank sharing one world (one UCX worker, one liveness state, one id space), each
// on its own communicator, for ThreadSanitizer (tests/sanitizers/CMakeLists.txt):
//   async:     asynchronous allreduces and broadcasts outstanding at once (the worker thread
//              writes the results), every other one polled with weft_test, the rest waited;
//   p2p:       a ring of weft_send/weft_recv with requests between blocking allreduces;
//   lifecycle: weft_comm_dup and weft_comm_split of its communicator, one allreduce on the
//              new one, destroy, over and over (ids reserved while the others run);
//   blocked:   a receive nobody sends (odd ranks) or an asynchronous allreduce the odd ranks
//              never join (even ranks: it blocks cb's worker thread), which the main thread
//              aborts with weft_comm_abort while the three above still run; the call or its
//              weft_wait must return WEFT_ERR_ABORTED, and that thread then destroys cb at once,
//              which may overlap weft_comm_abort: before capi/src/comm_api.cpp held a reference,
//              abort() went on using the freed communicator (TSan: heap-use-after-free, seen
//              with a 50 ms sleep in Comm::abort standing in for a device abort).
// Every result is checked against closed forms (integer-valued doubles: sums are exact).
// WEFT_TEST_INJECT=1 corrupts one element of every checked result (tests/multiproc/inject.h):
// the run passes only when each corruption was caught.
#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "inject.h"
#include "mp_common.h"

namespace {

using mpt::World;

constexpr int kRounds = 12;
std::atomic<int> g_failures{0};
std::atomic<long> g_injected{0}, g_caught{0};

void failf(const std::string& what) {
  ++g_failures;
  mpt::logf("FAIL %s", what.c_str());
}

// Checks got[i] == want(i) for all i, after corrupting got[i % n] when injecting.
template <class Want>
void check(const char* what, int round, std::vector<double>& got, Want want) {
  const bool inject = mpt::inject_enabled() && !got.empty();
  if (inject) got[static_cast<size_t>(round) % got.size()] += 1024.0;
  size_t bad = got.size();
  for (size_t i = 0; i < got.size() && bad == got.size(); ++i)
    if (got[i] != want(i)) bad = i;
  if (inject) {
    ++g_injected;
    if (bad != got.size()) ++g_caught;
    else failf(std::string(what) + ": an injected corruption was not caught");
  } else if (bad != got.size()) {
    failf(std::string(what) + " round " + std::to_string(round) + ": element " + std::to_string(bad) + " is " +
          std::to_string(got[bad]) + ", expected " + std::to_string(want(bad)));
  }
}

bool ok(weft_status_t s, const std::string& what) {
  if (s == WEFT_OK) return true;
  failf(what + ": " + mpt::status_name(s) + ": " + mpt::last_error());
  return false;
}

void async_thread(weft_comm_t c, int me, int n) {
  const double ranks_sum = n * (n - 1) / 2.0;
  for (int round = 0; round < kRounds; ++round) {
    const size_t counts[3] = {7, 1000, 40000};  // shared-memory slot, several slots, pipelined
    std::vector<std::vector<double>> send(3), recv(3);
    std::vector<weft_request_t> reqs;
    for (int k = 0; k < 3; ++k) {
      send[k].assign(counts[k], 0);
      recv[k].assign(counts[k], -1);
      for (size_t i = 0; i < counts[k]; ++i) send[k][i] = me + static_cast<double>(i % 97);
      weft_request_t r = nullptr;
      if (!ok(weft_allreduce(send[k].data(), recv[k].data(), counts[k], WEFT_FLOAT64, WEFT_SUM, c, nullptr, &r),
              "async allreduce")) return;
      reqs.push_back(r);
    }
    std::vector<double> b(500, me == round % n ? 3.0 * round : -1.0);
    weft_request_t rb = nullptr;
    if (!ok(weft_broadcast(b.data(), b.size(), WEFT_FLOAT64, round % n, c, nullptr, &rb), "async broadcast")) return;
    reqs.push_back(rb);
    for (size_t q = 0; q < reqs.size(); ++q) {
      if (q % 2 == 0) {
        ok(weft_wait(reqs[q]), "weft_wait");
      } else {
        int done = 0;
        weft_status_t s;
        while ((s = weft_test(reqs[q], &done)) == WEFT_IN_PROGRESS) std::this_thread::yield();
        ok(s, "weft_test");
      }
      ok(weft_request_free(reqs[q]), "weft_request_free");
    }
    for (int k = 0; k < 3; ++k)
      check("async allreduce", round, recv[k], [&](size_t i) { return ranks_sum + n * static_cast<double>(i % 97); });
    check("async broadcast", round, b, [&](size_t) { return 3.0 * round; });
  }
}

void p2p_thread(weft_comm_t c, int me, int n) {
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<double> out(3000, 100.0 * me + round), in(3000, -1);
    weft_request_t rr = nullptr, rs = nullptr;
    if (!ok(weft_recv(in.data(), in.size(), WEFT_FLOAT64, prev, c, nullptr, &rr), "weft_recv")) return;
    if (!ok(weft_send(out.data(), out.size(), WEFT_FLOAT64, next, c, nullptr, &rs), "weft_send")) return;
    ok(weft_wait(rs), "send wait");
    ok(weft_wait(rr), "recv wait");
    ok(weft_request_free(rs), "free send");
    ok(weft_request_free(rr), "free recv");
    check("ring p2p", round, in, [&](size_t) { return 100.0 * prev + round; });
    std::vector<double> x(64, me + 1.0);
    if (!ok(weft_allreduce(x.data(), x.data(), x.size(), WEFT_FLOAT64, WEFT_SUM, c, nullptr, nullptr), "allreduce"))
      return;
    check("blocking allreduce", round, x, [&](size_t) { return n * (n + 1) / 2.0; });
  }
}

void lifecycle_thread(weft_comm_t c, int me, int n) {
  for (int round = 0; round < kRounds / 2; ++round) {
    weft_comm_t dup = nullptr, half = nullptr;
    if (!ok(weft_comm_dup(c, &dup), "weft_comm_dup")) return;
    if (!ok(weft_comm_split(dup, me % 2, -me, &half, nullptr), "weft_comm_split")) return;
    int hn = 0;
    weft_comm_size(half, &hn);
    std::vector<double> x(100, 1.0);
    ok(weft_allreduce(x.data(), x.data(), x.size(), WEFT_FLOAT64, WEFT_SUM, half, nullptr, nullptr), "split allreduce");
    const int want = me % 2 == 0 ? (n + 1) / 2 : n / 2;
    if (hn != want) failf("split size " + std::to_string(hn) + ", expected " + std::to_string(want));
    check("split allreduce", round, x, [&](size_t) { return static_cast<double>(want); });
    ok(weft_comm_destroy(half), "destroy split");
    ok(weft_comm_destroy(dup), "destroy dup");
  }
}

}  // namespace

int main() {
  World w = mpt::init_world(60000);
  if (w.size < 2) mpt::die("needs 2 or more ranks");
  // Made here, in the same order on every rank; each thread then owns one.
  weft_comm_t ca = nullptr, cp = nullptr, cl = nullptr, cb = nullptr;
  MPT_OK(weft_comm_dup(w.comm, &ca));
  MPT_OK(weft_comm_dup(w.comm, &cp));
  MPT_OK(weft_comm_dup(w.comm, &cl));
  MPT_OK(weft_comm_dup(w.comm, &cb));

  weft_status_t blocked_status = WEFT_OK;
  std::thread blocked([&] {
    double x = 1, y = 0;
    if (w.rank % 2 == 1) {  // no rank sends on cb: only the abort ends this receive
      blocked_status = weft_recv(&y, 1, WEFT_FLOAT64, (w.rank + 1) % w.size, cb, nullptr, nullptr);
    } else {
      // The odd ranks never join: cb's worker thread blocks in it until the abort.
      weft_request_t r = nullptr;
      blocked_status = weft_allreduce(&x, &y, 1, WEFT_FLOAT64, WEFT_SUM, cb, nullptr, &r);
      if (blocked_status == WEFT_OK) {
        blocked_status = weft_wait(r);
        weft_request_free(r);  // returns the same error again
      }
    }
    // The owner destroys the communicator as soon as its call failed, possibly while
    // weft_comm_abort is still running on the main thread (its status says nothing more).
    weft_comm_destroy(cb);
  });
  std::thread ta(async_thread, ca, w.rank, w.size), tp(p2p_thread, cp, w.rank, w.size),
      tl(lifecycle_thread, cl, w.rank, w.size);
  mpt::sleep_ms(300);
  ok(weft_comm_abort(cb), "weft_comm_abort");
  blocked.join();
  if (blocked_status != WEFT_ERR_ABORTED)
    failf(std::string("the aborted receive returned ") + mpt::status_name(blocked_status) + ", expected WEFT_ERR_ABORTED");
  ta.join();
  tp.join();
  tl.join();
  for (weft_comm_t c : {ca, cp, cl}) ok(weft_comm_destroy(c), "weft_comm_destroy");
  MPT_OK(weft_barrier(w.comm, nullptr, nullptr));
  MPT_OK(weft_comm_destroy(w.comm));
  if (mpt::inject_enabled()) {
    mpt::logf("injected %ld, caught %ld", g_injected.load(), g_caught.load());
    if (g_injected.load() == 0 || g_caught.load() != g_injected.load()) ++g_failures;
  }
  mpt::logf("tsan threads: %s", g_failures.load() ? "FAILED" : "passed");
  return g_failures.load() ? 1 : 0;
}
