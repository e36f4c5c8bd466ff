// Signals become bytes on a pipe (the self-pipe trick), so the supervisor's single poll()
// loop sees rank exits (SIGCHLD) and interrupts (SIGINT/SIGTERM/SIGHUP) alongside rank output,
// with no work done inside a signal handler.
#pragma once

#include <vector>

namespace weftrun {

// Installs the handlers (once per process) and ignores SIGPIPE, so a closed stdout shows up
// as a failed write instead of killing weftrun and orphaning the ranks.
void install_signal_pipe();
// Read end of the pipe, for poll().
int signal_pipe_fd();
// Signals delivered since the last call, in arrival order.
std::vector<int> take_signals();

}  // namespace weftrun
