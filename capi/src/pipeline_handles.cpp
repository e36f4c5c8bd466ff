#include "capi/src/pipeline_handles.h"

#include "capi/src/registry.h"
#include "core/pipeline/executor.h"

namespace weft::capi {

static_assert(WEFT_ACTION_REDUCE_GRAD == static_cast<int>(pipeline::Kind::REDUCE_GRAD) &&
              WEFT_ACTION_SEND_F == static_cast<int>(pipeline::Kind::SEND_F) &&
              WEFT_ACTION_RECV_B == static_cast<int>(pipeline::Kind::RECV_B) && WEFT_ACTION_F == 0);
static_assert(WEFT_SCHEDULE_NUM_KINDS == pipeline::kNumMethods &&
              WEFT_SCHEDULE_DUALPIPE_V == static_cast<int>(pipeline::Method::dualpipe_v) &&
              WEFT_SCHEDULE_CUSTOM == static_cast<int>(pipeline::Method::custom));
static_assert(sizeof(weft_action_t) == 12 && sizeof(pipeline::Action) == 12,
              "weft_action_t and pipeline::Action share a layout (arrays are handed out as views)");

namespace {

auto& schedules() {
  static auto* r = new Registry<weft_schedule, kScheduleMagic>(
      "a schedule from weft_schedule_generate, _create, _from_csv or _load", "a live schedule", "destroyed");
  return *r;
}
auto& timelines() {
  static auto* r = new Registry<weft_timeline, kTimelineMagic>(
      "a timeline from weft_schedule_simulate or weft_pipeline_run", "a live timeline", "destroyed");
  return *r;
}
auto& pipelines() {
  static auto* r = new Registry<weft_pipeline, kPipelineMagic>("a pipeline from weft_pipeline_create",
                                                               "a live pipeline", "destroyed");
  return *r;
}

}  // namespace

weft_schedule_t register_schedule(std::shared_ptr<const pipeline::Schedule> s) {
  auto h = std::make_unique<weft_schedule>();
  h->schedule = std::move(s);
  return schedules().add(std::move(h));
}
weft_schedule* lookup_schedule(weft_schedule_t h, const char* arg) { return schedules().find(h, arg); }
void unregister_schedule(weft_schedule_t h) { schedules().remove(h); }

weft_timeline_t register_timeline(pipeline::Timeline t) {
  auto h = std::make_unique<weft_timeline>();
  h->timeline = std::move(t);
  return timelines().add(std::move(h));
}
weft_timeline* lookup_timeline(weft_timeline_t h, const char* arg) { return timelines().find(h, arg); }
void unregister_timeline(weft_timeline_t h) { timelines().remove(h); }

weft_pipeline_t register_pipeline(std::unique_ptr<weft_pipeline> p) { return pipelines().add(std::move(p)); }
weft_pipeline* lookup_pipeline(weft_pipeline_t h, const char* arg) { return pipelines().find(h, arg); }
void unregister_pipeline(weft_pipeline_t h) { pipelines().remove(h); }

}  // namespace weft::capi
