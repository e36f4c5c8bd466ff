/* See profile.h. */
#include "profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blocks.h"

/* Block A's input projection forward, its MLP forward, B forward, B backward (I + W), A's MLP
 * backward (I + W), A's input projection backward (I + W): A's two parts are timed apart
 * because every tp rank runs the input projection whole while the MLP is split over tp. */
enum { A_IN_F, A_MLP_F, B_F, B_B, A_MLP_B, A_IN_B, PHASES };
enum { NSIZES = 5 };
static const size_t sizes[NSIZES] = {4, 8, 16, 32, 64};
/* The per-sample numbers written are the fit at this many samples per call: the demo's default
 * layout runs micro-batches of 16 (128 samples, dp 2, the tuner's m = 4). */
enum { REFERENCE_SAMPLES = 16 };
static const double seconds_total = 1.25;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The whole model on one rank: a 1 x 1 x 1 mesh over `self`, every parameter local. */
static int make_model(struct model *m, weft_comm_t self) {
  memset(m, 0, sizeof *m);
  const int shape[3] = {1, 1, 1}, tdim[1] = {2};
  const char *names[3] = {"dp", "pp", "tp"};
  weft_status_t st = weft_mesh_create(self, 3, shape, names, NULL, &m->mesh);
  if (st == WEFT_OK) st = weft_mesh_comm(m->mesh, tdim, 1, &m->tp_comm);
  if (st != WEFT_OK) return report("profile: weft_mesh_create/comm", st);
  m->lay = (struct layout){1, 1, 1, 0, 0, EXPERTS};
  m->has_a = m->has_b = 1;
  model_shapes(m);
  for (int i = 0; i < NPARAMS; ++i) {
    float *v = malloc(sizeof(float) * m->p[i].count);
    model_init_values(m, i, v);
    m->p[i].value = v;
    m->p[i].grad = calloc(m->p[i].count, sizeof(double));
  }
  weft_moe_config_t mc = WEFT_MOE_CONFIG_INIT;
  mc.experts = EXPERTS;
  mc.hidden = HIDDEN;
  mc.dtype = WEFT_FLOAT32;
  st = weft_moe_create(m->tp_comm, &mc, &m->moe);
  return st == WEFT_OK ? 0 : report("profile: weft_moe_create", st);
}

static void free_model(struct model *m) {
  for (int i = 0; i < NPARAMS; ++i) {
    free((void *)m->p[i].value);
    free(m->p[i].grad);
  }
  weft_moe_destroy(m->moe);
  weft_mesh_destroy(m->mesh);
}

/* Adds one call of each phase on micro-batches of b samples (the rep-th batch) to sum[]. */
static int time_once(struct model *m, const struct digits *d, size_t b, long rep, float *h1, float *dh1,
                     double sum[PHASES]) {
  struct dense_cache dc = {0};
  struct moe_cache mc = {0};
  double loss = 0.0, correct = 0.0;
  const size_t first = ((size_t)rep * b) % (d->ntrain - b); /* a different batch each time */
  double t[PHASES + 1];
  t[0] = now();
  dense_input_forward(m, &dc, d->train_x + first * IN_DIM, b);
  t[1] = now();
  int rc = dense_mlp_forward(m, &dc, h1);
  t[2] = now();
  if (!rc) rc = moe_forward(m, &mc, h1, 0, b, d->train_y + first, 1.0 / (double)b, &loss, &correct);
  t[3] = now();
  if (!rc) rc = moe_backward_input(m, &mc, dh1, b);
  if (!rc) moe_backward_weight(m, &mc);
  t[4] = now();
  if (!rc) rc = dense_mlp_backward_input(m, &dc, dh1);
  if (!rc) dense_mlp_backward_weight(m, &dc);
  t[5] = now();
  if (!rc) {
    dense_input_backward_input(&dc);
    dense_input_backward_weight(m, &dc);
  }
  t[6] = now();
  for (int k = 0; k < PHASES; ++k) sum[k] += t[k + 1] - t[k];
  moe_free(&mc);
  dense_free(&dc);
  return rc;
}

/* Mean seconds per call of each phase at every size, t[size][phase]. The sizes take turns, one
 * call each, for seconds_total: on a machine whose load changes from one second to the next, a
 * size timed after another would see another machine and the fit across sizes would mix them. */
