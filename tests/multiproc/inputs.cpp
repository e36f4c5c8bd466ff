#include "inputs.h"

#include <cmath>
#include <limits>

namespace mpt {
namespace {

constexpr size_t kTable = 4096;

double unit(uint64_t h) { return static_cast<double>(h >> 11) * std::ldexp(1.0, -53); }  // [0,1)

int sum_range(weft_dtype_t dt) {
  switch (dt) {
    case WEFT_FLOAT64: case WEFT_FLOAT32: return 1000;
    case WEFT_FLOAT16: return 200;
    case WEFT_BFLOAT16: return 30;
    case WEFT_FP8_E4M3: return 2;
    default: return 1;  // e5m2
  }
}

double big_sum(weft_dtype_t dt) {
  switch (dt) {
    case WEFT_FLOAT64: return 1e308;
    case WEFT_FLOAT32: return 3e38;
    case WEFT_FLOAT16: return 40000;
    case WEFT_BFLOAT16: return 3e38;
    case WEFT_FP8_E4M3: return 320;
    default: return 40960;  // e5m2
  }
}

double big_prod(weft_dtype_t dt) {
  switch (dt) {
    case WEFT_FLOAT64: return 1e200;
    case WEFT_FLOAT32: return 1e30;
    case WEFT_FLOAT16: return 256;
    case WEFT_BFLOAT16: return std::ldexp(1.0, 40);
    case WEFT_FP8_E4M3: return 32;
    default: return 512;  // e5m2
  }
}

bool has_inf(weft_dtype_t dt) { return dt != WEFT_FP8_E4M3; }

}  // namespace

const char* input_name(Input in) {
  switch (in) {
    case Input::exact: return "exact";
    case Input::random: return "random";
    case Input::special: return "special";
    case Input::raw: return "raw";
  }
  return "?";
}

uint64_t hash_str(const char* s, uint64_t h) {
  for (; *s; ++s) {
    h ^= static_cast<unsigned char>(*s);
    h *= 1099511628211ull;
  }
  return h;
}

Source::Source(weft_dtype_t dt, weft_op_t op, Input kind, uint64_t seed, int nranks)
    : dt_(dt), op_(op), kind_(kind), seed_(seed), nranks_(nranks) {
  const size_t bytes = dtype_bytes(dt);
  mask_ = bytes == 8 ? ~uint64_t{0} : ((uint64_t{1} << (8 * bytes)) - 1);
  if (kind == Input::raw || !is_float(dt)) return;
  table_.resize(kTable);
  for (size_t k = 0; k < kTable; ++k) {
    uint64_t h = mix64(seed ^ (k * 0x9e3779b97f4a7c15ull) ^ 0x5eed);
    double v = 0;
    const bool exactish = kind == Input::exact || kind == Input::special;
    if (op == WEFT_SUM || op == WEFT_AVG) {
      if (exactish) {
        int r = sum_range(dt);
        v = static_cast<double>(static_cast<int64_t>(h % static_cast<uint64_t>(2 * r + 1)) - r);
      } else {
        v = 2.0 * unit(h) - 1.0;
      }
    } else if (op == WEFT_PROD) {
      if (exactish) {
        if (h % 16 == 0) {
          v = 0;
        } else {
          v = std::ldexp(1.0, static_cast<int>((h >> 8) % 3) - 1);
          if ((h >> 16) & 1) v = -v;
        }
      } else {
        v = 0.5 + 1.5 * unit(h);
        if (h & 1) v = -v;
      }
    } else {  // min / max
      if (kind == Input::exact) {
        // Any finite pattern: comparisons involve no rounding.
        uint64_t b = h & mask_;
        for (uint64_t t = 1; !std::isfinite(decode_float(dt, b)); ++t) b = mix64(h + t) & mask_;
        table_[k] = b;
        continue;
      }
      v = (2.0 * unit(h) - 1.0) * (kind == Input::random ? 400.0 : 16.0);
      if (kind == Input::special && dt == WEFT_FP8_E5M2) v = std::fmod(v, 8.0);
    }
    table_[k] = encode_float(dt, v, false);
  }
}

uint64_t Source::operator()(int rank, uint64_t idx) const {
  const uint64_t h = hash3(seed_, static_cast<uint64_t>(rank), idx);
  if (kind_ == Input::raw) return h & mask_;
  if (!is_float(dt_)) {
    if ((idx & 1) == 0) return h & mask_;
    int64_t small = is_signed_int(dt_) ? static_cast<int64_t>(h % 7) - 3 : static_cast<int64_t>(h % 7);
    return static_cast<uint64_t>(small) & mask_;
  }
  if (kind_ == Input::special) return special(rank, idx);
  return table_[h & (kTable - 1)];
}

uint64_t Source::special(int rank, uint64_t idx) const {
  const uint64_t h = hash3(seed_, static_cast<uint64_t>(rank), idx);
  const uint64_t small = table_[h & (kTable - 1)];
  const int n = nranks_;
  const int pick = static_cast<int>((idx / 8) % static_cast<uint64_t>(n));
  const double inf = has_inf(dt_) ? std::numeric_limits<double>::infinity() : max_finite(dt_);
  const bool neg = ((idx / 8) / static_cast<uint64_t>(n)) & 1;
  switch (idx % 8) {
    case 0:  // NaN on one rank
      return rank == pick ? encode_float(dt_, std::numeric_limits<double>::quiet_NaN(), false) : small;
    case 1: {  // every rank large: the reduction overflows the type
      double v;
      if (op_ == WEFT_SUM || op_ == WEFT_AVG) {
        v = big_sum(dt_);
      } else if (op_ == WEFT_PROD) {
        v = big_prod(dt_);
      } else {
        v = (rank % 2) ? -max_finite(dt_) : max_finite(dt_);
      }
      return encode_float(dt_, v, false);
    }
    case 2:  // +-inf (+-max for e4m3) on one rank
      return rank == pick ? encode_float(dt_, neg ? -inf : inf, false) : small;
    case 3:  // +inf on one rank, -inf on the next
      if (rank == pick) return encode_float(dt_, inf, false);
      if (n > 1 && rank == (pick + 1) % n) return encode_float(dt_, -inf, false);
      return small;
    case 4:  // -0 on every rank: SUM/AVG give -0, PROD the XOR of n minus signs
      return encode_float(dt_, -0.0, false);
    case 5:  // -0 on one rank, +0 elsewhere: SUM/AVG give +0 (n > 1), PROD gives -0
      return encode_float(dt_, rank == pick ? -0.0 : 0.0, false);
    default:
      return small;
  }
}

}  // namespace mpt
