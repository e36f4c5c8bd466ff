// weft-schedule: generate, check, simulate, convert, draw and tune pipeline schedules from the
// command line, through the C ABI only (weft/pipeline.h).
//
//   weft-schedule show METHOD -p P -m M [-v V] [--reduce-grad] [--costs F,B[,I,W]]
//                 [--svg OUT.svg] [--trace OUT.json] [--csv OUT.csv]
//   every subcommand also takes --plugin PATH[:PATH...] (weft/plugin.h): a SCHEDULE entry's name
//   is then a METHOD, and --cost-model NAME [--mbs N] (show, simulate, tune) times the actions
//   with a COST_MODEL entry instead of --costs / the layer times
//   weft-schedule validate FILE               FILE: torch CSV (*.csv) or FlatBuffers (*.wsched, ...)
//   weft-schedule simulate FILE [--costs F,B[,I,W]] [--svg OUT.svg] [--trace OUT.json]
//   weft-schedule convert IN OUT [--compute-only]   CSV <-> FlatBuffers, by the names' extensions
//   weft-schedule tune -p P --layers L --layer-fwd T --layer-bwd T --batch B [--overhead T]
//                 [--act-bytes N] [--mem-cap N] [--static-bytes N] [--kinds a,b] [--max-v V] [--max-m M]
//
// Exit status: 0 done, 1 a schedule was refused or an operation failed (the library's message
// on stderr), 2 usage.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "weft/weft.h"

namespace {

constexpr int kUsage = 2;
constexpr int kFailed = 1;

const char* const kUsageText =
    "usage: weft-schedule show METHOD -p P -m M [-v V] [--reduce-grad] [--costs F,B[,I,W]]\n"
    "                     [--svg OUT.svg] [--trace OUT.json] [--csv OUT.csv]\n"
    "         generate a schedule, validate it, print each rank's actions, simulate it\n"
    "       weft-schedule validate FILE\n"
    "         load a schedule (torch CSV when FILE ends in .csv, else weft's FlatBuffers file)\n"
    "         and validate it: exit 0 when valid, 1 with the validator's message\n"
    "       weft-schedule simulate FILE [--costs F,B[,I,W]] [--svg OUT.svg] [--trace OUT.json]\n"
    "       weft-schedule convert IN OUT [--compute-only]\n"
    "         CSV <-> FlatBuffers by extension (.csv, else FlatBuffers); --compute-only writes\n"
    "         F, B, I and W only into a CSV\n"
    "       weft-schedule tune -p P --layers L --layer-fwd T --layer-bwd T --batch B [--overhead T]\n"
    "                     [--act-bytes N] [--mem-cap N] [--static-bytes N] [--kinds a,b]\n"
    "                     [--max-v V] [--max-m M]\n"
    "         simulate every (method, micro-batches, virtual stages) and print them, best first\n"
    "\n"
    "       any subcommand: [--plugin PATH[:PATH...]]; show, simulate, tune: [--cost-model NAME [--mbs N]]\n"
    "         load plugins (weft_plugin_load): their SCHEDULE entries are METHODs (and --kinds\n"
    "         names); --cost-model times every action with a COST_MODEL entry (micro-batch size\n"
    "         --mbs, default 1; tune: global batch / m) instead of --costs or the layer times\n"
    "\n"
    "METHOD: gpipe, 1f1b, interleaved, zbh1, zbh2, zbv, dualpipev, or a plugin's SCHEDULE entry.\n"
    "--costs: per stage times of forward F and backward B (I and W: B/2 each unless given);\n"
    "  default 1,2. Sizes N take an optional K, M, G suffix (KiB, MiB, GiB).\n"
    "Exit status: 0 done, 1 refused or failed, 2 usage.\n";

int usage(const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "weft-schedule: %s\n", why.c_str());
  std::fputs(kUsageText, stderr);
  return kUsage;
}

int failed(const char* what, weft_status_t s) {
  std::fprintf(stderr, "weft-schedule: %s: %s: %s\n", what, weft_status_string(s), weft_last_error());
  return kFailed;
}

// Joins text pieces (std::string's operator+ on a literal trips GCC 12's -Wrestrict).
template <class... T>
std::string cat(const T&... parts) {
  std::string s;
  (s.append(parts), ...);
  return s;
}

