// Store servers this process runs (weft_get_unique_id, or rank 0 under init_from_env), found
// by port so a second communicator on the same store shares the running server.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/bootstrap/store.h"

namespace weft::capi {

// Starts a server (port 0 = any) and keeps it until a communicator takes it.
std::shared_ptr<bootstrap::StoreServer> start_store(const std::string& bind_addr, uint16_t port,
                                                    const std::string& secret);
// The server on `port` if this process runs one (pending or in use), else nullptr.
std::shared_ptr<bootstrap::StoreServer> find_store(uint16_t port);

}  // namespace weft::capi
