// kill -9: a rank dies in the middle of a loop of allreduces; the survivors must fail with
// WEFT_ERR_REMOTE (or WEFT_ERR_TIMEOUT from their short deadline) with a message naming the dead
// rank, within a bounded time, print the error, and exit with the code that says so.
//
// weftrun would stop the survivors as soon as one rank dies, so this driver is the launcher:
// it makes the unique id (which starts the store in this process), spawns the ranks with
// posix_spawn (no fork of a threaded process), reads their output through pipes, SIGKILLs the
// victim once it has done 20 iterations, and checks every exit status and the elapsed time.
//
//   weft_mp_failure_kill --child PATH [-n 3] [--victim 2] [--timeout-ms 10000]
#include <fcntl.h>
#include <poll.h>
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

struct Child {
  int rank = 0;
  pid_t pid = -1;
  int fd = -1;          // read end of its stdout+stderr
  std::string out;      // everything it printed
  std::string partial;  // the unfinished last line
  bool exited = false;
  int status = 0;
  double t_exit = 0;
  double t_error = 0;   // when its "ERROR" line arrived
};

int failures = 0;
void fail(const std::string& what) {
  ++failures;
  std::printf("[kill-driver] FAIL %s\n", what.c_str());
  std::fflush(stdout);
}

// Reads what is available from every child's pipe, echoing complete lines.
void pump(std::vector<Child>& kids, int timeout_ms) {
  std::vector<pollfd> fds;
  std::vector<size_t> which;
  for (size_t i = 0; i < kids.size(); ++i)
    if (kids[i].fd >= 0) {
      fds.push_back({kids[i].fd, POLLIN, 0});
      which.push_back(i);
    }
  if (fds.empty()) {
    sleep_ms(timeout_ms);
    return;
  }
  if (poll(fds.data(), fds.size(), timeout_ms) <= 0) return;
  for (size_t k = 0; k < fds.size(); ++k) {
    if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    Child& c = kids[which[k]];
    char buf[4096];
    ssize_t got = read(c.fd, buf, sizeof buf);
    if (got <= 0) {
      close(c.fd);
      c.fd = -1;
      if (!c.partial.empty()) std::printf("[child %d] %s\n", c.rank, c.partial.c_str());
      continue;
    }
    c.out.append(buf, static_cast<size_t>(got));
    c.partial.append(buf, static_cast<size_t>(got));
    size_t nl;
    while ((nl = c.partial.find('\n')) != std::string::npos) {
      if (c.t_error == 0 && c.partial.substr(0, nl).find("] ERROR iter") != std::string::npos)
        c.t_error = now_s();
      std::printf("[child %d] %s\n", c.rank, c.partial.substr(0, nl).c_str());
      c.partial.erase(0, nl + 1);
    }
    std::fflush(stdout);
  }
}

void reap(std::vector<Child>& kids) {
  for (Child& c : kids) {
    if (c.exited) continue;
    int st = 0;
    if (waitpid(c.pid, &st, WNOHANG) == c.pid) {
      c.exited = true;
      c.status = st;
      c.t_exit = now_s();
    }
  }
}

std::string describe_status(int st) {
  char buf[64];
  if (WIFEXITED(st)) std::snprintf(buf, sizeof buf, "exit %d", WEXITSTATUS(st));
  else if (WIFSIGNALED(st)) std::snprintf(buf, sizeof buf, "signal %d", WTERMSIG(st));
  else std::snprintf(buf, sizeof buf, "status 0x%x", st);
  return buf;
}