// Thrown for a bad command line; main() prints it with the usage text.
struct UsageError {
  std::string why;
};

struct MethodName {
  const char* name;
  weft_schedule_kind_t kind;
};
const MethodName kMethods[] = {
    {"gpipe", WEFT_SCHEDULE_GPIPE},
    {"1f1b", WEFT_SCHEDULE_ONE_F_ONE_B},
    {"interleaved", WEFT_SCHEDULE_INTERLEAVED_1F1B},
    {"zbh1", WEFT_SCHEDULE_ZB_H1},
    {"zbh2", WEFT_SCHEDULE_ZB_H2},
    {"zbv", WEFT_SCHEDULE_ZB_V},
    {"dualpipev", WEFT_SCHEDULE_DUALPIPE_V},
};

// The entries of the plugins --plugin loaded (the library keeps them for the process).
struct PluginEntry {
  std::string name;
  weft_plugin_kind_t kind;
  int id;
};
std::vector<PluginEntry> g_entries;

// --plugin PATH[:PATH...]: loads each (in order, as every rank of a run would) and lists its
// SCHEDULE and COST_MODEL entries. Prints the failure and returns false.
bool load_plugins(const std::string& paths) {
  size_t from = 0;
  for (;;) {
    const size_t colon = paths.find(':', from);
    const std::string path = paths.substr(from, colon == std::string::npos ? std::string::npos : colon - from);
    if (path.empty()) throw UsageError{"--plugin has an empty path"};
    weft_plugin_t plugin = nullptr;
    if (weft_status_t st = weft_plugin_load(path.c_str(), &plugin); st != WEFT_OK) {
      return failed(cat("--plugin ", path).c_str(), st), false;
    }
    weft_plugin_info_t info = WEFT_PLUGIN_INFO_INIT;
    weft_plugin_info(plugin, &info);
    for (size_t i = 0; i < info.nentries; ++i) {
      weft_plugin_entry_t e = WEFT_PLUGIN_ENTRY_INIT;
      if (weft_plugin_entry(plugin, i, &e) != WEFT_OK) continue;
      if (e.kind == WEFT_PLUGIN_SCHEDULE || e.kind == WEFT_PLUGIN_COST_MODEL) g_entries.push_back({e.name, e.kind, e.id});
    }
    // The handle only names the plugin; its extensions stay registered without it.
    weft_plugin_destroy(plugin);
    if (colon == std::string::npos) return true;
    from = colon + 1;
  }
}

int plugin_entry_id(const std::string& name, weft_plugin_kind_t kind) {
  for (const PluginEntry& e : g_entries) {
    if (e.kind == kind && e.name == name) return e.id;
  }
  return -1;
}

weft_schedule_kind_t method_kind(const std::string& name) {
  for (const MethodName& m : kMethods) {
    if (name == m.name) return m.kind;
  }
  if (const int id = plugin_entry_id(name, WEFT_PLUGIN_SCHEDULE); id >= 0) return static_cast<weft_schedule_kind_t>(id);
  throw UsageError{cat("unknown method '", name,
                       "' (gpipe, 1f1b, interleaved, zbh1, zbh2, zbv, dualpipev, or a SCHEDULE entry of a --plugin)")};
}

// A plugin kind with no loaded plugin (a file saved with one) prints as "plugin-<id>".
std::string method_text(weft_schedule_kind_t kind) {
  for (const MethodName& m : kMethods) {
    if (kind == m.kind) return m.name;
  }
  for (const PluginEntry& e : g_entries) {
    if (e.kind == WEFT_PLUGIN_SCHEDULE && e.id == static_cast<int>(kind)) return e.name;
  }
  if (static_cast<int>(kind) >= WEFT_PLUGIN_ID_BASE) return cat("plugin-", std::to_string(static_cast<int>(kind)));
  return "custom";
}

const char* const kKindNames[] = {"F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "REDUCE_GRAD"};

// torch's action string, as weft/pipeline.h describes it.
std::string action_text(const weft_action_t& a) {
  const int k = static_cast<int>(a.kind);
  std::string s = std::to_string(a.stage);
  s += k >= 0 && k < 9 ? kKindNames[k] : "?";
  if (a.kind != WEFT_ACTION_REDUCE_GRAD) s += std::to_string(a.microbatch);
  return s;
}

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// ---------------------------------------------------------------- the command line

// Options and positional arguments of one subcommand; options not in `valued`/`flags` are
// refused, so a typo never passes silently.
struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> values;
  std::map<std::string, bool> flags;

  bool has(const std::string& o) const { return values.count(o) != 0; }
  bool flag(const std::string& o) const { return flags.count(o) != 0; }
  std::string get(const std::string& o) const { return values.at(o); }
};

