// libFuzzer target: a pipeline schedule file's bytes (core/pipeline/schedule_file.cpp) through
// deserialize, the decoder weft_schedule_load runs on the file it read. Any bytes give a Schedule
// or an invalid_argument/unsupported weft::Error; an accepted schedule must serialize and read
// back to the same lists (the reader's checks are the writer's).
#include <cstdint>

#include "core/pipeline/schedule.h"
#include "tests/fuzz/fuzz_common.h"

using namespace weft;
using namespace weft::pipeline;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Schedule s;
  if (!fuzz::refuses_or_decodes("schedule_file", {Status::invalid_argument, Status::unsupported},
                                [&] { s = deserialize(data, size); })) {
    return 0;
  }
  const std::vector<uint8_t> again = serialize(s);
  Schedule t;
  if (!fuzz::refuses_or_decodes("schedule_file", {}, [&] { t = deserialize(again.data(), again.size()); })) return 0;
  if (t.actions != s.actions || t.stage_rank != s.stage_rank || t.method != s.method) {
    fuzz::broken("schedule_file", "round trip", "an accepted schedule reads back different");
  }
  return 0;
}
