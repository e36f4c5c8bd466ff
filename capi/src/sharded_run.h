// Running a redistribution plan from the C shims: the choice between host and device memory
// and the launch on a communicator, shared by weft_redistribute (mesh.h) and weft_region_apply
// (training.h), whose operations are redistributions over one mesh dim.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "capi/src/handles.h"
#include "core/sharding/plan.h"
#include "core/sharding/sharded.h"

namespace weft::capi {

// Whether this rank's side of a redistribution runs on the device: its local pieces are
// device memory (gpu::route on the anchor communicator, which also refuses a mix of host and
// device memory naming both sides, managed memory, memory or a stream of another GPU, and a
// stream with host memory), or are declared so (device_type WEFT_DEVICE_CUDA) and empty: such a
// rank still takes part in the device steps. A piece declared CUDA that is host memory, or an
// empty declared one beside a host piece, is refused. a_name / b_name name the sides in messages
// ("src"/"dst", "in"/"out").
bool on_device_pair(Comm& anchor, const shard::Sharded& a, const char* a_name, const shard::Sharded& b,
                    const char* b_name, void* stream);

// Runs `plan` from a into b: device memory through gpu::redistribute (every step on one stream),
// host memory on `anchor`'s executor (blocking, or queued and handed back as *request).
// `operation` (a string literal) names it in requests and messages; `what` is the noun for the
// stream refusal ("redistribution").
void run_plan(weft_comm* anchor, const char* operation, const char* what, std::shared_ptr<const shard::Sharded> a,
              const char* a_name, std::shared_ptr<const shard::Sharded> b, const char* b_name,
              std::shared_ptr<const shard::Plan> plan, void* stream, weft_request_t* request);

}  // namespace weft::capi
