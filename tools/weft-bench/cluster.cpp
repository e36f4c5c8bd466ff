#include "cluster.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <weft/weft.h>

#include "cluster_probe.h"
#include "collectives.h"
#include "options.h"

namespace weftbench {
namespace {

const char* kClusterUsage =
    "usage: weft-bench --cluster-file PATH [--memory BYTES] [--flops F] [--pattern pairs|ring|pair]\n"
    "                  [--large SIZE] [--seconds S] [--collectives off|on]\n"
    "  Measures this job's ranks and writes weft-plan's cluster file (run it under weftrun with\n"
    "  the ranks a training run would use: weftrun -n 8 weft-bench --cluster-file c.txt).\n"
    "  --memory BYTES  memory per rank to write (default: physical memory / ranks per host)\n"
    "  --flops F       FLOP/s per rank to write (default: measured, every rank computing at once)\n"
    "  --pattern P     how the links are loaded while timed (cluster_probe.h): pairs (default):\n"
    "                  every rank ping-pongs with a partner at once, waiting as collectives in a\n"
    "                  step wait; ring: every host's ranks shift around a ring at once; pair: one\n"
    "                  pair while the others wait (an idle link)\n"
    "  --large SIZE    the bandwidth message (default 1M); latency uses 8 bytes\n"
    "  --seconds S     each timed batch's length (per size, link and ring order; default 0.05)\n"
    "  --collectives C on: also write the busy probe's costs per group size as intra_allreduce=\n"
    "                  and intra_alltoall= (weft-plan then prices a host's collectives from them);\n"
    "                  off (default): they stay comments (docs/planner.md says why)\n";

struct ClusterOptions {
  std::string path;
  double memory = 0;  // 0 = physical memory / ranks per host
  double flops = 0;   // 0 = measure
  Pattern pattern = Pattern::pairs;
  size_t large = size_t{1} << 20;
  double seconds = 0.05;
  bool collectives = false;  // write intra_allreduce= / intra_alltoall=
};

double parse_positive(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || errno != 0 || !(x > 0) || !std::isfinite(x))
    throw UsageError(flag + " expects a positive number, got '" + v + "'");
  return x;
}

ClusterOptions parse_cluster_options(int argc, char** argv) {
  ClusterOptions o;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
      std::fputs(kClusterUsage, stdout);
      std::exit(0);
    }
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) throw UsageError(a + " needs a value (or is not a --cluster-file option)");
    const std::string v = argv[++i];
    if (a == "--cluster-file") {
      o.path = v;
    } else if (a == "--memory") {
      o.memory = static_cast<double>(parse_size(v));
      if (o.memory <= 0) throw UsageError("--memory expects a positive size, got '" + v + "'");
    } else if (a == "--flops") {
      o.flops = parse_positive(a, v);
    } else if (a == "--pattern") {
      if (v != "ring" && v != "pairs" && v != "pair")
        throw UsageError("--pattern expects pairs, ring or pair, got '" + v + "'");
      o.pattern = v == "ring" ? Pattern::ring : v == "pairs" ? Pattern::pairs : Pattern::pair;
    } else if (a == "--large") {
      o.large = parse_size(v);
      if (o.large <= 64) throw UsageError("--large must exceed 64 bytes (latency uses 8), got '" + v + "'");
    } else if (a == "--seconds") {
      o.seconds = parse_positive(a, v);
    } else if (a == "--collectives") {
      if (v != "on" && v != "off") throw UsageError("--collectives expects on or off, got '" + v + "'");
      o.collectives = v == "on";
    } else {
      throw UsageError("unknown option " + a + " with --cluster-file");
    }
  }
  if (o.path.empty()) throw UsageError("--cluster-file needs a path");
  return o;
}

std::string utc_now() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

