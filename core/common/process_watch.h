// Liveness of the other processes on this host, for failure detection (World::peer_dead).
//
// A rank that dies is a zombie until its launcher reaps it, and kill(pid, 0) reports a zombie
// as alive: detection then waited for the launcher (or the deadline). A pidfd (pidfd_open,
// Linux 5.3) becomes readable when its process exits, reaped or not, and never refers to a
// later process that reuses the pid; one poll() over all of them answers for every peer. Where
// pidfd_open is refused (old kernel, seccomp), a peer falls back to kill(pid, 0).
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <vector>

namespace weft {

class ProcessWatch {
 public:
  ProcessWatch() = default;
  ~ProcessWatch();
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  // Watches `pid` as entry `index` (entries are dense from 0; unwatched ones never report).
  void watch(int index, pid_t pid);
  // Sets `out` to the indexes of watched processes that have exited (each reported on every
  // call; the caller keeps its own record). One system call when every peer has a pidfd, and no
  // allocation once `out` has held every index (the host path's allocation budget counts it).
  void exited(std::vector<int>& out);

 private:
  struct Fallback {
    int index;
    pid_t pid;
  };
  std::vector<pollfd> pidfds_;
  std::vector<int> pidfd_index_;
  std::vector<Fallback> fallback_;
};

}  // namespace weft
