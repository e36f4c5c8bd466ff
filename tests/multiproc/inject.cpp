#include "inject.h"

#include <cstdlib>
#include <cstring>

#include "mp_common.h"
#include "reference.h"

namespace mpt {

bool inject_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("WEFT_TEST_INJECT");
    return v && std::strcmp(v, "1") == 0;
  }();
  return on;
}

uint64_t injected_bits(weft_dtype_t dt, uint64_t bits) {
  const size_t width = dtype_bytes(dt) * 8;
  return bits ^ (uint64_t{1} << (width - 2));
}

void InjectTally::record(const std::string& key, bool injected, bool failed) {
  Row& r = rows_[key];
  if (injected) {
    r.injected++;
    if (failed) r.caught++;
  } else if (failed) {
    r.clean_failed++;
  }
}

bool InjectTally::report(bool verbose) const {
  long injected = 0, caught = 0, clean_failed = 0;
  for (const auto& [key, r] : rows_) {
    injected += r.injected;
    caught += r.caught;
    clean_failed += r.clean_failed;
    if (verbose || r.caught != r.injected || r.clean_failed)
      logf("inject %-24s injected %ld, caught %ld%s", key.c_str(), r.injected, r.caught,
           r.clean_failed ? ", and failures in cases without an injection" : "");
  }
  logf("injected %ld, caught %ld", injected, caught);
  if (clean_failed) logf("%ld cases failed without an injection (real failures)", clean_failed);
  return injected > 0 && caught == injected && clean_failed == 0;
}

}  // namespace mpt
