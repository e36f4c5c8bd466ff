// WEFT_TEST_INJECT=1: the proof that weft_mp_collectives' checks can fail. After each call
// completes and before its result is checked, one element of the rank's result is corrupted
// (or, on a rank that receives nothing but passed a buffer that must stay untouched, one byte of
// that buffer); the case must then fail on that rank. The program tallies injected and caught
// cases per (collective, dtype), prints "injected N, caught N" and exits 0 only when every
// injected case was caught and no case without an injection failed.
//
// The corruption flips bit (width - 2) of the element: the top exponent bit of every float
// format (f64, f32, f16, bf16, e4m3, e5m2). It multiplies or divides the magnitude by
// 2^(bias+1) >= 2^8, turns 0 and subnormals into values >= 2, NaN and inf into finite values
// (or a finite value into NaN/inf): far outside every rounding tolerance (README.md,
// "Tolerances", has the argument; test_basics checks it over whole formats). Integers and raw
// data are compared bit for bit, so any flipped bit fails them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "weft/weft.h"

namespace mpt {

bool inject_enabled();  // WEFT_TEST_INJECT=1

// The corrupted pattern of one element.
uint64_t injected_bits(weft_dtype_t dt, uint64_t bits);

// Tally of one run, per "collective dtype" key.
class InjectTally {
 public:
  // One case on this rank: whether something was corrupted and whether the checks failed.
  void record(const std::string& key, bool injected, bool failed);
  // Prints the per-key table (when verbose) and the totals; true when the run proves the checks.
  bool report(bool verbose) const;

 private:
  struct Row {
    long injected = 0, caught = 0, clean_failed = 0;
  };
  std::map<std::string, Row> rows_;
};

}  // namespace mpt
