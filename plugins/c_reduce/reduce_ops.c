/* c_reduce's reduction operators (weft/plugin.h, REDUCE_OP: int32_t f(dst, a, b, count, dtype)).
 * weft calls each once per chunk of a collective; dst may be a or b exactly, so the loops read
 * a[i] and b[i] before writing dst[i] and never look at another index. A dtype the manifest does
 * not list cannot arrive (weft checks it before the collective), but each operator still answers
 * one with WEFT_ERR_INVALID_ARGUMENT rather than reading memory as the wrong type. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "weft/plugin.h"

#define C_REDUCE_EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------------ absmax */

/* max(|a|, |b|); a NaN operand wins (x > y is false for NaN, so x is kept only when it is the
 * NaN or the larger). Commutative bit for bit except between two different NaN payloads. */
#define ABSMAX_FLOAT(T, FABS)                                              \
  static void absmax_##T(T *dst, const T *a, const T *b, size_t n) {       \
    for (size_t i = 0; i < n; ++i) {                                       \
      const T x = FABS(a[i]), y = FABS(b[i]);                              \
      dst[i] = (x > y || x != x) ? x : y;                                  \
    }                                                                      \
  }
ABSMAX_FLOAT(float, fabsf)
ABSMAX_FLOAT(double, fabs)

/* Integers: the larger magnitude, computed in the unsigned type so that |INT_MIN| (2^31 or 2^63)
 * is defined; stored back it reads as INT_MIN again, which is still the largest magnitude, so the
 * operator stays associative and commutative. */
#define ABSMAX_INT(T, U)                                                   \
  static void absmax_##T(T *dst, const T *a, const T *b, size_t n) {       \
    for (size_t i = 0; i < n; ++i) {                                       \
      const U x = a[i] < 0 ? (U)0 - (U)a[i] : (U)a[i];                     \
      const U y = b[i] < 0 ? (U)0 - (U)b[i] : (U)b[i];                     \
      dst[i] = (T)(x > y ? x : y);                                         \
    }                                                                      \
  }
ABSMAX_INT(int32_t, uint32_t)
ABSMAX_INT(int64_t, uint64_t)

C_REDUCE_EXPORT int32_t c_reduce_absmax(void *dst, const void *a, const void *b, size_t count, int32_t dtype) {
  switch (dtype) {
    case WEFT_FLOAT32: absmax_float(dst, a, b, count); return WEFT_OK;
    case WEFT_FLOAT64: absmax_double(dst, a, b, count); return WEFT_OK;
    case WEFT_INT32: absmax_int32_t(dst, a, b, count); return WEFT_OK;
    case WEFT_INT64: absmax_int64_t(dst, a, b, count); return WEFT_OK;
    default: return WEFT_ERR_INVALID_ARGUMENT;
  }
}

/* ------------------------------------------------------------------ logsumexp */

/* log(exp(a) + exp(b)) = m + log1p(exp(s - m)) with m = max(a, b), s = min(a, b): exp's argument
 * is <= 0, so nothing overflows, and log1p keeps the small-difference digits.
 * Special values: a NaN operand gives NaN; m = -inf (both -inf) gives -inf (s - m would be
 * -inf - -inf = NaN); m = +inf gives +inf (likewise).
 * Rounding bound (u = 2^-24 for float32, 2^-53 for float64, the unit roundoff; exact operands):
 * exp(s - m) is in (0, 1] within 1 ulp (2u relative; glibc's exp and expf stay below 1 ulp),
 * log1p of it lies in (0, log 2] within 4u relative (its own ulp plus exp's error carried by a
 * condition number <= 1 on [0, 1]), and the final addition rounds once:
 * |computed - exact| <= u |result| + 4u log 2 <= u (|result| + 3). logsumexp is 1-Lipschitz in
 * the max norm (both partial derivatives lie in [0, 1] and sum to 1), so errors already in the
 * operands pass through without growth: n - 1 merges, in any order, stay within
 * (n - 1) u (M + 3), where M bounds |result| over every partial result (each partial
 * lies between the largest input and the final value). */
#define LOGSUMEXP(T, EXP, LOG1P)                                           \
  static void logsumexp_##T(T *dst, const T *a, const T *b, size_t n) {    \
    for (size_t i = 0; i < n; ++i) {                                       \
      const T x = a[i], y = b[i];                                          \
      const T m = x > y ? x : y, s = x > y ? y : x;                        \
      if (x != x || y != y) {                                              \
        dst[i] = x + y; /* NaN */                                          \
      } else if (m == -(T)INFINITY || m == (T)INFINITY) {                  \
        dst[i] = m;                                                        \
      } else {                                                             \
        dst[i] = m + LOG1P(EXP(s - m));                                    \
      }                                                                    \
    }                                                                      \
  }
LOGSUMEXP(float, expf, log1pf)
LOGSUMEXP(double, exp, log1p)

C_REDUCE_EXPORT int32_t c_reduce_logsumexp(void *dst, const void *a, const void *b, size_t count, int32_t dtype) {
  switch (dtype) {
    case WEFT_FLOAT32: logsumexp_float(dst, a, b, count); return WEFT_OK;
    case WEFT_FLOAT64: logsumexp_double(dst, a, b, count); return WEFT_OK;
    default: return WEFT_ERR_INVALID_ARGUMENT;
  }
}

/* ------------------------------------------------------------------ sum_f32 */

/* WEFT_SUM for float32, as weft's kernels/cpu/reduce.cpp writes it: restrict-qualified loops so
 * gcc -O3 vectorises them without runtime alias checks, with the exact-aliasing cases (dst == a,
 * dst == b) in their own loops (restrict would be a lie there). */
static void sum_distinct(float *restrict dst, const float *restrict a, const float *restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
}
static void sum_into(float *restrict acc, const float *restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] = acc[i] + b[i];
}
static void sum_double(float *restrict dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = dst[i] + dst[i];
}

C_REDUCE_EXPORT int32_t c_reduce_sum_f32(void *dst, const void *a, const void *b, size_t count, int32_t dtype) {
  if (dtype != WEFT_FLOAT32) return WEFT_ERR_INVALID_ARGUMENT;
  float *d = dst;
  const float *x = a, *y = b;
  if (d == x && d == y) {
    sum_double(d, count);
  } else if (d == x) {
    sum_into(d, y, count);
  } else if (d == y) {
    sum_into(d, x, count); /* addition commutes bit for bit */
  } else {
    sum_distinct(d, x, y, count);
  }
  return WEFT_OK;
}
