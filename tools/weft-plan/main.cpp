// weft-plan: rank the parallel layouts of a model on a cluster by predicted step time, or
// predict one given layout, through the C ABI only (weft/plan.h).
//
//   weft-plan --model M --cluster C [--batch G] [--ranks N] [--top K] [--report] [--json]
//             [--layout dp=2,tp=2,pp=2,ep=2,cp=1,zero=1,schedule=1f1b,mb=4,v=1] [options]
//
// Exit status: 0 done, 1 the library refused the description (its message on stderr), 2 usage.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "weft/weft.h"

namespace {

constexpr int kUsage = 2;
constexpr int kFailed = 1;

const char* const kUsageText =
    "usage: weft-plan --model M --cluster C [--batch G] [--ranks N] [--top K] [--report] [--json]\n"
    "                 [--layout dp=D,tp=T,pp=P,ep=E,cp=C,zero=Z,schedule=S,mb=M,v=V]\n"
    "                 [--all] [--max-pp N] [--max-tp N] [--max-cp N] [--max-mb N] [--tp-across-hosts]\n"
    "                 [--kinds a,b,...] [--overhead SECONDS] [--weight-bytes B] [--grad-bytes B]\n"
    "                 [--optimizer-bytes B] [--grad-allreduce-bytes B]\n"
    "  Ranks every layout (dp x tp x pp x cp = ranks, ep over dp x tp, ZeRO 0-3, every pipeline\n"
    "  schedule and micro-batch count) by predicted step time under the memory per rank and prints\n"
    "  the best K (default 10): layout, step time, compute, exposed communication, bubble, memory\n"
    "  per rank, bytes sent per rank per step. The cost model is stated in weft/plan.h.\n"
    "  --report    adds the Amdahl/Gustafson report of the best layout (serial fraction, speedup,\n"
    "              efficiency, strong and weak scaling curves at 1, 2, 4 ... ranks)\n"
    "  --layout    predicts the one layout given (missing keys: 1, zero 0; schedule and mb\n"
    "              missing = the best one for that layout); schedule: gpipe 1f1b interleaved zbh1\n"
    "              zbh2 zbv dualpipev\n"
    "  --json      machine-readable output (fields dp tp pp ep cp zero schedule microbatches\n"
    "              stages_per_rank step_seconds compute_seconds communication_seconds\n"
    "              bubble_fraction memory_bytes static_bytes activation_bytes communication_bytes fits)\n"
    "  --all       also list layouts that do not fit (fits = no)\n"
    "  --batch and the byte sizes override the model file's train line; --ranks (default all)\n"
    "\n"
    "model file (one line per layer kind, in model order; '#' comments):\n"
    "  layer name=NAME count=C params=P flops=F fwd=S bwd=S act=B out=B experts=E topk=K tp=0|1 kv=B\n"
    "        tp_rep=R tp_ar=A shared=P\n"
    "    count: identical copies in a row; params: parameters (all experts); flops: forward flops per\n"
    "    sample; fwd/bwd: measured seconds per sample (fwd > 0 overrides flops; bwd 0 = 2 x fwd);\n"
    "    act: bytes kept until backward per sample; out: output bytes per sample; experts/topk: an\n"
    "    MoE layer; tp=1: Megatron-splittable; kv: K/V bytes per sample context parallelism moves;\n"
    "    tp_rep: the share (0..1) of a tp-split layer's time every tp rank runs whole (default 0);\n"
    "    tp_ar: all-reduces over tp per micro-batch and direction of a tp=1 layer (0 = 2: a\n"
    "    transformer block; 1: an MLP alone); shared: of an MoE layer's params, those every rank\n"
    "    holds whole (router, shared experts; their gradients are all-reduced over tp each step)\n"
    "  train global_batch=G weight_bytes=2 grad_bytes=2 optimizer_bytes=12      (optional, once)\n"
    "        grad_allreduce_bytes=0\n"
    "    grad_allreduce_bytes: bytes per parameter of an all-reduce of every gradient over its\n"
    "    replicas before ZeRO's reduction (a float64 sum for reproducibility: 8; default none)\n"
    "cluster file (one or more lines):\n"
    "  cluster hosts=H ranks_per_host=R memory=BYTES flops=F intra_bw=B intra_lat=S inter_bw=B inter_lat=S\n"
    "          intra_allreduce=N:S,N:S,... intra_alltoall=N:S,...                  (optional)\n"
    "    bandwidths per rank in bytes/s, latencies in s, flops per second per rank;\n"
    "    intra_allreduce/intra_alltoall: seconds one small collective over N ranks of a host took\n"
    "    with every rank computing (weft-bench --cluster-file measures them); they replace that\n"
    "    collective's latency term within a host (weft/plan.h states the rule)\n"
    "Unknown keys and bad numbers are errors naming file:line and the key.\n"
    "Exit status: 0 done, 1 refused, 2 usage.\n";

struct UsageError {
  std::string why;
};

int failed(const char* what, weft_status_t s) {
  std::fprintf(stderr, "weft-plan: %s: %s: %s\n", what, weft_status_string(s), weft_last_error());
  return kFailed;
}

double number(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || errno || !std::isfinite(d) || d < 0) {
    throw UsageError{flag + " " + v + ": expected a number >= 0"};
  }
  return d;
}

