// The unique id layout and the FlatBuffers rank record: round trips, and rejection of
// corrupted, truncated and foreign bytes.
#include <unistd.h>

#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "capi/include/weft/weft.h"
#include "core/bootstrap/rank_record.h"
#include "core/bootstrap/unique_id.h"
#include "core/common/status.h"
#include "core/common/version.h"
#include "core/schema/rank_record_generated.h"

using weft::Error;
using weft::Status;
using namespace weft::bootstrap;

static_assert(weft::kVersionMajor == WEFT_VERSION_MAJOR);
static_assert(weft::kVersionMinor == WEFT_VERSION_MINOR);
static_assert(weft::kVersionPatch == WEFT_VERSION_PATCH);
static_assert(weft::kVersionCode == WEFT_VERSION_CODE);
static_assert(weft::kAbiVersion == WEFT_ABI_VERSION);
static_assert(kUniqueIdBytes == WEFT_UNIQUE_ID_BYTES);

namespace {

template <typename Fn>
std::string error_of(Status status, Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    return e.message();
  }
  ADD_FAILURE() << "expected weft::Error " << weft::status_name(status);
  return std::string();
}

RankRecord sample() {
  RankRecord r;
  r.rank = 5;
  r.nranks = 8;
  r.version_code = weft::kVersionCode;
  r.abi_version = weft::kAbiVersion;
  r.host_name = "node-17";
  r.boot_id = "4a1f0c7e-0d3b-4c8e-9a51-2f6d7b8c9e01";
  r.pid_ns = 4026531836ull;
  r.pid = 12345;
  r.device = 3;
  r.transport_address = std::string("\x00\x01ucx\xff\x00", 7);
  return r;
}

}  // namespace

// ------------------------------------------------------------------ unique id

TEST(UniqueId, RoundTrip) {
  UniqueId id{"node0.cluster.example", 29500, "0123456789abcdef0123456789abcdef"};
  char buf[kUniqueIdBytes];
  encode_unique_id(id, buf);
  UniqueId back = decode_unique_id(buf);
  EXPECT_EQ(back.host, id.host);
  EXPECT_EQ(back.port, id.port);
  EXPECT_EQ(back.secret, id.secret);

  UniqueId longest{std::string(63, 'h'), 65535, std::string(32, '\x7f')};
  encode_unique_id(longest, buf);
  back = decode_unique_id(buf);
  EXPECT_EQ(back.host, longest.host);
  EXPECT_EQ(back.port, 65535);
  EXPECT_EQ(back.secret, longest.secret);

  UniqueId no_secret{"10.0.0.1", 1, ""};
  encode_unique_id(no_secret, buf);
  EXPECT_EQ(decode_unique_id(buf).secret, "");
}

TEST(UniqueId, EncodeRejectsWhatDoesNotFit) {
  char buf[kUniqueIdBytes];
  EXPECT_NE(error_of(Status::invalid_argument, [&] { encode_unique_id({std::string(64, 'h'), 1, ""}, buf); })
                .find("host"),
            std::string::npos);
  EXPECT_NE(error_of(Status::invalid_argument, [&] { encode_unique_id({"h", 1, std::string(33, 's')}, buf); })
                .find("secret"),
            std::string::npos);
  error_of(Status::invalid_argument, [&] { encode_unique_id({"", 1, ""}, buf); });
  error_of(Status::invalid_argument, [&] { encode_unique_id({"h", 0, ""}, buf); });
}

TEST(UniqueId, RejectsRandomBytes) {
  std::mt19937_64 rng(42);
  char buf[kUniqueIdBytes];
  for (int i = 0; i < 2000; ++i) {
    for (char& c : buf) c = static_cast<char>(rng());
    if (i % 2) std::memcpy(buf, "WEFT-UID", 8);  // right magic, garbage after it
    error_of(Status::invalid_argument, [&] { decode_unique_id(buf); });
  }
  std::memset(buf, 0, sizeof(buf));
  std::string msg = error_of(Status::invalid_argument, [&] { decode_unique_id(buf); });
  EXPECT_NE(msg.find("not a weft unique id"), std::string::npos) << msg;
}

