// Watches the running ranks: pumps their output, reaps them, and decides weftrun's exit
// status. One thread, one poll() loop over every rank pipe plus the signal pipe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tools/weftrun/output_pump.h"
#include "tools/weftrun/spawn.h"

namespace weftrun {

class Supervisor {
 public:
  using Clock = std::chrono::steady_clock;

  // How long ranks get between SIGTERM (or a forwarded signal) and SIGKILL.
  static constexpr std::chrono::milliseconds kGrace{3000};
  // After the last rank exits, how long a pipe held open by a leftover grandchild is still
  // read before weftrun stops waiting for its EOF.
  static constexpr std::chrono::milliseconds kLinger{1000};

  // timeout_s 0 = none; the clock starts now.
  Supervisor(bool prefix, double timeout_s);
  ~Supervisor();

  // Takes over a started rank; ranks must be added in rank order.
  void add(const Child& child);
  // A rank could not be started: stop the ones already running and exit with `status`.
  void abort_start(int status);
  // Runs until every rank has exited and its output is written; returns weftrun's exit status.
  int run();

 private:
  struct Rank;

  void handle_signals();
  void reap();
  void on_rank_exit(Rank& r, int wait_status);
  void begin_teardown(int sig, int exit_status);
  void signal_all(int sig);
  void check_deadlines(Clock::time_point now);
  // Reads what a rank's pipe holds now (at most `budget` bytes); closes it at EOF.
  void drain(Rank& r, bool err, size_t budget);
  void close_stream(Rank& r, bool err);
  bool any_running() const;
  bool any_open() const;

  Sink out_sink_{1}, err_sink_{2};
  bool prefix_;
  std::optional<Clock::time_point> job_deadline_;
  double timeout_s_;
  std::vector<std::unique_ptr<Rank>> ranks_;

  bool tearing_down_ = false;
  bool killed_ = false;  // SIGKILL sent
  Clock::time_point kill_at_{};
  std::optional<Clock::time_point> linger_until_;
  int exit_status_ = 0;
};

// "exited with status 3", "killed by signal 9 (Killed)"; and the shell's number for it.
std::string describe_wait_status(int wait_status);
int exit_status_of(int wait_status);

}  // namespace weftrun
