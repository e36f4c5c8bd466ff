// The single-process reference the multi-rank tests compare against.
//
// Everything here is written from weft.h's "Reduction rules" alone and shares no code with the
// library: its own f16/bf16/fp8 codecs (round-to-nearest-even from double, which is exact for a
// float32 input), a sequential reduction in rank order, and the comparison rules (exact, or a
// stated tolerance for random-valued floats).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "weft/weft.h"

namespace mpt {

const char* dtype_name(weft_dtype_t dt);  // "f32", "bf16", "e4m3", ...
const char* op_name(weft_op_t op);        // "sum", "prod", ...
size_t dtype_bytes(weft_dtype_t dt);      // independent of weft_dtype_size()

bool is_float(weft_dtype_t dt);    // f64, f32, f16, bf16, e4m3, e5m2
bool is_lowp(weft_dtype_t dt);     // f16, bf16, e4m3, e5m2: reduced in float32, rounded once
bool is_signed_int(weft_dtype_t dt);
int int_bits(weft_dtype_t dt);     // 8/32/64 for integer types, 0 otherwise

// Raw element access: the element's bit pattern in the low bits of a uint64.
uint64_t load_bits(weft_dtype_t dt, const void* buf, size_t i);
void store_bits(weft_dtype_t dt, void* buf, size_t i, uint64_t bits);

// Float codecs. encode_float rounds a double to the format (round-to-nearest-even). Overflow
// gives +-inf for f32/f16/bf16/e5m2 and NaN for e4m3, unless saturate (fp8 only): +-max finite.
// A double that is already exactly a float32 value rounds exactly as float32 -> format would.
uint64_t encode_float(weft_dtype_t dt, double v, bool saturate);
double decode_float(weft_dtype_t dt, uint64_t bits);
double max_finite(weft_dtype_t dt);
bool is_nan_bits(weft_dtype_t dt, uint64_t bits);
// Position of a value on the format's number line (for "within k ulps" checks): adjacent
// representable values differ by 1, +0 and -0 are both 0.
int64_t ordinal(weft_dtype_t dt, uint64_t bits);

// Human-readable value: "3.5 (0x4060)" for floats, "-7 (0xf9)" for integers.
std::string format_value(weft_dtype_t dt, uint64_t bits);

// Spacing of the format's values at |v| (one ulp): 2^(e - mantissa bits) for |v| in [2^e, 2^(e+1)),
// the subnormal spacing below the smallest normal (and for 0). Meaningless for inf/NaN.
double spacing(weft_dtype_t dt, double v);

// True where weft.h, through IEEE 754 arithmetic in the stated type, fixes the sign of a zero
// result whatever the order of the reduction: SUM and AVG give -0 only when every input is -0,
// PROD's sign is the XOR of the inputs' signs. MIN/MAX of +0 and -0 are not specified by weft.h,
// so their zero sign is not compared.
bool zero_sign_defined(weft_op_t op);

// How reduction results are compared (see tests/multiproc/README.md, "Tolerances").
// Both modes: integers bit for bit; a float NaN matches any NaN and nothing else (weft.h
// promises NaN-ness, not sign, payload or quietness); an infinity matches only itself.
enum class Compare {
  exact,      // same value, and the same zero sign where zero_sign_defined(op)
  tolerance,  // random-valued floats: |got - expected| <= Expectation::bound (MIN/MAX stay exact)
};

// Expected result of reducing one element across ranks, plus what is needed for tolerances.
struct Expectation {
  uint64_t bits = 0;    // round_once(reference) in the destination type
  double value = 0;     // decoded value of bits (floats)
  double abs_sum = 0;   // sum over ranks of |x_r| (floats), for cancellation-aware tolerances
  double wide = 0;      // the reference's accumulator before the final rounding (float32 for
                        // f16/bf16/fp8; equal to value for f32/f64)
  bool matches(weft_dtype_t dt, weft_op_t op, Compare cmp, int nranks, uint64_t got) const;
  // The largest |got - expected| that Compare::tolerance accepts for a finite got (0 for
  // integers and for MIN/MAX): the rounding bound of the table in README.md.
  double bound(weft_dtype_t dt, weft_op_t op, int nranks, uint64_t got) const;
  // The tolerance rule as text, for failure messages.
  static std::string rule(weft_dtype_t dt, weft_op_t op, Compare cmp, int nranks);
};

// Reduces vals[0..n) (element bit patterns, in rank order) sequentially, following weft.h:
// f64/f32 in their own type, low-precision floats in float32 then rounded once (fp8
// saturating), integers wrapping, AVG = SUM / n (truncating for integers).
Expectation reduce_reference(weft_dtype_t dt, weft_op_t op, const uint64_t* vals, int n);

}  // namespace mpt
