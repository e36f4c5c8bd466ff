// posix_spawn rather than fork+exec: weftrun has threads (the store server), and between fork
// and exec a child of a threaded process may only call async-signal-safe functions. glibc's
// posix_spawn does that part for us and reports an exec failure as its return value, so a
// missing program is an error here, not a mysterious exit 127 from a child.
#include "tools/weftrun/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/common/status.h"

namespace weftrun {

namespace {

// Closes what it holds unless released: no fd leaks on any error path.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

void make_pipe(Fd& read_end, Fd& write_end) {
  int fds[2];
  // Close-on-exec on both ends: a rank must not hold another rank's pipes open, or we would
  // never see EOF when that rank dies. dup2 onto 1/2 in the child clears the flag there.
  if (::pipe2(fds, O_CLOEXEC) != 0)
    weft::fail(weft::Status::internal, "pipe: %s", std::strerror(errno));
  read_end.fd = fds[0];
  write_end.fd = fds[1];
  // Only our end is non-blocking: the rank's writes should block when we fall behind.
  int fl = ::fcntl(read_end.fd, F_GETFL);
  ::fcntl(read_end.fd, F_SETFL, fl | O_NONBLOCK);
}

void check(int rc, const char* what) {
  if (rc != 0) weft::fail(weft::Status::internal, "%s: %s", what, std::strerror(rc));
}

// posix_spawn's attribute and file-action objects, destroyed on every path.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnSetup() {
    check(posix_spawnattr_init(&attr), "posix_spawnattr_init");
    int rc = posix_spawn_file_actions_init(&actions);
    if (rc != 0) {
      posix_spawnattr_destroy(&attr);
      check(rc, "posix_spawn_file_actions_init");
    }
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

}  // namespace

Child spawn_rank(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  Fd out_r, out_w, err_r, err_w;
  make_pipe(out_r, out_w);
  make_pipe(err_r, err_w);

  SpawnSetup s;
  // Own process group (pgid = pid): signalling -pid reaches the rank's children too, and a
  // Ctrl-C at the terminal reaches only weftrun, which forwards it, so every rank sees it once.
  check(posix_spawnattr_setpgroup(&s.attr, 0), "posix_spawnattr_setpgroup");
  // weftrun ignores SIGPIPE and catches the termination signals; the rank starts with defaults
  // (an ignored disposition would survive exec) and nothing blocked.
  sigset_t defaults, empty;
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&defaults, sig);
  sigemptyset(&empty);
  check(posix_spawnattr_setsigdefault(&s.attr, &defaults), "posix_spawnattr_setsigdefault");
  check(posix_spawnattr_setsigmask(&s.attr, &empty), "posix_spawnattr_setsigmask");
  check(posix_spawnattr_setflags(&s.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF |
                                              POSIX_SPAWN_SETSIGMASK),
        "posix_spawnattr_setflags");

  // N ranks cannot share one terminal stdin sensibly; a rank reading the terminal from a
  // background process group would be stopped by SIGTTIN. /dev/null gives them EOF.
  check(posix_spawn_file_actions_addopen(&s.actions, 0, "/dev/null", O_RDONLY, 0),
        "posix_spawn_file_actions_addopen");
  check(posix_spawn_file_actions_adddup2(&s.actions, out_w.fd, 1), "adddup2");
  check(posix_spawn_file_actions_adddup2(&s.actions, err_w.fd, 2), "adddup2");

  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);

  pid_t pid = -1;
  int rc = posix_spawnp(&pid, cargv[0], &s.actions, &s.attr, cargv.data(), cenv.data());
  if (rc != 0) throw SpawnError{rc};

  // The write ends now live in the child only; holding them here would hide its EOF.
  Child c;
  c.pid = pid;
  c.out_fd = out_r.release();
  c.err_fd = err_r.release();
  return c;
}

int exit_status_for_spawn_error(int error) {
  return (error == ENOENT || error == ENOTDIR) ? 127 : 126;
}

}  // namespace weftrun
