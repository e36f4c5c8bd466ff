// One rank of the soak (scripts/soak runs 4 under weftrun): a long seeded stream of random
// operations (every collective, send/recv pairs, p2p batches, 0..16 MiB skewed toward small,
// blocking and asynchronous) with sub-communicators split and destroyed every so often; a
// sample of results checked against the reference; resident memory and open descriptors
// sampled, and required flat after warm-up.
//
//   weft_soak_driver [--ops N] [--seed S] [--max-bytes B] [--samples K] [--warmup F]
//                    [--rss-slack-mib M] [--timeout-ms T] [--leak-test]
//
// Flatness rule, over the samples taken after the first F (default 0.1) of the operations:
// max VmRSS - min VmRSS <= M MiB (default 8), and the open-descriptor count never exceeds the
// first such sample's. Samples are taken between operations after malloc_trim(0), and large
// buffers are mmapped (M_MMAP_THRESHOLD fixed at 256 KiB) so freed test buffers leave RSS
// instead of parking in the heap: what remains is memory somebody still holds.
// --leak-test keeps every split sub-communicator (the check must then fail).
// Lines: SAMPLE rank=R op=I rss_kb=K fds=D, then SOAK-RESULT rank=R ... verdict=flat|GROWING.
// Exit 0 = flat and every checked result right; 1 = not flat; 6 = wrong data; 5 = a weft error;
// 7 = WEFT_TEST_INJECT=1 and a corrupted result went unnoticed (random_ops.h).
#include <dirent.h>
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "random_ops.h"

namespace {

struct Sample {
  long op;
  long rss_kb;
  int fds;
};

long rss_kb() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

int open_fds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n - 1;  // the descriptor opendir itself holds
}

}  // namespace

int main(int argc, char** argv) {
  long ops = 100000, samples = 100;
  uint64_t seed = 1;
  size_t max_bytes = 16u << 20;
  double warmup = 0.1, rss_slack_mib = 8;
  int64_t timeout_ms = 120000;
  bool leak = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--leak-test") { leak = true; continue; }
    ++i;
    if (a == "--ops") ops = std::atol(v);
    else if (a == "--seed") seed = std::strtoull(v, nullptr, 10);
    else if (a == "--max-bytes") max_bytes = std::strtoull(v, nullptr, 10);
    else if (a == "--samples") samples = std::atol(v);
    else if (a == "--warmup") warmup = std::atof(v);
    else if (a == "--rss-slack-mib") rss_slack_mib = std::atof(v);
    else if (a == "--timeout-ms") timeout_ms = std::atoll(v);
    else {
      std::fprintf(stderr, "weft_soak_driver: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  weft_comm_config_t cfg = WEFT_COMM_CONFIG_INIT;
  cfg.timeout_ms = timeout_ms;
  cfg.name = "soak";
  weft_comm_t comm = nullptr;
  if (weft_comm_init_from_env(&comm, &cfg) != WEFT_OK) {
    std::fprintf(stderr, "init: %s\n", weft_last_error());
    return 5;
  }
  int me = 0, n = 1;
  weft_comm_rank(comm, &me);
  weft_comm_size(comm, &n);

  faults::Rng rng(seed);
  std::vector<Sample> series;
  const long every = std::max(1L, ops / std::max(1L, samples));
  long done = 0, next_sample = 0, splits = 0, verified = 0;
  double bytes = 0;
  const double t0 = faults::now_ms();
  faults::Outcome out;
  for (uint64_t seq = 1; done < ops; ++seq) {
    if (done >= next_sample) {
      malloc_trim(0);
      series.push_back({done, rss_kb(), open_fds()});
      std::printf("SAMPLE rank=%d op=%ld rss_kb=%ld fds=%d\n", me, done, series.back().rss_kb, series.back().fds);
      std::fflush(stdout);
      next_sample += every;
    }
    if (rng.below(100) == 0) {
      out = faults::split_and_use(comm, seq, leak);
      ++splits;
      ++done;
    } else {
      const bool async = rng.below(2) == 0;
      const int k = async ? 1 + rng.below(3) : 1;
      const bool verify = rng.below(4) == 0;
      faults::Spec specs[3];
      for (int j = 0; j < k; ++j) {
        specs[j] = faults::draw_spec(rng, n, max_bytes, true, seq * 4 + j);
        bytes += static_cast<double>(specs[j].count) * 4;
      }
      out = faults::run_batch(comm, specs, k, async, verify);
      done += k;
      verified += verify ? k : 0;
    }
    if (out.status != WEFT_OK || out.wrong_data) break;
  }
  if (out.wrong_data || out.status != WEFT_OK) {
    std::printf("SOAK-ERROR rank=%d op=%s status=%s msg=\"%s\"\n", me, out.op, weft_status_string(out.status),
                out.message.c_str());
    std::fflush(stdout);
    return out.wrong_data ? 6 : 5;
  }
  malloc_trim(0);
  series.push_back({done, rss_kb(), open_fds()});
  const double secs = (faults::now_ms() - t0) / 1000;

  // The verdict over the post-warm-up samples.
  std::vector<Sample> tail;
  for (const Sample& s : series)
    if (static_cast<double>(s.op) >= warmup * static_cast<double>(ops)) tail.push_back(s);
  long rmin = tail.front().rss_kb, rmax = rmin;
  int fmax = tail.front().fds;
  for (const Sample& s : tail) {
    rmin = std::min(rmin, s.rss_kb);
    rmax = std::max(rmax, s.rss_kb);
    fmax = std::max(fmax, s.fds);
  }
  const bool flat = static_cast<double>(rmax - rmin) <= rss_slack_mib * 1024 && fmax <= tail.front().fds;
  // Everyone finishes its operations before anyone prints a verdict and exits (a rank that
  // exits 1 makes weftrun stop the others).
  weft_barrier(comm, nullptr, nullptr);
  std::printf("SOAK-RESULT rank=%d ops=%ld splits=%ld verified=%ld gib=%.1f seconds=%.1f samples=%zu "
              "rss_first_mib=%.1f rss_min_mib=%.1f rss_max_mib=%.1f rss_range_mib=%.2f fds_first=%d fds_max=%d "
              "fds_last=%d verdict=%s\n",
              me, done, splits, verified, bytes / (1 << 30), secs, tail.size(), tail.front().rss_kb / 1024.0,
              rmin / 1024.0, rmax / 1024.0, (rmax - rmin) / 1024.0, tail.front().fds, fmax, tail.back().fds,
              flat ? "flat" : "GROWING");
  std::fflush(stdout);
  long injected = 0, caught = 0;
  const bool injecting = faults::inject_report(&injected, &caught);
  if (injecting) std::printf("INJECT rank=%d corrupted=%ld caught=%ld\n", me, injected, caught);
  weft_barrier(comm, nullptr, nullptr);
  weft_comm_destroy(comm);
  if (injecting && (injected == 0 || caught != injected)) return 7;
  return flat ? 0 : 1;
}
