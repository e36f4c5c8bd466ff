// Start and end times per action of each rank's list, from the simulator or from an executor run,
// with the per-rank totals weft_timeline_rank reports. The writers (timeline_svg.cpp,
// timeline_chrome.cpp) draw one next to its schedule.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/pipeline/schedule.h"

namespace weft::pipeline {

struct RankStats {
  double busy = 0;                  // time in compute actions
  double idle = 0;                  // makespan - busy
  int peak_activations = 0;         // micro-batch activations held at once
  double peak_activation_bytes = 0;
};

struct Timeline {
  std::shared_ptr<const Schedule> schedule;  // what the times are of (labels, kinds)
  std::vector<std::vector<double>> start;    // [rank][action index]
  std::vector<std::vector<double>> end;
  std::vector<RankStats> stats;              // [rank]
  bool simulated = true;                     // false: measured by an executor run

  double makespan() const;
  double bubble_fraction() const;  // sum idle / (ranks * makespan); 0 when makespan is 0
  // Fills busy/idle of every rank from the times (peaks are left as they are).
  void compute_busy_idle();
};

enum class TimelineFormat { svg = 0, chrome_trace = 1 };
std::string timeline_svg(const Timeline& t);
std::string timeline_chrome_trace(const Timeline& t);
// Writes to path; throws invalid_argument naming the path and errno's text when it cannot.
void write_timeline(const Timeline& t, TimelineFormat format, const std::string& path);

}  // namespace weft::pipeline
