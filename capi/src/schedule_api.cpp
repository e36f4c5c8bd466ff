// weft_schedule_* (weft/pipeline.h): building, inspecting, checking and moving schedules between
// weft, torch's CSV and FlatBuffers files. Argument checks here, the work in core/pipeline/
// (schedule.cpp, validator.cpp, csv.cpp, schedule_file.cpp). The generators, the simulator and
// the tuner have their own shims.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "capi/src/pipeline_handles.h"
#include "capi/src/shim.h"
#include "capi/src/validate.h"

using namespace weft;
using namespace weft::capi;
using pipeline::Schedule;

namespace {

const Schedule& schedule_of(weft_schedule_t h) { return *lookup_schedule(h, "schedule")->schedule; }

// Registers a new schedule and stores the handle in *out.
void hand_out(Schedule s, weft_schedule_t* out) {
  *out = register_schedule(std::make_shared<const Schedule>(std::move(s)));
}

std::string read_path(const char* path) {
  if (!path) fail(Status::invalid_argument, "path is NULL; expected a file path");
  if (!*path) fail(Status::invalid_argument, "path is empty; expected a file path");
  return path;
}

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_schedule_create(int nranks, const weft_action_t* const* actions, const size_t* counts,
                                            weft_schedule_t* schedule) {
  return guarded(__func__, [&] {
    check_out(schedule, "schedule");
    *schedule = nullptr;
    if (nranks < 1 || nranks > (1 << 20)) {
      fail(Status::invalid_argument, "nranks = %d; expected 1..%d", nranks, 1 << 20);
    }
    if (!actions) fail(Status::invalid_argument, "actions is NULL; expected %d per-rank lists", nranks);
    if (!counts) fail(Status::invalid_argument, "counts is NULL; expected %d list lengths", nranks);
    std::vector<std::vector<pipeline::Action>> lists(static_cast<size_t>(nranks));
    for (int r = 0; r < nranks; ++r) {
      const size_t n = counts[r];
      if (!actions[r] && n > 0) fail(Status::invalid_argument, "actions[%d] is NULL but counts[%d] = %zu", r, r, n);
      auto& list = lists[static_cast<size_t>(r)];
      list.reserve(n);
      for (size_t k = 0; k < n; ++k) {
        const weft_action_t& a = actions[r][k];
        const int kind = enum_bits(a.kind);
        if (kind < WEFT_ACTION_F || kind > WEFT_ACTION_REDUCE_GRAD) {
          fail(Status::invalid_argument, "actions[%d][%zu].kind = %d is not a weft_action_kind_t (0..%d)", r, k, kind,
               WEFT_ACTION_REDUCE_GRAD);
        }
        list.push_back(pipeline::Action{static_cast<pipeline::Kind>(kind), a.stage, a.microbatch});
      }
    }
    hand_out(pipeline::make_schedule(std::move(lists)), schedule);
  });
}

WEFT_API weft_status_t weft_schedule_destroy(weft_schedule_t schedule) {
  return guarded(__func__, [&] {
    if (!schedule) return;
    lookup_schedule(schedule, "schedule");
    unregister_schedule(schedule);
  });
}

WEFT_API weft_status_t weft_schedule_info(weft_schedule_t schedule, weft_schedule_info_t* info) {
  return guarded(__func__, [&] {
    const Schedule& s = schedule_of(schedule);
    check_out(info, "info");
    if (info->struct_size < sizeof(size_t) || info->struct_size > sizeof(weft_schedule_info_t)) {
      fail(Status::invalid_argument, "info->struct_size = %zu; initialise it with WEFT_SCHEDULE_INFO_INIT",
           info->struct_size);
    }
    weft_schedule_info_t out = WEFT_SCHEDULE_INFO_INIT;
    out.struct_size = info->struct_size;
    out.kind = static_cast<weft_schedule_kind_t>(static_cast<int>(s.method));
    out.ranks = s.ranks;
    out.stages = s.stages;
    out.microbatches = s.microbatches;
    out.stages_per_rank = s.stages_per_rank();
    std::memcpy(info, &out, info->struct_size);
  });
}

WEFT_API weft_status_t weft_schedule_actions(weft_schedule_t schedule, int rank, const weft_action_t** actions,
                                             size_t* count) {
  return guarded(__func__, [&] {
    const Schedule& s = schedule_of(schedule);
    check_out(actions, "actions");
    check_out(count, "count");
    check_rank(rank, s.ranks, "rank");
    const auto& list = s.actions[static_cast<size_t>(rank)];
    // pipeline::Action and weft_action_t share a layout (static_asserts in pipeline_handles.cpp),
    // and the schedule is immutable while the handle lives: the list is handed out as a view.
    *actions = reinterpret_cast<const weft_action_t*>(list.data());
    *count = list.size();
  });
}

WEFT_API weft_status_t weft_schedule_stage_rank(weft_schedule_t schedule, int stage, int* rank) {
  return guarded(__func__, [&] {
    const Schedule& s = schedule_of(schedule);
    check_out(rank, "rank");
    if (stage < 0 || stage >= s.stages) {
      fail(Status::invalid_argument, "stage = %d is out of range; the schedule has stages 0..%d", stage, s.stages - 1);
    }
    *rank = s.stage_rank[static_cast<size_t>(stage)];
  });
}

WEFT_API weft_status_t weft_schedule_validate(weft_schedule_t schedule) {
  return guarded(__func__, [&] { pipeline::validate(schedule_of(schedule)); });
}

WEFT_API weft_status_t weft_schedule_to_csv(weft_schedule_t schedule, weft_csv_format_t format, char* text,
                                            size_t capacity, size_t* length) {
  return guarded(__func__, [&] {
    const Schedule& s = schedule_of(schedule);
    check_out(length, "length");
    const int f = enum_bits(format);
    if (f != WEFT_CSV_COMPUTE_COMMS && f != WEFT_CSV_COMPUTE_ONLY) {
      fail(Status::invalid_argument, "format = %d; expected WEFT_CSV_COMPUTE_COMMS or WEFT_CSV_COMPUTE_ONLY", f);
    }
    const std::string csv = pipeline::to_csv(s, f == WEFT_CSV_COMPUTE_ONLY);
    *length = csv.size();
    if (!text) return;
    if (capacity < csv.size()) {
      fail(Status::invalid_argument, "capacity = %zu bytes; the CSV needs %zu (+1 for the NUL)", capacity, csv.size());
    }
    std::memcpy(text, csv.data(), csv.size());
    if (capacity > csv.size()) text[csv.size()] = '\0';
  });
}

WEFT_API weft_status_t weft_schedule_from_csv(const char* text, size_t length, weft_schedule_t* schedule) {
  return guarded(__func__, [&] {
    check_out(schedule, "schedule");
    *schedule = nullptr;
    if (!text) fail(Status::invalid_argument, "text is NULL; expected %zu bytes of CSV", length);
    hand_out(pipeline::from_csv(std::string(text, length)), schedule);
  });
}

WEFT_API weft_status_t weft_schedule_save(weft_schedule_t schedule, const char* path) {
  return guarded(__func__, [&] {
    const Schedule& s = schedule_of(schedule);
    pipeline::save(s, read_path(path));
  });
}

WEFT_API weft_status_t weft_schedule_load(const char* path, weft_schedule_t* schedule) {
  return guarded(__func__, [&] {
    check_out(schedule, "schedule");
    *schedule = nullptr;
    hand_out(pipeline::load(read_path(path)), schedule);
  });
}

}  // extern "C"
