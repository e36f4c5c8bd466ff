// The structs behind the opaque C handles, and the registry that tells a live handle from a
// destroyed or foreign pointer without dereferencing it (DESIGN.md: never UB by design).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/comm/comm.h"
#include "weft/weft.h"
#include "core/comm/executor.h"
#include "core/device/device_api.h"
#include "transports/transport.h"

struct weft_comm {
  uint64_t magic;
  std::shared_ptr<weft::Comm> comm;
  // Set for a mesh's communicators (weft_mesh_comm): the mesh owns them, so
  // weft_comm_destroy refuses them and weft_mesh_destroy frees them.
  bool owned_by_mesh = false;
};

struct weft_request {
  uint64_t magic;
  std::shared_ptr<weft::Comm> comm;
  // Exactly one of these: a queued collective, posted point-to-point operations (a batch: none
  // or more), or device work (core/device: a CUDA event, a staged task or staged transfers).
  std::shared_ptr<weft::Task> task;
  std::vector<std::unique_ptr<weft::transport::Op>> ops;
  std::shared_ptr<weft::gpu::Pending> device;
  const char* operation;
  // Point-to-point that failed: later weft_wait/weft_test calls report the same error.
  std::optional<weft::Error> failure;
};

namespace weft::capi {

constexpr uint64_t kCommMagic = 0x6d6d6f4374666577ull;     // "weftComm"
constexpr uint64_t kRequestMagic = 0x7165527466657777ull;  // "wwefReq"

weft_comm_t register_comm(std::shared_ptr<Comm> comm);
// Throws invalid_argument naming `arg` when h is NULL, destroyed or not a weft communicator.
weft_comm* lookup_comm(weft_comm_t h, const char* arg);
void unregister_comm(weft_comm_t h);

weft_request_t register_request(std::unique_ptr<weft_request> r);
weft_request* lookup_request(weft_request_t h, const char* arg);
void unregister_request(weft_request_t h);

}  // namespace weft::capi
