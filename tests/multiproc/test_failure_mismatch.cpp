// Collective checking: with check_collectives = 1 (--via=config) or WEFT_DEBUG=check read at
// communicator creation (--via=env), ranks that disagree on count, dtype, op, root or the
// collective itself all get WEFT_ERR_MISMATCH, and the message shows both values. Also: an
// agreeing call in check mode works (so "always MISMATCH" cannot pass), alltoallv counts that
// do not agree pairwise, and a point-to-point receive whose count differs from the send's
// (WEFT_ERR_MISMATCH without check mode). Each checked communicator has a 20 s deadline, so an
// undetected mismatch shows up as a failure rather than a hang.
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "mp_common.h"

namespace {

using namespace mpt;

int failures = 0;
// config: check_collectives = 1 in a split's config.
// env: WEFT_DEBUG=check was in the environment when the world was created (the ctest entry
//      sets it); the checked communicators are splits with check_collectives = 0.
// setenv: the world was created without it; WEFT_DEBUG=check is set in this process and a
//      split with config.check_collectives = 0 ("take WEFT_DEBUG from the environment") must
//      check. Only the count variant runs (an undetected mismatch costs a deadline).
enum class Via { config, env, setenv } via = Via::config;
std::string g_err_override;  // set by a call whose weft_last_error() would be overwritten

void fail(const std::string& variant, const std::string& what) {
  ++failures;
  const char* how = via == Via::config ? "config.check_collectives=1"
                    : via == Via::env  ? "WEFT_DEBUG=check at launch"
                                       : "setenv WEFT_DEBUG=check + split with check_collectives=0";
  logf("FAIL mismatch/%s (via %s): %s", variant.c_str(), how, what.c_str());
}

weft_comm_t checked_comm(const World& w) {
  weft_comm_t c = nullptr;
  weft_comm_config_t cfg = WEFT_COMM_CONFIG_INIT;
  cfg.timeout_ms = 20000;
  cfg.check_collectives = via == Via::config ? 1 : 0;
  cfg.name = "mismatch";
  if (via == Via::setenv) setenv("WEFT_DEBUG", "check", 1);
  weft_status_t s = weft_comm_split(w.comm, 0, w.rank, &c, &cfg);
  if (via == Via::setenv) unsetenv("WEFT_DEBUG");
  if (s != WEFT_OK) die("weft_comm_split (checked): %s: %s", status_name(s), last_error().c_str());
  return c;
}

// Every word group must appear in the message (any word of a group).
using Words = std::vector<std::vector<std::string>>;

void expect_mismatch(const World& w, const std::string& variant, const std::function<weft_status_t(weft_comm_t)>& call,
                     const Words& words) {
  weft_comm_t c = checked_comm(w);
  const double t0 = now_s();
  g_err_override.clear();
  weft_status_t s = call(c);
  const std::string err = g_err_override.empty() ? last_error() : g_err_override;
  const double dt = now_s() - t0;
  logf("mismatch/%s: %s after %.2f s: %s", variant.c_str(), status_name(s), dt, err.c_str());
  if (s != WEFT_ERR_MISMATCH) {
    fail(variant, std::string("returned ") + status_name(s) + ", expected WEFT_ERR_MISMATCH on every rank");
  } else {
    for (const auto& group : words) {
      bool any = false;
      std::string list;
      for (const std::string& word : group) {
        any |= contains_ci(err, word);
        list += (list.empty() ? "\"" : " or \"") + word + "\"";
      }
      if (!any) fail(variant, "message should show both values; missing " + list + ": \"" + err + "\"");
    }
  }
  weft_status_t sd = weft_comm_destroy(c);
  if (sd != WEFT_OK) logf("mismatch/%s: note: weft_comm_destroy returned %s", variant.c_str(), status_name(sd));
  MPT_OK(weft_barrier(w.comm, nullptr, nullptr));  // the world is unaffected
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--via=env") == 0) via = Via::env;
    else if (std::strcmp(argv[i], "--via=config") == 0) via = Via::config;
    else if (std::strcmp(argv[i], "--via=setenv") == 0) via = Via::setenv;
    else die("usage: weft_mp_failure_mismatch [--via=config|--via=env|--via=setenv]");
  }
  if (via == Via::env && env_or("WEFT_DEBUG", "") != "check") die("--via=env: run with WEFT_DEBUG=check in the environment");
  if (via != Via::env) unsetenv("WEFT_DEBUG");
  // The checked communicators have a 20 s deadline, so an undetected mismatch fails in 20 s
  // instead of hanging; the world waits longer so that ranks which failed fast meet the slow
  // ones at the barrier after each variant.
  World w = init_world(60000);
  const int n = w.size, me = w.rank, last = n - 1;
  if (n < 2) {
    logf("mismatch: needs at least 2 ranks; nothing to do");
    return 0;
  }
  std::vector<double> a(64, 1.0), b(64, 0.0);

  // Control: agreeing calls work in check mode.
  {
    weft_comm_t c = checked_comm(w);
    weft_status_t s = weft_allreduce(a.data(), b.data(), 10, WEFT_FLOAT64, WEFT_SUM, c, nullptr, nullptr);
    if (s != WEFT_OK) fail("control", std::string("agreeing allreduce returned ") + status_name(s) + ": " + last_error());
    else if (b[0] != n || b[9] != n) fail("control", "agreeing allreduce gave " + std::to_string(b[0]));
    int64_t v = me == last ? 5 : 0;
    s = weft_broadcast(&v, 1, WEFT_INT64, last, c, nullptr, nullptr);
    if (s != WEFT_OK || v != 5) fail("control", std::string("agreeing broadcast returned ") + status_name(s));
    MPT_OK(weft_comm_destroy(c));
  }

