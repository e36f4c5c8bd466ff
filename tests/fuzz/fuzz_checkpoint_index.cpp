// libFuzzer target: a distributed checkpoint's index.weft bytes through decode_index
// (core/sharding/checkpoint_index.cpp) and, for an index that passes, check_coverage of every
// tensor (what a load runs before trusting the index). Any bytes give an index or an
// invalid_argument/unsupported weft::Error; an accepted index must encode and decode again.
#include <cstdint>
#include <string>

#include "core/sharding/checkpoint_index.h"
#include "tests/fuzz/fuzz_common.h"

using namespace weft;
using namespace weft::shard;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CheckpointIndex ix;
  if (!fuzz::refuses_or_decodes("checkpoint_index", {Status::invalid_argument, Status::unsupported},
                                [&] { ix = decode_index(data, size, "fuzz"); })) {
    return 0;
  }
  for (const StoredTensor& t : ix.tensors) {
    fuzz::refuses_or_decodes("checkpoint_index", {Status::invalid_argument}, [&] { check_coverage(t, "fuzz"); });
  }
  const std::string again = encode_index(ix);
  CheckpointIndex back;
  fuzz::refuses_or_decodes("checkpoint_index", {}, [&] { back = decode_index(again.data(), again.size(), "again"); });
  if (back.tensors.size() != ix.tensors.size() || back.save_id != ix.save_id || back.nranks != ix.nranks) {
    fuzz::broken("checkpoint_index", "round trip", ix.save_id);
  }
  return 0;
}
