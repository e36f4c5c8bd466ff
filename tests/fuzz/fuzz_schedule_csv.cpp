// libFuzzer target: torch.distributed.pipelining's CSV text through from_csv
// (core/pipeline/csv.cpp, weft_schedule_from_csv's parser). Any text gives a Schedule or an
// invalid_argument weft::Error; an accepted schedule written back with to_csv must read back to
// the same lists, but for ranks with no actions at the end: to_csv writes them as blank lines,
// which from_csv reads as trailing newlines by design (such a rank holds no stage).
#include <cstdint>
#include <string>
#include <vector>

#include "core/pipeline/schedule.h"
#include "tests/fuzz/fuzz_common.h"

using namespace weft;
using namespace weft::pipeline;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Schedule s;
  if (!fuzz::refuses_or_decodes("schedule_csv", {Status::invalid_argument}, [&] { s = from_csv(text); })) return 0;
  Schedule t;
  fuzz::refuses_or_decodes("schedule_csv", {}, [&] { t = from_csv(to_csv(s, false)); });
  auto busy = [](std::vector<std::vector<Action>> lists) {
    while (!lists.empty() && lists.back().empty()) lists.pop_back();
    return lists;
  };
  if (busy(t.actions) != busy(s.actions)) fuzz::broken("schedule_csv", "round trip", text);
  return 0;
}
