#include "dtypes.h"

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstring>

namespace weftbench {

namespace {

// bias of a floating type with the given exponent width
int bias_of(const DtypeInfo& t) { return (1 << (t.exponent_bits - 1)) - 1; }

double max_finite(const DtypeInfo& t) {
  const int bias = bias_of(t);
  if (t.has_infinity)  // IEEE-like: top exponent field reserved for inf/NaN
    return std::ldexp(2.0 - std::ldexp(1.0, -t.mantissa_bits), ((1 << t.exponent_bits) - 2) - bias);
  // E4M3: the top exponent field holds numbers too; only mantissa all-ones there is NaN
  return std::ldexp(2.0 - std::ldexp(1.0, 1 - t.mantissa_bits), ((1 << t.exponent_bits) - 1) - bias);
}

// Bits of a small float type (half, bfloat16, fp8) holding v, which must be representable
// (or NaN / infinity where the type has it).
uint32_t encode_small(const DtypeInfo& t, double v) {
  const int E = t.exponent_bits, M = t.mantissa_bits, bias = bias_of(t);
  const uint32_t sign = std::signbit(v) ? 1u << (E + M) : 0u;
  const uint32_t exp_all = (1u << E) - 1;
  if (std::isnan(v)) {
    if (t.has_infinity) return (exp_all << M) | (1u << (M - 1));
    return (exp_all << M) | ((1u << M) - 1);  // E4M3: the single NaN pattern (per sign)
  }
  if (std::isinf(v)) {
    if (t.has_infinity) return sign | (exp_all << M);
    v = std::copysign(max_finite(t), v);
  }
  const double a = std::fabs(v);
  if (a == 0) return sign;
  const int e = std::ilogb(a);
  if (e < 1 - bias) {  // subnormal
    const double m = std::ldexp(a, -(1 - bias - M));
    return sign | static_cast<uint32_t>(m);
  }
  const double frac = std::ldexp(a, -e) - 1.0;  // in [0, 1)
  const uint32_t m = static_cast<uint32_t>(std::ldexp(frac, M));
  return sign | (static_cast<uint32_t>(e + bias) << M) | m;
}

double decode_small(const DtypeInfo& t, uint32_t bits) {
  const int E = t.exponent_bits, M = t.mantissa_bits, bias = bias_of(t);
  const bool neg = (bits >> (E + M)) & 1u;
  const uint32_t e = (bits >> M) & ((1u << E) - 1);
  const uint32_t m = bits & ((1u << M) - 1);
  double v;
  if (e == (1u << E) - 1 && t.has_infinity) {
    v = m == 0 ? INFINITY : NAN;
  } else if (e == (1u << E) - 1 && m == (1u << M) - 1) {
    v = NAN;  // E4M3
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - bias - M);
  } else {
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -M), static_cast<int>(e) - bias);
  }
  return neg ? -v : v;
}


// Lazily built tables for the small float types: bits -> value, and small integer -> bits.
constexpr int kIntTable = 4096;
struct SmallTables {
  std::vector<float> decode;        // indexed by bits
  std::vector<uint16_t> encode_int; // indexed by a non-negative integer < kIntTable
};

const SmallTables& tables_for(const DtypeInfo& t) {
  static SmallTables tables[WEFT_NUM_DTYPES];
  SmallTables& s = tables[t.dtype];
  if (s.decode.empty()) {
    const size_t n = size_t{1} << (8 * t.size);
    s.decode.resize(n);
    for (size_t b = 0; b < n; ++b) s.decode[b] = static_cast<float>(decode_small(t, static_cast<uint32_t>(b)));
    s.encode_int.resize(kIntTable);
    for (int k = 0; k < kIntTable; ++k)
      s.encode_int[k] = static_cast<uint16_t>(encode_small(t, round_to(t, k)));
  }
  return s;
}

}  // namespace

const std::vector<DtypeInfo>& all_dtypes() {
  static const std::vector<DtypeInfo> v = {
      {WEFT_FLOAT64, "double", 8, Kind::floating, 52, 11, false, true, int64_t{1} << 53},
      {WEFT_FLOAT32, "float", 4, Kind::floating, 23, 8, false, true, int64_t{1} << 24},
      {WEFT_FLOAT16, "half", 2, Kind::floating, 10, 5, false, true, 2048},
      {WEFT_BFLOAT16, "bfloat16", 2, Kind::floating, 7, 8, false, true, 256},
      {WEFT_FP8_E4M3, "fp8e4m3", 1, Kind::floating, 3, 4, true, false, 16},
      {WEFT_FP8_E5M2, "fp8e5m2", 1, Kind::floating, 2, 5, true, true, 8},
      {WEFT_INT8, "int8", 1, Kind::signed_int, 0, 0, false, false, INT8_MAX},
      {WEFT_UINT8, "uint8", 1, Kind::unsigned_int, 0, 0, false, false, UINT8_MAX},
      {WEFT_INT32, "int32", 4, Kind::signed_int, 0, 0, false, false, INT32_MAX},
      {WEFT_UINT32, "uint32", 4, Kind::unsigned_int, 0, 0, false, false, UINT32_MAX},
      {WEFT_INT64, "int64", 8, Kind::signed_int, 0, 0, false, false, int64_t{1} << 53},
      {WEFT_UINT64, "uint64", 8, Kind::unsigned_int, 0, 0, false, false, int64_t{1} << 53},
  };
  return v;
}

const DtypeInfo& dtype_info(weft_dtype_t d) { return all_dtypes().at(static_cast<size_t>(d)); }

