#include "tools/weftrun/signals.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/common/status.h"

namespace weftrun {

namespace {

int g_pipe[2] = {-1, -1};

extern "C" void on_signal(int sig) {
  int saved = errno;  // the interrupted code may be about to read errno
  unsigned char b = static_cast<unsigned char>(sig);
  // Non-blocking: if the pipe is full the loop is already due to wake, and SIGCHLD is
  // handled by reaping everything that exited, so a dropped duplicate loses nothing.
  ssize_t rc = ::write(g_pipe[1], &b, 1);
  (void)rc;
  errno = saved;
}

}  // namespace

void install_signal_pipe() {
  if (g_pipe[0] >= 0) return;
  if (::pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    weft::fail(weft::Status::internal, "pipe: %s", std::strerror(errno));
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;  // a stopped rank is not an exited one
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

int signal_pipe_fd() { return g_pipe[0]; }

std::vector<int> take_signals() {
  std::vector<int> sigs;
  unsigned char buf[64];
  for (;;) {
    ssize_t n = ::read(g_pipe[0], buf, sizeof buf);
    if (n > 0) {
      sigs.insert(sigs.end(), buf, buf + n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return sigs;  // EAGAIN: drained
  }
}

}  // namespace weftrun
