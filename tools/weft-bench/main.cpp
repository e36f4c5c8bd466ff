// weft-bench: nccl-tests-style bandwidth benchmark of weft's collectives and redistributions
// (redistribution.h) on host memory.
//
//   weftrun -n 2 build/bin/weft-bench -c allreduce -b 8 -e 64M -f 2 -d float -o sum -n 20 -w 5
//
// For each size: warmup iterations, a barrier, timed iterations; each rank's average time per
// iteration is reduced with weft_allreduce(MAX), so the printed time is the slowest rank's.
// Then (unless --check 0 / -c 0) one more run on fresh inputs is compared with a reference
// computed here, and the wrong elements of all ranks are summed into #wrong.
// Links only the public library (weft.h, weft/mesh.h); rank 0 prints.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <weft/weft.h>

#include "cluster.h"
#include "collectives.h"
#include "dtypes.h"
#include "moe.h"
#include "options.h"
#include "redistribution.h"

namespace weftbench {
namespace {

struct Result {
  double time_us = 0;
  double algbw = 0;  // GB/s (1e9 bytes per second)
  double busbw = 0;
  int64_t wrong = -1;  // -1: not checked
};

struct Totals {
  double busbw_sum = 0;
  int busbw_count = 0;
  int64_t wrong = 0;
};

std::vector<size_t> size_list(const Options& opt) {
  std::vector<size_t> sizes;
  for (size_t b = opt.min_bytes; b <= opt.max_bytes;) {
    sizes.push_back(b);
    size_t next = opt.step_bytes ? b + opt.step_bytes : static_cast<size_t>(static_cast<double>(b) * opt.step_factor);
    if (next <= b) next = b + 1;  // -b 0 with a factor, or an overflow
    b = next;
  }
  return sizes;
}

void wait_all(std::vector<weft_request_t>& reqs) {
  weft_status_t first = WEFT_OK;
  std::string msg;
  for (weft_request_t r : reqs) {
    weft_status_t st = weft_wait(r);
    if (st != WEFT_OK && first == WEFT_OK) {
      first = st;
      msg = weft_last_error();
    }
    weft_request_free(r);
  }
  reqs.clear();
  if (first != WEFT_OK)
    throw WeftError(std::string("weft_wait failed: ") + weft_status_string(first) + "\n  " + msg);
}

void run_iterations(Bench& c, const Shape& shape, bool inplace, int iters, bool blocking) {
  if (blocking) {
    for (int i = 0; i < iters; ++i) c.issue(shape, inplace, nullptr);
    return;
  }
  std::vector<weft_request_t> reqs;
  reqs.reserve(static_cast<size_t>(iters) * 2);
  for (int i = 0; i < iters; ++i) c.issue(shape, inplace, &reqs);
  wait_all(reqs);
}

Result measure(const Comm& comm, Bench& c, const Shape& shape, bool inplace, const Options& opt) {
  Result res;
  c.fill(shape, inplace);
  run_iterations(c, shape, inplace, opt.warmup, opt.blocking);
  check(weft_barrier(comm.comm, nullptr, nullptr), "weft_barrier");
  const auto t0 = std::chrono::steady_clock::now();
  run_iterations(c, shape, inplace, opt.iters, opt.blocking);
  const auto t1 = std::chrono::steady_clock::now();
  double mine = std::chrono::duration<double, std::micro>(t1 - t0).count() / opt.iters;
  double slowest = 0;
  check(weft_allreduce(&mine, &slowest, 1, WEFT_FLOAT64, WEFT_MAX, comm.comm, nullptr, nullptr),
        "weft_allreduce(time)");
  res.time_us = slowest;
  res.algbw = slowest > 0 ? static_cast<double>(shape.bytes) / (slowest * 1e-6) / 1e9 : 0.0;
  res.busbw = res.algbw * bus_factor(c.coll(), comm.nranks);

  if (opt.check) {
    c.fill(shape, inplace);
    c.issue(shape, inplace, nullptr);
    int64_t mine_wrong = static_cast<int64_t>(c.count_wrong(shape, inplace));
    int64_t all_wrong = 0;
    check(weft_allreduce(&mine_wrong, &all_wrong, 1, WEFT_INT64, WEFT_SUM, comm.comm, nullptr, nullptr),
          "weft_allreduce(#wrong)");
    res.wrong = all_wrong;
  }
  return res;
}

std::string format_time(double us) {
  char buf[32];
  if (us >= 10000.0)
    std::snprintf(buf, sizeof buf, "%7.0f", us);
  else if (us >= 100.0)
    std::snprintf(buf, sizeof buf, "%7.1f", us);
  else
    std::snprintf(buf, sizeof buf, "%7.2f", us);
  return buf;
}

std::string format_side(const Result* r) {
  char buf[96];
  if (!r) {
    std::snprintf(buf, sizeof buf, "  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
    return buf;
  }
  char wrong[24];
  if (r->wrong < 0)
    std::snprintf(wrong, sizeof wrong, "%6s", "N/A");
  else
    std::snprintf(wrong, sizeof wrong, "%6" PRId64, r->wrong);
  std::snprintf(buf, sizeof buf, "  %7s  %6.2f  %6.2f  %6s", format_time(r->time_us).c_str(), r->algbw,
                r->busbw, wrong);
  return buf;
}

std::string centered(const std::string& s, size_t width) {
  if (s.size() >= width) return s;
  size_t left = (width - s.size()) / 2;
  return std::string(left, ' ') + s + std::string(width - s.size() - left, ' ');
}

void print_column_header() {
  // Same columns, widths and units as nccl-tests.
  const size_t prefix = 12 + 2 + 12 + 2 + 8 + 2 + 6 + 2 + 6;
  const size_t side = 2 + 7 + 2 + 6 + 2 + 6 + 2 + 6;
  std::printf("#\n#%s%s%s\n", std::string(prefix - 1, ' ').c_str(), centered("out-of-place", side).c_str(),
              centered("in-place", side).c_str());
  std::printf("#%11s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
  for (int i = 0; i < 2; ++i) std::printf("  %7s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
  std::printf("\n#%11s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
  for (int i = 0; i < 2; ++i) std::printf("  %7s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
  std::printf("\n");
}

struct RankInfo {
  int32_t pid;
  int32_t local_rank;
  int32_t local_size;
  char host[52];
};

void print_preamble(const Comm& comm, const Options& opt) {
  RankInfo me{};
  me.pid = static_cast<int32_t>(getpid());
  check(weft_comm_local_rank(comm.comm, &me.local_rank), "weft_comm_local_rank");
  check(weft_comm_local_size(comm.comm, &me.local_size), "weft_comm_local_size");
  gethostname(me.host, sizeof me.host - 1);
  std::vector<RankInfo> all(static_cast<size_t>(comm.nranks));
  check(weft_allgather(&me, all.data(), sizeof(RankInfo), WEFT_UINT8, comm.comm, nullptr, nullptr),
        "weft_allgather(rank info)");
  if (comm.rank != 0) return;
  int version = 0, abi = 0;
  weft_version(&version, &abi);
  std::printf("# weft-bench: weft %d.%d.%d (ABI %d), host memory\n", version / 10000, version / 100 % 100,
              version % 100, abi);
  std::printf("# nRanks %d minBytes %zu maxBytes %zu step: ", comm.nranks, opt.min_bytes, opt.max_bytes);
  if (opt.step_bytes)
    std::printf("%zu(bytes)", opt.step_bytes);
  else
    std::printf("%g(factor)", opt.step_factor);
  std::printf(" warmup iters: %d iters: %d validation: %d blocking: %d\n#\n# Using ranks\n", opt.warmup,
              opt.iters, opt.check ? 1 : 0, opt.blocking ? 1 : 0);
  for (int r = 0; r < comm.nranks; ++r) {
    const RankInfo& ri = all[static_cast<size_t>(r)];
    std::printf("#  Rank %2d Pid %7d on %10s local rank %d of %d\n", r, ri.pid, ri.host, ri.local_rank,
                ri.local_size);
  }
}

int run(const Comm& comm, const Options& opt) {
  const bool root_rank = comm.rank == 0;
  FILE* csv = nullptr;
  if (root_rank && !opt.csv_path.empty()) {
    csv = std::fopen(opt.csv_path.c_str(), "w");
    if (!csv) {
      std::fprintf(stderr, "weft-bench: cannot write %s: %s\n", opt.csv_path.c_str(), std::strerror(errno));
      // keep going on the other ranks' schedule: failing here alone would hang them
    } else {
      std::fprintf(csv, "library,collective,nranks,bytes,count,dtype,time_us,algbw,busbw,wrong\n");
    }
  }
  print_preamble(comm, opt);
  const std::vector<size_t> sizes = size_list(opt);
  Totals totals;
  for (Coll coll : opt.collectives) {
    if (root_rank) {
      std::printf("#\n# Collective: %s\n", coll_name(coll));
      print_column_header();
      std::fflush(stdout);
    }
    const std::vector<weft_op_t> ops = is_reduction(coll) ? opt.ops : std::vector<weft_op_t>{WEFT_SUM};
    for (weft_dtype_t d : opt.dtypes) {
      const DtypeInfo& t = dtype_info(d);
      for (weft_op_t op : ops) {
        // A plugin's operator has no reference here: its rows are timed, not checked.
        Options opt_op = opt;
        opt_op.check = opt.check && !is_plugin_op(op);
        if (!redist_supports(coll, op)) {
          if (root_rank) std::printf("#  %s %s: skipped (PARTIAL(%s) does not exist)\n", t.name, op_name(op), op_name(op));
          continue;
        }
        std::unique_ptr<Bench> c;
        if (is_redistribution(coll))
          c = make_redistribution(comm, coll, t, op, opt.max_bytes);
        else
          c = std::make_unique<Case>(comm, coll, t, op, opt.root, opt.max_bytes);
        for (size_t req_bytes : sizes) {
          const Shape shape = shape_of(coll, req_bytes, t.size, comm.nranks);
          c->prepare(shape);
          const Result oop = measure(comm, *c, shape, false, opt_op);
          Result ip;
          const bool with_ip = has_inplace(coll);
          if (with_ip) ip = measure(comm, *c, shape, true, opt_op);
          auto tally = [&totals](const Result& r) {
            totals.busbw_sum += r.busbw;
            ++totals.busbw_count;
            if (r.wrong > 0) totals.wrong += r.wrong;
          };
          tally(oop);
          if (with_ip) tally(ip);
          if (!root_rank) continue;
          std::printf("%12zu  %12zu  %8s  %6s  %6d%s%s\n", shape.bytes, shape.count, t.name,
                      is_reduction(coll) ? op_name(op) : "none", is_rooted(coll) ? opt.root : -1,
                      format_side(&oop).c_str(), format_side(with_ip ? &ip : nullptr).c_str());
          std::fflush(stdout);
          if (csv) {
            std::fprintf(csv, "%s,%s,%d,%zu,%zu,%s,%.3f,%.6f,%.6f,%" PRId64 "\n", opt.library.c_str(),
                         coll_name(coll), comm.nranks, shape.bytes, shape.count, t.name, oop.time_us,
                         oop.algbw, oop.busbw, oop.wrong);
            std::fflush(csv);
          }
        }
      }
    }
  }
  if (csv) std::fclose(csv);
  if (root_rank) {
    std::printf("# Out of bounds values : %" PRId64 " %s\n", totals.wrong, totals.wrong ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %g \n#\n",
                totals.busbw_count ? totals.busbw_sum / totals.busbw_count : 0.0);
    std::fflush(stdout);
  }
  return totals.wrong ? 1 : 0;
}

}  // namespace
}  // namespace weftbench

int main(int argc, char** argv) {
  using namespace weftbench;
  // "weft-bench moe ...": expert-parallel dispatch and combine, a mode of its own (moe.h).
  if (argc > 1 && std::strcmp(argv[1], "moe") == 0) return moe_main(argc, argv);
  // "weft-bench --cluster-file PATH": measure the links and write weft-plan's cluster file (cluster.h).
  if (wants_cluster_file(argc, argv)) return cluster_main(argc, argv);
  Options opt;
  try {
    opt = parse_options(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "weft-bench: %s\n\n%s", e.what(), usage_text());
    return 2;
  }
  if (opt.help) {
    std::fputs(usage_text(), stdout);
    return 0;
  }
  Comm comm;
  weft_status_t st = weft_comm_init_from_env(&comm.comm, nullptr);
  if (st != WEFT_OK) {
    std::fprintf(stderr, "weft-bench: weft_comm_init_from_env failed: %s\n  %s\n", weft_status_string(st),
                 weft_last_error());
    return 3;
  }
  int rc = 0;
  try {
    check(weft_comm_rank(comm.comm, &comm.rank), "weft_comm_rank");
    check(weft_comm_size(comm.comm, &comm.nranks), "weft_comm_size");
    if (opt.root >= comm.nranks) {
      if (comm.rank == 0)
        std::fprintf(stderr, "weft-bench: root %d is not a rank of %d\n", opt.root, comm.nranks);
      weft_comm_destroy(comm.comm);
      return 2;
    }
    load_plugin_ops(opt);
    rc = run(comm, opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-bench: rank %d: %s\n", comm.rank, e.what());
    weft_comm_abort(comm.comm);
    rc = 3;
  }
  st = weft_comm_destroy(comm.comm);
  if (st != WEFT_OK && rc == 0) {
    std::fprintf(stderr, "weft-bench: weft_comm_destroy failed: %s\n  %s\n", weft_status_string(st),
                 weft_last_error());
    rc = 3;
  }
  return rc;
}