static int time_sizes(struct model *m, const struct digits *d, double t[NSIZES][PHASES]) {
  float *h1 = calloc(sizes[NSIZES - 1] * HIDDEN, sizeof(float));
  float *dh1 = calloc(sizes[NSIZES - 1] * HIDDEN, sizeof(float));
  double sum[NSIZES][PHASES] = {{0}};
  long reps = 0;
  int rc = 0;
  const double start = now();
  while (!rc && (now() - start < seconds_total || reps < 3)) {
    for (int i = 0; i < NSIZES && !rc; ++i) rc = time_once(m, d, sizes[i], reps, h1, dh1, sum[i]);
    ++reps;
  }
  for (int i = 0; i < NSIZES; ++i)
    for (int k = 0; k < PHASES; ++k) t[i][k] = sum[i][k] / (double)reps;
  free(h1);
  free(dh1);
  return rc;
}

/* Least squares t = a + c * samples through the sizes' mean call times. */
static void fit(const double *t, double *a, double *c) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int i = 0; i < NSIZES; ++i) {
    const double x = (double)sizes[i];
    sx += x, sy += t[i], sxx += x * x, sxy += x * t[i];
  }
  *c = (NSIZES * sxy - sx * sy) / (NSIZES * sxx - sx * sx);
  *a = (sy - *c * sx) / NSIZES;
}

static int cmp_double(const void *x, const void *y) {
  const double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* Block A's and block B's parameters, forward flops and kept activation bytes per sample, from
 * the shapes in model.h (block_dense.c and block_moe.c allocate the caches counted here). */
static void block_sizes(const struct model *m, double params[2], double flops[2], double act[2]) {
  params[0] = params[1] = 0;
  for (int i = 0; i < NPARAMS; ++i) params[i >= FIRST_B] += (double)m->p[i].count;
  flops[0] = 2.0 * (IN_DIM * HIDDEN + HIDDEN * FFN + FFN * HIDDEN);
  flops[1] = 2.0 * (HIDDEN * EXPERTS + TOPK * (HIDDEN * EXPERT_FFN + EXPERT_FFN * HIDDEN) + HIDDEN * CLASSES);
  /* dense_cache: x, pre0, h0, pre1, a1, h1; moe_cache: x, router logits, top-k weights and
   * indices, h2, dz, and per routed row the received token, pe and ae. */
  act[0] = 4.0 * (IN_DIM + 2 * HIDDEN + 2 * FFN + HIDDEN);
  act[1] = 4.0 * (2 * HIDDEN + EXPERTS + 2 * TOPK + CLASSES + TOPK * (HIDDEN + 2 * EXPERT_FFN));
}

static int write_model(const char *path, int ranks, const struct model *m, const double a[PHASES],
                       const double c[PHASES], double spread) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "moe_digits: cannot write the model file %s\n", path);
    return 1;
  }
  char when[32];
  const time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
  double params[2], flops[2], act[2], per[PHASES];
  block_sizes(m, params, flops, act);
  for (int k = 0; k < PHASES; ++k) per[k] = (a[k] + c[k] * REFERENCE_SAMPLES) / REFERENCE_SAMPLES;
  fprintf(f, "# The moe_digits demo's model for weft-plan: moe_digits --profile-layers, %s, %d rank(s) timing at "
             "once\n", when, ranks);
  fprintf(f, "# Per call: seconds = a + c * samples, least squares over micro-batches of 4..64 (median over ranks; "
             "ranks' spread %.0f%%):\n", 100.0 * spread);
  const char *phase[PHASES] = {"dense input forward", "dense MLP forward", "moe forward", "moe backward",
                               "dense MLP backward", "dense input backward"};
  for (int k = 0; k < PHASES; ++k)
    fprintf(f, "#   %-20s a = %8.2f us  c = %7.3f us/sample\n", phase[k], 1e6 * a[k], 1e6 * c[k]);
  fprintf(f, "# fwd/bwd = (a + c * %d) / %d: per sample at the default layout's micro-batch, call overhead "
             "included.\n", REFERENCE_SAMPLES, REFERENCE_SAMPLES);
  /* Every tp rank runs block A's input projection whole; only its MLP splits over tp. */
  const double a_f = per[A_IN_F] + per[A_MLP_F], a_b = per[A_IN_B] + per[A_MLP_B];
  double rep = a_f + a_b > 0 ? (per[A_IN_F] + per[A_IN_B]) / (a_f + a_b) : 0.0;
  rep = rep < 0 ? 0 : rep > 1 ? 1 : rep;
  fprintf(f, "# dense: tp_rep = the input projection's share of block A (every tp rank runs it whole); tp_ar=1:\n"
             "# one all-reduce over tp each way (an MLP alone). out = the float32 boundary row; block A's TP\n"
             "# reduction sends it in float64 (twice the bytes).\n");
  fprintf(f, "layer name=dense count=1 params=%.0f flops=%.0f fwd=%.4g bwd=%.4g act=%.0f out=%d experts=0 topk=0 "
             "tp=1 kv=0 tp_rep=%.3f tp_ar=1\n", params[0], flops[0], a_f, a_b, act[0], HIDDEN * 4, rep);
  /* The router and the head are whole on every tp/ep rank, which routed different tokens:
   * train.c sums their gradients over tp once a step. */
  const double shared = (double)(m->p[P_WR].count + m->p[P_WO].count + m->p[P_BO].count);
  fprintf(f, "# moe: shared = the router's and the head's parameters, whole on every tp/ep rank (their\n"
             "# gradients are summed over tp once a step).\n");
  fprintf(f, "layer name=moe count=1 params=%.0f flops=%.0f fwd=%.4g bwd=%.4g act=%.0f out=%d experts=%d topk=%d "
             "tp=0 kv=0 shared=%.0f\n", params[1], flops[1], per[B_F], per[B_B], act[1], HIDDEN * 4, EXPERTS, TOPK,
          shared);
  fprintf(f, "# float32 weights; gradients summed over dp in float64 first (grad_allreduce_bytes=8, train.c),\n"
             "# then handed to ZeRO in float32 (grad_bytes=4); Adam's two float32 moments\n");
  fprintf(f, "train global_batch=128 weight_bytes=4 grad_bytes=4 optimizer_bytes=8 grad_allreduce_bytes=8\n");
  return fclose(f) != 0;
}

