// One rank of the fault matrix (scripts/fault-matrix starts N of them and kills, stops or cuts
// off one): runs a seeded random stream of collectives, p2p batches and sub-communicator splits,
// every result checked against the reference, until an operation fails or the stream ends.
//
//   weft_fault_driver [--seed S] [--timeout-ms T] [--max-bytes B] [--ops N] [--max-seconds M]
//                     [--id-file F] [--start-file F] [--release-file F] [--bug hang|exit0]
//                     [--shrink on]
//   weft_fault_driver --store-host F     (start a store, write its unique id to F, sleep)
//
// Rank and size come from WEFT_RANK / WEFT_WORLD_SIZE. Without --id-file the communicator
// comes from weft_comm_init_from_env (rank 0 hosts the store); with it, from weft_comm_init on
// the id a --store-host process wrote (the store then lives in that process alone).
// --start-file: after READY, wait until F exists before the stream starts (the store scenario
// kills the store host in between, so that the whole stream runs without it).
//
// Lines for the script (one each, flushed):
//   READY rank=R pid=P t=WALL_MS
//   FAULT-DETECTED rank=R failed=F among=A,B|- op=NAME after_ms=MS t=WALL_MS status=NAME msg="..."
//     (failed: the rank the message blames, world numbering; among: every rank of a timeout's
//     "not heard from" list, when it could not single one out)
//   WRONG-DATA rank=R op=NAME msg="..."        (exit 6)
//   CLEANUP rank=R pending=N ms=MS               (after a failure: freeing requests, destroying)
//   DONE rank=R ops=N                            (exit 0)
//   INJECT rank=R corrupted=N caught=M           (WEFT_TEST_INJECT=1: exit 7 unless N == M > 0)
// After a failure the rank stays up until the release file exists (or timeout + 2 s), so that
// no survivor sees another one leave and blames it; exit 3 = WEFT_ERR_REMOTE, 4 = TIMEOUT,
// 5 = another status. --bug makes a survivor misbehave on purpose (the script must say FAIL):
// hang = sleep forever after the failure, exit0 = exit 0 without reporting it.
// --shrink on: after reporting the failure, shrink the communicator and run a checked stream on
// the new one (shrink_continue.h: SHRINK-OK / SHRINK-FAILED lines; exit 0 or 8).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "random_ops.h"
#include "shrink_continue.h"

namespace {

struct Options {
  uint64_t seed = 1;
  int64_t timeout_ms = 3000;
  size_t max_bytes = 1 << 20;
  long ops = -1;
  double max_seconds = 60;
  std::string id_file, start_file, release_file, store_host, bug;
  bool shrink = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "weft_fault_driver: %s (see the comment at the top of fault_driver.cpp)\n", why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    if (a == "--seed") o.seed = std::strtoull(v, nullptr, 10);
    else if (a == "--timeout-ms") o.timeout_ms = std::atoll(v);
    else if (a == "--max-bytes") o.max_bytes = std::strtoull(v, nullptr, 10);
    else if (a == "--ops") o.ops = std::atol(v);
    else if (a == "--max-seconds") o.max_seconds = std::atof(v);
    else if (a == "--id-file") o.id_file = v;
    else if (a == "--start-file") o.start_file = v;
    else if (a == "--release-file") o.release_file = v;
    else if (a == "--store-host") o.store_host = v;
    else if (a == "--bug") o.bug = v;
    else if (a == "--shrink") o.shrink = std::string(v) == "on";
    else usage(("unknown option " + a).c_str());
  }
  if (!o.bug.empty() && o.bug != "hang" && o.bug != "exit0") usage("--bug takes hang or exit0");
  return o;
}

bool exists(const std::string& path) {
  struct stat st;
  return !path.empty() && stat(path.c_str(), &st) == 0;
}

// This process's pid as the script sees it: the outermost NSpid, since netns-run puts each
// rank in a PID namespace of its own (where getpid() says 1 or 2) while /proc is the host's.
long outer_pid() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("NSpid:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return static_cast<long>(getpid());
}

