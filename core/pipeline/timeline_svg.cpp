// timeline_svg: a timeline as an SVG picture. Ranks are rows, time runs left to right; each
// compute action (F, B, I, W, REDUCE_GRAD) is a box in its kind's colour, labelled with its
// micro-batch ("R" for REDUCE_GRAD; no label on a box under 6 pixels wide), in a lighter shade of
// that colour for each later stage chunk a rank holds (an interleaved or V-shaped placement).
// SEND/RECV actions are thin grey bars along the bottom of their row from posting to completion
// (a square dot when both are at one time), so waiting for data shows; idle time is empty space.
// Each box and bar carries a <title> (the action and its times) that viewers show on hover.
//
// Geometry (tests/unit/test_pipeline_pictures.cpp relies on it):
//   x(t) = kLeft + t * scale, where scale (pixels per time unit, stated in the root element's
//   data-px-per-unit) = max(kPlotWidth / makespan, min(kMinBoxWidth / shortest compute action,
//   kMaxPlotWidth / makespan)): at least kPlotWidth wide, wider (up to kMaxPlotWidth) so that the
//   shortest box with a positive duration is kMinBoxWidth pixels wide and keeps a readable label.
//   Row r's boxes span y in [kTop + r*kRowHeight + 2, +kBoxHeight].
// Every number is written with a fixed number of decimals, so equal timelines give equal text.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "core/pipeline/timeline.h"

namespace weft::pipeline {
namespace {

constexpr double kLeft = 70;  // room for the row labels
constexpr double kTop = 44;   // room for the title
constexpr double kRowHeight = 30;
constexpr double kBoxHeight = 22;
constexpr double kPlotWidth = 960;
constexpr double kMaxPlotWidth = 8000;
constexpr double kMinBoxWidth = 16;
constexpr double kMinLabelWidth = 6;  // narrower boxes get no label
constexpr double kRight = 30;
constexpr double kMinWidth = 920;  // the legend's room

// Appends every piece to out (std::string's operator+ on a literal trips GCC 12's -Wrestrict).
template <class... T>
void put(std::string& out, const T&... pieces) {
  (out.append(pieces), ...);
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  std::string s = buf;
  return s == "-0.00" ? "0.00" : s;
}

// A time as people read it (ticks, title): up to 6 significant digits, no float noise.
std::string time_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", std::fabs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '"') out += "&quot;";
    else if (c == '\'') out += "&apos;";
    else out += c;
  }
  return out;
}

struct Rgb {
  int r, g, b;
};

Rgb base_colour(Kind k) {
  switch (k) {
    case Kind::F: return {0x4c, 0x78, 0xa8};            // blue
    case Kind::B: return {0x54, 0xa2, 0x4b};            // green
    case Kind::I: return {0xf5, 0x85, 0x18};            // orange
    case Kind::W: return {0xb2, 0x79, 0xa2};            // purple
    case Kind::REDUCE_GRAD: return {0xe4, 0x57, 0x56};  // red
    default: return {0x99, 0x99, 0x99};
  }
}

// Chunk 0 of n is the base colour; later chunks are mixed with white, up to 55%, so that the
// (black) label stays readable on every shade.
std::string shade(Kind k, int chunk, int nchunks) {
  const Rgb c = base_colour(k);
  const double t = nchunks > 1 ? 0.55 * chunk / (nchunks - 1) : 0.0;
  auto mix = [t](int v) { return static_cast<int>(std::lround(v + (255 - v) * t)); };
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", mix(c.r), mix(c.g), mix(c.b));
  return buf;
}

void check_shape(const Timeline& t) {
  if (!t.schedule) fail(Status::invalid_argument, "timeline has no schedule to draw");
  const Schedule& s = *t.schedule;
  if (t.start.size() != s.actions.size() || t.end.size() != s.actions.size()) {
    fail(Status::invalid_argument, "timeline has %zu start and %zu end lists for %zu ranks", t.start.size(),
         t.end.size(), s.actions.size());
  }
  for (size_t r = 0; r < s.actions.size(); ++r) {
    if (t.start[r].size() != s.actions[r].size() || t.end[r].size() != s.actions[r].size()) {
      fail(Status::invalid_argument, "timeline rank %zu has %zu start and %zu end times for %zu actions", r,
           t.start[r].size(), t.end[r].size(), s.actions[r].size());
    }
  }
}

