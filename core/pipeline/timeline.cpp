// Timeline's derived numbers: makespan, per-rank busy/idle and the bubble fraction
// (weft_timeline_info_t and weft_rank_stats_t state what each means).
#include <algorithm>

#include "core/pipeline/timeline.h"

namespace weft::pipeline {

double Timeline::makespan() const {
  double latest = 0;
  for (const auto& ends : end) {
    for (double e : ends) latest = std::max(latest, e);
  }
  return latest;
}

double Timeline::bubble_fraction() const {
  const double span = makespan();
  if (span <= 0 || stats.empty()) return 0;
  double idle = 0;
  for (const RankStats& st : stats) idle += st.idle;
  return idle / (static_cast<double>(stats.size()) * span);
}

void Timeline::compute_busy_idle() {
  const double span = makespan();
  const size_t ranks = start.size();
  stats.resize(ranks);
  for (size_t r = 0; r < ranks; ++r) {
    double busy = 0;
    const std::vector<Action>* list =
        schedule && r < schedule->actions.size() ? &schedule->actions[r] : nullptr;
    for (size_t k = 0; k < start[r].size() && k < end[r].size(); ++k) {
      // Without a schedule every entry counts (a caller-built timeline of compute only).
      if (list && (k >= list->size() || !is_compute((*list)[k].kind))) continue;
      busy += end[r][k] - start[r][k];
    }
    stats[r].busy = busy;
    stats[r].idle = span - busy;
  }
}

}  // namespace weft::pipeline