Args parse(int argc, char** argv, const std::vector<std::string>& valued, const std::vector<std::string>& flags) {
  Args a;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-') {
      a.positional.push_back(arg);
      continue;
    }
    std::string value;
    bool has_value = false;
    if (const size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    bool known = false;
    for (const std::string& v : valued) {
      if (arg != v) continue;
      known = true;
      if (!has_value) {
        if (i + 1 >= argc) throw UsageError{cat("option ", arg, " needs a value")};
        value = argv[++i];
      }
      if (a.values.count(arg)) throw UsageError{cat("option ", arg, " given twice")};
      a.values[arg] = value;
    }
    for (const std::string& f : flags) {
      if (arg != f) continue;
      if (has_value) throw UsageError{cat("option ", arg, " takes no value")};
      known = true;
      a.flags[arg] = true;
    }
    if (!known) throw UsageError{cat("unknown option '", arg, "' for '", argv[1], "'")};
  }
  return a;
}

long parse_int(const std::string& what, const std::string& text, long lo, long hi) {
  errno = 0;
  char* endp = nullptr;
  const long v = std::strtol(text.c_str(), &endp, 10);
  if (text.empty() || *endp != '\0' || errno != 0 || v < lo || v > hi) {
    throw UsageError{
        cat(what, " must be an integer in [", std::to_string(lo), ", ", std::to_string(hi), "], not '", text, "'")};
  }
  return v;
}

double parse_double(const std::string& what, const std::string& text) {
  errno = 0;
  char* endp = nullptr;
  const double v = std::strtod(text.c_str(), &endp);
  if (text.empty() || *endp != '\0' || errno != 0 || !std::isfinite(v) || v < 0) {
    throw UsageError{cat(what, " must be a finite number >= 0, not '", text, "'")};
  }
  return v;
}

