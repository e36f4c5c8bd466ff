/* c_reduce's FUNCTION entries: plain functions that bindings call by name (weft_plugin_call).
 * Their manifest signatures (manifest.json) must match these prototypes exactly: weft cannot
 * check a FUNCTION's real types. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "weft/plugin.h"

#define C_REDUCE_EXPORT __attribute__((visibility("default")))

/* I64(I64, I64): wraps around like two's-complement hardware (computed unsigned: no UB). */
C_REDUCE_EXPORT int64_t c_reduce_add_i64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }

/* F64(PTR, PTR, SIZE): x and y are n doubles each. */
C_REDUCE_EXPORT double c_reduce_dot_f64(const void *x, const void *y, size_t n) {
  const double *p = x, *q = y;
  double s = 0.0;
  for (size_t i = 0; i < n; ++i) s += p[i] * q[i];
  return s;
}

/* F64(FN, F64): f is double (*)(double), e.g. a closure from weft_closure_create. */
typedef double (*c_reduce_unary_fn)(double);
C_REDUCE_EXPORT double c_reduce_apply_twice(void *f, double x) {
  c_reduce_unary_fn fn;
  memcpy(&fn, &f, sizeof fn); /* object pointer to function pointer, as POSIX dlsym does */
  return fn(fn(x));
}

/* F64(TENSOR): the sum of a float32 tensor in host memory, in double, walking shape and strides
 * (NULL strides: row-major contiguous). Other dtypes, device memory and empty tensors give 0. */
C_REDUCE_EXPORT double c_reduce_tensor_sum(const weft_tensor_t *t) {
  if (t->dtype != WEFT_FLOAT32 || t->device_type == WEFT_DEVICE_CUDA || !t->data) return 0.0;
  if (t->ndim < 0 || t->ndim > 32) return 0.0;
  int64_t extent = 1;
  for (int k = 0; k < t->ndim; ++k) {
    if (t->shape[k] <= 0) return 0.0;
    extent *= t->shape[k];
  }
  const float *base = (const float *)((const char *)t->data + t->byte_offset);
  if (!t->strides) {
    double s = 0.0;
    for (int64_t i = 0; i < extent; ++i) s += base[i];
    return s;
  }
  int64_t index[32] = {0};
  double s = 0.0;
  for (int64_t i = 0; i < extent; ++i) {
    int64_t off = 0;
    for (int k = 0; k < t->ndim; ++k) off += index[k] * t->strides[k];
    s += base[off];
    for (int k = t->ndim - 1; k >= 0; --k) { /* odometer step, last dim fastest */
      if (++index[k] < t->shape[k]) break;
      index[k] = 0;
    }
  }
  return s;
}

/* U64(STRING). */
C_REDUCE_EXPORT uint64_t c_reduce_strlen_u64(const char *s) { return (uint64_t)strlen(s); }
