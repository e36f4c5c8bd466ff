/* The two blocks' forward, backward-input (I) and backward-weight (W) passes on one micro-batch.
 * F and I communicate (TP regions, MoE dispatch/combine) and are collective over the tp/ep dim:
 * the M ranks of a group call them for the same micro-batches in the same order, which the
 * pipeline schedule guarantees (every group runs the same action list). W is local. */
#ifndef MOE_DIGITS_BLOCKS_H
#define MOE_DIGITS_BLOCKS_H

#include "model.h"

/* What block A keeps from F for I and W, for one micro-batch of t tokens. */
struct dense_cache {
  size_t t;
  float *x, *pre0, *h0, *pre1, *a1, *h1; /* F */
  float *dh1, *dpre1, *dpre0;            /* I, for W */
};

/* What block B keeps: its chunk [start, start + t) of the micro-batch's tokens. */
struct moe_cache {
  size_t start, t, rows;
  float *x, *logits_r, *weights, *pe, *ae, *h2, *dz;
  int32_t *indices;
  weft_moe_handle_t handle;
  const float *received; /* the dispatched rows (the handle's memory) */
  float *g_eo, *dpe, *g_logits;
};

/* h1[t, H] = block A of x[t, 64]. */
int dense_forward(struct model *m, struct dense_cache *c, const float *x, size_t t, float *h1);
/* Block A's two parts, which profile.c times apart: the input projection, which every tp rank
 * runs whole, and the MLP, which the tp ranks split. dense_forward is input then MLP,
 * dense_backward_input MLP then input, dense_backward_weight both. */
void dense_input_forward(struct model *m, struct dense_cache *c, const float *x, size_t t);
int dense_mlp_forward(struct model *m, struct dense_cache *c, float *h1);
int dense_mlp_backward_input(struct model *m, struct dense_cache *c, const float *dh1);
void dense_input_backward_input(struct dense_cache *c);
void dense_mlp_backward_weight(struct model *m, struct dense_cache *c);
void dense_input_backward_weight(struct model *m, struct dense_cache *c);
/* dx is not needed (block A is first): the gradient w.r.t. h1 gives everything W needs. */
int dense_backward_input(struct model *m, struct dense_cache *c, const float *dh1);
void dense_backward_weight(struct model *m, struct dense_cache *c);
void dense_free(struct dense_cache *c);

/* Block B on tokens [start, start+t) of h1 (n rows, H wide). labels (n) may be NULL. scale: the
 * loss's weight per token (1 / global batch). Adds this chunk's summed loss to *loss and its
 * correct predictions to *correct. */
int moe_forward(struct model *m, struct moe_cache *c, const float *h1, size_t start, size_t t,
                const int *labels, double scale, double *loss, double *correct);
/* The gradient w.r.t. block B's input for the whole micro-batch of n rows (all-gathered over the
 * tp/ep dim: the backward of taking one chunk) into dh1[n, H]. */
int moe_backward_input(struct model *m, struct moe_cache *c, float *dh1, size_t n);
void moe_backward_weight(struct model *m, struct moe_cache *c);
void moe_free(struct moe_cache *c);

/* The chunk [*start, *start + *len) of n rows that tp/ep rank r of M takes (torch.chunk's rule). */
void chunk_of(size_t n, int r, int ranks, size_t *start, size_t *len);

/* A 2-d float32 (or, with view2_init_f64, float64) host tensor view (keep the struct where it
 * is: t.shape points into it). */
struct view2 {
  weft_tensor_t t;
  int64_t shape[2];
};
void view2_init(struct view2 *v, const float *data, size_t rows, size_t cols);
void view2_init_f64(struct view2 *v, const double *data, size_t rows, size_t cols);

/* Prints the failed call with weft's words, keeps its status in block_status and returns 1. */
int report(const char *what, weft_status_t st);
extern weft_status_t block_status;

#endif