int integer(const std::string& flag, const std::string& v) {
  const double d = number(flag, v);
  if (d != std::floor(d) || d > 1e9) throw UsageError{flag + " " + v + ": expected a whole number"};
  return static_cast<int>(d);
}

const char* const kSchedules[] = {"gpipe", "1f1b", "interleaved", "zbh1", "zbh2", "zbv", "dualpipev"};

weft_schedule_kind_t schedule_named(const std::string& flag, const std::string& name) {
  for (int k = 0; k < WEFT_SCHEDULE_NUM_KINDS; ++k) {
    if (name == kSchedules[k]) return static_cast<weft_schedule_kind_t>(k);
  }
  if (name == "any") return WEFT_SCHEDULE_CUSTOM;
  throw UsageError{flag + ": unknown schedule '" + name + "'; expected gpipe, 1f1b, interleaved, zbh1, zbh2, zbv, " +
                   "dualpipev or any"};
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

weft_plan_layout_t parse_layout(const std::string& text) {
  weft_plan_layout_t l = WEFT_PLAN_LAYOUT_INIT;
  for (const std::string& pair : split(text, ',')) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos) throw UsageError{"--layout: '" + pair + "' is not key=value"};
    const std::string k = pair.substr(0, eq), v = pair.substr(eq + 1), flag = "--layout " + k;
    if (k == "dp") l.dp = integer(flag, v);
    else if (k == "tp") l.tp = integer(flag, v);
    else if (k == "pp") l.pp = integer(flag, v);
    else if (k == "ep") l.ep = integer(flag, v);
    else if (k == "cp") l.cp = integer(flag, v);
    else if (k == "zero") l.zero_stage = integer(flag, v);
    else if (k == "schedule") l.schedule = schedule_named(flag, v);
    else if (k == "mb") l.microbatches = integer(flag, v);
    else if (k == "v") l.stages_per_rank = integer(flag, v);
    else throw UsageError{"--layout: unknown key '" + k + "'; expected dp tp pp ep cp zero schedule mb v"};
  }
  return l;
}