TEST(UniqueId, EveryFlippedByteIsDetected) {
  char good[kUniqueIdBytes];
  encode_unique_id({"master", 4242, "secret"}, good);
  for (size_t i = 0; i < kUniqueIdBytes; ++i) {
    for (unsigned mask : {0x01u, 0x80u, 0xffu}) {
      char buf[kUniqueIdBytes];
      std::memcpy(buf, good, sizeof(buf));
      buf[i] = static_cast<char>(buf[i] ^ mask);
      SCOPED_TRACE("byte " + std::to_string(i) + " mask " + std::to_string(mask));
      error_of(Status::invalid_argument, [&] { decode_unique_id(buf); });
    }
  }
}

TEST(UniqueId, OtherFormatVersionIsNamed) {
  char buf[kUniqueIdBytes];
  encode_unique_id({"master", 4242, "secret"}, buf);
  buf[8] = 2;  // format version 2
  std::string msg = error_of(Status::invalid_argument, [&] { decode_unique_id(buf); });
  EXPECT_NE(msg.find("format version 2"), std::string::npos) << msg;
}

TEST(UniqueId, RandomSecret) {
  std::string a = random_secret(), b = random_secret();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
  std::set<char> distinct(a.begin(), a.end());
  EXPECT_GT(distinct.size(), 4u);
}

// ------------------------------------------------------------------ rank record

TEST(RankRecord, RoundTrip) {
  RankRecord r = sample();
  std::string bytes = encode_rank_record(r);
  EXPECT_EQ(decode_rank_record(bytes, 5), r);
  r.device = -1;
  r.transport_address.clear();
  r.host_name.clear();
  EXPECT_EQ(decode_rank_record(encode_rank_record(r), 5), r);
  // A large address survives too.
  r.transport_address.assign(100000, '\xab');
  EXPECT_EQ(decode_rank_record(encode_rank_record(r), 5), r);
}

TEST(RankRecord, LocalRecord) {
  RankRecord r = local_rank_record(2, 4, "addr-bytes");
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.nranks, 4);
  EXPECT_EQ(r.version_code, 100);
  EXPECT_EQ(r.abi_version, 1);
  EXPECT_EQ(r.pid, static_cast<int>(::getpid()));
  EXPECT_EQ(r.device, -1);
  EXPECT_EQ(r.transport_address, "addr-bytes");
  EXPECT_FALSE(r.host_name.empty());
  EXPECT_FALSE(r.boot_id.empty());
  EXPECT_NE(r.pid_ns, 0u);
  EXPECT_EQ(decode_rank_record(encode_rank_record(r), 2), r);

  RankRecord other = local_rank_record(3, 4, "");
  EXPECT_TRUE(same_host(r, other));
  other.boot_id += "x";
  EXPECT_FALSE(same_host(r, other));
  other = local_rank_record(3, 4, "");
  other.pid_ns += 1;
  EXPECT_FALSE(same_host(r, other));
}

TEST(RankRecord, EveryTruncationIsRejected) {
  RankRecord r = sample();
  r.transport_address = "ab";
  std::string bytes = encode_rank_record(r);
  ASSERT_LT(bytes.size(), 300u);
  for (size_t n = 0; n < bytes.size(); ++n) {
    SCOPED_TRACE("truncated to " + std::to_string(n) + " of " + std::to_string(bytes.size()));
    std::string msg = error_of(Status::transport, [&] { decode_rank_record(bytes.substr(0, n), 6); });
    EXPECT_NE(msg.find("rank 6"), std::string::npos) << msg;
  }
  // Extra bytes are refused as well.
  error_of(Status::transport, [&] { decode_rank_record(bytes + '\0', 6); });
}

