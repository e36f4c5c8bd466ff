// Element types as weft-bench sees them: names (nccl-tests spelling), sizes, and a reference
// codec (value <-> bits, rounding) written from the formats' definitions so results can be
// checked without linking weft's internals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <weft/weft.h>

namespace weftbench {

enum class Kind { floating, signed_int, unsigned_int };

struct DtypeInfo {
  weft_dtype_t dtype;
  const char* name;      // as printed in the "type" column
  size_t size;           // bytes per element
  Kind kind;
  int mantissa_bits;     // stored fraction bits (floating kinds only)
  int exponent_bits;     // (floating kinds only)
  bool saturates;        // FP8: finite results beyond range become +-max finite
  bool has_infinity;     // false for FP8 E4M3
  int64_t max_exact_int; // every integer in [0, max_exact_int] is representable exactly
};

// All twelve types, in weft_dtype_t order.
const std::vector<DtypeInfo>& all_dtypes();
const DtypeInfo& dtype_info(weft_dtype_t d);
// Accepts nccl-tests' names and aliases (float, float32, half, fp16, bfloat16, bf16, int8, ...).
// Returns nullptr for an unknown name.
const DtypeInfo* find_dtype(const std::string& name);

// Rounds x to the nearest value of a floating type (ties to even), with the type's overflow
// rule (infinity, or saturation for FP8). Integer kinds: truncates to the type's width with
// two's-complement wrap. Returns the rounded value as a double.
double round_to(const DtypeInfo& t, double x);

// Writes value (already representable, e.g. from round_to) into element i of buf.
void store(const DtypeInfo& t, void* buf, size_t i, double value);
// Reads element i of buf as a double (integers exactly up to 2^53).
double load(const DtypeInfo& t, const void* buf, size_t i);

// Wraps v to the type's width (two's complement) and returns it sign- or zero-extended.
int64_t wrap_int(const DtypeInfo& t, int64_t v);

// True when got is an acceptable result for the exact reference value `expected` (already
// rounded to the type): floats within one unit in the last place of the type (or both NaN,
// or equal infinities), integers exactly.
bool close_enough(const DtypeInfo& t, double got, double expected);

}  // namespace weftbench
