#include "capi/src/config.h"

#include <cstddef>
#include <cstring>

#include "capi/src/shim.h"
#include "core/common/log.h"
#include "core/common/status.h"

namespace weft::capi {
namespace {

// The first published layout; older callers can never be smaller than this.
constexpr size_t kFirstConfigSize = sizeof(weft_comm_config_t);

weft_comm_config_t read_versioned(const weft_comm_config_t* user) {
  weft_comm_config_t c = WEFT_COMM_CONFIG_INIT;
  const size_t size = user->struct_size;
  if (size < kFirstConfigSize) {
    fail(Status::invalid_argument,
         "config->struct_size = %zu is smaller than any weft_comm_config_t (%zu); initialise with "
         "WEFT_COMM_CONFIG_INIT",
         size, kFirstConfigSize);
  }
  if (size > sizeof(weft_comm_config_t)) {
    // A newer caller: accept only if every field this library does not know is zero
    // (= that field's default), as Linux does for extensible syscall structs.
    if (size > 4096) {
      fail(Status::invalid_argument, "config->struct_size = %zu is implausible (this library knows %zu bytes)", size,
           sizeof(weft_comm_config_t));
    }
    const auto* tail = reinterpret_cast<const unsigned char*>(user) + sizeof(weft_comm_config_t);
    for (size_t i = 0; i < size - sizeof(weft_comm_config_t); ++i) {
      if (tail[i]) {
        fail(Status::invalid_argument,
             "config->struct_size = %zu: the caller sets fields this weft (%zu-byte config) does not know", size,
             sizeof(weft_comm_config_t));
      }
    }
  }
  std::memcpy(&c, user, sizeof(weft_comm_config_t));
  return c;
}

}  // namespace

CommConfig resolve_config(const weft_comm_config_t* config, const CommConfig* inherit) {
  CommConfig out;
  // A NULL config inherits the parent's settings (split/dup); a given config means exactly
  // what weft.h says of each field, with 0/NULL fields taking the environment or the default.
  if (inherit && !config) {
    out = *inherit;
  } else {
    out.timeout = timeout_from_env();
    out.check_collectives = debug_check_from_env();
  }
  out.algorithms = algorithms_from_env();
  shm_settings_from_env(out);
  if (!config) return out;
  weft_comm_config_t c = read_versioned(config);
  if (c.timeout_ms < 0) fail(Status::invalid_argument, "config->timeout_ms = %lld; expected >= 0 (0 = default)", static_cast<long long>(c.timeout_ms));
  if (c.timeout_ms > 0) out.timeout = std::chrono::milliseconds(c.timeout_ms);
  const int transport = enum_bits(c.transport);
  if (transport != WEFT_TRANSPORT_AUTO && transport != WEFT_TRANSPORT_UCX) {
    fail(Status::invalid_argument, "config->transport = %d is not a weft_transport_t", transport);
  }
  if (c.name) out.name = c.name;
  if (c.check_collectives) out.check_collectives = true;
  return out;
}

}  // namespace weft::capi
