// The executor: runs one rank's list of a schedule on a pipeline communicator, calling the
// framework's stage callbacks for compute actions and moving activations and gradients between
// ranks (weft/pipeline.h, weft_pipeline_run, states the contract).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/common/dtype.h"
#include "core/pipeline/timeline.h"

namespace weft {
class Comm;
}

namespace weft::pipeline {

// The shape, dtype and memory of one stage boundary (stage s's output = stage s+1's input).
struct Boundary {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  bool device = false;  // CUDA memory of the communicator's GPU
  size_t bytes() const;
};

// What a callback is given: a buffer of the boundary's shape, or none.
struct StageBuffer {
  void* data = nullptr;
  const Boundary* boundary = nullptr;  // nullptr: no buffer (stage 0's input, the last stage's output)
};

struct StageCall {
  Kind kind;
  int stage;
  int microbatch;
  StageBuffer input;
  StageBuffer output;
};

// Returns normally, or throws weft::Error (the capi shim turns a callback's status into one).
using StageFn = std::function<void(const StageCall&)>;

struct ExecutorConfig {
  StageFn forward, backward, backward_input, backward_weight, reduce_grad;  // empty = not given
  std::vector<Boundary> boundaries;                                          // S - 1
  void* stream = nullptr;
  bool record = false;
};

class Executor {
 public:
  // Validates the schedule and the config against it (a B action with no backward callback, a
  // boundary count that is not S - 1, a communicator of another size ...).
  Executor(std::shared_ptr<Comm> comm, std::shared_ptr<const Schedule> schedule, ExecutorConfig config);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // One step. With config.record, returns the gathered timeline of all ranks; else an empty one.
  Timeline run();

  // Defined in executor_state.h, for executor.cpp and executor_run.cpp only.
  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace weft::pipeline
