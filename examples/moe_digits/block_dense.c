/* Block A: the input projection, which every tp rank runs whole, and a Megatron tensor-parallel
 * MLP (W1 column-sharded, W2 row-sharded) over the "tp" mesh dim: one all-reduce in forward
 * (REDUCE region) and one in backward (COPY region's backward). */
#include <stdio.h>
#include <stdlib.h>

#include "blocks.h"
#include "linalg.h"

weft_status_t block_status = WEFT_OK;

int report(const char *what, weft_status_t st) {
  block_status = st;
  fprintf(stderr, "moe_digits: %s failed: %s\n  %s\n", what, weft_status_string(st), weft_last_error());
  return 1;
}

void view2_init(struct view2 *v, const float *data, size_t rows, size_t cols) {
  v->shape[0] = (int64_t)rows;
  v->shape[1] = (int64_t)cols;
  v->t.data = (void *)data;
  v->t.device_type = WEFT_DEVICE_CPU;
  v->t.device_id = 0;
  v->t.ndim = 2;
  v->t.dtype = WEFT_FLOAT32;
  v->t.shape = v->shape;
  v->t.strides = NULL;
  v->t.byte_offset = 0;
}

void view2_init_f64(struct view2 *v, const double *data, size_t rows, size_t cols) {
  view2_init(v, (const float *)(const void *)data, rows, cols);
  v->t.dtype = WEFT_FLOAT64;
}

void chunk_of(size_t n, int r, int ranks, size_t *start, size_t *len) {
  const size_t c = (n + (size_t)ranks - 1) / (size_t)ranks;
  size_t s = c * (size_t)r;
  if (s > n) s = n;
  *start = s;
  *len = (s + c > n ? n : s + c) - s;
}

static float *alloc(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

void dense_input_forward(struct model *m, struct dense_cache *c, const float *x, size_t t) {
  const struct param *p = m->p;
  c->t = t;
  c->x = alloc(t * IN_DIM);
  c->pre0 = alloc(t * HIDDEN);
  c->h0 = alloc(t * HIDDEN);
  for (size_t i = 0; i < t * IN_DIM; ++i) c->x[i] = x[i];
  mm(c->x, p[P_WIN].value, p[P_BIN].value, c->pre0, t, IN_DIM, HIDDEN);
  relu(c->pre0, c->h0, t * HIDDEN);
}

int dense_mlp_forward(struct model *m, struct dense_cache *c, float *h1) {
  const size_t t = c->t, fl = (size_t)(FFN / m->lay.tp);
  const struct param *p = m->p;
  c->pre1 = alloc(t * fl);
  c->a1 = alloc(t * fl);
  c->h1 = alloc(t * HIDDEN);
  mm(c->h0, p[P_W1].value, p[P_B1].value, c->pre1, t, HIDDEN, fl);
  relu(c->pre1, c->a1, t * fl);
  /* This rank's partial sum over its F/M hidden units, then the sum over the tp group, in
   * float64 and rounded once after it (train.c: why float64 sums). */
  double *z = calloc(t * HIDDEN + 1, sizeof(double));
  mm_d(c->a1, p[P_W2].value, z, t, fl, HIDDEN);
  struct view2 zv;
  view2_init_f64(&zv, z, t, HIDDEN);
  weft_status_t st = weft_region_apply(m->mesh, "tp", WEFT_REGION_REDUCE, 0, 0, &zv.t, &zv.t, NULL, NULL);
  if (st != WEFT_OK) {
    free(z);
    return report("block A forward: weft_region_apply(REDUCE)", st);
  }
  for (size_t r = 0; r < t; ++r)
    for (size_t k = 0; k < HIDDEN; ++k)
      c->h1[r * HIDDEN + k] = c->h0[r * HIDDEN + k] + (float)(z[r * HIDDEN + k] + p[P_B2].value[k]);
  free(z);
  for (size_t i = 0; i < t * HIDDEN; ++i) h1[i] = c->h1[i];
  return 0;
}

int dense_forward(struct model *m, struct dense_cache *c, const float *x, size_t t, float *h1) {
  dense_input_forward(m, c, x, t);
  return dense_mlp_forward(m, c, h1);
}

int dense_mlp_backward_input(struct model *m, struct dense_cache *c, const float *dh1) {
  const size_t t = c->t, fl = (size_t)(FFN / m->lay.tp);
  const struct param *p = m->p;
  c->dh1 = alloc(t * HIDDEN);
  c->dpre1 = alloc(t * fl);
  c->dpre0 = alloc(t * HIDDEN);
  for (size_t i = 0; i < t * HIDDEN; ++i) c->dh1[i] = dh1[i];
  mm_nt(c->dh1, p[P_W2].value, c->dpre1, t, fl, HIDDEN);
  relu_grad(c->pre1, c->dpre1, t * fl);
  /* d(h0) through the MLP: this rank's hidden units' share, summed over the tp group (float64). */
  double *dh0 = calloc(t * HIDDEN + 1, sizeof(double));
  mm_nt_d(c->dpre1, p[P_W1].value, dh0, t, HIDDEN, fl);
  struct view2 dv;
  view2_init_f64(&dv, dh0, t, HIDDEN);
  weft_status_t st = weft_region_apply(m->mesh, "tp", WEFT_REGION_COPY, 1, 0, &dv.t, &dv.t, NULL, NULL);
  for (size_t i = 0; i < t * HIDDEN; ++i) c->dpre0[i] = (float)dh0[i] + c->dh1[i]; /* + the residual path */
  free(dh0);
  return st == WEFT_OK ? 0 : report("block A backward: weft_region_apply(COPY backward)", st);
}

void dense_input_backward_input(struct dense_cache *c) { relu_grad(c->pre0, c->dpre0, c->t * HIDDEN); }

int dense_backward_input(struct model *m, struct dense_cache *c, const float *dh1) {
  if (dense_mlp_backward_input(m, c, dh1)) return 1;
  dense_input_backward_input(c);
  return 0;
}

void dense_mlp_backward_weight(struct model *m, struct dense_cache *c) {
  const size_t t = c->t, fl = (size_t)(FFN / m->lay.tp);
  struct param *p = m->p;
  mm_tn_acc(c->a1, c->dh1, p[P_W2].grad, t, fl, HIDDEN);
  colsum_acc(c->dh1, p[P_B2].grad, t, HIDDEN);
  mm_tn_acc(c->h0, c->dpre1, p[P_W1].grad, t, HIDDEN, fl);
  colsum_acc(c->dpre1, p[P_B1].grad, t, fl);
}

void dense_input_backward_weight(struct model *m, struct dense_cache *c) {
  struct param *p = m->p;
  mm_tn_acc(c->x, c->dpre0, p[P_WIN].grad, c->t, IN_DIM, HIDDEN);
  colsum_acc(c->dpre0, p[P_BIN].grad, c->t, HIDDEN);
}

void dense_backward_weight(struct model *m, struct dense_cache *c) {
  dense_mlp_backward_weight(m, c);
  dense_input_backward_weight(m, c);
}

void dense_free(struct dense_cache *c) {
  float *all[] = {c->x, c->pre0, c->h0, c->pre1, c->a1, c->h1, c->dh1, c->dpre1, c->dpre0};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) free(all[i]);
  *c = (struct dense_cache){0};
}
