#include "core/training/agreement.h"

#include "core/collectives/collectives.h"
#include "core/common/status.h"

namespace weft::training {

uint64_t key_of(std::initializer_list<uint64_t> words) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t w : words) {
    for (int b = 0; b < 8; ++b) h = (h ^ ((w >> (8 * b)) & 0xff)) * 1099511628211ull;
  }
  return h;
}

void check_agreement(Comm& comm, const char* what, const std::vector<uint64_t>& header,
                     const std::vector<uint64_t>& keys, const std::function<std::string(size_t)>& item_name) {
  const size_t n = static_cast<size_t>(comm.size());
  const size_t h = header.size();
  std::vector<uint64_t> all(h * n);
  coll::allgather(comm, header.data(), all.data(), h, DType::u64);
  for (size_t r = 0; r < n; ++r) {
    if (all[r * h] != header[0]) {
      fail(Status::mismatch, "%s: rank %zu passed %llu items, rank %d passed %llu", what, r,
           static_cast<unsigned long long>(all[r * h]), comm.rank(), static_cast<unsigned long long>(header[0]));
    }
    for (size_t w = 1; w < h; ++w) {
      if (all[r * h + w] != header[w]) {
        fail(Status::mismatch, "%s: rank %zu and rank %d were created with different options", what, r, comm.rank());
      }
    }
  }
  std::vector<uint64_t> every(keys.size() * n);
  coll::allgather(comm, keys.data(), every.data(), keys.size(), DType::u64);
  for (size_t r = 0; r < n; ++r) {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (every[r * keys.size() + i] != keys[i]) {
        fail(Status::mismatch, "%s: rank %zu passed %s (item %zu) with another shape, dtype or group than rank %d", what,
             r, item_name(i).c_str(), i, comm.rank());
      }
    }
  }
}

}  // namespace weft::training
