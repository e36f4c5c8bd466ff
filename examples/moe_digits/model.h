/* The demo's model: a small MoE classifier of 8x8 handwritten digits, written by hand (forward
 * and backward) against weft's public C ABI.
 *
 *   block A (dense, tensor parallel over the "tp" dim):
 *     h0 = relu(x Win + bin)                       x: 64 pixels / 16
 *     h1 = h0 + relu(h0 W1 + b1) W2 + b2            W1 column-sharded, W2 row-sharded (Megatron)
 *   block B (MoE, expert parallel over the same dim, then the classifier head):
 *     h2 = h1 + sum_{k=2 slots} w_k expert_k(h1)    router Wr: softmax top-2 over 8 experts
 *     expert_e(h) = relu(h W1e + b1e) W2e + b2e
 *     logits = h2 Wo + bo, loss = mean cross-entropy over the global batch
 *
 * One mesh dim of size M serves as TP in block A and as EP in block B, as the issue's
 * "EP/TP = 2" asks: in block A the M ranks hold the same tokens and split the hidden units; in
 * block B each takes 1/M of the micro-batch's tokens (Megatron's SCATTER region) and holds E/M
 * experts. */
#ifndef MOE_DIGITS_MODEL_H
#define MOE_DIGITS_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <weft/weft.h>

enum {
  IN_DIM = 64,    /* 8x8 pixels */
  HIDDEN = 32,    /* H: the residual stream */
  FFN = 64,       /* F: block A's hidden units (split over TP) */
  EXPERTS = 8,    /* E */
  TOPK = 2,       /* k */
  EXPERT_FFN = 32, /* Fe: each expert's hidden units */
  CLASSES = 10
};

/* Parameter indices: block A's, then block B's. A rank registers with ZeRO the parameters of the
 * blocks its pipeline stage holds, in this order. */
enum {
  P_WIN, P_BIN, P_W1, P_B1, P_W2, P_B2,                   /* block A */
  P_WR, P_WE1, P_BE1, P_WE2, P_BE2, P_WO, P_BO,            /* block B */
  NPARAMS,
  FIRST_B = P_WR
};

/* One parameter on this rank: its local shape and where weft's ZeRO keeps it this step. */
struct param {
  const char *name;
  int ndim;
  int64_t shape[3];
  size_t count;       /* local elements */
  const float *value; /* weft_zero_param's view (refreshed after every step) */
  double *grad;       /* this rank's gradient, summed over its micro-batches (float64: train.c) */
};

/* The parallel layout and the model shards it implies for this rank. */
struct layout {
  int dp, pp, tp; /* tp = ep: one mesh dim (see above) */
  int zero_stage;
  int tp_rank;    /* this rank's coordinate on the tp/ep dim */
  int local_experts;
};

/* Everything a rank's blocks need: parameters, shapes and the communication handles. */
struct model {
  struct layout lay;
  struct param p[NPARAMS];
  int has_a, has_b;   /* which blocks this rank's stage holds */
  weft_mesh_t mesh;   /* dims dp, pp, tp */
  weft_comm_t tp_comm;
  weft_moe_t moe;     /* dispatch/combine over tp_comm (EP) */
};

/* Local shapes of every parameter for the layout (block B's expert tensors hold E/M experts). */
void model_shapes(struct model *m);
/* The initial value of element `local` of parameter `id` on this rank: a function of the seed,
 * the parameter and the element's GLOBAL index only, so every layout starts from the same model. */
void model_init_values(const struct model *m, int id, float *out);

#endif