TEST(RankRecord, CorruptedBytes) {
  std::string bytes = encode_rank_record(sample());
  // Structural bytes: size prefix, root offset, file identifier.
  for (size_t i = 0; i < 12; ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x40);
    SCOPED_TRACE("byte " + std::to_string(i));
    std::string msg = error_of(Status::transport, [&] { decode_rank_record(bad, 1); });
    EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
  }
  // Any byte flipped anywhere: a clean error or a record, never a crash or an overread
  // (the sanitizer build checks the latter). Offsets and lengths must mostly be caught.
  int rejected = 0, total = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (unsigned mask : {0x01u, 0x10u, 0x80u, 0xffu}) {
      std::string bad = bytes;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      ++total;
      try {
        decode_rank_record(bad, 1);
      } catch (const Error& e) {
        EXPECT_EQ(e.status(), Status::transport);
        ++rejected;
      }
    }
  }
  EXPECT_GT(rejected, total / 4) << rejected << " of " << total;
  // Random bytes of many lengths.
  std::mt19937 rng(7);
  for (int i = 0; i < 500; ++i) {
    std::string junk(rng() % 200, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    error_of(Status::transport, [&] { decode_rank_record(junk, 9); });
  }
}

TEST(RankRecord, MissingRequiredFieldIsNamed) {
  flatbuffers::FlatBufferBuilder fbb;
  auto host = fbb.CreateString("h");
  auto boot = fbb.CreateString("b");
  // No pid.
  auto root = weft::schema::CreateRankRecord(fbb, 0, 2, 100, 1, host, boot, uint64_t{1});
  weft::schema::FinishSizePrefixedRankRecordBuffer(fbb, root);
  std::string bytes(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
  std::string msg = error_of(Status::transport, [&] { decode_rank_record(bytes, 4); });
  EXPECT_NE(msg.find("'pid'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 4"), std::string::npos) << msg;

  flatbuffers::FlatBufferBuilder fbb2;
  auto host2 = fbb2.CreateString("h");
  auto root2 = weft::schema::CreateRankRecord(fbb2, 0, 2, 100, 1, host2, 0, uint64_t{1}, 77);
  weft::schema::FinishSizePrefixedRankRecordBuffer(fbb2, root2);
  std::string bytes2(reinterpret_cast<const char*>(fbb2.GetBufferPointer()), fbb2.GetSize());
  msg = error_of(Status::transport, [&] { decode_rank_record(bytes2, 4); });
  EXPECT_NE(msg.find("'boot_id'"), std::string::npos) << msg;
}

TEST(RankRecord, RankOutOfRange) {
  RankRecord r = sample();
  r.rank = 8;
  std::string msg = error_of(Status::transport, [&] { decode_rank_record(encode_rank_record(r), 8); });
  EXPECT_NE(msg.find("rank 8 of 8"), std::string::npos) << msg;
  r.rank = 0;
  r.nranks = 0;
  error_of(Status::transport, [&] { decode_rank_record(encode_rank_record(r), 0); });
}

TEST(RankRecord, VersionMismatch) {
  std::vector<RankRecord> recs;
  for (int i = 0; i < 4; ++i) recs.push_back(local_rank_record(i, 4, ""));
  check_same_version(recs);
  check_same_version({});
  recs[3].version_code = 200;
  recs[3].abi_version = 2;
  std::string msg = error_of(Status::mismatch, [&] { check_same_version(recs); });
  EXPECT_EQ(msg, "rank 3 runs weft 0.2.0 (abi 2) but rank 0 runs weft 0.1.0 (abi 1)");
  recs[3].version_code = 100;
  msg = error_of(Status::mismatch, [&] { check_same_version(recs); });
  EXPECT_EQ(msg, "rank 3 runs weft 0.1.0 (abi 2) but rank 0 runs weft 0.1.0 (abi 1)");
  EXPECT_EQ(version_string(10203), "1.2.3");
  EXPECT_EQ(version_string(weft::kVersionCode), "0.1.0");
}