  expect_mismatch(w, "count", [&](weft_comm_t c) {
    return weft_allreduce(a.data(), b.data(), me == 1 ? 11 : 10, WEFT_FLOAT64, WEFT_SUM, c, nullptr, nullptr);
  }, {{"10"}, {"11"}});

  if (via == Via::setenv) {
    MPT_OK(weft_comm_destroy(w.comm));
    if (failures) logf("%d mismatch checks FAILED", failures);
    return failures ? 1 : 0;
  }

  expect_mismatch(w, "dtype", [&](weft_comm_t c) {
    return weft_allreduce(a.data(), b.data(), 10, me == 1 ? WEFT_FLOAT32 : WEFT_FLOAT64, WEFT_SUM, c, nullptr, nullptr);
  }, {{"float32", "f32", "FLOAT32"}, {"float64", "f64", "FLOAT64"}});

  expect_mismatch(w, "op", [&](weft_comm_t c) {
    return weft_allreduce(a.data(), b.data(), 10, WEFT_FLOAT64, me == 1 ? WEFT_MAX : WEFT_SUM, c, nullptr, nullptr);
  }, {{"sum"}, {"max"}});

  expect_mismatch(w, "root", [&](weft_comm_t c) {
    return weft_broadcast(a.data(), 10, WEFT_FLOAT64, me == 1 ? last : 0, c, nullptr, nullptr);
  }, {{"root"}, {"0"}, {std::to_string(last)}});

  expect_mismatch(w, "collective", [&](weft_comm_t c) {
    if (me == 1) return weft_broadcast(a.data(), 10, WEFT_FLOAT64, 0, c, nullptr, nullptr);
    return weft_allreduce(a.data(), b.data(), 10, WEFT_FLOAT64, WEFT_SUM, c, nullptr, nullptr);
  }, {{"allreduce"}, {"broadcast", "bcast"}});

  expect_mismatch(w, "async-count", [&](weft_comm_t c) {
    weft_request_t r = nullptr;
    weft_status_t s = weft_allreduce(a.data(), b.data(), me == 1 ? 11 : 10, WEFT_FLOAT64, WEFT_SUM, c, nullptr, &r);
    if (s != WEFT_OK) return s;
    s = weft_wait(r);
    g_err_override = last_error();  // weft_request_free may replace weft_last_error()
    weft_request_free(r);
    return s;
  }, {{"10"}, {"11"}});

  // alltoallv: rank 0 sends 3 elements to rank 1, rank 1 expects 4 from rank 0.
  expect_mismatch(w, "alltoallv-pairwise-counts", [&](weft_comm_t c) {
    std::vector<size_t> sc(static_cast<size_t>(n), 2), rc(static_cast<size_t>(n), 2), sd(static_cast<size_t>(n)),
        rd(static_cast<size_t>(n));
    if (me == 0) sc[1] = 3;
    if (me == 1) rc[0] = 4;
    for (int p = 0; p < n; ++p) {
      sd[static_cast<size_t>(p)] = 4 * static_cast<size_t>(p);
      rd[static_cast<size_t>(p)] = 4 * static_cast<size_t>(p);
    }
    std::vector<double> sb(4 * static_cast<size_t>(n), 1.0), rb(4 * static_cast<size_t>(n), 0.0);
    return weft_alltoallv(sb.data(), sc.data(), sd.data(), rb.data(), rc.data(), rd.data(), WEFT_FLOAT64, c, nullptr,
                          nullptr);
  }, {{"3"}, {"4"}});

  // Point to point: receive count 11 for a send of 10 -> WEFT_ERR_MISMATCH at the receiver,
  // without check mode.
  {
    weft_comm_config_t cfg = WEFT_COMM_CONFIG_INIT;
    cfg.timeout_ms = 20000;
    weft_comm_t c = nullptr;
    MPT_OK(weft_comm_split(w.comm, 0, me, &c, &cfg));
    if (me == 0) {
      weft_status_t s = weft_send(a.data(), 10, WEFT_FLOAT64, 1, c, nullptr, nullptr);
      logf("mismatch/p2p: sender got %s: %s", status_name(s), s == WEFT_OK ? "" : last_error().c_str());
      if (s != WEFT_OK && s != WEFT_ERR_MISMATCH) fail("p2p", std::string("sender got ") + status_name(s));
    } else if (me == 1) {
      weft_status_t s = weft_recv(b.data(), 11, WEFT_FLOAT64, 0, c, nullptr, nullptr);
      std::string err = last_error();
      logf("mismatch/p2p: receiver got %s: %s", status_name(s), err.c_str());
      if (s != WEFT_ERR_MISMATCH) fail("p2p", std::string("receive of 11 for a send of 10 returned ") + status_name(s));
      else if (!(contains_ci(err, "10") && contains_ci(err, "11")) && !(contains_ci(err, "80") && contains_ci(err, "88")))
        fail("p2p", "message should show both counts (10 and 11 elements, or 80 and 88 bytes): \"" + err + "\"");
    }
    weft_comm_destroy(c);
    MPT_OK(weft_barrier(w.comm, nullptr, nullptr));
  }

  MPT_OK(weft_comm_destroy(w.comm));
  if (failures) {
    logf("%d mismatch checks FAILED", failures);
    return 1;
  }
  logf("mismatch checks passed");
  return 0;
}
