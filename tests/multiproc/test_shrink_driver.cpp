// Launcher of the shrink test: weftrun stops every rank as soon as one dies, so (as the kill -9
// test does) this program makes the unique id (the store runs here, so the store outlives
// every rank, rank 0 included), spawns the ranks (test_shrink_child.cpp) and judges how each
// one ended: the victim by SIGKILL, the second victim by exit 9 (WEFT_TEST_SHRINK_EXIT_AT),
// every survivor with exit 0 (it shrank, agreed and trained), and all within a bound.
//
//   weft_mp_shrink --child PATH -n N --scenario healthy|kill|second [--victim R]
//                  [--second R --phase reported|collected|half-decided] [--timeout-ms T]
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mp_common.h"

extern char** environ;

namespace {

using namespace mpt;

std::string describe_status(int st) {
  char buf[64];
  if (WIFEXITED(st)) std::snprintf(buf, sizeof buf, "exit %d", WEXITSTATUS(st));
  else if (WIFSIGNALED(st)) std::snprintf(buf, sizeof buf, "signal %d", WTERMSIG(st));
  else std::snprintf(buf, sizeof buf, "status 0x%x", st);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::string child, scenario = "kill", phase;
  int n = 3, victim = -1, second = -1;
  long timeout_ms = 3000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const char* v = argv[i + 1];
    if (a == "--child") child = v;
    else if (a == "-n") n = std::atoi(v);
    else if (a == "--scenario") scenario = v;
    else if (a == "--victim") victim = std::atoi(v);
    else if (a == "--second") second = std::atoi(v);
    else if (a == "--phase") phase = v;
    else if (a == "--timeout-ms") timeout_ms = std::atol(v);
    else {
      std::fprintf(stderr, "unknown option %s (see the comment at the top of test_shrink_driver.cpp)\n", a.c_str());
      return 2;
    }
  }
  if (child.empty() || n < 2 || (scenario != "healthy" && (victim < 0 || victim >= n)) ||
      (scenario == "second" && (second < 0 || second >= n || second == victim || phase.empty()))) {
    std::fprintf(stderr, "bad arguments (see the comment at the top of test_shrink_driver.cpp)\n");
    return 2;
  }
  if (scenario != "second") second = -1;
  if (scenario == "healthy") victim = -1;
  std::printf("[shrink-driver] %d ranks, scenario %s, victim %d, second %d %s, deadline %ld ms\n", n, scenario.c_str(),
              victim, second, phase.c_str(), timeout_ms);
  std::fflush(stdout);

  const std::string hex = unique_id_for_children();
  if (hex.empty()) {
    std::printf("[shrink-driver] FAIL weft_get_unique_id: %s\n", last_error().c_str());
    return 1;
  }
  if (scenario == "second") setenv("WEFT_TEST_SHRINK_EXIT_AT", (phase + ":" + std::to_string(second)).c_str(), 1);

  std::vector<pid_t> pids(static_cast<size_t>(n), -1);
  const std::string ns = std::to_string(n), tmo = std::to_string(timeout_ms), vs = std::to_string(victim),
                    ss = std::to_string(second);
  for (int r = 0; r < n; ++r) {
    const std::string rs = std::to_string(r);
    char* cargv[] = {const_cast<char*>(child.c_str()), const_cast<char*>(hex.c_str()), const_cast<char*>(rs.c_str()),
                     const_cast<char*>(ns.c_str()),    const_cast<char*>(tmo.c_str()), const_cast<char*>(scenario.c_str()),
                     const_cast<char*>(vs.c_str()),    const_cast<char*>(ss.c_str()),  nullptr};
    if (int e = posix_spawn(&pids[static_cast<size_t>(r)], child.c_str(), nullptr, nullptr, cargv, environ); e != 0) {
      std::printf("[shrink-driver] FAIL posix_spawn %s: %s\n", child.c_str(), std::strerror(e));
      return 1;
    }
  }

  // Up to 4 shrink rounds of at most 2 x timeout + 2 s each, the failing allreduce, start-up and
  // the training: anything slower is a hang.
  const double bound = 5.0 * (2.0 * static_cast<double>(timeout_ms) / 1000.0 + 2.0) + 30.0;
  const double t0 = now_s();
  std::vector<int> status(static_cast<size_t>(n), 0);
  std::vector<bool> done(static_cast<size_t>(n), false);
  int failures = 0, left = n;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      int st = 0;
      if (!done[static_cast<size_t>(r)] && waitpid(pids[static_cast<size_t>(r)], &st, WNOHANG) == pids[static_cast<size_t>(r)]) {
        done[static_cast<size_t>(r)] = true;
        status[static_cast<size_t>(r)] = st;
        --left;
        std::printf("[shrink-driver] rank %d ended after %.1f s: %s\n", r, now_s() - t0, describe_status(st).c_str());
        std::fflush(stdout);
      }
    }
    if (left > 0 && now_s() - t0 > bound) {
      for (int r = 0; r < n; ++r)
        if (!done[static_cast<size_t>(r)]) {
          std::printf("[shrink-driver] FAIL rank %d still running after %.0f s (hang)\n", r, bound);
          ++failures;
          kill(pids[static_cast<size_t>(r)], SIGKILL);
          waitpid(pids[static_cast<size_t>(r)], &status[static_cast<size_t>(r)], 0);
          done[static_cast<size_t>(r)] = true;
          --left;
        }
    }
    sleep_ms(50);
  }
  for (int r = 0; r < n; ++r) {
    const int st = status[static_cast<size_t>(r)];
    bool ok;
    if (r == victim) ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
    else if (r == second) ok = WIFEXITED(st) && WEXITSTATUS(st) == 9;
    else ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!ok) {
      std::printf("[shrink-driver] FAIL rank %d ended with %s\n", r, describe_status(st).c_str());
      ++failures;
    }
  }
  std::printf("[shrink-driver] %s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
