// weftrun: starts N local ranks of a program, hosting their rendezvous store, and stays
// until they are done. See usage_text() in args.cpp for the user's view.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>

#include "core/bootstrap/store.h"
#include "core/bootstrap/unique_id.h"
#include "core/common/status.h"
#include "tools/weftrun/args.h"
#include "tools/weftrun/rank_env.h"
#include "tools/weftrun/signals.h"
#include "tools/weftrun/spawn.h"
#include "tools/weftrun/supervisor.h"

extern char** environ;

namespace {

// weftrun's own failure (no store, no pipes), as GNU timeout and env use: distinct from
// anything a rank returns in the usual 0..2 range.
constexpr int kLauncherFailure = 125;

// A launcher started with fd 0, 1 or 2 closed would hand those numbers to its pipes and
// sockets, and a rank's dup2 onto 1/2 would then alias something else. Plug them first.
void plug_standard_fds() {
  for (int fd = 0; fd <= 2; ++fd)
    if (::fcntl(fd, F_GETFD) < 0) {
      int nul = ::open("/dev/null", O_RDWR);  // lowest free number: this very fd
      if (nul >= 0 && nul != fd) ::close(nul);
    }
}

// Each rank costs two pipes here and one socket in the store; a large -n outgrows the default
// soft limit of 1024 open files. Raise it to what is needed, never past the hard limit.
void raise_fd_limit(int nranks) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  rlim_t want = static_cast<rlim_t>(nranks) * 4 + 64;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
    rl.rlim_cur = (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want) ? want : rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int run(const weftrun::Options& opt) {
  using namespace weftrun;
  raise_fd_limit(opt.nranks);
  // Before the first rank starts, so no SIGCHLD or Ctrl-C is missed.
  install_signal_pipe();

  JobInfo job;
  job.world_size = opt.nranks;
  job.master_addr = "127.0.0.1";  // local ranks only: never listen beyond loopback
  job.secret = weft::bootstrap::random_secret();
  // Lives until weftrun returns, i.e. after the last rank has exited.
  weft::bootstrap::StoreServer store(job.master_addr, 0, job.secret);
  job.store_port = store.port();
  job.torch_port = pick_free_port(job.master_addr);

  Supervisor sup(opt.prefix, opt.timeout_s);
  for (int rank = 0; rank < opt.nranks; ++rank) {
    try {
      sup.add(spawn_rank(opt.program, rank_environment(environ, job, rank)));
    } catch (const SpawnError& e) {
      std::fprintf(stderr, "weftrun: cannot run '%s' (rank %d): %s\n", opt.program[0].c_str(),
                   rank, std::strerror(e.error));
      sup.abort_start(exit_status_for_spawn_error(e.error));
      break;
    }
  }
  return sup.run();
}

}  // namespace

int main(int argc, char** argv) {
  plug_standard_fds();
  weftrun::Options opt;
  try {
    opt = weftrun::parse_args(argc, argv);
  } catch (const weftrun::UsageError& e) {
    std::fprintf(stderr, "weftrun: %s\n%s", e.message.c_str(), weftrun::usage_text());
    return 2;
  }
  if (opt.help) {
    std::fputs(weftrun::usage_text(), stdout);
    return 0;
  }
  try {
    return run(opt);
  } catch (const weft::Error& e) {
    std::fprintf(stderr, "weftrun: %s: %s\n", weft::status_name(e.status()), e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weftrun: %s\n", e.what());
  }
  return kLauncherFailure;
}