double pixels_per_unit(const Timeline& t, double makespan) {
  if (!(makespan > 0)) return 1;
  double shortest = 0;
  for (size_t r = 0; r < t.schedule->actions.size(); ++r) {
    for (size_t k = 0; k < t.schedule->actions[r].size(); ++k) {
      const double d = t.end[r][k] - t.start[r][k];
      if (is_compute(t.schedule->actions[r][k].kind) && d > 0 && (shortest == 0 || d < shortest)) shortest = d;
    }
  }
  const double fit = kPlotWidth / makespan;
  if (shortest == 0) return fit;
  return std::max(fit, std::min(kMinBoxWidth / shortest, kMaxPlotWidth / makespan));
}

// 1, 2 or 5 times a power of ten, the smallest giving at most 10 intervals.
double tick_step(double makespan) {
  const double raw = makespan / 10;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * p >= raw * (1 - 1e-9)) return m * p;
  }
  return 10 * p;
}

void append_title(std::string& out, const Timeline& t, double makespan, double width) {
  const Schedule& s = *t.schedule;
  char bubble[64];
  std::snprintf(bubble, sizeof bubble, ", bubble %.1f%%", 100.0 * t.bubble_fraction());
  std::string title;
  put(title, method_name(s.method), ", p=", std::to_string(s.ranks), " m=", std::to_string(s.microbatches),
      " v=", std::to_string(s.stages_per_rank()), ", makespan ", time_text(makespan), t.simulated ? "" : " s",
      bubble, t.simulated ? " (simulated)" : " (measured)");
  put(out, "<text class=\"title\" x=\"", num(width / 2), "\" y=\"20\" text-anchor=\"middle\">", xml_escape(title),
      "</text>\n");
}

void append_axis(std::string& out, const Timeline& t, double makespan, double scale, double axis_y) {
  const std::string y0 = num(axis_y), y1 = num(axis_y + 5), ytext = num(axis_y + 17);
  put(out, "<g class=\"axis\">\n<line x1=\"", num(kLeft), "\" y1=\"", y0, "\" x2=\"", num(kLeft + makespan * scale),
      "\" y2=\"", y0, "\"/>\n");
  if (makespan > 0) {
    const double step = tick_step(makespan);
    for (long k = 0;; ++k) {
      const double v = static_cast<double>(k) * step;
      if (v > makespan * (1 + 1e-9)) break;
      const std::string x = num(kLeft + v * scale);
      put(out, "<line x1=\"", x, "\" y1=\"", y0, "\" x2=\"", x, "\" y2=\"", y1, "\"/>\n");
      put(out, "<text class=\"tick\" x=\"", x, "\" y=\"", ytext, "\" text-anchor=\"middle\">", time_text(v),
          "</text>\n");
    }
  }
  // A measured timeline is in seconds; a simulation in the unit its costs were given in.
  put(out, "<text class=\"tick\" x=\"", num(kLeft - 8), "\" y=\"", ytext, "\" text-anchor=\"end\">",
      t.simulated ? "time" : "time (s)", "</text>\n</g>\n");
}

void append_legend(std::string& out, double y, bool chunks) {
  struct Entry {
    Kind kind;
    const char* text;
  };
  const Entry entries[] = {{Kind::F, "F forward"},
                           {Kind::B, "B backward"},
                           {Kind::I, "I backward (input)"},
                           {Kind::W, "W backward (weight)"},
                           {Kind::REDUCE_GRAD, "REDUCE_GRAD"}};
  put(out, "<g class=\"legend\">\n");
  double x = kLeft;
  for (const Entry& e : entries) {
    put(out, "<rect class=\"key\" x=\"", num(x), "\" y=\"", num(y), "\" width=\"14\" height=\"14\" fill=\"",
        shade(e.kind, 0, 1), "\"/>\n");
    put(out, "<text x=\"", num(x + 18), "\" y=\"", num(y + 11), "\">", xml_escape(e.text), "</text>\n");
    x += 150;
  }
  const double y2 = y + 22;
  put(out, "<line class=\"comm\" x1=\"", num(kLeft), "\" y1=\"", num(y2 + 7), "\" x2=\"", num(kLeft + 14),
      "\" y2=\"", num(y2 + 7), "\"/>\n");
  std::string note = "grey bar: SEND/RECV, posted -> completed;  label <i>: micro-batch i, R: REDUCE_GRAD";
  if (chunks) note += ";  lighter: a later stage chunk of the rank";
  put(out, "<text x=\"", num(kLeft + 18), "\" y=\"", num(y2 + 11), "\">", xml_escape(note), "</text>\n</g>\n");
}

