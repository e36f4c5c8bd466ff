// weft_timeline_* (weft/pipeline.h): reading a simulated or recorded timeline, drawing it
// (core/pipeline/timeline_write.cpp) and releasing it.
#include <cstring>

#include "capi/src/pipeline_handles.h"
#include "capi/src/shim.h"
#include "capi/src/validate.h"

using namespace weft;
using namespace weft::capi;

namespace {

const pipeline::Timeline& timeline_of(weft_timeline_t h) { return lookup_timeline(h, "timeline")->timeline; }

// struct_size in [sizeof(size_t), sizeof(T)]: an older caller gets the fields it knows.
template <class T>
void check_size(const T* given, const char* arg, const char* init) {
  if (given->struct_size < sizeof(size_t) || given->struct_size > sizeof(T)) {
    fail(Status::invalid_argument, "%s->struct_size = %zu; initialise it with %s", arg, given->struct_size, init);
  }
}

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_timeline_info(weft_timeline_t timeline, weft_timeline_info_t* info) {
  return guarded(__func__, [&] {
    const pipeline::Timeline& t = timeline_of(timeline);
    check_out(info, "info");
    check_size(info, "info", "WEFT_TIMELINE_INFO_INIT");
    weft_timeline_info_t out = WEFT_TIMELINE_INFO_INIT;
    out.struct_size = info->struct_size;
    out.ranks = static_cast<int>(t.start.size());
    out.makespan = t.makespan();
    out.bubble_fraction = t.bubble_fraction();
    std::memcpy(info, &out, info->struct_size);
  });
}

WEFT_API weft_status_t weft_timeline_rank(weft_timeline_t timeline, int rank, const double** start, const double** end,
                                          size_t* count, weft_rank_stats_t* stats) {
  return guarded(__func__, [&] {
    const pipeline::Timeline& t = timeline_of(timeline);
    check_out(start, "start");
    check_out(end, "end");
    check_out(count, "count");
    check_rank(rank, static_cast<int>(t.start.size()), "rank");
    if (stats) check_size(stats, "stats", "WEFT_RANK_STATS_INIT");
    const size_t r = static_cast<size_t>(rank);
    *start = t.start[r].data();
    *end = t.end[r].data();
    *count = t.start[r].size();
    if (!stats) return;
    weft_rank_stats_t out = WEFT_RANK_STATS_INIT;
    out.struct_size = stats->struct_size;
    if (r < t.stats.size()) {
      out.busy = t.stats[r].busy;
      out.idle = t.stats[r].idle;
      out.peak_activations = t.stats[r].peak_activations;
      out.peak_activation_bytes = t.stats[r].peak_activation_bytes;
    }
    std::memcpy(stats, &out, stats->struct_size);
  });
}

WEFT_API weft_status_t weft_timeline_write(weft_timeline_t timeline, weft_timeline_format_t format, const char* path) {
  return guarded(__func__, [&] {
    const pipeline::Timeline& t = timeline_of(timeline);
    const int f = enum_bits(format);
    if (f != WEFT_TIMELINE_SVG && f != WEFT_TIMELINE_CHROME_TRACE) {
      fail(Status::invalid_argument, "format = %d; expected WEFT_TIMELINE_SVG or WEFT_TIMELINE_CHROME_TRACE", f);
    }
    if (!path || !*path) fail(Status::invalid_argument, "path is %s; expected a file path", path ? "empty" : "NULL");
    pipeline::write_timeline(t, static_cast<pipeline::TimelineFormat>(f), path);
  });
}

WEFT_API weft_status_t weft_timeline_destroy(weft_timeline_t timeline) {
  return guarded(__func__, [&] {
    if (!timeline) return;
    lookup_timeline(timeline, "timeline");
    unregister_timeline(timeline);
  });
}

}  // extern "C"
