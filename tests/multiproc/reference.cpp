#include "reference.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace mpt {
namespace {

// A binary floating-point format narrower than float32.
struct Fmt {
  int ebits;
  int mbits;
  int bias;
  int emin;      // exponent of the smallest normal
  double maxv;   // largest finite value
  bool has_inf;  // IEEE-like; otherwise (E4M3) all-ones exponent+mantissa is NaN
  uint64_t nan;  // the quiet NaN pattern we produce
};

const Fmt kF16{5, 10, 15, -14, 65504.0, true, 0x7e00};
const Fmt kBF16{8, 7, 127, -126, (2.0 - std::ldexp(1.0, -7)) * std::ldexp(1.0, 127), true, 0x7fc0};
const Fmt kE4M3{4, 3, 7, -6, 448.0, false, 0x7f};
const Fmt kE5M2{5, 2, 15, -14, 57344.0, true, 0x7e};

const Fmt& fmt_of(weft_dtype_t dt) {
  switch (dt) {
    case WEFT_FLOAT16: return kF16;
    case WEFT_BFLOAT16: return kBF16;
    case WEFT_FP8_E4M3: return kE4M3;
    default: return kE5M2;
  }
}

uint64_t f64_bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  return b;
}
double f64_from(uint64_t b) {
  double v;
  std::memcpy(&v, &b, 8);
  return v;
}
uint64_t f32_bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}
float f32_from(uint64_t b) {
  uint32_t u = static_cast<uint32_t>(b);
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

uint64_t encode_small(const Fmt& f, double v, bool saturate) {
  const uint64_t sign = std::signbit(v) ? (uint64_t{1} << (f.ebits + f.mbits)) : 0;
  const uint64_t exp_all = (uint64_t{1} << f.ebits) - 1;
  const uint64_t inf = sign | (exp_all << f.mbits);
  const uint64_t maxb = sign | (f.has_inf ? (((exp_all - 1) << f.mbits) | ((uint64_t{1} << f.mbits) - 1))
                                          : ((exp_all << f.mbits) | ((uint64_t{1} << f.mbits) - 2)));
  if (std::isnan(v)) return sign | f.nan;
  if (std::isinf(v)) {
    if (f.has_inf) return inf;
    return saturate ? maxb : (sign | f.nan);
  }
  double a = std::fabs(v);
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);
  int lead = e - 1;
  if (lead < f.emin) lead = f.emin;
  double quantum = std::ldexp(1.0, lead - f.mbits);
  double r = std::nearbyint(a / quantum) * quantum;  // default rounding mode: ties to even
  if (r > f.maxv) {
    if (saturate) return maxb;
    return f.has_inf ? inf : (sign | f.nan);
  }
  if (r == 0) return sign;
  if (r < std::ldexp(1.0, f.emin)) {
    uint64_t mant = static_cast<uint64_t>(r / std::ldexp(1.0, f.emin - f.mbits));
    return sign | mant;
  }
  int e2;
  std::frexp(r, &e2);
  int lead2 = e2 - 1;
  uint64_t expf = static_cast<uint64_t>(lead2 + f.bias);
  uint64_t mant = static_cast<uint64_t>((r / std::ldexp(1.0, lead2) - 1.0) * std::ldexp(1.0, f.mbits));
  return sign | (expf << f.mbits) | mant;
}

double decode_small(const Fmt& f, uint64_t b) {
  const uint64_t exp_all = (uint64_t{1} << f.ebits) - 1;
  const uint64_t mmask = (uint64_t{1} << f.mbits) - 1;
  bool neg = (b >> (f.ebits + f.mbits)) & 1;
  uint64_t expf = (b >> f.mbits) & exp_all;
  uint64_t mant = b & mmask;
  double v;
  if (f.has_inf && expf == exp_all) {
    v = mant == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.has_inf && expf == exp_all && mant == mmask) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (expf == 0) {
    v = static_cast<double>(mant) * std::ldexp(1.0, f.emin - f.mbits);
  } else {
    v = (1.0 + static_cast<double>(mant) / std::ldexp(1.0, f.mbits)) *
        std::ldexp(1.0, static_cast<int>(expf) - f.bias);
  }
  return neg ? -v : v;
}

template <typename T>
T fmin_nan(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  return b < a ? b : a;
}
template <typename T>
T fmax_nan(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  return b > a ? b : a;
}

template <typename T>
T apply(weft_op_t op, T acc, T x) {
  switch (op) {
    case WEFT_SUM:
    case WEFT_AVG: return acc + x;
    case WEFT_PROD: return acc * x;
    case WEFT_MIN: return fmin_nan(acc, x);
    case WEFT_MAX: return fmax_nan(acc, x);
    default: return acc;
  }
}

