#include "core/common/process_watch.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace weft {

namespace {

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  const long fd = syscall(SYS_pidfd_open, pid, 0);
  return fd >= 0 ? static_cast<int>(fd) : -1;
#else
  (void)pid;
  return -1;
#endif
}

}  // namespace

ProcessWatch::~ProcessWatch() {
  for (const pollfd& p : pidfds_) ::close(p.fd);
}

void ProcessWatch::watch(int index, pid_t pid) {
  const int fd = open_pidfd(pid);
  if (fd >= 0) {
    pidfds_.push_back({fd, POLLIN, 0});
    pidfd_index_.push_back(index);
  } else {
    // Refused, or ESRCH because it is already gone: kill() then reports it on the next check.
    fallback_.push_back({index, pid});
  }
}

void ProcessWatch::exited(std::vector<int>& out) {
  out.clear();
  for (const Fallback& f : fallback_)
    // Signal 0 checks existence only. ESRCH = gone; EPERM = exists but not ours (alive).
    if (kill(f.pid, 0) != 0 && errno == ESRCH) out.push_back(f.index);
  if (pidfds_.empty() || ::poll(pidfds_.data(), pidfds_.size(), 0) <= 0) return;
  for (size_t i = 0; i < pidfds_.size(); ++i)
    if (pidfds_[i].revents & (POLLIN | POLLHUP | POLLERR)) out.push_back(pidfd_index_[i]);
}

}  // namespace weft
