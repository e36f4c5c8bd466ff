// weft_comm_abort: one thread blocks in an operation that can never complete (its peers do not
// call it); another thread aborts the communicator after 300 ms; the blocked call returns
// WEFT_ERR_ABORTED promptly, later calls on that communicator return WEFT_ERR_ABORTED too, and
// other communicators keep working. The aborted communicators have a 20 s deadline, so a
// broken abort shows up as WEFT_ERR_TIMEOUT instead of a hang.
#include <atomic>
#include <string>
#include <thread>

#include "mp_common.h"

namespace {

using namespace mpt;

constexpr double kPromptS = 1.0;  // from weft_comm_abort to the blocked call returning
int failures = 0;

void fail(const char* scenario, const std::string& what) {
  ++failures;
  logf("FAIL abort/%s: %s", scenario, what.c_str());
}

weft_comm_t make_comm(const World& w) {
  weft_comm_config_t cfg = WEFT_COMM_CONFIG_INIT;
  cfg.timeout_ms = 20000;
  cfg.name = "abort-test";
  weft_comm_t c = nullptr;
  MPT_OK(weft_comm_split(w.comm, 0, w.rank, &c, &cfg));
  return c;
}

// Runs `blocked` in a thread; aborts `c` from this thread after 300 ms; checks the result.
template <typename Blocked>
void abort_while_blocked(const char* name, weft_comm_t c, Blocked blocked) {
  std::atomic<double> t_return{0};
  weft_status_t s = WEFT_OK;
  std::string err;
  std::thread t([&] {
    s = blocked();
    err = last_error();
    t_return = now_s();
  });
  sleep_ms(300);
  const double t_abort = now_s();
  weft_status_t sa = weft_comm_abort(c);
  if (sa != WEFT_OK) fail(name, std::string("weft_comm_abort returned ") + status_name(sa) + ": " + last_error());
  t.join();
  const double dt = t_return.load() - t_abort;
  logf("abort/%s: blocked call returned %s %.3f s after weft_comm_abort: %s", name, status_name(s), dt, err.c_str());
  if (s != WEFT_ERR_ABORTED) fail(name, std::string("blocked call returned ") + status_name(s) + ", expected WEFT_ERR_ABORTED");
  if (dt > kPromptS) fail(name, "blocked call returned " + std::to_string(dt) + " s after the abort (not prompt)");
  if (dt < 0) fail(name, "blocked call returned before the abort: " + std::string(status_name(s)));
}

void later_calls_fail(const char* name, weft_comm_t c) {
  float x = 1, y = 0;
  weft_status_t s = weft_allreduce(&x, &y, 1, WEFT_FLOAT32, WEFT_SUM, c, nullptr, nullptr);
  if (s != WEFT_ERR_ABORTED) fail(name, std::string("allreduce after the abort returned ") + status_name(s));
  s = weft_barrier(c, nullptr, nullptr);
  if (s != WEFT_ERR_ABORTED) fail(name, std::string("barrier after the abort returned ") + status_name(s));
  weft_request_t r = nullptr;
  s = weft_broadcast(&x, 1, WEFT_FLOAT32, 0, c, nullptr, &r);
  if (s == WEFT_OK) {
    s = weft_wait(r);
    weft_request_free(r);
  }
  if (s != WEFT_ERR_ABORTED) fail(name, std::string("async broadcast after the abort gave ") + status_name(s));
  // A second abort is harmless.
  s = weft_comm_abort(c);
  if (s != WEFT_OK && s != WEFT_ERR_ABORTED) fail(name, std::string("second weft_comm_abort returned ") + status_name(s));
}

void destroy_promptly(const char* name, weft_comm_t c) {
  const double t0 = now_s();
  weft_status_t s = weft_comm_destroy(c);
  const double dt = now_s() - t0;
  if (s != WEFT_OK) logf("abort/%s: note: weft_comm_destroy returned %s: %s", name, status_name(s), last_error().c_str());
  if (dt > 2.0) fail(name, "weft_comm_destroy of an aborted communicator took " + std::to_string(dt) + " s");
}

}  // namespace

int main() {
  World w = init_world();
  const int n = w.size, me = w.rank, last = n - 1;
  if (n < 2) {
    logf("abort: needs at least 2 ranks; nothing to do");
    return 0;
  }

  // 1. Rank 0 blocks in an allreduce nobody else calls; rank 0 aborts from another thread.
  {
    weft_comm_t c = make_comm(w);
    MPT_OK(weft_barrier(c, nullptr, nullptr));
    if (me == 0) {
      abort_while_blocked("blocking-allreduce", c, [c] {
        float buf[256] = {0};
        return weft_allreduce(buf, buf, 256, WEFT_FLOAT32, WEFT_SUM, c, nullptr, nullptr);
      });
      later_calls_fail("blocking-allreduce", c);
    }
    MPT_OK(weft_barrier(w.comm, nullptr, nullptr));  // other communicators still work
    destroy_promptly("blocking-allreduce", c);
  }

  // 2. Every rank but the last has an async allreduce outstanding and waits in weft_wait; a
  //    second thread aborts.
  {
    weft_comm_t c = make_comm(w);
    MPT_OK(weft_barrier(c, nullptr, nullptr));
    if (me != last) {
      double buf[1000] = {0};
      weft_request_t req = nullptr;
      MPT_OK(weft_allreduce(buf, buf, 1000, WEFT_FLOAT64, WEFT_SUM, c, nullptr, &req));
      abort_while_blocked("async-wait", c, [req] { return weft_wait(req); });
      weft_status_t s = weft_test(req, nullptr);
      if (s != WEFT_ERR_ABORTED) fail("async-wait", std::string("weft_test after the abort returned ") + status_name(s));
      weft_request_free(req);
      later_calls_fail("async-wait", c);
    }
    MPT_OK(weft_barrier(w.comm, nullptr, nullptr));
    destroy_promptly("async-wait", c);
  }

  // 3. Rank 0 blocks in a receive from rank 1, which never sends.
  {
    weft_comm_t c = make_comm(w);
    MPT_OK(weft_barrier(c, nullptr, nullptr));
    if (me == 0) {
      abort_while_blocked("blocking-recv", c, [c] {
        int32_t buf[16];
        return weft_recv(buf, 16, WEFT_INT32, 1, c, nullptr, nullptr);
      });
      later_calls_fail("blocking-recv", c);
    }
    MPT_OK(weft_barrier(w.comm, nullptr, nullptr));
    destroy_promptly("blocking-recv", c);
  }

  // 4. The world still reduces correctly.
  int64_t one = 1, sum = 0;
  MPT_OK(weft_allreduce(&one, &sum, 1, WEFT_INT64, WEFT_SUM, w.comm, nullptr, nullptr));
  if (sum != n) fail("world-after", "world allreduce gave " + std::to_string(sum));
  MPT_OK(weft_comm_destroy(w.comm));
  if (failures) {
    logf("%d abort checks FAILED", failures);
    return 1;
  }
  logf("abort checks passed");
  return 0;
}
