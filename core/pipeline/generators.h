// The schedule generators (weft/pipeline.h states each one's rule). One file per method family:
// gen_simple.cpp (GPipe, 1F1B, interleaved 1F1B), gen_zero_bubble.cpp (ZB-H1, ZB-H2, ZB-V),
// gen_dualpipe.cpp (DualPipeV); SCHEDULE plugins (ids >= WEFT_PLUGIN_ID_BASE) in gen_plugin.cpp.
#pragma once

#include <cstdint>

#include "core/pipeline/schedule.h"

namespace weft::pipeline {

struct GenerateOptions {
  int ranks = 1;
  int microbatches = 1;
  int stages_per_rank = 0;  // 0 = the method's own
  bool reduce_grad = false;
};

// The schedule with its SEND/RECV actions; it passes validate(). Throws invalid_argument naming
// the rule when the combination cannot work.
// A plugin's id: its generator runs with v = stages_per_rank (0 = 1).
Schedule generate(Method method, const GenerateOptions& options);

// gen_plugin.cpp. A SCHEDULE plugin's schedule into *out; false (and *declined = its return
// value) when the plugin's function returned nonzero, i.e. it does not make (p, m, v): the tuner
// skips such candidates. Throws invalid_argument naming the plugin for an id that is no
// generator and for lists or a placement that are not a valid schedule.
bool try_generate_plugin(Method method, const GenerateOptions& options, Schedule* out, int32_t* declined);

}  // namespace weft::pipeline
