#include "tools/weftrun/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/common/status.h"
#include "tools/weftrun/signals.h"

namespace weftrun {

struct Supervisor::Rank {
  int index;
  pid_t pid;  // and process group id
  bool running = true;
  int fd[2];  // stdout, stderr read ends; -1 once closed
  LinePump pump[2];
  Rank(int i, const Child& c, Sink& out, Sink& err, const std::string& prefix)
      : index(i), pid(c.pid), fd{c.out_fd, c.err_fd}, pump{LinePump(out, prefix),
                                                          LinePump(err, prefix)} {}
};

namespace {

// Everything weftrun itself says goes to stderr in one write, marked as ours.
void say(const std::string& msg) {
  std::string line = "weftrun: " + msg + "\n";
  ssize_t rc = ::write(2, line.data(), line.size());
  (void)rc;
}

}  // namespace

std::string describe_wait_status(int st) {
  if (WIFEXITED(st)) return weft::format("exited with status %d", WEXITSTATUS(st));
  if (WIFSIGNALED(st)) {
    int sig = WTERMSIG(st);
    return weft::format("killed by signal %d (%s)%s", sig, strsignal(sig),
                        WCOREDUMP(st) ? ", core dumped" : "");
  }
  return weft::format("ended with wait status %#x", st);
}

int exit_status_of(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return 1;
}

Supervisor::Supervisor(bool prefix, double timeout_s) : prefix_(prefix), timeout_s_(timeout_s) {
  if (timeout_s > 0) {
    auto d = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    job_deadline_ = Clock::now() + d;
  }
}

Supervisor::~Supervisor() {
  // Only reached with ranks alive when weftrun itself failed: do not leave them orphaned.
  if (any_running()) signal_all(SIGKILL);
  for (auto& r : ranks_)
    for (int& f : r->fd)
      if (f >= 0) ::close(f);
}

void Supervisor::add(const Child& child) {
  int i = static_cast<int>(ranks_.size());
  std::string prefix = prefix_ ? "[" + std::to_string(i) + "] " : "";
  ranks_.push_back(std::make_unique<Rank>(i, child, out_sink_, err_sink_, prefix));
}

void Supervisor::abort_start(int status) {
  if (!tearing_down_) begin_teardown(SIGTERM, status);
}

bool Supervisor::any_running() const {
  return std::any_of(ranks_.begin(), ranks_.end(), [](auto& r) { return r->running; });
}

bool Supervisor::any_open() const {
  return std::any_of(ranks_.begin(), ranks_.end(),
                     [](auto& r) { return r->fd[0] >= 0 || r->fd[1] >= 0; });
}

void Supervisor::signal_all(int sig) {
  // The whole process group of every rank, exited ones included: a rank that failed may
  // leave children behind, and they belong to the job too. ESRCH (group gone) is fine.
  for (auto& r : ranks_) ::kill(-r->pid, sig);
}

void Supervisor::begin_teardown(int sig, int exit_status) {
  tearing_down_ = true;
  exit_status_ = exit_status;
  kill_at_ = Clock::now() + kGrace;
  int n = static_cast<int>(std::count_if(ranks_.begin(), ranks_.end(),
                                         [](auto& r) { return r->running; }));
  if (n > 0)
    say(weft::format("stopping %d remaining rank%s (%s)", n, n == 1 ? "" : "s", strsignal(sig)));
  signal_all(sig);
}

void Supervisor::close_stream(Rank& r, bool err) {
  int& f = r.fd[err ? 1 : 0];
  if (f < 0) return;
  r.pump[err ? 1 : 0].finish();
  ::close(f);
  f = -1;
}

void Supervisor::drain(Rank& r, bool err, size_t budget) {
  char buf[65536];
  int& f = r.fd[err ? 1 : 0];
  while (f >= 0 && budget > 0) {
    ssize_t n = ::read(f, buf, std::min(sizeof buf, budget));
    if (n > 0) {
      r.pump[err ? 1 : 0].feed(buf, static_cast<size_t>(n));
      budget -= static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return;
    } else {
      close_stream(r, err);  // EOF, or an error that leaves nothing more to read
    }
  }
}

void Supervisor::on_rank_exit(Rank& r, int st) {
  r.running = false;
  // Everything the rank wrote before dying is already in its pipes: write it out now, so its
  // last words come before our report of its death. (The pipes stay open if a child of the
  // rank still holds them; the main loop keeps reading them.) 1 MiB covers a full pipe.
  drain(r, false, 1 << 20);
  drain(r, true, 1 << 20);
  bool failed = !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  if (!failed || tearing_down_) return;  // deaths we caused are not news
  say(weft::format("rank %d (pid %d) %s", r.index, static_cast<int>(r.pid),
                   describe_wait_status(st).c_str()));
  begin_teardown(SIGTERM, exit_status_of(st));
}

void Supervisor::reap() {
  for (;;) {
    int st = 0;
    pid_t pid = ::waitpid(-1, &st, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return;  // 0: none ready; ECHILD: none left
    for (auto& r : ranks_)
      if (r->pid == pid && r->running) on_rank_exit(*r, st);
  }
}

void Supervisor::handle_signals() {
  for (int sig : take_signals()) {
    if (sig == SIGCHLD) {
      reap();
    } else if (!tearing_down_) {
      // Forward the user's signal as is: ranks may treat SIGINT and SIGTERM differently.
      say(weft::format("got %s, forwarding it to the ranks", strsignal(sig)));
      begin_teardown(sig, 128 + sig);
    } else if (!killed_) {
      say(weft::format("got %s again, killing the ranks", strsignal(sig)));
      kill_at_ = Clock::now();  // a second interrupt means now
    }
  }
}

void Supervisor::check_deadlines(Clock::time_point now) {
  if (!tearing_down_ && job_deadline_ && now >= *job_deadline_) {
    std::string still;
    for (auto& r : ranks_)
      if (r->running)
        still += weft::format("%s%d (pid %d)", still.empty() ? "" : ", ", r->index,
                              static_cast<int>(r->pid));
    say(weft::format("timed out after %g s; ranks still running: %s", timeout_s_,
                     still.empty() ? "none" : still.c_str()));
    begin_teardown(SIGTERM, 124);
  }
  if (tearing_down_ && !killed_ && now >= kill_at_) {
    for (auto& r : ranks_)
      if (r->running)
        say(weft::format("rank %d (pid %d) still running; sending SIGKILL", r->index,
                         static_cast<int>(r->pid)));
    signal_all(SIGKILL);
    killed_ = true;
  }
}

int Supervisor::run() {
  std::vector<pollfd> pfds;
  std::vector<std::pair<Rank*, bool>> owners;  // pfds[i+1] belongs to rank, stream
  for (;;) {
    auto now = Clock::now();
    check_deadlines(now);
    if (!any_running()) {
      if (!any_open()) break;
      // Only leftover children of exited ranks hold these pipes now.
      if (!linger_until_) linger_until_ = now + kLinger;
      if (now >= *linger_until_) break;
    }

    // Sleep until the nearest deadline, or output, or a signal.
    std::optional<Clock::time_point> wake = linger_until_;
    auto earlier = [&](Clock::time_point t) { wake = wake ? std::min(*wake, t) : t; };
    if (!tearing_down_ && job_deadline_) earlier(*job_deadline_);
    if (tearing_down_ && !killed_) earlier(kill_at_);
    int timeout_ms = -1;
    if (wake) {
      auto ms = std::chrono::ceil<std::chrono::milliseconds>(*wake - now).count();
      timeout_ms = static_cast<int>(std::clamp<decltype(ms)>(ms, 0, 1 << 30));
    }

    pfds.clear();
    owners.clear();
    pfds.push_back({signal_pipe_fd(), POLLIN, 0});
    for (auto& r : ranks_)
      for (int s = 0; s < 2; ++s)
        if (r->fd[s] >= 0) {
          pfds.push_back({r->fd[s], POLLIN, 0});
          owners.emplace_back(r.get(), s == 1);
        }
    int n = ::poll(pfds.data(), pfds.size(), timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      weft::fail(weft::Status::internal, "poll: %s", std::strerror(errno));
    }
    if (pfds[0].revents) handle_signals();
    for (size_t i = 1; i < pfds.size(); ++i)
      if (pfds[i].revents) {
        // A budget per wake-up keeps one chatty rank from starving the others and the
        // signal pipe; whatever is left is read on the next round.
        drain(*owners[i - 1].first, owners[i - 1].second, 256 * 1024);
      }
  }

  // Pipes still open belong to leftover children; stop waiting for them.
  for (auto& r : ranks_) {
    close_stream(*r, false);
    close_stream(*r, true);
  }
  // After a failure, timeout or interrupt nothing of the job may outlive weftrun.
  if (tearing_down_) signal_all(SIGKILL);
  return exit_status_;
}

}  // namespace weftrun
