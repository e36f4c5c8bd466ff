/* The dense arithmetic of the demo's hand-written forward and backward: row-major float32
 * matrices, every dot product accumulated in double in index order, so a result depends on its
 * inputs only (not on how a layout splits the batch into micro-batches or ranks). */
#ifndef MOE_DIGITS_LINALG_H
#define MOE_DIGITS_LINALG_H

#include <stddef.h>

/* y[T,N] = x[T,K] W[K,N] (+ b[N] when b is not NULL). */
void mm(const float *x, const float *w, const float *b, float *y, size_t t, size_t k, size_t n);
/* dx[T,K] = dy[T,N] W[K,N]^T (overwrites dx). */
void mm_nt(const float *dy, const float *w, float *dx, size_t t, size_t k, size_t n);
/* The same without the final rounding: y[T,N] = x W in double (sums that ranks add up further). */
void mm_d(const float *x, const float *w, double *y, size_t t, size_t k, size_t n);
void mm_nt_d(const float *dy, const float *w, double *dx, size_t t, size_t k, size_t n);
/* dw[K,N] += x[T,K]^T dy[T,N] and db[N] += column sums of dy: gradients stay in double until
 * every micro-batch and rank has added its share (see train.c: why float64 sums). */
void mm_tn_acc(const float *x, const float *dy, double *dw, size_t t, size_t k, size_t n);
void colsum_acc(const float *dy, double *db, size_t t, size_t n);
/* y = max(x, 0) elementwise (y may be x). */
void relu(const float *x, float *y, size_t n);
/* g[i] = 0 where pre[i] <= 0: the gradient through relu, in place. */
void relu_grad(const float *pre, float *g, size_t n);
/* y[i] += x[i]. */
void add_to(float *y, const float *x, size_t n);

#endif