int profile_layers(const struct options *o, weft_comm_t world, const struct digits *d, const char *path) {
  (void)o;
  int rank = 0, size = 1;
  weft_comm_rank(world, &rank);
  weft_comm_size(world, &size);
  weft_comm_t self = NULL;
  weft_status_t st = weft_comm_split(world, rank, 0, &self, NULL);
  if (st != WEFT_OK) return report("profile: weft_comm_split", st);
  struct model m;
  int rc = make_model(&m, self);
  double t[NSIZES][PHASES] = {{0}};
  /* Together: every rank starts timing at once, so all share the cores alike (a rank that failed
   * to make its model still joins the barrier, so the others do not wait for it in vain). */
  st = weft_barrier(world, NULL, NULL);
  if (st != WEFT_OK) return report("profile: weft_barrier", st);
  if (!rc) rc = time_sizes(&m, d, t);
  double a[PHASES] = {0}, c[PHASES] = {0}, mine[2 * PHASES] = {0}, spread = 0.0;
  for (int k = 0; k < PHASES && !rc; ++k) {
    double col[NSIZES];
    for (int i = 0; i < NSIZES; ++i) col[i] = t[i][k];
    fit(col, &mine[k], &mine[PHASES + k]);
  }
  int bad = rc, any_bad = 0;
  st = weft_allreduce(&bad, &any_bad, 1, WEFT_INT32, WEFT_MAX, world, NULL, NULL);
  if (st == WEFT_OK && !any_bad) {
    double *all = malloc(sizeof(double) * 2 * PHASES * (size_t)size);
    st = weft_allgather(mine, all, 2 * PHASES, WEFT_FLOAT64, world, NULL, NULL);
    if (st == WEFT_OK && rank == 0) {
      double *col = malloc(sizeof(double) * (size_t)size);
      for (int k = 0; k < 2 * PHASES; ++k) {
        for (int r = 0; r < size; ++r) col[r] = all[(size_t)r * 2 * PHASES + (size_t)k];
        qsort(col, (size_t)size, sizeof(double), cmp_double);
        const double med = size % 2 ? col[size / 2] : 0.5 * (col[size / 2 - 1] + col[size / 2]);
        if (k < PHASES) a[k] = med;
        else c[k - PHASES] = med;
        if (k >= PHASES && med > 0) spread = fmax(spread, (col[size - 1] - col[0]) / med);
      }
      free(col);
      rc = write_model(path, size, &m, a, c, spread);
      if (!rc) printf("moe_digits: wrote the model file %s (%d rank(s) timing at once)\n", path, size);
    }
    free(all);
  }
  if (st != WEFT_OK) rc = report("profile: gathering the times", st);
  free_model(&m);
  weft_comm_destroy(self);
  return rc || any_bad;
}