int64_t sext(uint64_t v, int bits) {
  if (bits == 64) return static_cast<int64_t>(v);
  uint64_t m = uint64_t{1} << (bits - 1);
  v &= (uint64_t{1} << bits) - 1;
  return static_cast<int64_t>((v ^ m) - m);
}

}  // namespace

const char* dtype_name(weft_dtype_t dt) {
  switch (dt) {
    case WEFT_FLOAT64: return "f64";
    case WEFT_FLOAT32: return "f32";
    case WEFT_FLOAT16: return "f16";
    case WEFT_BFLOAT16: return "bf16";
    case WEFT_FP8_E4M3: return "e4m3";
    case WEFT_FP8_E5M2: return "e5m2";
    case WEFT_INT8: return "i8";
    case WEFT_UINT8: return "u8";
    case WEFT_INT32: return "i32";
    case WEFT_UINT32: return "u32";
    case WEFT_INT64: return "i64";
    case WEFT_UINT64: return "u64";
    default: return "bad-dtype";
  }
}

const char* op_name(weft_op_t op) {
  switch (op) {
    case WEFT_SUM: return "sum";
    case WEFT_PROD: return "prod";
    case WEFT_MIN: return "min";
    case WEFT_MAX: return "max";
    case WEFT_AVG: return "avg";
    default: return "bad-op";
  }
}

size_t dtype_bytes(weft_dtype_t dt) {
  switch (dt) {
    case WEFT_FLOAT64: case WEFT_INT64: case WEFT_UINT64: return 8;
    case WEFT_FLOAT32: case WEFT_INT32: case WEFT_UINT32: return 4;
    case WEFT_FLOAT16: case WEFT_BFLOAT16: return 2;
    case WEFT_FP8_E4M3: case WEFT_FP8_E5M2: case WEFT_INT8: case WEFT_UINT8: return 1;
    default: return 0;
  }
}

bool is_float(weft_dtype_t dt) { return dt >= WEFT_FLOAT64 && dt <= WEFT_FP8_E5M2; }
bool is_lowp(weft_dtype_t dt) { return dt >= WEFT_FLOAT16 && dt <= WEFT_FP8_E5M2; }
bool is_signed_int(weft_dtype_t dt) { return dt == WEFT_INT8 || dt == WEFT_INT32 || dt == WEFT_INT64; }
int int_bits(weft_dtype_t dt) { return is_float(dt) ? 0 : static_cast<int>(dtype_bytes(dt) * 8); }

uint64_t load_bits(weft_dtype_t dt, const void* buf, size_t i) {
  const unsigned char* p = static_cast<const unsigned char*>(buf);
  switch (dtype_bytes(dt)) {
    case 1: return p[i];
    case 2: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); return v; }
    case 4: { uint32_t v; std::memcpy(&v, p + 4 * i, 4); return v; }
    default: { uint64_t v; std::memcpy(&v, p + 8 * i, 8); return v; }
  }
}

void store_bits(weft_dtype_t dt, void* buf, size_t i, uint64_t bits) {
  unsigned char* p = static_cast<unsigned char*>(buf);
  switch (dtype_bytes(dt)) {
    case 1: p[i] = static_cast<unsigned char>(bits); break;
    case 2: { uint16_t v = static_cast<uint16_t>(bits); std::memcpy(p + 2 * i, &v, 2); break; }
    case 4: { uint32_t v = static_cast<uint32_t>(bits); std::memcpy(p + 4 * i, &v, 4); break; }
    default: std::memcpy(p + 8 * i, &bits, 8); break;
  }
}

uint64_t encode_float(weft_dtype_t dt, double v, bool saturate) {
  if (dt == WEFT_FLOAT64) return f64_bits(v);
  if (dt == WEFT_FLOAT32) return f32_bits(static_cast<float>(v));
  return encode_small(fmt_of(dt), v, saturate);
}

double decode_float(weft_dtype_t dt, uint64_t bits) {
  if (dt == WEFT_FLOAT64) return f64_from(bits);
  if (dt == WEFT_FLOAT32) return f32_from(bits);
  return decode_small(fmt_of(dt), bits);
}

double max_finite(weft_dtype_t dt) {
  if (dt == WEFT_FLOAT64) return std::numeric_limits<double>::max();
  if (dt == WEFT_FLOAT32) return std::numeric_limits<float>::max();
  return fmt_of(dt).maxv;
}

bool is_nan_bits(weft_dtype_t dt, uint64_t bits) { return is_float(dt) && std::isnan(decode_float(dt, bits)); }