// The rank the message blames: the end of a stall chain ("likely cause: rank N") when there is
// one, else "world rank N" (failures on a sub-communicator name both), else the first
// "rank N", "rank(s) N" or "rank=N" that is not the "rank R/SIZE" naming this rank itself;
// -1 if none. *world says whether the number is a world rank (else it is the failing
// communicator's numbering).
int named_rank(const std::string& msg, bool* world) {
  *world = false;
  if (size_t c = msg.find("likely cause: "); c != std::string::npos) {
    size_t i = c + 14;
    if (msg.compare(i, 6, "world ") == 0) *world = true, i += 6;
    if (msg.compare(i, 5, "rank ") == 0) return std::atoi(msg.c_str() + i + 5);
  }
  if (size_t w = msg.find("world rank "); w != std::string::npos) {
    *world = true;
    return std::atoi(msg.c_str() + w + 11);
  }
  for (size_t at = msg.find("rank"); at != std::string::npos; at = msg.find("rank", at + 4)) {
    size_t i = at + 4;
    if (msg.compare(i, 3, "(s)") == 0) i += 3;
    while (i < msg.size() && (msg[i] == ' ' || msg[i] == '=' || msg[i] == '[')) ++i;
    if (i >= msg.size() || !std::isdigit(static_cast<unsigned char>(msg[i]))) continue;
    size_t j = i;
    while (j < msg.size() && std::isdigit(static_cast<unsigned char>(msg[j]))) ++j;
    if (j < msg.size() && msg[j] == '/') continue;
    return std::atoi(msg.c_str() + i);
  }
  return -1;
}

// True when the message's "on comm '...' rank R/SIZE" describes a communicator of SIZE != n.
bool on_sub_comm(const std::string& msg, int n) {
  const size_t c = msg.find("on comm '");
  if (c == std::string::npos) return false;
  const size_t at = msg.find("' rank ", c + 9);
  const size_t slash = at == std::string::npos ? at : msg.find('/', at);
  return slash != std::string::npos && std::atoi(msg.c_str() + slash + 1) != n;
}

// Every rank of a "not heard from rank(s) A, B, C" list (a timeout that could not single out
// the cause), in the failing communicator's numbering.
std::vector<int> silent_ranks(const std::string& msg) {
  std::vector<int> out;
  const size_t at = msg.find("not heard from rank(s) ");
  if (at == std::string::npos) return out;
  for (const char* p = msg.c_str() + at + 23; std::isdigit(static_cast<unsigned char>(*p));) {
    char* end = nullptr;
    out.push_back(static_cast<int>(std::strtol(p, &end, 10)));
    p = end;
    if (p[0] == ',' && p[1] == ' ') p += 2;
  }
  return out;
}

// World rank of rank `r` of the parity sub-communicator split_and_use makes (color = world
// rank % 2, key = -world rank: members in descending world rank).
int world_of_sub_rank(int r, int me, int n) {
  std::vector<int> members;
  for (int w = n - 1; w >= 0; --w)
    if (w % 2 == me % 2) members.push_back(w);
  return r >= 0 && r < static_cast<int>(members.size()) ? members[r] : -1;
}

std::string one_line(std::string s) {
  for (char& c : s) if (c == '\n' || c == '"') c = '\'';
  return s;
}

const char* status_name(weft_status_t s) { return weft_status_string(s); }

int store_host(const Options& o) {
  weft_unique_id_t id;
  if (weft_get_unique_id(&id) != WEFT_OK) {
    std::fprintf(stderr, "weft_get_unique_id: %s\n", weft_last_error());
    return 1;
  }
  const std::string tmp = o.store_host + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f || std::fwrite(id.internal, sizeof id.internal, 1, f) != 1 || std::fclose(f) != 0) return 1;
  std::rename(tmp.c_str(), o.store_host.c_str());
  std::printf("STORE-READY pid=%ld\n", outer_pid());
  std::fflush(stdout);
  for (;;) pause();  // until the script kills it
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v) usage((std::string(name) + " is not set").c_str());
  return std::atoi(v);
}