// A byte count with an optional binary suffix: 4096, 64K, 1.5M, 2G.
double parse_bytes(const std::string& what, const std::string& text) {
  double scale = 1;
  std::string digits = text;
  if (!digits.empty()) {
    const char c = digits.back();
    if (c == 'K' || c == 'k') scale = 1024.0;
    if (c == 'M' || c == 'm') scale = 1024.0 * 1024;
    if (c == 'G' || c == 'g') scale = 1024.0 * 1024 * 1024;
    if (scale != 1) digits.pop_back();
  }
  return parse_double(what, digits) * scale;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  size_t from = 0;
  for (;;) {
    const size_t comma = text.find(',', from);
    parts.push_back(text.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
    if (comma == std::string::npos) return parts;
    from = comma + 1;
  }
}

// ---------------------------------------------------------------- schedules and files

// Owns a handle; the library accepts NULL in destroy.
struct Schedule {
  weft_schedule_t h = nullptr;
  ~Schedule() { weft_schedule_destroy(h); }
};
struct Timeline {
  weft_timeline_t h = nullptr;
  ~Timeline() { weft_timeline_destroy(h); }
};

bool read_file(const std::string& path, std::string* text) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    std::fprintf(stderr, "weft-schedule: cannot open %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text->append(buf, n);
  const bool ok = !std::ferror(f);
  if (!ok) std::fprintf(stderr, "weft-schedule: cannot read %s: %s\n", path.c_str(), std::strerror(errno));
  std::fclose(f);
  return ok;
}

bool write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    std::fprintf(stderr, "weft-schedule: cannot open %s for writing: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int err = errno;
  if (std::fclose(f) != 0 || !ok) {
    std::fprintf(stderr, "weft-schedule: cannot write %s: %s\n", path.c_str(), std::strerror(ok ? errno : err));
    return false;
  }
  return true;
}

// Loads a CSV (by extension) or a FlatBuffers file; prints the failure and returns false.
bool load(const std::string& path, Schedule* s) {
  if (ends_with(path, ".csv")) {
    std::string text;
    if (!read_file(path, &text)) return false;
    if (weft_status_t st = weft_schedule_from_csv(text.data(), text.size(), &s->h); st != WEFT_OK) {
      return failed(cat("cannot read ", path).c_str(), st), false;
    }
    return true;
  }
  if (weft_status_t st = weft_schedule_load(path.c_str(), &s->h); st != WEFT_OK) {
    return failed(cat("cannot load ", path).c_str(), st), false;
  }
  return true;
}

bool to_csv(weft_schedule_t s, weft_csv_format_t format, std::string* text) {
  size_t length = 0;
  if (weft_status_t st = weft_schedule_to_csv(s, format, nullptr, 0, &length); st != WEFT_OK) {
    return failed("CSV", st), false;
  }
  std::vector<char> buf(length + 1);
  if (weft_status_t st = weft_schedule_to_csv(s, format, buf.data(), buf.size(), &length); st != WEFT_OK) {
    return failed("CSV", st), false;
  }
  text->assign(buf.data(), length);
  return true;
}

weft_schedule_info_t info_of(weft_schedule_t s) {
  weft_schedule_info_t info = WEFT_SCHEDULE_INFO_INIT;
  weft_schedule_info(s, &info);
  return info;
}

void print_summary(const char* what, weft_schedule_t s) {
  const weft_schedule_info_t i = info_of(s);
  std::printf("%s: %s p=%d S=%d m=%d v=%d\n", what, method_text(i.kind).c_str(), i.ranks, i.stages, i.microbatches,
              i.stages_per_rank);
}

void print_actions(weft_schedule_t s) {
  const weft_schedule_info_t info = info_of(s);
  for (int r = 0; r < info.ranks; ++r) {
    const weft_action_t* actions = nullptr;
    size_t count = 0;
    weft_schedule_actions(s, r, &actions, &count);
    std::printf("rank %d (%zu actions):", r, count);
    for (size_t k = 0; k < count; ++k) std::printf(" %s", action_text(actions[k]).c_str());
    std::printf("\n");
  }
}

// ---------------------------------------------------------------- simulation

struct Outputs {
  std::string svg, trace;
};

// --cost-model NAME: a COST_MODEL entry of a --plugin (0 when not given).
int parse_cost_model(const Args& a) {
  if (!a.has("--cost-model")) {
    if (a.has("--mbs")) throw UsageError{"--mbs applies to --cost-model"};
    return 0;
  }
  const int id = plugin_entry_id(a.get("--cost-model"), WEFT_PLUGIN_COST_MODEL);
  if (id < 0) throw UsageError{cat("--cost-model '", a.get("--cost-model"), "' is no COST_MODEL entry of a --plugin")};
  return id;
}

// --costs "F,B[,I,W]" (default "1,2"), parsed before any work is done: 2 or 4 numbers.
std::vector<double> parse_costs(const Args& a) {
  const std::string text = a.has("--costs") ? a.get("--costs") : "1,2";
  const std::vector<std::string> parts = split_commas(text);
  if (parts.size() != 2 && parts.size() != 4) throw UsageError{cat("--costs takes F,B or F,B,I,W, not '", text, "'")};
  std::vector<double> c;
  for (const std::string& p : parts) c.push_back(parse_double("--costs entry", p));
  return c;
}

// Simulates with the same costs on every stage (or a cost model's, cost_model > 0, with
// micro-batch size mbs), prints the totals and writes the pictures.
int simulate_and_report(weft_schedule_t s, const std::vector<double>& c, const Outputs& out, int cost_model = 0,
                        int mbs = 1) {
  const bool split = c.size() == 4;  // I and W given
  const int stages = info_of(s).stages;
  const size_t n = static_cast<size_t>(stages);
  std::vector<double> f(n, c[0]), b(n, c[1]), bi(n, split ? c[2] : 0), bw(n, split ? c[3] : 0);
  weft_pipeline_costs_t costs = WEFT_PIPELINE_COSTS_INIT;
  costs.nstages = stages;
  costs.forward = f.data();
  costs.backward = b.data();
  if (split) {
    costs.backward_input = bi.data();
    costs.backward_weight = bw.data();
  }
  costs.cost_model = cost_model;
  costs.microbatch_size = mbs;
  Timeline t;
  if (weft_status_t st = weft_schedule_simulate(s, &costs, &t.h); st != WEFT_OK) return failed("simulate", st);
  weft_timeline_info_t ti = WEFT_TIMELINE_INFO_INIT;
  weft_timeline_info(t.h, &ti);
  if (cost_model) {
    std::string name = std::to_string(cost_model);
    for (const PluginEntry& e : g_entries) {
      if (e.kind == WEFT_PLUGIN_COST_MODEL && e.id == cost_model) name = e.name;
    }
    std::printf("costs: cost model %s, micro-batch size %d\n", name.c_str(), mbs);
  } else if (split) {
    std::printf("costs per stage: F=%g B=%g I=%g W=%g\n", c[0], c[1], c[2], c[3]);
  } else {
    std::printf("costs per stage: F=%g B=%g (I=W=%g)\n", c[0], c[1], c[1] / 2);
  }
  std::printf("makespan %g\n", ti.makespan);
  std::printf("bubble %.2f%%\n", 100.0 * ti.bubble_fraction);
  std::printf("%-6s %12s %12s %16s\n", "rank", "busy", "idle", "peak_activations");
  for (int r = 0; r < ti.ranks; ++r) {
    const double *start = nullptr, *end = nullptr;
    size_t count = 0;
    weft_rank_stats_t rs = WEFT_RANK_STATS_INIT;
    if (weft_status_t st = weft_timeline_rank(t.h, r, &start, &end, &count, &rs); st != WEFT_OK) {
      return failed("timeline", st);
    }
    std::printf("%-6d %12g %12g %16d\n", r, rs.busy, rs.idle, rs.peak_activations);
  }
  if (!out.svg.empty()) {
    if (weft_status_t st = weft_timeline_write(t.h, WEFT_TIMELINE_SVG, out.svg.c_str()); st != WEFT_OK) {
      return failed("--svg", st);
    }
    std::printf("wrote %s\n", out.svg.c_str());
  }
  if (!out.trace.empty()) {
    if (weft_status_t st = weft_timeline_write(t.h, WEFT_TIMELINE_CHROME_TRACE, out.trace.c_str()); st != WEFT_OK) {
      return failed("--trace", st);
    }
    std::printf("wrote %s\n", out.trace.c_str());
  }
  return 0;
}

// ---------------------------------------------------------------- subcommands

int cmd_show(int argc, char** argv) {
  const Args a = parse(argc, argv,
                       {"-p", "-m", "-v", "--costs", "--svg", "--trace", "--csv", "--plugin", "--cost-model", "--mbs"},
                       {"--reduce-grad"});
  if (a.positional.size() != 1) throw UsageError{"show takes one METHOD"};
  if (a.has("--plugin") && !load_plugins(a.get("--plugin"))) return kFailed;
  const int cost_model = parse_cost_model(a);
  const int mbs = a.has("--mbs") ? static_cast<int>(parse_int("--mbs", a.get("--mbs"), 1, 1 << 24)) : 1;
  if (!a.has("-p") || !a.has("-m")) throw UsageError{"show needs -p RANKS and -m MICROBATCHES"};
  const weft_schedule_kind_t kind = method_kind(a.positional[0]);
  weft_schedule_config_t cfg = WEFT_SCHEDULE_CONFIG_INIT;
  cfg.ranks = static_cast<int>(parse_int("-p", a.get("-p"), 1, 1 << 20));
  cfg.microbatches = static_cast<int>(parse_int("-m", a.get("-m"), 1, 1 << 20));
  if (a.has("-v")) cfg.stages_per_rank = static_cast<int>(parse_int("-v", a.get("-v"), 1, 1 << 10));
  cfg.reduce_grad = a.flag("--reduce-grad") ? 1 : 0;
  const std::vector<double> costs = parse_costs(a);

  Schedule s;
  if (weft_status_t st = weft_schedule_generate(kind, &cfg, &s.h); st != WEFT_OK) return failed("generate", st);
  if (weft_status_t st = weft_schedule_validate(s.h); st != WEFT_OK) return failed("validate", st);
  print_summary("schedule", s.h);
  std::printf("valid\n");
  print_actions(s.h);
  if (a.has("--csv")) {
    std::string text;
    if (!to_csv(s.h, WEFT_CSV_COMPUTE_COMMS, &text) || !write_file(a.get("--csv"), text)) return kFailed;
    std::printf("wrote %s\n", a.get("--csv").c_str());
  }
  return simulate_and_report(s.h, costs,
                             {a.has("--svg") ? a.get("--svg") : "", a.has("--trace") ? a.get("--trace") : ""},
                             cost_model, mbs);
}

int cmd_validate(int argc, char** argv) {
  const Args a = parse(argc, argv, {"--plugin"}, {});
  if (a.positional.size() != 1) throw UsageError{"validate takes one FILE"};
  if (a.has("--plugin") && !load_plugins(a.get("--plugin"))) return kFailed;
  Schedule s;
  if (!load(a.positional[0], &s)) return kFailed;
  if (weft_status_t st = weft_schedule_validate(s.h); st != WEFT_OK) {
    return failed(cat("invalid schedule ", a.positional[0]).c_str(), st);
  }
  print_summary(a.positional[0].c_str(), s.h);
  std::printf("valid\n");
  return 0;
}

int cmd_simulate(int argc, char** argv) {
  const Args a = parse(argc, argv, {"--costs", "--svg", "--trace", "--plugin", "--cost-model", "--mbs"}, {});
  if (a.positional.size() != 1) throw UsageError{"simulate takes one FILE"};
  if (a.has("--plugin") && !load_plugins(a.get("--plugin"))) return kFailed;
  const int cost_model = parse_cost_model(a);
  const int mbs = a.has("--mbs") ? static_cast<int>(parse_int("--mbs", a.get("--mbs"), 1, 1 << 24)) : 1;
  const std::vector<double> costs = parse_costs(a);
  Schedule s;
  if (!load(a.positional[0], &s)) return kFailed;
  print_summary(a.positional[0].c_str(), s.h);
  return simulate_and_report(s.h, costs,
                             {a.has("--svg") ? a.get("--svg") : "", a.has("--trace") ? a.get("--trace") : ""},
                             cost_model, mbs);
}

int cmd_convert(int argc, char** argv) {
  const Args a = parse(argc, argv, {"--plugin"}, {"--compute-only"});
  if (a.positional.size() != 2) throw UsageError{"convert takes IN and OUT"};
  if (a.has("--plugin") && !load_plugins(a.get("--plugin"))) return kFailed;
  const std::string& out = a.positional[1];
  const bool csv_out = ends_with(out, ".csv");
  if (a.flag("--compute-only") && !csv_out) throw UsageError{"--compute-only applies to a CSV output (OUT.csv)"};
  Schedule s;
  if (!load(a.positional[0], &s)) return kFailed;
  if (csv_out) {
    std::string text;
    const weft_csv_format_t format = a.flag("--compute-only") ? WEFT_CSV_COMPUTE_ONLY : WEFT_CSV_COMPUTE_COMMS;
    if (!to_csv(s.h, format, &text) || !write_file(out, text)) return kFailed;
  } else if (weft_status_t st = weft_schedule_save(s.h, out.c_str()); st != WEFT_OK) {
    return failed(cat("cannot save ", out).c_str(), st);
  }
  print_summary(out.c_str(), s.h);
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

int cmd_tune(int argc, char** argv) {
  const Args a = parse(argc, argv,
                       {"-p", "--layers", "--layer-fwd", "--layer-bwd", "--batch", "--overhead", "--act-bytes",
                        "--mem-cap", "--static-bytes", "--kinds", "--max-v", "--max-m", "--plugin", "--cost-model"},
                       {});
  if (!a.positional.empty()) throw UsageError{cat("tune takes no positional argument ('", a.positional[0], "')")};
  if (a.has("--plugin") && !load_plugins(a.get("--plugin"))) return kFailed;
  weft_tune_config_t cfg = WEFT_TUNE_CONFIG_INIT;
  cfg.cost_model = parse_cost_model(a);
  // With a cost model the layer times are optional (weft_tune_config_t.cost_model).
  for (const char* o : {"-p", "--layers", "--layer-fwd", "--layer-bwd", "--batch"}) {
    if (!a.has(o) && (std::string(o) == "-p" || std::string(o) == "--batch" || !cfg.cost_model)) {
      throw UsageError{std::string("tune needs ").append(o)};
    }
  }
  cfg.ranks = static_cast<int>(parse_int("-p", a.get("-p"), 1, 1 << 20));
  cfg.layers = a.has("--layers") ? static_cast<int>(parse_int("--layers", a.get("--layers"), 1, 1 << 20)) : 0;
  const std::vector<double> fwd(static_cast<size_t>(cfg.layers),
                                a.has("--layer-fwd") ? parse_double("--layer-fwd", a.get("--layer-fwd")) : 0.0);
  const std::vector<double> bwd(static_cast<size_t>(cfg.layers),
                                a.has("--layer-bwd") ? parse_double("--layer-bwd", a.get("--layer-bwd")) : 0.0);
  cfg.layer_forward = fwd.data();
  cfg.layer_backward = bwd.data();
  cfg.global_batch = static_cast<int>(parse_int("--batch", a.get("--batch"), 1, 1 << 24));
  if (a.has("--overhead")) cfg.microbatch_overhead = parse_double("--overhead", a.get("--overhead"));
  if (a.has("--act-bytes")) cfg.activation_bytes_per_sample = parse_bytes("--act-bytes", a.get("--act-bytes"));
  if (a.has("--mem-cap")) cfg.memory_cap = parse_bytes("--mem-cap", a.get("--mem-cap"));
  if (a.has("--static-bytes")) cfg.static_bytes = parse_bytes("--static-bytes", a.get("--static-bytes"));
  if (a.has("--max-v")) cfg.max_stages_per_rank = static_cast<int>(parse_int("--max-v", a.get("--max-v"), 1, 64));
  if (a.has("--max-m")) cfg.max_microbatches = static_cast<int>(parse_int("--max-m", a.get("--max-m"), 1, 1 << 24));
  std::vector<weft_schedule_kind_t> kinds;
  if (a.has("--kinds")) {
    for (const std::string& k : split_commas(a.get("--kinds"))) kinds.push_back(method_kind(k));
    cfg.kinds = kinds.data();
    cfg.nkinds = kinds.size();
  }

  size_t count = 0;
  int best = -1;
  if (weft_status_t st = weft_schedule_tune(&cfg, nullptr, 0, &count, &best); st != WEFT_OK) return failed("tune", st);
  std::vector<weft_tune_candidate_t> cands(count);
  if (weft_status_t st = weft_schedule_tune(&cfg, cands.data(), cands.size(), &count, &best); st != WEFT_OK) {
    return failed("tune", st);
  }
  cands.resize(std::min(count, cands.size()));
  std::printf("%-12s %6s %3s %8s %14s %8s %12s %5s\n", "kind", "m", "v", "mb_size", "step_time", "bubble%", "peak_MiB",
              "fits");
  for (const weft_tune_candidate_t& c : cands) {
    std::printf("%-12s %6d %3d %8d %14g %8.2f %12.3f %5s\n", method_text(c.kind).c_str(), c.microbatches, c.stages_per_rank,
                c.microbatch_size, c.step_time, 100.0 * c.bubble_fraction, c.peak_bytes / (1024.0 * 1024.0),
                c.fits ? "yes" : "no");
  }
  std::printf("%zu candidates\n", cands.size());
  if (best < 0 || static_cast<size_t>(best) >= cands.size()) {
    std::fprintf(stderr, "weft-schedule: tune: no candidate fits under --mem-cap\n");
    return kFailed;
  }
  const weft_tune_candidate_t& b = cands[static_cast<size_t>(best)];
  std::printf("best: %s m=%d v=%d micro-batch size %d step time %g bubble %.2f%% peak %.3f MiB\n",
              method_text(b.kind).c_str(),
              b.microbatches, b.stages_per_rank, b.microbatch_size, b.step_time, 100.0 * b.bubble_fraction,
              b.peak_bytes / (1024.0 * 1024.0));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage("");
  const std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    std::fputs(kUsageText, stdout);
    return 0;
  }
  try {
    if (cmd == "show") return cmd_show(argc, argv);
    if (cmd == "validate") return cmd_validate(argc, argv);
    if (cmd == "simulate") return cmd_simulate(argc, argv);
    if (cmd == "convert") return cmd_convert(argc, argv);
    if (cmd == "tune") return cmd_tune(argc, argv);
  } catch (const UsageError& e) {
    return usage(std::string(cmd).append(": ").append(e.why));
  }
  return usage(cat("unknown command '", cmd, "'"));
}
