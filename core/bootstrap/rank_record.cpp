#include "core/bootstrap/rank_record.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "core/common/log.h"
#include "core/common/status.h"
#include "core/common/version.h"
#include "core/schema/rank_record_generated.h"

namespace weft::bootstrap {
namespace {

// Largest record accepted: far above host name + address sizes, far below the store's limit.
constexpr size_t kMaxRecordBytes = 1u << 20;

std::string read_boot_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (f && std::getline(f, id)) {
    while (!id.empty() && (id.back() == '\n' || id.back() == '\r' || id.back() == ' ')) id.pop_back();
    if (!id.empty()) return id;
  }
  return std::string();
}

}  // namespace

std::string version_string(int version_code) {
  return format("%d.%d.%d", version_code / 10000, (version_code / 100) % 100, version_code % 100);
}

std::string encode_rank_record(const RankRecord& r) {
  flatbuffers::FlatBufferBuilder fbb(256 + r.host_name.size() + r.boot_id.size() + r.transport_address.size());
  auto host = fbb.CreateString(r.host_name);
  auto boot = fbb.CreateString(r.boot_id);
  auto addr = fbb.CreateVector(reinterpret_cast<const uint8_t*>(r.transport_address.data()),
                               r.transport_address.size());
  auto root = schema::CreateRankRecord(fbb, r.rank, r.nranks, r.version_code, r.abi_version, host, boot, r.pid_ns,
                                       r.pid, r.device, addr);
  // Size-prefixed: the verifier then also checks that not a byte is missing, even where the
  // tail of the buffer is only alignment padding.
  schema::FinishSizePrefixedRankRecordBuffer(fbb, root);
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

RankRecord decode_rank_record(const std::string& bytes, int from_rank) {
  if (bytes.size() > kMaxRecordBytes) {
    fail(Status::transport, "rank record from rank %d is %zu bytes; the limit is %zu", from_rank, bytes.size(),
         kMaxRecordBytes);
  }
  // The verifier checks alignment relative to the buffer start and the accessors read scalars in
  // place, so give the bytes 8-byte-aligned storage of their own.
  std::vector<uint64_t> storage((bytes.size() + 7) / 8 + 1, 0);
  auto* buf = reinterpret_cast<uint8_t*>(storage.data());
  if (!bytes.empty()) std::memcpy(buf, bytes.data(), bytes.size());
  flatbuffers::Verifier verifier(buf, bytes.size());
  if (bytes.size() < 8 || !schema::VerifySizePrefixedRankRecordBuffer(verifier)) {
    fail(Status::transport,
         "rank record from rank %d (%zu bytes) failed verification: corrupt, truncated or not a weft rank record",
         from_rank, bytes.size());
  }
  const schema::RankRecord* rec = schema::GetSizePrefixedRankRecord(buf);
  const char* missing = nullptr;
  if (!rec->rank()) missing = "rank";
  else if (!rec->nranks()) missing = "nranks";
  else if (!rec->version_code()) missing = "version_code";
  else if (!rec->abi_version()) missing = "abi_version";
  else if (!rec->host_name()) missing = "host_name";
  else if (!rec->boot_id()) missing = "boot_id";
  else if (!rec->pid_ns()) missing = "pid_ns";
  else if (!rec->pid()) missing = "pid";
  if (missing) fail(Status::transport, "rank record from rank %d lacks the required field '%s'", from_rank, missing);

  RankRecord r;
  r.rank = *rec->rank();
  r.nranks = *rec->nranks();
  r.version_code = *rec->version_code();
  r.abi_version = *rec->abi_version();
  r.host_name = rec->host_name()->str();
  r.boot_id = rec->boot_id()->str();
  r.pid_ns = *rec->pid_ns();
  r.pid = *rec->pid();
  r.device = rec->device();
  if (const auto* a = rec->transport_address()) {
    r.transport_address.assign(reinterpret_cast<const char*>(a->data()), a->size());
  }
  if (r.nranks < 1 || r.rank < 0 || r.rank >= r.nranks) {
    fail(Status::transport, "rank record from rank %d claims rank %d of %d ranks", from_rank, r.rank, r.nranks);
  }
  return r;
}

RankRecord local_rank_record(int rank, int nranks, std::string transport_address) {
  RankRecord r;
  r.rank = rank;
  r.nranks = nranks;
  r.version_code = kVersionCode;
  r.abi_version = kAbiVersion;
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown-host");
  r.host_name = host;
  r.boot_id = read_boot_id();
  if (r.boot_id.empty()) {
    // Without a boot id, fall back to the host name: processes on one host still match, and
    // two hosts differ unless they share a name.
    r.boot_id = "no-boot-id:" + r.host_name;
    log(LogLevel::info, "cannot read /proc/sys/kernel/random/boot_id; using the host name to tell hosts apart");
  }
  struct stat st{};
  if (::stat("/proc/self/ns/pid", &st) == 0) {
    r.pid_ns = static_cast<uint64_t>(st.st_ino);
  } else {
    log(LogLevel::info, "cannot stat /proc/self/ns/pid (%s); assuming the initial PID namespace", std::strerror(errno));
  }
  r.pid = static_cast<int>(::getpid());
  r.device = -1;
  r.transport_address = std::move(transport_address);
  return r;
}

void check_same_version(const std::vector<RankRecord>& records) {
  if (records.empty()) return;
  const RankRecord& ref = records.front();
  for (const RankRecord& r : records) {
    if (r.version_code != ref.version_code || r.abi_version != ref.abi_version) {
      fail(Status::mismatch, "rank %d runs weft %s (abi %d) but rank %d runs weft %s (abi %d)", r.rank,
           version_string(r.version_code).c_str(), r.abi_version, ref.rank, version_string(ref.version_code).c_str(),
           ref.abi_version);
    }
  }
}

bool same_host(const RankRecord& a, const RankRecord& b) { return a.boot_id == b.boot_id && a.pid_ns == b.pid_ns; }

}  // namespace weft::bootstrap
