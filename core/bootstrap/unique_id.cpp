// Layout of the 128 bytes (integers little-endian):
//   [0, 8)      magic "WEFT-UID"
//   [8, 12)     u32 format version (kFormatVersion)
//   [12, 14)    u16 store port (1..65535)
//   [14]        u8 host length (1..63)
//   [15]        u8 secret length (0..32)
//   [16, 80)    host bytes, zero padded
//   [80, 112)   secret bytes, zero padded
//   [112, 120)  reserved, zero
//   [120, 128)  u64 FNV-1a checksum of bytes [0, 120)
// Decoding checks every field and that all padding is zero, so random or truncated-and-padded
// bytes are refused with a message instead of connecting somewhere odd.
#include "core/bootstrap/unique_id.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/common/status.h"

namespace weft::bootstrap {
namespace {

constexpr char kMagic[8] = {'W', 'E', 'F', 'T', '-', 'U', 'I', 'D'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kMaxHost = 63;
constexpr size_t kMaxSecret = 32;
constexpr size_t kOffVersion = 8, kOffPort = 12, kOffHostLen = 14, kOffSecretLen = 15;
constexpr size_t kOffHost = 16, kOffSecret = 80, kOffReserved = 112, kOffChecksum = 120;
static_assert(kOffHost + kMaxHost + 1 == kOffSecret);
static_assert(kOffSecret + kMaxSecret == kOffReserved);
static_assert(kOffChecksum + 8 == kUniqueIdBytes);

uint64_t checksum(const unsigned char* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

void store_le(unsigned char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>((v >> (8 * i)) & 0xffu);
}

uint64_t load_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

bool all_zero(const unsigned char* p, size_t n) {
  unsigned char acc = 0;
  for (size_t i = 0; i < n; ++i) acc |= p[i];
  return acc == 0;
}

}  // namespace

void encode_unique_id(const UniqueId& id, char out[kUniqueIdBytes]) {
  if (id.host.empty() || id.host.size() > kMaxHost) {
    fail(Status::invalid_argument, "unique id: store host '%s' must be 1..%zu bytes long", id.host.c_str(), kMaxHost);
  }
  if (id.host.find('\0') != std::string::npos) fail(Status::invalid_argument, "unique id: store host contains a NUL byte");
  if (id.secret.size() > kMaxSecret) {
    fail(Status::invalid_argument, "unique id: job secret is %zu bytes; at most %zu fit in a unique id",
         id.secret.size(), kMaxSecret);
  }
  if (id.port == 0) fail(Status::invalid_argument, "unique id: store port 0 is not a valid port");
  unsigned char* p = reinterpret_cast<unsigned char*>(out);
  std::memset(p, 0, kUniqueIdBytes);
  std::memcpy(p, kMagic, sizeof(kMagic));
  store_le(p + kOffVersion, kFormatVersion, 4);
  store_le(p + kOffPort, id.port, 2);
  p[kOffHostLen] = static_cast<unsigned char>(id.host.size());
  p[kOffSecretLen] = static_cast<unsigned char>(id.secret.size());
  std::memcpy(p + kOffHost, id.host.data(), id.host.size());
  std::memcpy(p + kOffSecret, id.secret.data(), id.secret.size());
  store_le(p + kOffChecksum, checksum(p, kOffChecksum), 8);
}

UniqueId decode_unique_id(const char in[kUniqueIdBytes]) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(in);
  if (std::memcmp(p, kMagic, sizeof(kMagic)) != 0) {
    fail(Status::invalid_argument,
         "not a weft unique id (bad magic): pass the bytes weft_get_unique_id produced, unchanged");
  }
  uint32_t version = static_cast<uint32_t>(load_le(p + kOffVersion, 4));
  if (version != kFormatVersion) {
    fail(Status::invalid_argument,
         "unique id has format version %u but this weft reads version %u: every process must use the same weft",
         version, kFormatVersion);
  }
  if (load_le(p + kOffChecksum, 8) != checksum(p, kOffChecksum)) {
    fail(Status::invalid_argument, "unique id is corrupted (checksum mismatch): it was changed after weft_get_unique_id");
  }
  size_t host_len = p[kOffHostLen];
  size_t secret_len = p[kOffSecretLen];
  uint16_t port = static_cast<uint16_t>(load_le(p + kOffPort, 2));
  if (host_len == 0 || host_len > kMaxHost) {
    fail(Status::invalid_argument, "unique id is malformed: host length %zu (expected 1..%zu)", host_len, kMaxHost);
  }
  if (secret_len > kMaxSecret) {
    fail(Status::invalid_argument, "unique id is malformed: secret length %zu (expected at most %zu)", secret_len,
         kMaxSecret);
  }
  if (port == 0) fail(Status::invalid_argument, "unique id is malformed: store port 0");
  if (std::memchr(p + kOffHost, 0, host_len) != nullptr ||
      !all_zero(p + kOffHost + host_len, kOffSecret - kOffHost - host_len) ||
      !all_zero(p + kOffSecret + secret_len, kOffReserved - kOffSecret - secret_len) ||
      !all_zero(p + kOffReserved, kOffChecksum - kOffReserved)) {
    fail(Status::invalid_argument, "unique id is malformed: padding or reserved bytes are not zero");
  }
  UniqueId id;
  id.host.assign(reinterpret_cast<const char*>(p + kOffHost), host_len);
  id.port = port;
  id.secret.assign(reinterpret_cast<const char*>(p + kOffSecret), secret_len);
  return id;
}

std::string random_secret() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // ENOSYS or similar: read the device instead
  }
  if (got < sizeof(bytes)) {
    int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(Status::internal, "cannot open /dev/urandom for a job secret: %s", std::strerror(errno));
    while (got < sizeof(bytes)) {
      ssize_t n = ::read(fd, bytes + got, sizeof(bytes) - got);
      if (n > 0) {
        got += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        int err = errno;
        ::close(fd);
        fail(Status::internal, "cannot read /dev/urandom for a job secret: %s", n == 0 ? "end of file" : std::strerror(err));
      }
    }
    ::close(fd);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * sizeof(bytes));
  for (unsigned char b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

}  // namespace weft::bootstrap
