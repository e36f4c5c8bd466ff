// The record each rank publishes through the store when a communicator is created: identity,
// weft version, placement (host, kernel boot, PID namespace, device) and transport address.
// Carried as a verified FlatBuffer (core/schema/rank_record.fbs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::bootstrap {

struct RankRecord {
  int rank = -1;
  int nranks = 0;
  int version_code = 0;           // major * 10000 + minor * 100 + patch (kVersionCode)
  int abi_version = 0;            // kAbiVersion
  std::string host_name;
  std::string boot_id;            // /proc/sys/kernel/random/boot_id
  uint64_t pid_ns = 0;            // inode of /proc/self/ns/pid
  int pid = 0;
  int device = -1;                // device ordinal, -1 = host
  std::string transport_address;  // opaque bytes from the transport

  bool operator==(const RankRecord&) const = default;
};

// Size-prefixed FlatBuffer bytes (file identifier "WFRR").
std::string encode_rank_record(const RankRecord& record);
// Verifies the buffer before reading it. Throws weft::Error(Status::transport) naming from_rank
// when the bytes are not a valid record, a required field (all but device and
// transport_address) is missing, or rank/nranks are out of range. from_rank is only used in
// messages (the rank whose key the bytes were read from).
RankRecord decode_rank_record(const std::string& bytes, int from_rank);
// This process's record: host name, boot id, PID namespace, pid and weft version filled in,
// device -1.
RankRecord local_rank_record(int rank, int nranks, std::string transport_address);
// Throws weft::Error(Status::mismatch) when any record's version_code or abi_version differs
// from records[0]'s, naming both ranks and both versions.
void check_same_version(const std::vector<RankRecord>& records);
// Same kernel instance and PID namespace: shared memory and CMA can work between them.
bool same_host(const RankRecord& a, const RankRecord& b);
// "0.1.0" for version code 100.
std::string version_string(int version_code);

}  // namespace weft::bootstrap
