// Where an operation runs: blocking calls go through the communicator's executor on this
// thread; asynchronous calls are queued and handed back as a weft_request_t.
#pragma once

#include <functional>
#include <memory>

#include "capi/src/handles.h"

namespace weft::capi {

void launch(weft_comm* h, weft_request_t* request, const char* operation, std::function<void()> work);

}  // namespace weft::capi