int64_t ordinal(weft_dtype_t dt, uint64_t bits) {
  int w = static_cast<int>(dtype_bytes(dt) * 8);
  uint64_t signbit = uint64_t{1} << (w - 1);
  uint64_t mag = bits & (signbit - 1);
  return (bits & signbit) ? -static_cast<int64_t>(mag) : static_cast<int64_t>(mag);
}

std::string format_value(weft_dtype_t dt, uint64_t bits) {
  char buf[96];
  int hexw = static_cast<int>(dtype_bytes(dt) * 2);
  if (is_float(dt)) {
    std::snprintf(buf, sizeof buf, "%.10g (0x%0*llx)", decode_float(dt, bits), hexw,
                  static_cast<unsigned long long>(bits));
  } else if (is_signed_int(dt)) {
    std::snprintf(buf, sizeof buf, "%lld (0x%0*llx)", static_cast<long long>(sext(bits, int_bits(dt))), hexw,
                  static_cast<unsigned long long>(bits));
  } else {
    std::snprintf(buf, sizeof buf, "%llu (0x%0*llx)", static_cast<unsigned long long>(bits), hexw,
                  static_cast<unsigned long long>(bits));
  }
  return buf;
}

Expectation reduce_reference(weft_dtype_t dt, weft_op_t op, const uint64_t* vals, int n) {
  Expectation e;
  if (dt == WEFT_FLOAT64) {
    double acc = f64_from(vals[0]);
    e.abs_sum = std::fabs(acc);
    for (int r = 1; r < n; ++r) {
      double x = f64_from(vals[r]);
      e.abs_sum += std::fabs(x);
      acc = apply(op, acc, x);
    }
    if (op == WEFT_AVG) acc = acc / static_cast<double>(n);
    e.bits = f64_bits(acc);
    e.value = acc;
    e.wide = acc;
  } else if (is_float(dt)) {
    // f32 itself, or a low-precision type widened to f32: reduce in float32.
    float acc = static_cast<float>(decode_float(dt, vals[0]));
    e.abs_sum = std::fabs(static_cast<double>(acc));
    for (int r = 1; r < n; ++r) {
      float x = static_cast<float>(decode_float(dt, vals[r]));
      e.abs_sum += std::fabs(static_cast<double>(x));
      acc = apply(op, acc, x);
    }
    if (op == WEFT_AVG) acc = acc / static_cast<float>(n);
    e.wide = static_cast<double>(acc);
    bool saturate = dt == WEFT_FP8_E4M3 || dt == WEFT_FP8_E5M2;
    e.bits = encode_float(dt, static_cast<double>(acc), saturate);
    e.value = decode_float(dt, e.bits);
  } else {
    const int bits = int_bits(dt);
    const uint64_t mask = bits == 64 ? ~uint64_t{0} : ((uint64_t{1} << bits) - 1);
    const bool sgn = is_signed_int(dt);
    uint64_t acc = vals[0] & mask;
    for (int r = 1; r < n; ++r) {
      uint64_t x = vals[r] & mask;
      switch (op) {
        case WEFT_SUM:
        case WEFT_AVG: acc = (acc + x) & mask; break;
        case WEFT_PROD: acc = (acc * x) & mask; break;
        case WEFT_MIN:
          if (sgn ? sext(x, bits) < sext(acc, bits) : x < acc) acc = x;
          break;
        case WEFT_MAX:
          if (sgn ? sext(x, bits) > sext(acc, bits) : x > acc) acc = x;
          break;
        default: break;
      }
    }
    if (op == WEFT_AVG) {
      if (sgn) {
        acc = static_cast<uint64_t>(sext(acc, bits) / static_cast<int64_t>(n)) & mask;
      } else {
        acc = acc / static_cast<uint64_t>(n);
      }
    }
    e.bits = acc;
    e.value = 0;
  }
  return e;
}

double spacing(weft_dtype_t dt, double v) {
  int mbits, emin;
  if (dt == WEFT_FLOAT64) {
    mbits = 52;
    emin = -1022;
  } else if (dt == WEFT_FLOAT32) {
    mbits = 23;
    emin = -126;
  } else {
    mbits = fmt_of(dt).mbits;
    emin = fmt_of(dt).emin;
  }
  int e = emin;
  if (v != 0) {
    std::frexp(std::fabs(v), &e);  // |v| in [2^(e-1), 2^e)
    e = e - 1 < emin ? emin : e - 1;
  }
  return std::ldexp(1.0, e - mbits);
}

bool zero_sign_defined(weft_op_t op) { return op == WEFT_SUM || op == WEFT_AVG || op == WEFT_PROD; }