// "rank R iter K ok" lines: the highest K the child reported.
long last_iter(const std::string& out) {
  long best = -1;
  for (size_t p = out.find("iter "); p != std::string::npos; p = out.find("iter ", p + 1)) {
    long k = std::atol(out.c_str() + p + 5);
    size_t eol = out.find('\n', p);
    if (eol != std::string::npos && out.compare(eol - 2, 2, "ok") == 0 && k > best) best = k;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::string child_path;
  int n = 3, victim = -1;
  long timeout_ms = 10000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--child" && i + 1 < argc) child_path = argv[++i];
    else if (a == "-n" && i + 1 < argc) n = std::atoi(argv[++i]);
    else if (a == "--victim" && i + 1 < argc) victim = std::atoi(argv[++i]);
    else if (a == "--timeout-ms" && i + 1 < argc) timeout_ms = std::atol(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s --child PATH [-n N] [--victim R] [--timeout-ms T]\n", argv[0]);
      return 2;
    }
  }
  if (victim < 0) victim = n - 1;
  if (child_path.empty() || n < 2 || victim >= n) {
    std::fprintf(stderr, "bad arguments\n");
    return 2;
  }
  std::printf("[kill-driver] %d ranks, SIGKILL rank %d after 20 iterations; survivor deadline %ld ms\n", n, victim,
              timeout_ms);

  // The store runs in this process, on a port of its own.
  const std::string hex = unique_id_for_children();
  if (hex.empty()) {
    std::printf("[kill-driver] FAIL weft_get_unique_id: %s\n", last_error().c_str());
    return 1;
  }

  std::vector<Child> kids(static_cast<size_t>(n));
  const std::string tmo = std::to_string(timeout_ms);
  for (int r = 0; r < n; ++r) {
    Child& c = kids[static_cast<size_t>(r)];
    c.rank = r;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
      std::perror("pipe2");
      return 1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_adddup2(&fa, p[1], 2);
    const std::string rs = std::to_string(r), ns = std::to_string(n);
    char* cargv[] = {const_cast<char*>(child_path.c_str()), const_cast<char*>(hex.c_str()), const_cast<char*>(rs.c_str()),
                     const_cast<char*>(ns.c_str()), const_cast<char*>(tmo.c_str()), nullptr};
    int e = posix_spawn(&c.pid, child_path.c_str(), &fa, nullptr, cargv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (e != 0) {
      std::printf("[kill-driver] FAIL posix_spawn %s: %s\n", child_path.c_str(), std::strerror(e));
      return 1;
    }
    c.fd = p[0];
  }

  auto kill_all = [&] {
    for (Child& c : kids)
      if (!c.exited) kill(c.pid, SIGKILL);
    for (Child& c : kids)
      if (!c.exited) {
        waitpid(c.pid, &c.status, 0);
        c.exited = true;
      }
  };

  // Wait for the victim's 20th iteration (everybody is in the loop by then).
  const double t_start = now_s();
  Child& v = kids[static_cast<size_t>(victim)];
  while (last_iter(v.out) < 20) {
    pump(kids, 100);
    reap(kids);
    for (Child& c : kids)
      if (c.exited) {
        fail("rank " + std::to_string(c.rank) + " ended before the kill: " + describe_status(c.status));
        kill_all();
        return 1;
      }
    if (now_s() - t_start > 60) {
      fail("the ranks did not reach 20 iterations within 60 s");
      kill_all();
      return 1;
    }
  }
  kill(v.pid, SIGKILL);
  const double t_kill = now_s();
  std::printf("[kill-driver] SIGKILL rank %d (pid %d) at iteration ~%ld\n", victim, static_cast<int>(v.pid), last_iter(v.out));
  std::fflush(stdout);

  // Survivors report the error within their deadline plus slack, then linger deadline + 2 s.
  const double bound = static_cast<double>(timeout_ms) / 1000.0 + 10.0;
  const double exit_bound = 2 * static_cast<double>(timeout_ms) / 1000.0 + 15.0;
  for (;;) {
    pump(kids, 100);
    reap(kids);
    bool all = true;
    for (Child& c : kids) all &= c.exited;
    if (all) break;
    if (now_s() - t_kill > exit_bound) {
      for (Child& c : kids)
        if (!c.exited)
          fail("rank " + std::to_string(c.rank) + " still running " + std::to_string(exit_bound) + " s after the kill (hang)");
      kill_all();
      break;
    }
  }
  while (true) {  // drain the pipes
    bool open = false;
    for (Child& c : kids) open |= c.fd >= 0;
    if (!open) break;
    pump(kids, 100);
  }

  for (Child& c : kids) {
    const std::string st = describe_status(c.status);
    if (c.rank == victim) {
      if (!(WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGKILL)) fail("victim ended with " + st + ", not SIGKILL");
      continue;
    }
    const double dt = (c.t_error > 0 ? c.t_error : c.t_exit) - t_kill;
    std::printf("[kill-driver] rank %d: %s; error reported %.2f s after the kill\n", c.rank, st.c_str(), dt);
    if (!WIFEXITED(c.status)) {
      fail("rank " + std::to_string(c.rank) + " ended with " + st);
      continue;
    }
    const int code = WEXITSTATUS(c.status);
    size_t p = c.out.find("ERROR iter");
    std::string line = p == std::string::npos ? "" : c.out.substr(p, c.out.find('\n', p) - p);
    size_t m = line.find("message: ");
    std::string msg = m == std::string::npos ? "" : line.substr(m + 9);
    // Either status must name the dead rank: a survivor that only times out still has to say
    // who is gone (DESIGN.md: "a dead peer surfaces ... naming the rank").
    if (code == 3 || code == 4) {
      const char* status = code == 3 ? "WEFT_ERR_REMOTE" : "WEFT_ERR_TIMEOUT";
      if (code == 4)
        std::printf("[kill-driver] note: rank %d saw WEFT_ERR_TIMEOUT, not WEFT_ERR_REMOTE (allowed, but slower)\n",
                    c.rank);
      if (!mentions_rank(msg, victim))
        fail("rank " + std::to_string(c.rank) + ": " + status + " message does not name dead rank " +
             std::to_string(victim) + ": \"" + msg + "\"");
    } else {
      fail("rank " + std::to_string(c.rank) + " exit " + std::to_string(code) +
           " (want 3 = WEFT_ERR_REMOTE or 4 = WEFT_ERR_TIMEOUT; 0 = no error seen, 5 = other status, 6 = wrong data)" +
           (line.empty() ? "" : ": " + line));
    }
    if (line.empty()) fail("rank " + std::to_string(c.rank) + " printed no error text");
    if (dt > bound) fail("rank " + std::to_string(c.rank) + " took " + std::to_string(dt) + " s to report the error");
  }
  if (failures) {
    std::printf("[kill-driver] %d checks FAILED\n", failures);
    return 1;
  }
  std::printf("[kill-driver] passed\n");
  return 0;
}