// The file's lines: how each number was measured, then the one line weft-plan reads.
std::vector<std::string> file_lines(const ClusterOptions& o, const Topology& topo, const LinkResult& intra,
                                    const LinkResult& inter, const BusyResult& busy, double flops, double flops_spread,
                                    double memory) {
  std::vector<std::string> out;
  char b[512];
  std::snprintf(b, sizeof b, "# weft-bench --cluster-file, %s on %s: %d ranks = %d host(s) x %d ranks", utc_now().c_str(),
                topo.first_host.c_str(), topo.nranks, topo.hosts, topo.ranks_per_host);
  out.push_back(b);
  auto link = [&](const char* what, const LinkResult& r) {
    if (o.pattern == Pattern::ring)
      std::snprintf(b, sizeof b, "# %s: %d ring(s) of %d ranks shifting at once (weft_p2p_batch: send right, receive left);"
                    " seconds per step, median of 7 rank orders, median over ranks:", what, r.rings, r.ring_size);
    else if (o.pattern == Pattern::pairs)
      std::snprintf(b, sizeof b, "# %s: %d pairs ping-pong at once (weft_send/weft_recv), every rank in one (an odd one"
                    " out waits); half a round trip, median of 7 pairings, median over ranks:", what, r.rings);
    else
      std::snprintf(b, sizeof b, "# %s: one pair ping-pongs (weft_send/weft_recv), the other ranks wait; half a round"
                    " trip:", what);
    out.push_back(b);
    std::snprintf(b, sizeof b, "#   8 B %.2f us (ranks %.2f..%.2f), %zu B %.1f us (ranks %.1f..%.1f)", 1e6 * r.small_s,
                  1e6 * r.small_min, 1e6 * r.small_max, o.large, 1e6 * r.large_s, 1e6 * r.large_min,
                  1e6 * r.large_max);
    out.push_back(b);
  };
  out.push_back("# latency = the 8-byte time; bandwidth = (large - 8 bytes) / (large time - 8-byte time)");
  if (intra.rings > 0)
    link("intra-host", intra);
  else
    out.push_back("# intra-host: one rank per host, nothing to measure; intra_* repeat inter_*");
  if (inter.rings > 0)
    link("inter-host", inter);
  else
    out.push_back("# inter-host: all ranks on one host; inter_* repeat intra_* (unused while a job fits one host)");
  if (o.flops > 0) {
    out.push_back("# flops: given with --flops");
  } else {
    std::snprintf(b, sizeof b,
                  "# flops: per rank, float32 64x64x64 products accumulated in double (the demo's loops), all %d"
                  " ranks computing at once (ranks' spread %.0f%%)",
                  topo.nranks, 100.0 * flops_spread);
    out.push_back(b);
  }
  out.push_back(o.memory > 0 ? "# memory: given with --memory" : "# memory: physical memory / ranks per host");
  const LinkResult& a = intra.rings > 0 ? intra : inter;
  const LinkResult& e = inter.rings > 0 ? inter : intra;
  // weft-plan prices a small ring all-reduce of n ranks as 2 (n - 1) latencies. Between compute
  // bursts it costs what the busy probe measured, which with ranks outnumbering cores is mostly
  // waiting for descheduled ranks: the latency stated (which also prices the pipeline's
  // transfers) is the larger of the ping-pong's and the one at which weft-plan's price of the
  // host-wide all-reduce equals the measured cost. With --collectives on, the collectives
  // themselves get the measured costs per kind and group size (intra_allreduce, intra_alltoall;
  // weft/plan.h). Off by default: with 8 ranks on 2 cores the lockstep probe costs every group
  // size about the same (85-125 us), where a training step pays far less for a 2-rank group,
  // and the demo's predictions got worse with them (docs/planner.md).
  double intra_lat = a.small_s;
  std::string measured;
  if (!busy.costs.empty() && intra.rings > 0) {
    std::snprintf(b, sizeof b,
                  "# busy collectives: groups of g consecutive ranks of a host, all at once, every rank computing"
                  " %.0f-us bursts between 8-byte collectives; seconds added per collective:",
                  1e6 * busy.burst);
    out.push_back(b);
    for (const bool alltoall : {false, true}) {
      std::string list;
      for (const BusyCollective& m : busy.costs) {
        if (m.alltoall != alltoall) continue;
        std::snprintf(b, sizeof b, "%s%d:%.4g", list.empty() ? "" : ",", m.ranks, m.seconds);
        list += b;
        std::snprintf(b, sizeof b, "#   %s over %d ranks: %.1f us", alltoall ? "all-to-all" : "all-reduce", m.ranks,
                      1e6 * m.seconds);
        out.push_back(b);
        if (!alltoall && m.ranks == busy.ranks) intra_lat = std::max(intra_lat, m.seconds / (2.0 * (m.ranks - 1)));
      }
      measured += std::string(alltoall ? " intra_alltoall=" : " intra_allreduce=") + list;
    }
    out.push_back("# intra_lat = the larger of the ping-pong's and the host-wide busy all-reduce's per-step latency");
    if (!o.collectives) {
      out.push_back("# --collectives on would add:" + measured);
      measured.clear();
    }
  }
  const double inter_lat = inter.rings > 0 ? e.small_s : intra_lat;
  std::snprintf(b, sizeof b,
                "cluster hosts=%d ranks_per_host=%d memory=%.0f flops=%.4g intra_bw=%.4g intra_lat=%.4g"
                " inter_bw=%.4g inter_lat=%.4g",
                topo.hosts, topo.ranks_per_host, memory, flops, a.bandwidth, intra_lat, e.bandwidth, inter_lat);
  out.push_back(b + measured);
  return out;
}

