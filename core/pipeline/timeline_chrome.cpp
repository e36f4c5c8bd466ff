// timeline_chrome_trace: a timeline as Chrome trace JSON (chrome://tracing, Perfetto), the
// "JSON Object Format": {"traceEvents":[...], "displayTimeUnit":"ms", "otherData":{...}}.
//   - one "M" thread_name event per rank ("rank r", pid 0, tid r) and one process_name event;
//   - one "X" (complete) event per compute action: name = torch's action string ("2F3"),
//     cat = the kind ("F"), pid 0, tid = rank, ts and dur in microseconds, args {stage,
//     microbatch}. Times are multiplied by 1e6: a measured timeline is in seconds; a
//     simulation's cost unit is shown as one second.
// SEND/RECV actions are left out: their posted-to-completed intervals overlap the compute
// around them (receives are posted one action early), and slices on one thread must nest.
// Numbers have a fixed format (3 decimals of a microsecond), so equal timelines give equal text.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "core/pipeline/timeline.h"

namespace weft::pipeline {
namespace {

// Appends every piece to out (std::string's operator+ on a literal trips GCC 12's -Wrestrict).
template <class... T>
void put(std::string& out, const T&... pieces) {
  (out.append(pieces), ...);
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

std::string micros(double seconds) {
  char buf[64];
  const double us = seconds * 1e6;
  std::snprintf(buf, sizeof buf, "%.3f", std::fabs(us) < 5e-4 ? 0.0 : us);
  return buf;
}

}  // namespace

std::string timeline_chrome_trace(const Timeline& t) {
  if (!t.schedule) fail(Status::invalid_argument, "timeline has no schedule to write");
  const Schedule& s = *t.schedule;
  if (t.start.size() != s.actions.size() || t.end.size() != s.actions.size()) {
    fail(Status::invalid_argument, "timeline has %zu start and %zu end lists for %zu ranks", t.start.size(),
         t.end.size(), s.actions.size());
  }
  const int nranks = static_cast<int>(s.actions.size());
  std::string out = "{\"traceEvents\":[\n";
  put(out, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":",
      json_string(std::string("weft pipeline ").append(method_name(s.method))), "}}");
  for (int r = 0; r < nranks; ++r) {
    put(out, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":", std::to_string(r),
        ",\"args\":{\"name\":", json_string(std::string("rank ").append(std::to_string(r))), "}}");
  }
  for (int r = 0; r < nranks; ++r) {
    const std::vector<Action>& list = s.actions[static_cast<size_t>(r)];
    const std::vector<double>& start = t.start[static_cast<size_t>(r)];
    const std::vector<double>& end = t.end[static_cast<size_t>(r)];
    if (start.size() != list.size() || end.size() != list.size()) {
      fail(Status::invalid_argument, "timeline rank %d has %zu start and %zu end times for %zu actions", r,
           start.size(), end.size(), list.size());
    }
    for (size_t k = 0; k < list.size(); ++k) {
      const Action& a = list[k];
      if (!is_compute(a.kind)) continue;
      const double dur = end[k] - start[k];
      put(out, ",\n{\"name\":", json_string(to_string(a)), ",\"cat\":", json_string(kind_name(a.kind)),
          ",\"ph\":\"X\",\"pid\":0,\"tid\":", std::to_string(r), ",\"ts\":", micros(start[k]),
          ",\"dur\":", micros(dur > 0 ? dur : 0), ",\"args\":{\"stage\":", std::to_string(a.stage),
          ",\"microbatch\":", std::to_string(a.microbatch), "}}");
    }
  }
  char bubble[32];
  std::snprintf(bubble, sizeof bubble, "%.6f", t.bubble_fraction());
  put(out, "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"method\":", json_string(method_name(s.method)),
      ",\"ranks\":", std::to_string(s.ranks), ",\"microbatches\":", std::to_string(s.microbatches),
      ",\"stages\":", std::to_string(s.stages), ",\"simulated\":", t.simulated ? "true" : "false",
      ",\"makespan_us\":", micros(t.makespan()), ",\"bubble_fraction\":", bubble, "}\n}\n");
  return out;
}

}  // namespace weft::pipeline
