// The plan as text: a table for people, the Amdahl/Gustafson report, and JSON for programs
// (the validation scripts read it). Numbers in JSON are %.9g so that a script comparing
// predictions with measurements loses nothing a person would notice.
#include <cmath>
#include <cstdio>
#include <string>

#include "core/common/status.h"
#include "core/plan/plan.h"

namespace weft::plan {

namespace {

std::string seconds(double s) {
  if (s >= 100) return format("%.0f s", s);
  if (s >= 1) return format("%.2f s", s);
  if (s >= 1e-3) return format("%.2f ms", s * 1e3);
  return format("%.1f us", s * 1e6);
}

std::string bytes(double b) {
  if (b >= 1024.0 * 1024 * 1024) return format("%.1f GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return format("%.1f MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return format("%.1f KiB", b / 1024.0);
  return format("%.0f B", b);
}

std::string shape(const Layout& x) {
  return format("dp %d tp %d pp %d ep %d cp %d zero %d", x.dp, x.tp, x.pp, x.ep, x.cp, x.zero);
}

// Appends "name": value and the separator (a non-finite value, which the checks rule out, would
// make the JSON unreadable: it is written as 0).
void field(std::string& j, const char* name, double v, const char* after = ", ") {
  j += format("\"%s\": %.9g%s", name, std::isfinite(v) ? v : 0.0, after);
}

}  // namespace

std::string format_table(const Plan& plan) {
  const Options& o = plan.options;
  std::string t = format("%d ranks (%d hosts x %d), global batch %d, memory per rank %s: %zu layouts predicted, "
                         "%zu fit\n",
                         o.ranks, (o.ranks + o.cluster.ranks_per_host - 1) / o.cluster.ranks_per_host,
                         o.cluster.ranks_per_host, o.global_batch, bytes(o.cluster.memory).c_str(), plan.searched,
                         plan.feasible);
  t += format("%-4s %4s %3s %3s %3s %3s %4s %-12s %5s %2s %10s %10s %10s %6s %10s %10s %4s\n", "#", "dp", "tp", "pp",
              "ep", "cp", "zero", "schedule", "m", "v", "step", "compute", "comm", "bubble", "mem/rank", "comm/step",
              "fits");
  for (size_t i = 0; i < plan.layouts.size(); ++i) {
    const Layout& x = plan.layouts[i];
    t += format("%-4zu %4d %3d %3d %3d %3d %4d %-12s %5d %2d %10s %10s %10s %5.1f%% %10s %10s %4s\n", i + 1, x.dp,
                x.tp, x.pp, x.ep, x.cp, x.zero, pipeline::method_name(x.schedule), x.microbatches, x.stages_per_rank,
                seconds(x.step).c_str(), seconds(x.compute).c_str(), seconds(x.communication).c_str(),
                100 * x.bubble, bytes(x.memory).c_str(), bytes(x.communication_bytes).c_str(), x.fits ? "yes" : "no");
  }
  if (plan.layouts.empty()) t += "(no layout fits the memory per rank)\n";
  return t;
}

std::string format_report(const Plan& plan, const Scaling& s) {
  const Layout& b = plan.layouts.front();
  std::string t = format("Amdahl/Gustafson for the best layout (%s, %s, m %d) on %d ranks:\n", shape(b).c_str(),
                         pipeline::method_name(b.schedule), b.microbatches, s.ranks);
  t += format("  predicted step: %s on %d ranks, %s on one rank (memory cap ignored there)\n", seconds(s.step).c_str(),
              s.ranks, seconds(s.one_rank).c_str());
  t += format("  speedup %.1fx, efficiency %.1f%%\n", s.speedup, 100 * s.efficiency);
  t += format("  serial fraction s = (1/speedup - 1/N) / (1 - 1/N) = %.4g: Amdahl's bound 1/s = %s\n",
              s.serial_fraction, s.serial_fraction > 0 ? format("%.0fx", 1 / s.serial_fraction).c_str() : "none");
  t += format("  Gustafson's scaled speedup N - s (N - 1) = %.1f\n", s.gustafson);
  t += "  strong scaling (global batch fixed) and weak scaling (batch grows with the ranks):\n";
  t += format("  %6s %10s %8s %8s %6s | %6s %10s %8s %9s\n", "ranks", "step", "speedup", "Amdahl", "fits", "batch",
              "weak step", "speedup", "Gustafson");
  for (const Scaling::Point& p : s.points) {
    t += format("  %6d %10s %7.1fx %7.1fx %6s | %6d %10s %7.1fx %8.1fx\n", p.ranks, seconds(p.strong).c_str(),
                p.strong_speedup, p.amdahl, p.fits ? "yes" : "no", p.weak_batch, seconds(p.weak).c_str(),
                p.weak_speedup, p.gustafson);
  }
  return t;
}

std::string format_json(const Plan& plan, const Scaling* s) {
  const Options& o = plan.options;
  std::string j = format("{\"ranks\": %d, \"global_batch\": %d, \"searched\": %zu, \"feasible\": %zu, \"layouts\": [",
                         o.ranks, o.global_batch, plan.searched, plan.feasible);
  for (size_t i = 0; i < plan.layouts.size(); ++i) {
    const Layout& x = plan.layouts[i];
    j += i ? ",\n  " : "\n  ";
    j += format("{\"dp\": %d, \"tp\": %d, \"pp\": %d, \"ep\": %d, \"cp\": %d, \"zero\": %d, \"schedule\": \"%s\", "
                "\"microbatches\": %d, \"stages_per_rank\": %d, ",
                x.dp, x.tp, x.pp, x.ep, x.cp, x.zero, pipeline::method_name(x.schedule), x.microbatches,
                x.stages_per_rank);
    field(j, "step_seconds", x.step);
    field(j, "compute_seconds", x.compute);
    field(j, "communication_seconds", x.communication);
    field(j, "bubble_fraction", x.bubble);
    field(j, "memory_bytes", x.memory);
    field(j, "static_bytes", x.static_bytes);
    field(j, "activation_bytes", x.activation_bytes);
    field(j, "communication_bytes", x.communication_bytes);
    j += x.fits ? "\"fits\": true}" : "\"fits\": false}";
  }
  j += "],\n \"scaling\": ";
  if (!s) {
    j += "null}\n";
    return j;
  }
  j += format("{\"ranks\": %d, ", s->ranks);
  field(j, "one_rank_seconds", s->one_rank);
  field(j, "step_seconds", s->step);
  field(j, "speedup", s->speedup);
  field(j, "efficiency", s->efficiency);
  field(j, "serial_fraction", s->serial_fraction);
  field(j, "gustafson_speedup", s->gustafson);
  j += "\"points\": [";
  for (size_t i = 0; i < s->points.size(); ++i) {
    const Scaling::Point& p = s->points[i];
    if (i) j += ", ";
    j += format("{\"ranks\": %d, \"weak_batch\": %d, \"fits\": %s, ", p.ranks, p.weak_batch,
                p.fits ? "true" : "false");
    field(j, "strong_seconds", p.strong);
    field(j, "strong_speedup", p.strong_speedup);
    field(j, "amdahl_speedup", p.amdahl);
    field(j, "weak_seconds", p.weak);
    field(j, "weak_speedup", p.weak_speedup);
    field(j, "gustafson_speedup", p.gustafson, "}");
  }
  j += "]}}\n";
  return j;
}

}  // namespace weft::plan
