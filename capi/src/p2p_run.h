// Running a validated point-to-point batch (weft_p2p_batch, weft_send/weft_recv, weft_ring_shift):
// the one place that routes it to host or device memory and hands back its request.
#pragma once

#include <string>
#include <vector>

#include "capi/src/handles.h"
#include "core/device/device_api.h"

namespace weft::capi {

// The validated operations of one call, and each one's buffer argument name for messages
// ("buf" for weft_send/weft_recv, "ops[i].buf" for a batch, "send"/"recv" for a ring shift).
struct P2PBatch {
  std::vector<gpu::P2POp> ops;
  std::vector<std::string> names;
};

// Device memory to core/device, host memory posted to the transport here (every send and
// receive at once) and waited for together or returned as one request. `what` (a string
// literal) names the operation in requests and messages.
void run_p2p(weft_comm* h, const char* what, const P2PBatch& b, void* stream, weft_request_t* request);

}  // namespace weft::capi