int measure_and_write(weft_comm_t comm, const ClusterOptions& o) {
  int rank = 0;
  check(weft_comm_rank(comm, &rank), "weft_comm_rank");
  // Fail before measuring when the file cannot be written (every rank learns it from rank 0).
  int writable = 1;
  if (rank == 0) {
    FILE* f = std::fopen(o.path.c_str(), "a");
    writable = f != nullptr;
    if (!f) std::fprintf(stderr, "weft-bench: cannot write %s: %s\n", o.path.c_str(), std::strerror(errno));
    if (f) std::fclose(f);
  }
  check(weft_broadcast(&writable, 1, WEFT_INT32, 0, comm, nullptr, nullptr), "weft_broadcast(writable)");
  if (!writable) return 3;
  const Topology topo = discover_topology(comm);
  if (topo.nranks < 2) {
    if (rank == 0)
      std::fprintf(stderr, "weft-bench: --cluster-file needs at least 2 ranks to time a link (weftrun -n 2 or more)\n");
    return 2;
  }
  const LinkResult intra = measure_links(comm, topo, LinkKind::intra, o.pattern, o.large, o.seconds);
  const LinkResult inter = measure_links(comm, topo, LinkKind::inter, o.pattern, o.large, o.seconds);
  const BusyResult busy = measure_busy_collectives(comm, topo);
  double spread = 0;
  const double flops = o.flops > 0 ? o.flops : measure_flops(comm, &spread);
  double memory = o.memory;
  if (memory <= 0) {
    const double phys = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
    memory = std::floor(phys / topo.ranks_per_host);
  }
  if (rank != 0) return 0;
  const std::vector<std::string> lines = file_lines(o, topo, intra, inter, busy, flops, spread, memory);
  FILE* f = std::fopen(o.path.c_str(), "w");
  bool ok = f != nullptr;
  for (const std::string& l : lines) {
    std::printf("%s\n", l.c_str());
    if (f) ok = std::fprintf(f, "%s\n", l.c_str()) > 0 && ok;
  }
  if (f) ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    std::fprintf(stderr, "weft-bench: writing %s failed: %s\n", o.path.c_str(), std::strerror(errno));
    return 3;
  }
  std::printf("# written to %s\n", o.path.c_str());
  return 0;
}

}  // namespace

bool wants_cluster_file(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--cluster-file") == 0) return true;
  return false;
}

int cluster_main(int argc, char** argv) {
  ClusterOptions o;
  try {
    o = parse_cluster_options(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "weft-bench: %s\n\n%s", e.what(), kClusterUsage);
    return 2;
  }
  weft_comm_t comm = nullptr;
  weft_status_t st = weft_comm_init_from_env(&comm, nullptr);
  if (st != WEFT_OK) {
    std::fprintf(stderr, "weft-bench: weft_comm_init_from_env failed: %s\n  %s\n", weft_status_string(st),
                 weft_last_error());
    return 3;
  }
  int rc = 0;
  try {
    rc = measure_and_write(comm, o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-bench: %s\n", e.what());
    weft_comm_abort(comm);
    rc = 3;
  }
  st = weft_comm_destroy(comm);
  if (st != WEFT_OK && rc == 0) rc = 3;
  return rc;
}

}  // namespace weftbench
