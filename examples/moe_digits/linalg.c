/* See linalg.h. Sizes are small (tens of rows and columns): plain loops, no blocking. */
#include "linalg.h"

void mm(const float *x, const float *w, const float *b, float *y, size_t t, size_t k, size_t n) {
  for (size_t r = 0; r < t; ++r) {
    for (size_t c = 0; c < n; ++c) {
      double s = b ? (double)b[c] : 0.0;
      for (size_t i = 0; i < k; ++i) s += (double)x[r * k + i] * (double)w[i * n + c];
      y[r * n + c] = (float)s;
    }
  }
}

void mm_nt(const float *dy, const float *w, float *dx, size_t t, size_t k, size_t n) {
  for (size_t r = 0; r < t; ++r) {
    for (size_t i = 0; i < k; ++i) {
      double s = 0.0;
      for (size_t c = 0; c < n; ++c) s += (double)dy[r * n + c] * (double)w[i * n + c];
      dx[r * k + i] = (float)s;
    }
  }
}

void mm_d(const float *x, const float *w, double *y, size_t t, size_t k, size_t n) {
  for (size_t r = 0; r < t; ++r) {
    for (size_t c = 0; c < n; ++c) {
      double s = 0.0;
      for (size_t i = 0; i < k; ++i) s += (double)x[r * k + i] * (double)w[i * n + c];
      y[r * n + c] = s;
    }
  }
}

void mm_nt_d(const float *dy, const float *w, double *dx, size_t t, size_t k, size_t n) {
  for (size_t r = 0; r < t; ++r) {
    for (size_t i = 0; i < k; ++i) {
      double s = 0.0;
      for (size_t c = 0; c < n; ++c) s += (double)dy[r * n + c] * (double)w[i * n + c];
      dx[r * k + i] = s;
    }
  }
}

void mm_tn_acc(const float *x, const float *dy, double *dw, size_t t, size_t k, size_t n) {
  for (size_t i = 0; i < k; ++i)
    for (size_t c = 0; c < n; ++c)
      for (size_t r = 0; r < t; ++r) dw[i * n + c] += (double)x[r * k + i] * (double)dy[r * n + c];
}

void colsum_acc(const float *dy, double *db, size_t t, size_t n) {
  for (size_t c = 0; c < n; ++c)
    for (size_t r = 0; r < t; ++r) db[c] += (double)dy[r * n + c];
}

void relu(const float *x, float *y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void relu_grad(const float *pre, float *g, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (pre[i] <= 0.0f) g[i] = 0.0f;
}

void add_to(float *y, const float *x, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += x[i];
}
