/* Block B: an expert-parallel MoE layer (weft's router, dispatch and combine over the tp/ep dim)
 * and the classifier head with its cross-entropy loss, on this rank's chunk of the micro-batch. */
#include <math.h>
#include <stdlib.h>

#include "blocks.h"
#include "linalg.h"

static float *alloc(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

/* Softmax top-2, renormalised, dropless. No auxiliary loss and no capacity: both depend on which
 * tokens share a router call (a micro-batch's chunk), so they would make the loss depend on the
 * layout and the equivalence with one process could not hold. */
static weft_router_config_t router_config(void) {
  weft_router_config_t rc = WEFT_ROUTER_CONFIG_INIT;
  rc.experts = EXPERTS;
  rc.topk = TOPK;
  rc.score = WEFT_ROUTER_SOFTMAX;
  rc.normalize = 1;
  rc.drop = WEFT_DROP_NONE;
  return rc;
}

/* Expert j's rows: pe = rows We1[j] + be1[j], ae = relu(pe), out = ae We2[j] + be2[j]. */
static void experts_forward(const struct model *m, const weft_moe_received_t *rec, struct moe_cache *c, float *out) {
  const struct param *p = m->p;
  for (int j = 0; j < rec->local_experts; ++j) {
    const size_t off = (size_t)rec->offsets[j], n = (size_t)rec->counts[j];
    mm(c->received + off * HIDDEN, p[P_WE1].value + (size_t)j * HIDDEN * EXPERT_FFN,
       p[P_BE1].value + (size_t)j * EXPERT_FFN, c->pe + off * EXPERT_FFN, n, HIDDEN, EXPERT_FFN);
    relu(c->pe + off * EXPERT_FFN, c->ae + off * EXPERT_FFN, n * EXPERT_FFN);
    mm(c->ae + off * EXPERT_FFN, p[P_WE2].value + (size_t)j * EXPERT_FFN * HIDDEN,
       p[P_BE2].value + (size_t)j * HIDDEN, out + off * HIDDEN, n, EXPERT_FFN, HIDDEN);
  }
}

/* Cross-entropy of logits z[t, 10] against labels: adds the summed loss and the correct count;
 * dz = (softmax - onehot) * scale, the gradient of the global mean loss. */
static void head_loss(const float *z, const int *labels, size_t t, double scale, float *dz, double *loss,
                      double *correct) {
  for (size_t r = 0; r < t; ++r) {
    const float *zr = z + r * CLASSES;
    int best = 0;
    double mx = zr[0];
    for (int k = 1; k < CLASSES; ++k)
      if (zr[k] > zr[best]) best = k;
    mx = zr[best];
    if (labels == NULL) continue;
    double sum = 0.0;
    for (int k = 0; k < CLASSES; ++k) sum += exp((double)zr[k] - mx);
    *loss += log(sum) + mx - (double)zr[labels[r]];
    *correct += best == labels[r];
    for (int k = 0; k < CLASSES; ++k) {
      const double pk = exp((double)zr[k] - mx) / sum;
      dz[r * CLASSES + k] = (float)((pk - (k == labels[r])) * scale);
    }
  }
}

int moe_forward(struct model *m, struct moe_cache *c, const float *h1, size_t start, size_t t,
                const int *labels, double scale, double *loss, double *correct) {
  const struct param *p = m->p;
  c->start = start;
  c->t = t;
  c->x = alloc(t * HIDDEN);
  c->logits_r = alloc(t * EXPERTS);
  c->weights = alloc(t * TOPK);
  c->indices = calloc(t * TOPK + 1, sizeof(int32_t));
  c->h2 = alloc(t * HIDDEN);
  c->dz = alloc(t * CLASSES);
  for (size_t i = 0; i < t * HIDDEN; ++i) c->x[i] = h1[start * HIDDEN + i];

  mm(c->x, p[P_WR].value, NULL, c->logits_r, t, HIDDEN, EXPERTS);
  weft_router_config_t rc = router_config();
  weft_router_result_t rr = WEFT_ROUTER_RESULT_INIT;
  rr.indices = c->indices;
  rr.weights = c->weights;
  struct view2 lv;
  view2_init(&lv, c->logits_r, t, EXPERTS);
  weft_status_t st = weft_router_forward(&lv.t, &rc, &rr, NULL);
  if (st != WEFT_OK) return report("block B: weft_router_forward", st);

  struct view2 xv;
  view2_init(&xv, c->x, t, HIDDEN);
  st = weft_moe_dispatch(m->moe, &xv.t, c->indices, c->weights, t, TOPK, NULL, &c->handle);
  if (st != WEFT_OK) return report("block B: weft_moe_dispatch", st);
  weft_moe_received_t rec = WEFT_MOE_RECEIVED_INIT;
  st = weft_moe_handle_received(c->handle, &rec);
  if (st != WEFT_OK) return report("block B: weft_moe_handle_received", st);
  c->rows = rec.rows;
  c->received = rec.tokens.data;
  c->pe = alloc(c->rows * EXPERT_FFN);
  c->ae = alloc(c->rows * EXPERT_FFN);
  float *eo = alloc(c->rows * HIDDEN);
  experts_forward(m, &rec, c, eo);

  struct view2 eov, ov;
  view2_init(&eov, eo, c->rows, HIDDEN);
  view2_init(&ov, c->h2, t, HIDDEN);
  st = weft_moe_combine(m->moe, c->handle, &eov.t, 1, &ov.t, NULL);
  free(eo);
  if (st != WEFT_OK) return report("block B: weft_moe_combine", st);
  add_to(c->h2, c->x, t * HIDDEN); /* the residual path */

  float *z = alloc(t * CLASSES);
  mm(c->h2, p[P_WO].value, p[P_BO].value, z, t, HIDDEN, CLASSES);
  head_loss(z, labels ? labels + start : NULL, t, scale, c->dz, loss, correct);
  free(z);
  return 0;
}

int moe_backward_input(struct model *m, struct moe_cache *c, float *dh1, size_t n) {
  const struct param *p = m->p;
  const size_t t = c->t;
  float *dh2 = alloc(t * HIDDEN);
  mm_nt(c->dz, p[P_WO].value, dh2, t, HIDDEN, CLASSES);

  /* The combine's backward: the expert outputs' gradients and the routing weights'. */
  c->g_eo = alloc(c->rows * HIDDEN);
  float *g_w = alloc(t * TOPK);
  struct view2 gv, gev;
  view2_init(&gv, dh2, t, HIDDEN);
  view2_init(&gev, c->g_eo, c->rows, HIDDEN);
  weft_status_t st = weft_moe_combine_backward(m->moe, c->handle, &gv.t, &gev.t, g_w, NULL);
  if (st != WEFT_OK) return report("block B: weft_moe_combine_backward", st);

  /* The experts' backward for their inputs. */
  weft_moe_received_t rec = WEFT_MOE_RECEIVED_INIT;
  st = weft_moe_handle_received(c->handle, &rec);
  if (st != WEFT_OK) return report("block B: weft_moe_handle_received", st);
  c->dpe = alloc(c->rows * EXPERT_FFN);
  float *drows = alloc(c->rows * HIDDEN);
  for (int j = 0; j < rec.local_experts; ++j) {
    const size_t off = (size_t)rec.offsets[j], cnt = (size_t)rec.counts[j];
    mm_nt(c->g_eo + off * HIDDEN, p[P_WE2].value + (size_t)j * EXPERT_FFN * HIDDEN, c->dpe + off * EXPERT_FFN, cnt,
          EXPERT_FFN, HIDDEN);
    relu_grad(c->pe + off * EXPERT_FFN, c->dpe + off * EXPERT_FFN, cnt * EXPERT_FFN);
    mm_nt(c->dpe + off * EXPERT_FFN, p[P_WE1].value + (size_t)j * HIDDEN * EXPERT_FFN, drows + off * HIDDEN, cnt,
          HIDDEN, EXPERT_FFN);
  }
  /* Dispatch's backward: an unweighted combine brings the rows' gradients home. */
  float *dx = alloc(t * HIDDEN);
  struct view2 drv, dxv;
  view2_init(&drv, drows, c->rows, HIDDEN);
  view2_init(&dxv, dx, t, HIDDEN);
  st = weft_moe_combine(m->moe, c->handle, &drv.t, 0, &dxv.t, NULL);
  free(drows);
  if (st != WEFT_OK) {
    free(dx);
    free(dh2);
    free(g_w);
    return report("block B: weft_moe_combine (dispatch backward)", st);
  }
  /* The router's backward: routing weights -> router logits -> x. */
  c->g_logits = alloc(t * EXPERTS);
  weft_router_config_t rc = router_config();
  struct view2 lv, glv;
  view2_init(&lv, c->logits_r, t, EXPERTS);
  view2_init(&glv, c->g_logits, t, EXPERTS);
  st = weft_router_backward(&lv.t, &rc, c->indices, g_w, 0.0f, 0.0f, &glv.t, NULL);
  free(g_w);
  if (st != WEFT_OK) {
    free(dx);
    free(dh2);
    return report("block B: weft_router_backward", st);
  }
  float *dxr = alloc(t * HIDDEN);
  mm_nt(c->g_logits, p[P_WR].value, dxr, t, HIDDEN, EXPERTS);
  for (size_t i = 0; i < t * HIDDEN; ++i) dx[i] = dh2[i] + (dx[i] + dxr[i]);
  free(dxr);
  free(dh2);

  /* The backward of taking this rank's chunk: all-gather the chunks over the tp/ep dim. */
  struct view2 full;
  view2_init(&dxv, dx, t, HIDDEN);
  view2_init(&full, dh1, n, HIDDEN);
  st = weft_region_apply(m->mesh, "tp", WEFT_REGION_SCATTER, 1, 0, &dxv.t, &full.t, NULL, NULL);
  free(dx);
  if (st != WEFT_OK) return report("block B backward: weft_region_apply(SCATTER backward)", st);
  return 0;
}

void moe_backward_weight(struct model *m, struct moe_cache *c) {
  struct param *p = m->p;
  const size_t t = c->t;
  mm_tn_acc(c->h2, c->dz, p[P_WO].grad, t, HIDDEN, CLASSES);
  colsum_acc(c->dz, p[P_BO].grad, t, CLASSES);
  mm_tn_acc(c->x, c->g_logits, p[P_WR].grad, t, HIDDEN, EXPERTS);
  weft_moe_received_t rec = WEFT_MOE_RECEIVED_INIT;
  if (weft_moe_handle_received(c->handle, &rec) != WEFT_OK) return; /* cannot fail on a live handle */
  for (int j = 0; j < rec.local_experts; ++j) {
    const size_t off = (size_t)rec.offsets[j], cnt = (size_t)rec.counts[j];
    mm_tn_acc(c->ae + off * EXPERT_FFN, c->g_eo + off * HIDDEN, p[P_WE2].grad + (size_t)j * EXPERT_FFN * HIDDEN, cnt,
              EXPERT_FFN, HIDDEN);
    colsum_acc(c->g_eo + off * HIDDEN, p[P_BE2].grad + (size_t)j * HIDDEN, cnt, HIDDEN);
    mm_tn_acc(c->received + off * HIDDEN, c->dpe + off * EXPERT_FFN, p[P_WE1].grad + (size_t)j * HIDDEN * EXPERT_FFN,
              cnt, HIDDEN, EXPERT_FFN);
    colsum_acc(c->dpe + off * EXPERT_FFN, p[P_BE1].grad + (size_t)j * EXPERT_FFN, cnt, EXPERT_FFN);
  }
}

void moe_free(struct moe_cache *c) {
  weft_moe_handle_destroy(c->handle);
  float *all[] = {c->x, c->logits_r, c->weights, c->pe, c->ae, c->h2, c->dz, c->g_eo, c->dpe, c->g_logits};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) free(all[i]);
  free(c->indices);
  *c = (struct moe_cache){0};
}