struct Args {
  std::string model, cluster;
  bool report = false, json = false, has_layout = false;
  weft_plan_config_t config = WEFT_PLAN_CONFIG_INIT;
  weft_plan_layout_t layout = WEFT_PLAN_LAYOUT_INIT;
  std::vector<weft_schedule_kind_t> kinds;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError{f + " needs a value"};
      return argv[++i];
    };
    if (f == "--help" || f == "-h") throw UsageError{};
    else if (f == "--model") a.model = value();
    else if (f == "--cluster") a.cluster = value();
    else if (f == "--batch") a.config.global_batch = integer(f, value());
    else if (f == "--ranks") a.config.ranks = integer(f, value());
    else if (f == "--top") a.config.top = integer(f, value());
    else if (f == "--report") a.report = true;
    else if (f == "--json") a.json = true;
    else if (f == "--all") a.config.include_infeasible = 1;
    else if (f == "--max-pp") a.config.max_pp = integer(f, value());
    else if (f == "--max-tp") a.config.max_tp = integer(f, value());
    else if (f == "--max-cp") a.config.max_cp = integer(f, value());
    else if (f == "--max-mb") a.config.max_microbatches = integer(f, value());
    else if (f == "--tp-across-hosts") a.config.tp_across_hosts = 1;
    else if (f == "--overhead") a.config.microbatch_overhead = number(f, value());
    else if (f == "--weight-bytes") a.config.weight_bytes = number(f, value());
    else if (f == "--grad-bytes") a.config.grad_bytes = number(f, value());
    else if (f == "--optimizer-bytes") a.config.optimizer_bytes = number(f, value());
    else if (f == "--grad-allreduce-bytes") a.config.grad_allreduce_bytes = number(f, value());
    else if (f == "--kinds") {
      for (const std::string& k : split(value(), ',')) a.kinds.push_back(schedule_named(f, k));
    } else if (f == "--layout") {
      a.layout = parse_layout(value());
      a.has_layout = true;
    } else {
      throw UsageError{"unknown argument '" + f + "'"};
    }
  }
  if (a.model.empty() || a.cluster.empty()) throw UsageError{"--model and --cluster are required"};
  for (weft_schedule_kind_t k : a.kinds) {
    if (k == WEFT_SCHEDULE_CUSTOM) throw UsageError{"--kinds: 'any' is not a schedule"};
  }
  return a;
}

// The plan's text of one kind, printed to stdout.
int print(weft_plan_t plan, weft_plan_format_kind_t what) {
  size_t length = 0;
  weft_status_t s = weft_plan_format(plan, what, nullptr, 0, &length);
  if (s != WEFT_OK) return failed("format", s);
  std::string text(length + 1, '\0');
  s = weft_plan_format(plan, what, text.data(), text.size(), &length);
  if (s != WEFT_OK) return failed("format", s);
  std::fwrite(text.data(), 1, length, stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  try {
    a = parse(argc, argv);
  } catch (const UsageError& e) {
    if (!e.why.empty()) std::fprintf(stderr, "weft-plan: %s\n", e.why.c_str());
    std::fputs(kUsageText, e.why.empty() ? stdout : stderr);
    return e.why.empty() ? 0 : kUsage;
  }
  if (!a.kinds.empty()) {
    a.config.kinds = a.kinds.data();
    a.config.nkinds = a.kinds.size();
  }
  if (a.has_layout) a.config.layout = &a.layout;
  a.config.scaling = a.report ? 1 : 0;
  weft_plan_t plan = nullptr;
  const weft_status_t s = weft_plan_load(a.model.c_str(), a.cluster.c_str(), &a.config, &plan);
  if (s != WEFT_OK) return failed("plan", s);
  int rc = 0;
  if (a.json) {
    rc = print(plan, WEFT_PLAN_FORMAT_JSON);
  } else {
    rc = print(plan, WEFT_PLAN_FORMAT_TABLE);
    weft_plan_info_t info = WEFT_PLAN_INFO_INIT;
    if (rc == 0 && weft_plan_info(plan, &info) != WEFT_OK) rc = failed("info", WEFT_ERR_INTERNAL);
    if (rc == 0 && a.report && info.count > 0) {
      std::fputs("\n", stdout);
      rc = print(plan, WEFT_PLAN_FORMAT_REPORT);
    }
  }
  weft_plan_destroy(plan);
  return rc;
}
