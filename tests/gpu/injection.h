// WEFT_TEST_INJECT=1 for the GPU tests, by the multi-rank tests' rule (tests/multiproc/inject.h):
// every device result is corrupted after it comes back from the device and before it is
// checked, so a run proves that each check can fail. The programs tally the corrupted results
// and the ones their checks caught (mpt::InjectTally) and pass an injection run only when there
// was at least one and every one was caught (tests/gpu/CMakeLists.txt runs one per program).
#pragma once

#include <cstddef>

#include "inject.h"
#include "reference.h"

namespace weft::gputest {

// In injection mode, corrupts the middle element of a result of `count` elements of dt as
// mpt::injected_bits says (far outside every tolerance) and returns true; otherwise, or for
// an empty result, leaves it alone.
inline bool inject(void* result, weft_dtype_t dt, size_t count) {
  if (!mpt::inject_enabled() || !result || count == 0) return false;
  const size_t i = count / 2;
  mpt::store_bits(dt, result, i, mpt::injected_bits(dt, mpt::load_bits(dt, result, i)));
  return true;
}

}  // namespace weft::gputest
