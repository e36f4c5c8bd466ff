// Starting one rank: its own process group, stdin from /dev/null, stdout and stderr into pipes.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace weftrun {

struct Child {
  pid_t pid = -1;   // also its process group id
  int out_fd = -1;  // read ends, non-blocking, close-on-exec
  int err_fd = -1;
};

// The program could not be started; `error` is the errno from the exec (ENOENT, EACCES, ...).
struct SpawnError {
  int error;
};

// Starts argv[0] (searched in PATH when it has no '/') with environment `env`.
// Throws SpawnError when the exec fails, weft::Error for anything else (pipes, fork).
Child spawn_rank(const std::vector<std::string>& argv, const std::vector<std::string>& env);

// Shell convention for a program that never ran: 127 not found, 126 found but not runnable.
int exit_status_for_spawn_error(int error);

}  // namespace weftrun