const DtypeInfo* find_dtype(const std::string& name) {
  struct Alias {
    const char* name;
    weft_dtype_t d;
  };
  static const Alias aliases[] = {
      {"double", WEFT_FLOAT64},   {"float64", WEFT_FLOAT64},  {"f64", WEFT_FLOAT64},
      {"float", WEFT_FLOAT32},    {"float32", WEFT_FLOAT32},  {"f32", WEFT_FLOAT32},
      {"half", WEFT_FLOAT16},     {"float16", WEFT_FLOAT16},  {"fp16", WEFT_FLOAT16},
      {"bfloat16", WEFT_BFLOAT16}, {"bf16", WEFT_BFLOAT16},
      {"fp8e4m3", WEFT_FP8_E4M3}, {"f8e4m3", WEFT_FP8_E4M3},  {"e4m3", WEFT_FP8_E4M3},
      {"fp8e5m2", WEFT_FP8_E5M2}, {"f8e5m2", WEFT_FP8_E5M2},  {"e5m2", WEFT_FP8_E5M2},
      {"int8", WEFT_INT8},        {"uint8", WEFT_UINT8},      {"int32", WEFT_INT32},
      {"int", WEFT_INT32},        {"uint32", WEFT_UINT32},    {"int64", WEFT_INT64},
      {"uint64", WEFT_UINT64},
  };
  for (const Alias& a : aliases)
    if (name == a.name) return &dtype_info(a.d);
  return nullptr;
}

int64_t wrap_int(const DtypeInfo& t, int64_t v) {
  const int bits = static_cast<int>(8 * t.size);
  if (bits == 64) return v;
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  const uint64_t u = static_cast<uint64_t>(v) & mask;
  if (t.kind == Kind::signed_int && (u >> (bits - 1)) != 0) return static_cast<int64_t>(u) - (int64_t{1} << bits);
  return static_cast<int64_t>(u);
}

double round_to(const DtypeInfo& t, double x) {
  if (t.kind != Kind::floating) return static_cast<double>(wrap_int(t, static_cast<int64_t>(x)));
  if (t.dtype == WEFT_FLOAT64) return x;
  if (t.dtype == WEFT_FLOAT32) return static_cast<double>(static_cast<float>(x));
  if (std::isnan(x)) return x;
  const double mx = max_finite(t);
  if (std::isinf(x)) return t.has_infinity ? x : std::copysign(mx, x);
  const double a = std::fabs(x);
  if (a == 0) return x;
  const int bias = bias_of(t);
  const int e = std::max(std::ilogb(a), 1 - bias);
  const int quantum = e - t.mantissa_bits;
  const double r = std::ldexp(std::nearbyint(std::ldexp(a, -quantum)), quantum);  // ties to even
  double res = r;
  if (r > mx) res = t.saturates ? mx : INFINITY;
  return std::copysign(res, x);
}

void store(const DtypeInfo& t, void* buf, size_t i, double v) {
  char* p = static_cast<char*>(buf) + i * t.size;
  switch (t.dtype) {
    case WEFT_FLOAT64: std::memcpy(p, &v, 8); return;
    case WEFT_FLOAT32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); return; }
    case WEFT_INT8: case WEFT_UINT8: { uint8_t u = static_cast<uint8_t>(wrap_int(t, static_cast<int64_t>(v))); *p = static_cast<char>(u); return; }
    case WEFT_INT32: case WEFT_UINT32: { uint32_t u = static_cast<uint32_t>(wrap_int(t, static_cast<int64_t>(v))); std::memcpy(p, &u, 4); return; }
    case WEFT_INT64: { int64_t u = static_cast<int64_t>(v); std::memcpy(p, &u, 8); return; }
    case WEFT_UINT64: { uint64_t u = static_cast<uint64_t>(v); std::memcpy(p, &u, 8); return; }
    default: break;
  }
  // half, bfloat16, fp8
  uint32_t bits;
  if (v >= 0 && v < kIntTable && v == std::floor(v) && !std::signbit(v))
    bits = tables_for(t).encode_int[static_cast<size_t>(v)];
  else
    bits = encode_small(t, v);
  if (t.size == 2) {
    uint16_t b = static_cast<uint16_t>(bits);
    std::memcpy(p, &b, 2);
  } else {
    *p = static_cast<char>(static_cast<uint8_t>(bits));
  }
}

double load(const DtypeInfo& t, const void* buf, size_t i) {
  const char* p = static_cast<const char*>(buf) + i * t.size;
  switch (t.dtype) {
    case WEFT_FLOAT64: { double d; std::memcpy(&d, p, 8); return d; }
    case WEFT_FLOAT32: { float f; std::memcpy(&f, p, 4); return f; }
    case WEFT_INT8: { int8_t v; std::memcpy(&v, p, 1); return v; }
    case WEFT_UINT8: { uint8_t v; std::memcpy(&v, p, 1); return v; }
    case WEFT_INT32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case WEFT_UINT32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case WEFT_INT64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case WEFT_UINT64: { uint64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    default: break;
  }
  uint32_t bits;
  if (t.size == 2) {
    uint16_t b;
    std::memcpy(&b, p, 2);
    bits = b;
  } else {
    bits = static_cast<uint8_t>(*p);
  }
  return tables_for(t).decode[bits];
}

bool close_enough(const DtypeInfo& t, double got, double expected) {
  if (t.kind != Kind::floating) return got == expected;
  if (std::isnan(expected)) return std::isnan(got);
  if (std::isinf(expected)) return got == expected;
  if (!std::isfinite(got)) return false;
  const int bias = bias_of(t);
  const double a = std::fabs(expected);
  const int e = a == 0 ? 1 - bias : std::max(std::ilogb(a), 1 - bias);
  const double ulp = std::ldexp(1.0, e - t.mantissa_bits);
  return std::fabs(got - expected) <= ulp;
}

}  // namespace weftbench
