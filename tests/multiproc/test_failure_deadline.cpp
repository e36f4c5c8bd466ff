// Deadline: with config.timeout_ms = 2000, rank 1 skips an allreduce and sleeps; every other
// rank must get WEFT_ERR_TIMEOUT after 2-4 s, and weft_last_error() must name the collective
// and rank 1. Rank 1 then exits cleanly. Scenarios: blocking call, async request + weft_wait,
// and the deadline taken from WEFT_TIMEOUT (seconds) when timeout_ms = 0.
// Every rank exits 0 when the library behaves; each check can fail.
#include <cstdlib>
#include <string>

#include "mp_common.h"

namespace {

using namespace mpt;

constexpr double kMinS = 1.8;   // the deadline is 2 s
constexpr double kMaxS = 4.5;   // "within ~2-4 s", with some slack for 8 ranks on 2 cores
constexpr int kSkipperSleepMs = 5000;

int failures = 0;

void fail(const char* scenario, const std::string& what) {
  ++failures;
  logf("FAIL deadline/%s: %s", scenario, what.c_str());
}

weft_comm_t make_comm(const World& w, int64_t timeout_ms) {
  weft_comm_config_t cfg = WEFT_COMM_CONFIG_INIT;
  cfg.timeout_ms = timeout_ms;
  cfg.name = "deadline";
  weft_comm_t c = nullptr;
  MPT_OK(weft_comm_split(w.comm, 0, w.rank, &c, &cfg));
  return c;
}

// mode 0: blocking; 1: async + weft_wait
void scenario(const World& w, const char* name, weft_comm_t c, int mode) {
  MPT_OK(weft_barrier(c, nullptr, nullptr));  // everybody is here; the deadline works
  if (w.rank == 1) {
    logf("deadline/%s: rank 1 skips the allreduce and sleeps %d ms", name, kSkipperSleepMs);
    sleep_ms(kSkipperSleepMs);
  } else {
    float buf[1000];
    for (float& f : buf) f = 1.0f;
    const double t0 = now_s();
    weft_status_t s;
    std::string err;
    if (mode == 0) {
      s = weft_allreduce(buf, buf, 1000, WEFT_FLOAT32, WEFT_SUM, c, nullptr, nullptr);
      err = last_error();
    } else {
      weft_request_t req = nullptr;
      s = weft_allreduce(buf, buf, 1000, WEFT_FLOAT32, WEFT_SUM, c, nullptr, &req);
      if (s == WEFT_OK) {
        s = weft_wait(req);
        err = last_error();
        weft_request_free(req);  // finished (failed): freeing must not wait again
      } else {
        err = last_error();
      }
    }
    const double dt = now_s() - t0;
    logf("deadline/%s: %s after %.2f s: %s", name, status_name(s), dt, err.c_str());
    if (s != WEFT_ERR_TIMEOUT) fail(name, std::string("returned ") + status_name(s) + ", expected WEFT_ERR_TIMEOUT");
    if (dt < kMinS || dt > kMaxS) fail(name, "returned after " + std::to_string(dt) + " s, expected 2-4 s");
    if (!contains_ci(err, "allreduce")) fail(name, "message does not name the collective: \"" + err + "\"");
    if (!mentions_rank(err, 1)) fail(name, "message does not name rank 1: \"" + err + "\"");
  }
  // Destroying the communicator does not wait for the failed operation again.
  const double t1 = now_s();
  weft_status_t s = weft_comm_destroy(c);
  const double dt = now_s() - t1;
  if (s != WEFT_OK) logf("deadline/%s: note: weft_comm_destroy returned %s: %s", name, status_name(s), last_error().c_str());
  if (dt > 2.5) fail(name, "weft_comm_destroy took " + std::to_string(dt) + " s after the timeout");
}

}  // namespace

int main() {
  // World deadline 30 s: a sub-communicator that wrongly inherits it fails in 30 s, not 120.
  World w = init_world(30000);
  if (w.size < 2) {
    logf("deadline: needs at least 2 ranks; nothing to do");
    return 0;
  }
  scenario(w, "blocking", make_comm(w, 2000), 0);
  MPT_OK(weft_barrier(w.comm, nullptr, nullptr));  // the world is unaffected
  scenario(w, "async-wait", make_comm(w, 2000), 1);
  MPT_OK(weft_barrier(w.comm, nullptr, nullptr));
  // timeout_ms = 0: weft.h says the deadline then comes from WEFT_TIMEOUT (seconds) or 300 s,
  // here for a split with a config (only a NULL config means "inherit the parent's").
  setenv("WEFT_TIMEOUT", "2", 1);
  weft_comm_t c = make_comm(w, 0);
  unsetenv("WEFT_TIMEOUT");
  scenario(w, "WEFT_TIMEOUT=2", c, 0);
  MPT_OK(weft_barrier(w.comm, nullptr, nullptr));
  MPT_OK(weft_comm_destroy(w.comm));
  if (failures) {
    logf("%d deadline checks FAILED", failures);
    return 1;
  }
  logf("deadline checks passed");
  return 0;
}
