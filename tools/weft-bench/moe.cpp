#include "moe.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <weft/weft.h>

#include "collectives.h"
#include "moe_routing.h"

namespace weftbench {
namespace {

struct MoeOptions {
  std::vector<size_t> tokens{128, 512, 2048, 8192};
  std::vector<size_t> hidden{1024, 4096, 7168};
  int topk = 8;
  int experts = 64;
  std::vector<weft_dtype_t> dtypes{WEFT_FLOAT32, WEFT_BFLOAT16};
  std::vector<MoeRouting> routings{MoeRouting::balanced, MoeRouting::imbalanced};
  int iters = 10;
  int warmup = 2;
  uint64_t seed = 1234;
  // A case whose received rows (tokens * topk * hidden * elem on average per rank) exceed this is
  // skipped on every rank alike: 8192 x 7168 float32 at top-8 would need ~2 GiB per copy per rank.
  double max_mib = 1024;
  std::string routing_dir;
  std::string csv_path;
};

const char* kUsage =
    "usage: weft-bench moe [--quick] [--tokens LIST] [--hidden LIST] [--topk K] [--experts E]\n"
    "         [--dtype float32,bf16] [--routing balanced,imbalanced] [-n ITERS] [-w WARMUP]\n"
    "         [--seed S] [--max-mib M] [--routing-dir DIR] [--csv FILE]\n"
    "  --quick          tokens 128,512, hidden 1024, 3 iterations, 1 warm-up\n"
    "  --max-mib M      skip cases whose received rows per rank exceed M MiB (default 1024)\n"
    "  --routing-dir D  write each rank's routing there (for bench/moe_peer.py)\n";

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

size_t parse_count(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n == 0)
    throw UsageError(std::string(flag).append(": expected a positive integer, got '").append(v).append("'"));
  return static_cast<size_t>(n);
}

MoeOptions parse_moe_options(int argc, char** argv) {
  MoeOptions o;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(std::string(a).append(" needs a value"));
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--quick") {
      o.tokens = {128, 512};
      o.hidden = {1024};
      o.iters = 3;
      o.warmup = 1;
    } else if (a == "--tokens" || a == "--hidden") {
      std::vector<size_t>& dst = a == "--tokens" ? o.tokens : o.hidden;
      dst.clear();
      for (const std::string& s : split_list(value())) dst.push_back(parse_count(a, s));
    } else if (a == "--topk") {
      o.topk = static_cast<int>(parse_count(a, value()));
    } else if (a == "--experts") {
      o.experts = static_cast<int>(parse_count(a, value()));
    } else if (a == "--dtype" || a == "-d") {
      o.dtypes.clear();
      for (const std::string& s : split_list(value())) {
        if (s == "float32" || s == "float" || s == "f32")
          o.dtypes.push_back(WEFT_FLOAT32);
        else if (s == "bf16" || s == "bfloat16")
          o.dtypes.push_back(WEFT_BFLOAT16);
        else
          throw UsageError(std::string("--dtype: expected float32 or bf16, got '").append(s).append("'"));
      }
    } else if (a == "--routing") {
      o.routings.clear();
      for (const std::string& s : split_list(value())) {
        if (s == "balanced")
          o.routings.push_back(MoeRouting::balanced);
        else if (s == "imbalanced")
          o.routings.push_back(MoeRouting::imbalanced);
        else
          throw UsageError(std::string("--routing: expected balanced or imbalanced, got '").append(s).append("'"));
      }
    } else if (a == "-n" || a == "--iters") {
      o.iters = static_cast<int>(parse_count(a, value()));
    } else if (a == "-w" || a == "--warmup") {
      const std::string v = value();
      o.warmup = v == "0" ? 0 : static_cast<int>(parse_count(a, v));
    } else if (a == "--seed") {
      o.seed = parse_count(a, value());
    } else if (a == "--max-mib") {
      o.max_mib = static_cast<double>(parse_count(a, value()));
    } else if (a == "--routing-dir") {
      o.routing_dir = value();
    } else if (a == "--csv") {
      o.csv_path = value();
    } else {
      throw UsageError(std::string("unknown option '").append(a).append("'"));
    }
  }
  if (o.topk > o.experts) throw UsageError("--topk must be at most --experts");
  if (o.tokens.empty() || o.hidden.empty() || o.dtypes.empty() || o.routings.empty())
    throw UsageError("empty --tokens, --hidden, --dtype or --routing list");
  return o;
}

