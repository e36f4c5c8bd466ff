// The opaque 128-byte weft_unique_id_t: store address and job secret, versioned and checked.
#pragma once

#include <cstdint>
#include <string>

namespace weft::bootstrap {

constexpr size_t kUniqueIdBytes = 128;

struct UniqueId {
  std::string host;    // store host, <= 63 bytes
  uint16_t port = 0;
  std::string secret;  // <= 32 bytes
};

// Packs into exactly kUniqueIdBytes bytes (magic, format version, port, host, secret).
void encode_unique_id(const UniqueId& id, char out[kUniqueIdBytes]);
// Throws weft::Error(invalid_argument) when the bytes are not a unique id of this format.
UniqueId decode_unique_id(const char in[kUniqueIdBytes]);
// 32 random bytes from /dev/urandom, hex-encoded (tests and weftrun use it for job secrets).
std::string random_secret();

}  // namespace weft::bootstrap
