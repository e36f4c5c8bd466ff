/* The test fixture plugin (manifests/test_good.json): a FUNCTION entry for every value type,
 * callbacks through FN arguments, and one entry of every kind. tests/unit/test_plugin_{loader,
 * call}.cpp check each against references written in the tests. */
#include <stdint.h>
#include <string.h>

#include <weft/plugin.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int64_t tp_add_i64(int64_t a, int64_t b) { return a + b; }
EXPORT double tp_mix3(int32_t a, int64_t b, double c) { return (double)a + 2.0 * (double)b + 4.0 * c; }
EXPORT int8_t tp_neg_i8(int8_t x) { return (int8_t)-x; }
EXPORT uint8_t tp_not_u8(uint8_t x) { return (uint8_t)~x; }
EXPORT int16_t tp_neg_i16(int16_t x) { return (int16_t)-x; }
EXPORT uint16_t tp_not_u16(uint16_t x) { return (uint16_t)~x; }
EXPORT int32_t tp_neg_i32(int32_t x) { return -x; }
EXPORT uint32_t tp_not_u32(uint32_t x) { return ~x; }
EXPORT int64_t tp_neg_i64(int64_t x) { return -x; }
EXPORT uint64_t tp_not_u64(uint64_t x) { return ~x; }
EXPORT float tp_half_f32(float x) { return x / 2.0f; }
EXPORT double tp_half_f64(double x) { return x / 2.0; }
EXPORT size_t tp_str_len(const char *s) { return strlen(s); }
EXPORT void *tp_ptr_advance(void *p, size_t n) { return (char *)p + n; }

EXPORT int64_t tp_tensor_numel(const weft_tensor_t *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

EXPORT double tp_mix_all(int8_t a, uint8_t b, int16_t c, uint16_t d, int32_t e, uint32_t f, int64_t g, uint64_t h,
                         float i, double j, size_t k) {
  return 1.0 * a + 2.0 * b + 3.0 * c + 4.0 * d + 5.0 * e + 6.0 * f + 7.0 * (double)g + 8.0 * (double)h + 9.0 * i +
         10.0 * j + 11.0 * (double)k;
}

EXPORT int32_t tp_apply_i32(int32_t (*fn)(int32_t), int32_t x) { return fn(x) + 1; }
EXPORT double tp_apply_mixed(double (*fn)(double, const char *), double x, const char *s) { return 2.0 * fn(x, s); }

EXPORT int64_t tp_sum_cb(int64_t (*fn)(int64_t), int64_t n) {
  int64_t s = 0;
  for (int64_t i = 0; i < n; ++i) s += fn(i);
  return s;
}

EXPORT void tp_set_flag(void *p) { *(int32_t *)p = 42; }

/* ---------------------------------------------------------------- kinds */

EXPORT int32_t tp_absmax(void *dst, const void *a, const void *b, size_t count, int32_t dtype) {
  if (dtype == WEFT_FLOAT32) {
    const float *x = a, *y = b;
    float *d = dst;
    for (size_t i = 0; i < count; ++i) {
      const float u = x[i] < 0 ? -x[i] : x[i], v = y[i] < 0 ? -y[i] : y[i];
      d[i] = u > v ? u : v;
    }
    return 0;
  }
  if (dtype == WEFT_INT32) {
    const int32_t *x = a, *y = b;
    int32_t *d = dst;
    for (size_t i = 0; i < count; ++i) {
      const int64_t u = x[i] < 0 ? -(int64_t)x[i] : x[i], v = y[i] < 0 ? -(int64_t)y[i] : y[i];
      d[i] = (int32_t)(u > v ? u : v);
    }
    return 0;
  }
  return WEFT_ERR_INVALID_ARGUMENT;
}

EXPORT size_t tp_trunc16_bytes(size_t count) { return 2 * count; }

EXPORT int32_t tp_trunc16_encode(const float *src, size_t count, void *dst) {
  uint16_t *out = dst;
  for (size_t i = 0; i < count; ++i) {
    uint32_t bits;
    memcpy(&bits, &src[i], 4);
    out[i] = (uint16_t)(bits >> 16);
  }
  return 0;
}

EXPORT int32_t tp_trunc16_decode(const void *src, size_t count, float *dst) {
  const uint16_t *in = src;
  for (size_t i = 0; i < count; ++i) {
    const uint32_t bits = (uint32_t)in[i] << 16;
    memcpy(&dst[i], &bits, 4);
  }
  return 0;
}

EXPORT int32_t tp_router_highest(const float *scores, size_t tokens, int32_t experts, int32_t topk, int32_t *indices) {
  if (topk < 1 || topk > experts || experts > 1024) return WEFT_ERR_INVALID_ARGUMENT;
  for (size_t t = 0; t < tokens; ++t) {
    unsigned char taken[1024] = {0};
    for (int32_t j = 0; j < topk; ++j) {
      int32_t best = -1;
      for (int32_t e = 0; e < experts; ++e) {
        if (!taken[e] && (best < 0 || scores[t * experts + e] > scores[t * experts + best])) best = e;
      }
      taken[best] = 1;
      indices[t * topk + j] = best;
    }
  }
  return 0;
}

/* GPipe's order for one stage per rank: every forward, then every backward. */
EXPORT int32_t tp_schedule_gpipe(int32_t ranks, int32_t microbatches, int32_t stages_per_rank, void *actions,
                                 size_t capacity, size_t *counts, int32_t *stage_rank) {
  if (stages_per_rank != 1 || ranks < 1 || microbatches < 1) return WEFT_ERR_INVALID_ARGUMENT;
  if ((size_t)ranks * 2 * (size_t)microbatches > capacity) return WEFT_ERR_INVALID_ARGUMENT;
  int32_t *out = actions; /* weft_action_t: kind, stage, microbatch (three int32) */
  for (int32_t r = 0; r < ranks; ++r) {
    for (int32_t pass = 0; pass < 2; ++pass) {
      for (int32_t m = 0; m < microbatches; ++m) {
        *out++ = pass; /* WEFT_ACTION_F = 0, WEFT_ACTION_B = 1 */
        *out++ = r;
        *out++ = m;
      }
    }
    counts[r] = 2 * (size_t)microbatches;
    stage_rank[r] = r;
  }
  return 0;
}

EXPORT double tp_cost_linear(int32_t action_kind, int32_t stage, int32_t nstages, int32_t microbatch,
                             int32_t microbatch_size) {
  (void)nstages;
  (void)microbatch;
  const double t = action_kind == 0 ? 1.0 + stage / 10.0 : action_kind == 1 ? 2.0 : 1.0;
  return t * microbatch_size;
}
