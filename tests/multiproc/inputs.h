// Deterministic inputs: every rank can compute every rank's input element from (seed, rank,
// index) alone, so each rank builds the exact expected output locally.
//
// Input kinds for reductions (tolerances: tests/multiproc/README.md):
//   exact   floats: small integers for sum/avg (sums exact in every format for up to 8 ranks:
//                   |x| <= 1000 f64/f32, 200 f16, 30 bf16, 2 e4m3, 1 e5m2), 0 or +-2^{-1,0,1}
//                   for prod (products exact, |p| in [2^-8, 2^8]), random finite bit patterns
//                   for min/max (no arithmetic, so exact); integers: full-range random values
//                   on even indices (sum/prod wrap) and small values on odd indices.
//   random  floats only: uniform in [-1,1) for sum/avg, +-[0.5,2) for prod, [-400,400) for
//           min/max, rounded to the type; compared with the tolerance in reference.h.
//   special floats only: NaN on one rank, +-inf (or +-max for e4m3), values whose sum/product
//           overflows the type (fp8 must saturate, f16/bf16/f32/f64 go to inf), -0 on every
//           rank, -0 on one rank and +0 on the others (the sign of a zero result), and exact
//           small values in between.
// Non-reducing collectives move raw random bit patterns and are compared bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "reference.h"
#include "weft/weft.h"

namespace mpt {

enum class Input { exact = 0, random = 1, special = 2, raw = 3 };
const char* input_name(Input in);

inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint64_t hash3(uint64_t seed, uint64_t rank, uint64_t idx) {
  return mix64(seed ^ mix64(rank * 0x632be59bd9b4e019ull + 1) ^ (idx * 0xd6e8feb86659fd93ull));
}

// Hash of a string (FNV-1a), for case seeds.
uint64_t hash_str(const char* s, uint64_t h = 1469598103934665603ull);

// The value of element `idx` of rank `rank`'s input, as a bit pattern of dtype.
class Source {
 public:
  Source(weft_dtype_t dt, weft_op_t op, Input kind, uint64_t seed, int nranks);
  uint64_t operator()(int rank, uint64_t idx) const;
  weft_dtype_t dtype() const { return dt_; }

 private:
  uint64_t special(int rank, uint64_t idx) const;
  weft_dtype_t dt_;
  weft_op_t op_;
  Input kind_;
  uint64_t seed_;
  int nranks_;
  uint64_t mask_;
  std::vector<uint64_t> table_;  // float exact/random values, indexed by hash
};

}  // namespace mpt
