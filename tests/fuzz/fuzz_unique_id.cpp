// libFuzzer target: a weft_unique_id_t's 128 bytes (what weft_comm_init receives from the user)
// through decode_unique_id (core/bootstrap/unique_id.cpp). Inputs are padded with zeros or cut to
// 128 bytes. Any bytes give an id or an invalid_argument weft::Error; an accepted id keeps the
// documented bounds and encodes to bytes that decode to the same id.
#include <cstdint>
#include <cstring>
#include <string>

#include "core/bootstrap/unique_id.h"
#include "tests/fuzz/fuzz_common.h"

using namespace weft;
using namespace weft::bootstrap;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char in[kUniqueIdBytes] = {};
  std::memcpy(in, data, size < kUniqueIdBytes ? size : kUniqueIdBytes);
  UniqueId id;
  if (!fuzz::refuses_or_decodes("unique_id", {Status::invalid_argument}, [&] { id = decode_unique_id(in); })) return 0;
  if (id.host.size() > 63 || id.secret.size() > 32) fuzz::broken("unique_id", "bounds", id.host);
  char out[kUniqueIdBytes];
  encode_unique_id(id, out);
  UniqueId back;
  fuzz::refuses_or_decodes("unique_id", {}, [&] { back = decode_unique_id(out); });
  if (back.host != id.host || back.port != id.port || back.secret != id.secret) {
    fuzz::broken("unique_id", "round trip", id.host);
  }
  return 0;
}