// x[t, h] of `rank`: multiples of 1/64 in [-127/64, 127/64], exact in bfloat16 and float32.
float token_value(int rank, size_t t, size_t h) {
  const long v = static_cast<long>((t * 131 + h * 7 + static_cast<size_t>(rank) * 17) % 255) - 127;
  return static_cast<float>(v) / 64.0f;
}

uint16_t bf16_bits(float f) {  // exact for the values above (8 significant bits at most)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

float bf16_value(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float element(const char* base, weft_dtype_t d, size_t i) {
  if (d == WEFT_FLOAT32) {
    float f;
    std::memcpy(&f, base + i * 4, 4);
    return f;
  }
  uint16_t b;
  std::memcpy(&b, base + i * 2, 2);
  return bf16_value(b);
}

weft_tensor_t view(void* data, weft_dtype_t d, const int64_t* shape) {
  weft_tensor_t t{};
  t.data = data;
  t.device_type = WEFT_DEVICE_CPU;
  t.ndim = 2;
  t.dtype = d;
  t.shape = shape;
  t.strides = nullptr;
  return t;
}

struct CaseResult {
  double dispatch_bytes = 0, combine_bytes = 0;  // per rank (mean over ranks)
  double dispatch_us = 0, combine_us = 0;        // slowest rank's median
  int64_t wrong = 0;
  int iters = 0;
  int64_t injected = 0, caught = 0;  // WEFT_TEST_INJECT=1 (inject_enabled)
};

// WEFT_TEST_INJECT=1: after each check, one element of the received rows and one of the combined
// output are corrupted in turn and checked again; each must raise the count of wrong values.
bool inject_enabled() {
  const char* v = std::getenv("WEFT_TEST_INJECT");
  return v && std::strcmp(v, "1") == 0;
}

// Flips the top stored fraction bit of element i: a change of at least a quarter of the value
// (or a subnormal where it was 0), far outside every tolerance.
void corrupt(char* base, weft_dtype_t d, size_t i) {
  if (d == WEFT_FLOAT32)
    base[i * 4 + 2] = static_cast<char>(base[i * 4 + 2] ^ 0x40);
  else
    base[i * 2] = static_cast<char>(base[i * 2] ^ 0x40);
}

// Small cases are cheap and noisy: they get up to 10x the iterations, so each case's timed loop
// moves at least ~8 MiB of tokens (bench/moe_peer.py uses the same rule).
int case_iters(int iters, size_t token_bytes) {
  const size_t scale = std::clamp<size_t>((size_t{8} << 20) / std::max<size_t>(token_bytes, 1), 1, 10);
  return iters * static_cast<int>(scale);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

class MoeCase {
 public:
  MoeCase(const Comm& comm, const MoeOptions& o, weft_dtype_t d, MoeRouting r, size_t tokens, size_t hidden)
      : comm_(comm), o_(o), d_(d), T_(tokens), H_(hidden), elem_(d == WEFT_FLOAT32 ? 4 : 2) {
    for (int q = 0; q < comm.nranks; ++q)
      sel_.push_back(make_routing(r, o.seed, T_, o.topk, o.experts, comm.nranks, q));
    x_ = HostBuffer(T_ * H_ * elem_);
    out_ = HostBuffer(T_ * H_ * elem_);
    for (size_t t = 0; t < T_; ++t)
      for (size_t h = 0; h < H_; ++h) {
        const float v = token_value(comm.rank, t, h);
        if (d == WEFT_FLOAT32)
          std::memcpy(x_.data() + (t * H_ + h) * 4, &v, 4);
        else {
          const uint16_t b = bf16_bits(v);
          std::memcpy(x_.data() + (t * H_ + h) * 2, &b, 2);
        }
      }
  }

  const MoeSelection& mine() const { return sel_[static_cast<size_t>(comm_.rank)]; }

  CaseResult run(weft_moe_t moe) {
    CaseResult res;
    count_bytes(res);
    res.iters = case_iters(o_.iters, T_ * H_ * elem_);
    std::vector<double> disp, comb;
    for (int it = 0; it < o_.warmup + res.iters; ++it) {
      double td = 0, tc = 0;
      one_iteration(moe, &td, &tc, nullptr);
      if (it >= o_.warmup) {
        disp.push_back(td);
        comb.push_back(tc);
      }
    }
    double mine[2] = {median(disp), median(comb)}, slowest[2] = {0, 0};
    check(weft_allreduce(mine, slowest, 2, WEFT_FLOAT64, WEFT_MAX, comm_.comm, nullptr, nullptr),
          "weft_allreduce(time)");
    res.dispatch_us = slowest[0];
    res.combine_us = slowest[1];
    int64_t counts[3] = {0, 0, 0}, sums[3] = {0, 0, 0};  // wrong, injected, caught
    one_iteration(moe, nullptr, nullptr, counts);
    check(weft_allreduce(counts, sums, 3, WEFT_INT64, WEFT_SUM, comm_.comm, nullptr, nullptr),
          "weft_allreduce(#wrong)");
    res.wrong = sums[0];
    res.injected = sums[1];
    res.caught = sums[2];
    return res;
  }

 private:
  int rank_of_expert(int e) const {
    const int c = (o_.experts + comm_.nranks - 1) / comm_.nranks;
    return e / c;
  }

  // DeepEP's byte counts, from the routing alone (not from what weft reports).
  void count_bytes(CaseResult& res) const {
    const size_t k = static_cast<size_t>(o_.topk);
    double tokens_to_ranks = 0, rows = 0;
    std::vector<char> to(static_cast<size_t>(comm_.nranks));
    for (const MoeSelection& s : sel_)
      for (size_t t = 0; t < T_; ++t) {
        std::fill(to.begin(), to.end(), 0);
        for (size_t j = 0; j < k; ++j) to[static_cast<size_t>(rank_of_expert(s.indices[t * k + j]))] = 1;
        for (char c : to) tokens_to_ranks += c;
        rows += static_cast<double>(k);
      }
    const double row_bytes = static_cast<double>(H_ * elem_);
    res.dispatch_bytes = tokens_to_ranks * row_bytes / comm_.nranks;
    res.combine_bytes = rows * row_bytes / comm_.nranks;
  }

  // One dispatch and one combine, each after a barrier; times in microseconds. With wrong != null
  // the results are checked: wrong[0] += wrong values, and with WEFT_TEST_INJECT=1 wrong[1] +=
  // corruptions made, wrong[2] += corruptions caught.
  void one_iteration(weft_moe_t moe, double* td, double* tc, int64_t* wrong) {
    const MoeSelection& mine = sel_[static_cast<size_t>(comm_.rank)];
    const int64_t xshape[2] = {static_cast<int64_t>(T_), static_cast<int64_t>(H_)};
    weft_tensor_t x = view(x_.data(), d_, xshape);
    weft_moe_handle_t handle = nullptr;
    check(weft_barrier(comm_.comm, nullptr, nullptr), "weft_barrier");
    auto t0 = std::chrono::steady_clock::now();
    check(weft_moe_dispatch(moe, &x, mine.indices.data(), mine.weights.data(), T_, o_.topk, nullptr, &handle),
          "weft_moe_dispatch");
    auto t1 = std::chrono::steady_clock::now();
    weft_moe_received_t rec = WEFT_MOE_RECEIVED_INIT;
    check(weft_moe_handle_received(handle, &rec), "weft_moe_handle_received");
    // The identity expert writes its output into memory of its own, as a real expert would.
    const size_t rec_bytes = rec.rows * H_ * elem_;
    if (expert_out_.size() < rec_bytes) expert_out_ = HostBuffer(rec_bytes);
    if (rec_bytes) std::memcpy(expert_out_.data(), rec.tokens.data, rec_bytes);
    if (wrong) {
      const int64_t bad = check_received(rec, expert_out_.data());
      wrong[0] += bad;
      if (inject_enabled() && rec.rows) {
        corrupt(expert_out_.data(), d_, rec.rows / 2 * H_ + H_ / 2);
        ++wrong[1];
        wrong[2] += check_received(rec, expert_out_.data()) > bad;
        corrupt(expert_out_.data(), d_, rec.rows / 2 * H_ + H_ / 2);  // restored
      }
    }
    const int64_t eshape[2] = {static_cast<int64_t>(rec.rows), static_cast<int64_t>(H_)};
    weft_tensor_t eo = view(expert_out_.data(), d_, eshape);
    weft_tensor_t out = view(out_.data(), d_, xshape);
    if (wrong) std::memset(out_.data(), 0x7f, T_ * H_ * elem_);  // poison: a skipped row cannot pass
    check(weft_barrier(comm_.comm, nullptr, nullptr), "weft_barrier");
    auto t2 = std::chrono::steady_clock::now();
    check(weft_moe_combine(moe, handle, &eo, 1, &out, nullptr), "weft_moe_combine");
    auto t3 = std::chrono::steady_clock::now();
    check(weft_moe_handle_destroy(handle), "weft_moe_handle_destroy");
    if (td) *td = std::chrono::duration<double, std::micro>(t1 - t0).count();
    if (tc) *tc = std::chrono::duration<double, std::micro>(t3 - t2).count();
    if (wrong) {
      const int64_t bad = check_combined();
      wrong[0] += bad;
      if (inject_enabled() && T_) {
        corrupt(out_.data(), d_, T_ / 2 * H_ + H_ / 3);
        ++wrong[1];
        wrong[2] += check_combined() > bad;
      }
    }
  }

  // Every received row must be its source token, and the rows must be exactly the (token, slot)
  // pairs of all ranks whose expert lives here. Returns the number of wrong rows and elements.
  // `rows` holds the received tokens (a copy of rec.tokens).
  int64_t check_received(const weft_moe_received_t& rec, const char* rows) const {
    const size_t k = static_cast<size_t>(o_.topk);
    int64_t bad = 0;
    // expected[(source rank, token, expert)] seen counts: mark each row, then look for misses.
    std::vector<std::vector<char>> seen(sel_.size());
    for (size_t q = 0; q < sel_.size(); ++q) seen[q].assign(T_ * k, 0);
    for (size_t row = 0; row < rec.rows; ++row) {
      const int32_t q = rec.row_source_rank[row];
      const int64_t t = rec.row_source_token[row];
      const int32_t e = rec.row_expert[row];
      if (q < 0 || q >= comm_.nranks || t < 0 || static_cast<size_t>(t) >= T_ || rank_of_expert(e) != comm_.rank) {
        ++bad;
        continue;
      }
      const MoeSelection& s = sel_[static_cast<size_t>(q)];
      size_t slot = k;
      for (size_t j = 0; j < k; ++j)
        if (s.indices[static_cast<size_t>(t) * k + j] == e) slot = j;
      if (slot == k || seen[static_cast<size_t>(q)][static_cast<size_t>(t) * k + slot]) {
        ++bad;  // an expert the token did not pick, or a pair delivered twice
        continue;
      }
      seen[static_cast<size_t>(q)][static_cast<size_t>(t) * k + slot] = 1;
      if (rec.row_weight[row] != s.weights[static_cast<size_t>(t) * k + slot]) ++bad;
      for (size_t h = 0; h < H_; ++h)
        if (element(rows, d_, row * H_ + h) != token_value(q, static_cast<size_t>(t), h)) ++bad;
    }
    for (size_t q = 0; q < sel_.size(); ++q)
      for (size_t i = 0; i < T_ * k; ++i)
        if (!seen[q][i] && rank_of_expert(sel_[q].indices[i]) == comm_.rank) ++bad;  // a pair never delivered
    return bad;
  }

  // With the identity expert and weights summing to 1 (in float32), out = x within rounding:
  // float32 relative 1e-5 (the sum of k weights is 1 within a few ulps); bfloat16 exactly,
  // since x is a bfloat16 value and x * (1 +- 1e-6) rounds back to it.
  int64_t check_combined() const {
    int64_t bad = 0;
    for (size_t t = 0; t < T_; ++t)
      for (size_t h = 0; h < H_; ++h) {
        const float want = token_value(comm_.rank, t, h);
        const float got = element(out_.data(), d_, t * H_ + h);
        const float tol = d_ == WEFT_FLOAT32 ? 1e-5f * std::fabs(want) : 0.0f;
        if (!(std::fabs(got - want) <= tol)) ++bad;
      }
    return bad;
  }

  const Comm& comm_;
  const MoeOptions& o_;
  weft_dtype_t d_;
  size_t T_, H_, elem_;
  std::vector<MoeSelection> sel_;
  HostBuffer x_, out_, expert_out_;
};

void print_header(const Comm& comm, const MoeOptions& o) {
  if (comm.rank != 0) return;
  int version = 0, abi = 0;
  weft_version(&version, &abi);
  std::printf("# weft-bench moe: weft %d.%d.%d (ABI %d), host memory, %d ranks\n", version / 10000,
              version / 100 % 100, version % 100, abi, comm.nranks);
  std::printf("# experts %d (contiguous blocks), top-k %d, seed %" PRIu64 ", warm-up %d, iterations %d (x up to 10\n"
              "#   where tokens*hidden*elem < 8 MiB, so each timed loop moves ~8 MiB; the csv has the count)\n",
              o.experts, o.topk, o.seed, o.warmup, o.iters);
  std::printf("# bytes per rank (mean over ranks), as DeepEP: dispatch = each token's H*elem bytes once per\n"
              "#   destination rank (its own included); combine = H*elem bytes once per (token, slot) row\n"
              "#   returned. time = slowest rank's median (us) of the timed iterations, each after a barrier;\n"
              "#   GB/s = 1e9 bytes/s; total = (dispatch + combine bytes) / (dispatch + combine time).\n"
              "# check: combine(dispatch(x)) with an identity expert and weights summing to 1 == x, and\n"
              "#   every received row == its source token; #wrong counts bad rows and elements, all ranks.\n#\n");
  std::printf("#%6s %6s %8s %10s %10s %9s %7s %10s %9s %7s %7s %6s\n", "tokens", "hidden", "type", "routing",
              "disp(MB)", "disp(us)", "GB/s", "comb(MB)", "comb(us)", "GB/s", "total", "#wrong");
  std::fflush(stdout);
}

int run_moe(const Comm& comm, const MoeOptions& o) {
  FILE* csv = nullptr;
  if (comm.rank == 0 && !o.csv_path.empty()) {
    csv = std::fopen(o.csv_path.c_str(), "w");
    if (!csv)
      std::fprintf(stderr, "weft-bench moe: cannot write %s: %s\n", o.csv_path.c_str(), std::strerror(errno));
    else
      std::fprintf(csv, "library,nranks,tokens,hidden,dtype,routing,iters,dispatch_bytes,combine_bytes,"
                        "dispatch_us,combine_us,dispatch_gbps,combine_gbps,total_gbps,wrong\n");
  }
  print_header(comm, o);
  int64_t total_wrong = 0, total_injected = 0, total_caught = 0;
  for (weft_dtype_t d : o.dtypes) {
    const char* dname = d == WEFT_FLOAT32 ? "float32" : "bf16";
    const size_t elem = d == WEFT_FLOAT32 ? 4 : 2;
    for (size_t hidden : o.hidden) {
      weft_moe_config_t cfg = WEFT_MOE_CONFIG_INIT;
      cfg.experts = o.experts;
      cfg.hidden = hidden;
      cfg.dtype = d;
      weft_moe_t moe = nullptr;
      check(weft_moe_create(comm.comm, &cfg, &moe), "weft_moe_create");
      for (MoeRouting r : o.routings)
        for (size_t tokens : o.tokens) {
          const double rows_mib = static_cast<double>(tokens * static_cast<size_t>(o.topk) * hidden * elem) / 1048576.0;
          if (rows_mib > o.max_mib) {
            if (comm.rank == 0)
              std::printf(" %6zu %6zu %8s %10s  skipped: %.0f MiB of received rows per rank > --max-mib %.0f\n",
                          tokens, hidden, dname, moe_routing_name(r), rows_mib, o.max_mib);
            continue;
          }
          MoeCase c(comm, o, d, r, tokens, hidden);
          if (!o.routing_dir.empty())
            write_routing_file(o.routing_dir, r, tokens, o.topk, o.experts, comm.nranks, comm.rank, c.mine());
          const CaseResult res = c.run(moe);
          total_wrong += res.wrong;
          total_injected += res.injected;
          total_caught += res.caught;
          if (comm.rank != 0) continue;
          const double dg = res.dispatch_bytes / (res.dispatch_us * 1e3);
          const double cg = res.combine_bytes / (res.combine_us * 1e3);
          const double tg = (res.dispatch_bytes + res.combine_bytes) / ((res.dispatch_us + res.combine_us) * 1e3);
          std::printf(" %6zu %6zu %8s %10s %10.2f %9.1f %7.2f %10.2f %9.1f %7.2f %7.2f %6" PRId64 "\n", tokens, hidden,
                      dname, moe_routing_name(r), res.dispatch_bytes / 1e6, res.dispatch_us, dg,
                      res.combine_bytes / 1e6, res.combine_us, cg, tg, res.wrong);
          std::fflush(stdout);
          if (csv) {
            std::fprintf(csv, "weft,%d,%zu,%zu,%s,%s,%d,%.0f,%.0f,%.3f,%.3f,%.6f,%.6f,%.6f,%" PRId64 "\n", comm.nranks,
                         tokens, hidden, dname, moe_routing_name(r), res.iters, res.dispatch_bytes,
                         res.combine_bytes, res.dispatch_us, res.combine_us, dg, cg, tg, res.wrong);
            std::fflush(csv);
          }
        }
      check(weft_moe_destroy(moe), "weft_moe_destroy");
    }
  }
  if (csv) std::fclose(csv);
  if (comm.rank == 0) {
    std::printf("# wrong values: %" PRId64 " %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
    if (inject_enabled())
      std::printf("# injection (WEFT_TEST_INJECT=1): %" PRId64 " of %" PRId64 " corruptions caught %s\n", total_caught,
                  total_injected, total_caught == total_injected && total_injected > 0 ? "OK" : "FAILED");
    std::fflush(stdout);
  }
  if (inject_enabled() && (total_caught != total_injected || total_injected == 0)) return 1;
  return total_wrong ? 1 : 0;
}

}  // namespace

int moe_main(int argc, char** argv) {
  MoeOptions o;
  try {
    o = parse_moe_options(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "weft-bench moe: %s\n\n%s", e.what(), kUsage);
    return 2;
  }
  Comm comm;
  weft_status_t st = weft_comm_init_from_env(&comm.comm, nullptr);
  if (st != WEFT_OK) {
    std::fprintf(stderr, "weft-bench moe: weft_comm_init_from_env failed: %s\n  %s\n", weft_status_string(st),
                 weft_last_error());
    return 3;
  }
  int rc = 0;
  try {
    check(weft_comm_rank(comm.comm, &comm.rank), "weft_comm_rank");
    check(weft_comm_size(comm.comm, &comm.nranks), "weft_comm_size");
    rc = run_moe(comm, o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-bench moe: rank %d: %s\n", comm.rank, e.what());
    weft_comm_abort(comm.comm);
    rc = 3;
  }
  st = weft_comm_destroy(comm.comm);
  if (st != WEFT_OK && rc == 0) rc = 3;
  return rc;
}

}  // namespace weftbench