weft_status_t init(const Options& o, weft_comm_t* comm) {
  weft_comm_config_t cfg = WEFT_COMM_CONFIG_INIT;
  cfg.timeout_ms = o.timeout_ms;
  cfg.name = "faults";
  if (o.id_file.empty()) return weft_comm_init_from_env(comm, &cfg);
  const double give_up = faults::now_ms() + 30000;
  while (!exists(o.id_file) && faults::now_ms() < give_up) usleep(20000);
  weft_unique_id_t id;
  std::FILE* f = std::fopen(o.id_file.c_str(), "rb");
  if (!f || std::fread(id.internal, sizeof id.internal, 1, f) != 1) usage("cannot read the id file");
  std::fclose(f);
  return weft_comm_init(comm, &id, env_int("WEFT_RANK"), env_int("WEFT_WORLD_SIZE"), &cfg);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (!o.store_host.empty()) return store_host(o);
  weft_comm_t comm = nullptr;
  if (weft_status_t s = init(o, &comm); s != WEFT_OK) {
    std::printf("INIT-FAILED status=%s msg=\"%s\"\n", status_name(s), one_line(weft_last_error()).c_str());
    return 1;
  }
  int me = 0, n = 1;
  weft_comm_rank(comm, &me);
  weft_comm_size(comm, &n);
  std::printf("READY rank=%d pid=%ld t=%lld\n", me, outer_pid(), static_cast<long long>(faults::wall_ms()));
  std::fflush(stdout);

  if (!o.start_file.empty()) {
    const double give_up = faults::now_ms() + 60000;
    while (!exists(o.start_file) && faults::now_ms() < give_up) usleep(10000);
  }
  faults::Rng rng(o.seed);
  const double t_end = faults::now_ms() + o.max_seconds * 1000;
  long done = 0;
  faults::Outcome out;
  for (uint64_t seq = 1; (o.ops < 0 || done < o.ops) && faults::now_ms() < t_end; ++seq) {
    if (rng.below(40) == 0) {
      out = faults::split_and_use(comm, seq, false);
      ++done;
    } else {
      const bool async = rng.below(2) == 0;
      const int k = async ? 1 + rng.below(3) : 1;
      faults::Spec specs[3];
      for (int j = 0; j < k; ++j) specs[j] = faults::draw_spec(rng, n, o.max_bytes, false, seq * 4 + j);
      out = faults::run_batch(comm, specs, k, async, true);
      done += k;
    }
    if (out.status != WEFT_OK || out.wrong_data) break;
  }
  if (out.wrong_data) {
    std::printf("WRONG-DATA rank=%d op=%s msg=\"%s\"\n", me, out.op, one_line(out.message).c_str());
    std::fflush(stdout);
    return 6;
  }
  if (out.status == WEFT_OK) {
    weft_status_t sd = weft_comm_destroy(comm);
    std::printf("DONE rank=%d ops=%ld destroy=%s\n", me, done, status_name(sd));
    long injected = 0, caught = 0;
    if (faults::inject_report(&injected, &caught)) {
      std::printf("INJECT rank=%d corrupted=%ld caught=%ld\n", me, injected, caught);
      if (injected == 0 || caught != injected) return 7;
    }
    return sd == WEFT_OK ? 0 : 5;
  }
  if (o.bug == "exit0") return 0;
  bool world = false;
  int failed = named_rank(out.message, &world);
  // A message about the parity sub-communicator (its own "rank R/SIZE" has SIZE != n, e.g. a
  // failed split's set-up) numbers ranks within it.
  const bool sub = on_sub_comm(out.message, n);
  if (!world && sub) failed = world_of_sub_rank(failed, me, n);
  std::string among;
  for (int r : silent_ranks(out.message))
    among += (among.empty() ? "" : ",") + std::to_string(sub ? world_of_sub_rank(r, me, n) : r);
  std::printf("FAULT-DETECTED rank=%d failed=%d among=%s op=%s after_ms=%.0f t=%lld status=%s msg=\"%s\"\n", me,
              failed, among.empty() ? "-" : among.c_str(), out.op, out.op_ms, static_cast<long long>(faults::wall_ms()),
              status_name(out.status), one_line(out.message).c_str());
  std::fflush(stdout);
  if (o.bug == "hang") {
    for (;;) pause();
  }
  int shrink_code = -1;
  if (o.shrink) {
    // The survivors shrink together right away: no lingering first.
    for (weft_request_t r : out.pending) weft_request_free(r);
    out.pending.clear();
    weft_comm_destroy(out.sub);
    out.sub = nullptr;
    shrink_code = faults::shrink_and_continue(comm, me, o.seed, o.max_bytes, 30);
  }
  const double linger_end = faults::now_ms() + static_cast<double>(o.timeout_ms) + 2000;
  while (faults::now_ms() < linger_end && !exists(o.release_file)) usleep(20000);
  // How long the clean-up after a failure takes is part of "no survivor hangs": say it.
  const double t_clean = faults::now_ms();
  for (weft_request_t r : out.pending) weft_request_free(r);
  weft_comm_destroy(out.sub);
  weft_comm_destroy(comm);
  out.buffers.reset();
  std::printf("CLEANUP rank=%d pending=%zu ms=%.0f\n", me, out.pending.size(), faults::now_ms() - t_clean);
  std::fflush(stdout);
  if (shrink_code >= 0) return shrink_code;
  return out.status == WEFT_ERR_REMOTE ? 3 : out.status == WEFT_ERR_TIMEOUT ? 4 : 5;
}