namespace {

// Unit roundoff of the type the reduction runs in: float64, or float32 (f32 itself and the
// low-precision types, which weft.h widens to float32).
double unit_roundoff(weft_dtype_t dt) { return dt == WEFT_FLOAT64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24); }

// gamma_k = k u / (1 - k u): the relative error bound of k rounded operations (Higham,
// "Accuracy and Stability of Numerical Algorithms", 2nd ed., lemma 3.1).
double gamma_k(int k, double u) { return k * u / (1 - k * u); }

}  // namespace

double Expectation::bound(weft_dtype_t dt, weft_op_t op, int nranks, uint64_t got) const {
  if (!is_float(dt) || op == WEFT_MIN || op == WEFT_MAX) return 0;
  const double u = unit_roundoff(dt);
  const int n = nranks;
  // abs_sum was itself accumulated in double with up to n-1 roundings of 2^-53: inflate it so
  // that it is never below the true sum of |x_r|.
  const double S = abs_sum * (1 + n * std::ldexp(1.0, -52));
  // Any summation order performs n-1 additions, each input entering once, so both weft's sum
  // and the reference's differ from the exact sum by at most gamma_{n-1} * S: they differ from
  // each other by at most twice that. AVG adds one division, rounded once: gamma_n on S/n.
  // PROD: n-1 multiplications in any order give |fl - exact| <= gamma_{n-1} |exact|, and
  // |exact| <= |wide| / (1 - gamma_{n-1}).
  double acc;
  if (op == WEFT_SUM) {
    acc = 2 * gamma_k(n - 1, u) * S;
  } else if (op == WEFT_AVG) {
    acc = 2 * gamma_k(n, u) * S / n;
  } else {
    const double g = gamma_k(n - 1, u);
    acc = 2 * g / (1 - g) * std::fabs(wide);
  }
  if (!is_lowp(dt)) return acc;
  // The final rounding of each side to the destination type moves it by at most half a
  // spacing at the rounded value (a value that rounds up into the next binade rounds by at
  // most half the smaller spacing below it).
  return acc + spacing(dt, decode_float(dt, got)) / 2 + spacing(dt, value) / 2;
}

bool Expectation::matches(weft_dtype_t dt, weft_op_t op, Compare cmp, int nranks, uint64_t got) const {
  if (!is_float(dt)) return got == bits;
  const double g = decode_float(dt, got);
  const bool gn = std::isnan(g), en = std::isnan(value);
  if (gn || en) return gn && en;
  if (g == value) {
    // Equal values differ at most in the sign of zero.
    if (g != 0 || cmp == Compare::tolerance || !zero_sign_defined(op)) return true;
    return std::signbit(g) == std::signbit(value);
  }
  if (cmp == Compare::exact || op == WEFT_MIN || op == WEFT_MAX) return false;
  if (std::isinf(g) || std::isinf(value)) return false;
  return std::fabs(g - value) <= bound(dt, op, nranks, got);
}

std::string Expectation::rule(weft_dtype_t dt, weft_op_t op, Compare cmp, int nranks) {
  if (!is_float(dt)) return "exact (integers wrap; avg = wrapped sum / n truncated)";
  if (cmp == Compare::exact || op == WEFT_MIN || op == WEFT_MAX) {
    return zero_sign_defined(op) ? "exact (NaN matches any NaN; the sign of a zero result is compared)"
                                 : "exact (NaN matches any NaN; +0 == -0: weft.h leaves min/max of +-0 open)";
  }
  const double u = unit_roundoff(dt);
  const int n = nranks;
  char buf[240];
  if (op == WEFT_SUM) {
    std::snprintf(buf, sizeof buf, "|got-expected| <= 2*gamma_%d*sum|x_r| = %.3g*sum|x_r|", n - 1,
                  2 * gamma_k(n - 1, u));
  } else if (op == WEFT_AVG) {
    std::snprintf(buf, sizeof buf, "|got-expected| <= 2*gamma_%d*sum|x_r|/%d = %.3g*sum|x_r|", n, n,
                  2 * gamma_k(n, u) / n);
  } else {
    const double g = gamma_k(n - 1, u);
    std::snprintf(buf, sizeof buf, "|got-expected| <= 2*gamma_%d/(1-gamma_%d)*|wide| = %.3g*|wide|", n - 1, n - 1,
                  2 * g / (1 - g));
  }
  std::string out = buf;
  out += dt == WEFT_FLOAT64 ? " (float64, u = 2^-53)" : " (float32 accumulation, u = 2^-24)";
  if (is_lowp(dt)) out += std::string(" + half a spacing of ") + dtype_name(dt) + " at got and at expected";
  return out;
}

}  // namespace mpt