// Row r: its label, a box (and label) per compute action, a bar per SEND/RECV. Returns whether
// the rank computes more than one stage.
bool append_rank(std::string& out, const Timeline& t, int r, double scale) {
  const std::vector<Action>& list = t.schedule->actions[static_cast<size_t>(r)];
  const std::vector<double>& start = t.start[static_cast<size_t>(r)];
  const std::vector<double>& end = t.end[static_cast<size_t>(r)];
  const double row_y = kTop + r * kRowHeight;
  const double box_y = row_y + 2;
  const std::string text_y = num(box_y + kBoxHeight / 2 + 4);
  put(out, "<g class=\"rank\" id=\"rank", std::to_string(r), "\">\n");
  put(out, "<text x=\"", num(kLeft - 8), "\" y=\"", text_y, "\" text-anchor=\"end\">rank ", std::to_string(r),
      "</text>\n");
  // The rank's stage chunks in stage order: chunk c is the c-th smallest stage it computes.
  std::set<int32_t> stage_set;
  for (const Action& a : list) {
    if (is_compute(a.kind)) stage_set.insert(a.stage);
  }
  const std::vector<int32_t> stages(stage_set.begin(), stage_set.end());
  for (size_t k = 0; k < list.size(); ++k) {
    const Action& a = list[k];
    const double x0 = kLeft + start[k] * scale;
    const double x1 = kLeft + end[k] * scale;
    std::string tip;
    put(tip, xml_escape(to_string(a)), " [", time_text(start[k]), ", ", time_text(end[k]), "]");
    if (is_comm(a.kind)) {
      const std::string y = num(row_y + kBoxHeight + 5);
      put(out, "<line class=\"comm\" x1=\"", num(x0), "\" y1=\"", y, "\" x2=\"", num(x1), "\" y2=\"", y,
          "\"><title>", tip, "</title></line>\n");
      continue;
    }
    const int chunk = static_cast<int>(std::lower_bound(stages.begin(), stages.end(), a.stage) - stages.begin());
    const double w = std::max(0.0, x1 - x0);
    put(out, "<rect class=\"act\" x=\"", num(x0), "\" y=\"", num(box_y), "\" width=\"", num(w), "\" height=\"",
        num(kBoxHeight), "\" fill=\"", shade(a.kind, chunk, static_cast<int>(stages.size())), "\"><title>", tip,
        "</title></rect>\n");
    // A label wider than its box would cover the neighbours' (a free REDUCE_GRAD is 0 wide).
    if (w < kMinLabelWidth) continue;
    const std::string label = a.kind == Kind::REDUCE_GRAD ? "R" : std::to_string(a.microbatch);
    put(out, "<text class=\"label\" x=\"", num((x0 + x1) / 2), "\" y=\"", text_y, "\" text-anchor=\"middle\">",
        label, "</text>\n");
  }
  put(out, "</g>\n");
  return stages.size() > 1;
}

}  // namespace

std::string timeline_svg(const Timeline& t) {
  check_shape(t);
  const int nranks = static_cast<int>(t.schedule->actions.size());
  const double makespan = t.makespan();
  const double scale = pixels_per_unit(t, makespan);
  const double width = std::max(kMinWidth, kLeft + std::max(makespan, 0.0) * scale + kRight);
  const double axis_y = kTop + nranks * kRowHeight + 4;
  const double legend_y = axis_y + 30;
  const double height = legend_y + 48;
  const std::string w = num(width), h = num(height);

  std::string out;
  put(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  put(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", w, "\" height=\"", h, "\" viewBox=\"0 0 ", w, " ",
      h, "\" data-px-per-unit=\"", time_text(scale), "\">\n");
  put(out,
      "<style>text{font-family:sans-serif;font-size:11px}.title{font-size:14px;font-weight:bold}"
      ".act{stroke:#333;stroke-width:0.5}.axis line{stroke:#333}"
      ".comm{stroke:#777;stroke-width:3;stroke-linecap:square}</style>\n");
  put(out, "<rect x=\"0\" y=\"0\" width=\"", w, "\" height=\"", h, "\" fill=\"white\"/>\n");
  append_title(out, t, makespan, width);
  bool any_chunks = false;
  for (int r = 0; r < nranks; ++r) any_chunks = append_rank(out, t, r, scale) || any_chunks;
  append_axis(out, t, makespan, scale, axis_y);
  append_legend(out, legend_y, any_chunks);
  put(out, "</svg>\n");
  return out;
}

}  // namespace weft::pipeline
