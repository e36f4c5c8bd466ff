// The schedule generators (weft/pipeline.h states each one's rule). One file per method family:
// gen_simple.cpp (GPipe, 1F1B, interleaved 1F1B), gen_zero_bubble.cpp (ZB-H1, ZB-H2, ZB-V),
// gen_dualpipe.cpp (DualPipeV).
#pragma once

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
Schedule generate(Method method, const GenerateOptions& options);

}  // namespace weft::pipeline
