// libFuzzer target: the bytes a rank publishes through the store at communicator creation
// through decode_rank_record (core/bootstrap/rank_record.cpp). Any bytes give a record or a
// transport weft::Error; an accepted record must encode and decode to itself.
#include <cstdint>
#include <string>

#include "core/bootstrap/rank_record.h"
#include "tests/fuzz/fuzz_common.h"

using namespace weft;
using namespace weft::bootstrap;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  RankRecord r;
  if (!fuzz::refuses_or_decodes("rank_record", {Status::transport}, [&] { r = decode_rank_record(bytes, 3); })) {
    return 0;
  }
  if (r.rank < 0 || r.rank >= r.nranks) fuzz::broken("rank_record", "rank out of range", std::to_string(r.rank));
  RankRecord back;
  fuzz::refuses_or_decodes("rank_record", {}, [&] { back = decode_rank_record(encode_rank_record(r), 3); });
  if (!(back == r)) fuzz::broken("rank_record", "round trip", r.host_name);
  return 0;
}
