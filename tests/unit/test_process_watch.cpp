// ProcessWatch (core/common/process_watch.h): a child that exits must be reported while it is
// still an unreaped zombie (kill(pid, 0) calls a zombie alive; that delayed failure detection
// until the launcher reaped the rank) and after it is reaped; a running or stopped child must
// not be. The fallback path (no pidfd) is the same checks through kill(). Children are forked
// here, so the reference is the kernel's own account (waitpid), not weft's.
// WEFT_TEST_INJECT=1 flips every check's truth once; the run passes only when each was caught.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/common/process_watch.h"
#include "inject_tally.h"

namespace {

::testing::Environment* const kInjectionReport = inject::register_report();

using inject::check;

pid_t child_that_sleeps() {
  const pid_t pid = fork();
  if (pid == 0) {
    for (;;) pause();
  }
  return pid;
}

bool reported(weft::ProcessWatch& w, int index) {
  std::vector<int> out;
  w.exited(out);
  return std::find(out.begin(), out.end(), index) != out.end();
}

// The kernel marks a killed child exited shortly after the signal; polls for up to 5 s.
bool reported_soon(weft::ProcessWatch& w, int index) {
  for (int i = 0; i < 500; ++i) {
    if (reported(w, index)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Whether the child is a zombie (exited, not reaped): the reference for the zombie case.
bool is_zombie(pid_t pid) {
  siginfo_t info{};
  return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

}  // namespace

TEST(ProcessWatch, ZombieReapedRunningAndStopped) {
  const pid_t running = child_that_sleeps();
  const pid_t stopped = child_that_sleeps();
  const pid_t dies = child_that_sleeps();
  ASSERT_GT(running, 0);
  ASSERT_GT(stopped, 0);
  ASSERT_GT(dies, 0);
  weft::ProcessWatch w;
  w.watch(0, running);
  w.watch(1, stopped);
  w.watch(2, dies);
  check(!reported(w, 0) && !reported(w, 1) && !reported(w, 2), "no child has exited yet");

  kill(stopped, SIGSTOP);
  kill(dies, SIGKILL);
  check(reported_soon(w, 2), "a killed child must be reported before it is reaped");
  check(is_zombie(dies), "the reference: the killed child is an unreaped zombie");
  check(!reported(w, 0) && !reported(w, 1), "running and stopped children are alive");

  waitpid(dies, nullptr, 0);
  check(reported(w, 2), "a reaped child stays reported");

  kill(running, SIGKILL);
  kill(stopped, SIGKILL);
  waitpid(running, nullptr, 0);
  waitpid(stopped, nullptr, 0);
  check(reported(w, 0) && reported(w, 1), "every child is reported once all are gone");
}

TEST(ProcessWatch, ProcessGoneBeforeWatchIsReported) {
  const pid_t pid = child_that_sleeps();
  ASSERT_GT(pid, 0);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  weft::ProcessWatch w;
  w.watch(7, pid);  // pidfd_open fails (ESRCH): the kill() fallback must answer
  check(reported(w, 7), "a process already gone when watched");
}
