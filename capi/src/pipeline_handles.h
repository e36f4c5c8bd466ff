// The structs behind weft_schedule_t, weft_timeline_t and weft_pipeline_t, their registries, and
// the conversions the pipeline shims share.
#pragma once

#include <memory>

#include "core/pipeline/schedule.h"
#include "core/pipeline/timeline.h"
#include "weft/pipeline.h"

namespace weft::pipeline {
class Executor;
}

struct weft_schedule {
  uint64_t magic;
  // Shared with the timelines and pipelines made from it, so the handle may be destroyed first.
  std::shared_ptr<const weft::pipeline::Schedule> schedule;
};

struct weft_timeline {
  uint64_t magic;
  weft::pipeline::Timeline timeline;
};

struct weft_pipeline {
  uint64_t magic;
  std::unique_ptr<weft::pipeline::Executor> executor;
};

namespace weft::capi {

constexpr uint64_t kScheduleMagic = 0x6465686353746665ull;  // "efSched"
constexpr uint64_t kTimelineMagic = 0x656e696c6d695474ull;  // "tTimline"
constexpr uint64_t kPipelineMagic = 0x656e696c65706950ull;  // "Pipeline"

weft_schedule_t register_schedule(std::shared_ptr<const pipeline::Schedule> s);
weft_schedule* lookup_schedule(weft_schedule_t h, const char* arg);
void unregister_schedule(weft_schedule_t h);

weft_timeline_t register_timeline(pipeline::Timeline t);
weft_timeline* lookup_timeline(weft_timeline_t h, const char* arg);
void unregister_timeline(weft_timeline_t h);

weft_pipeline_t register_pipeline(std::unique_ptr<weft_pipeline> p);
weft_pipeline* lookup_pipeline(weft_pipeline_t h, const char* arg);
void unregister_pipeline(weft_pipeline_t h);

}  // namespace weft::capi
