/* See train.h. Every rank runs this; rank 0 prints and keeps the history. */
#include "train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stages.h"

#define TRY(what, call)                              \
  do {                                               \
    weft_status_t st_ = (call);                      \
    if (st_ != WEFT_OK) return report((what), st_);  \
  } while (0)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of this process, every thread (weft's progress threads too): on a machine whose
 * ranks outnumber its cores a step cannot be shorter than all ranks' CPU seconds / cores. */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct run {
  struct model m;
  struct stages s;
  weft_zero_t zero;
  weft_mesh_t zmesh;
  weft_comm_t pp_comm, pipe_comm, dp_comm;
  double *grads;      /* every held parameter's gradient, one float64 buffer (param.grad points in) */
  size_t ngrads;
  float *grad32;      /* the same rounded to float32 for ZeRO */
  weft_pipeline_t pipe;
  int first, last; /* the parameters this rank holds: [first, last) */
  int world_rank, dp_rank, pp_rank;
};

/* ZeRO-1 (or 0/2) over this rank's data-parallel group: a 1-d mesh of it, so every handle holds
 * exactly one stage's parameters of one tp/ep shard. weft keeps the parameters and runs Adam. */
static int make_zero(struct run *r, const struct options *o) {
  const int dims[1] = {0};
  TRY("weft_mesh_comm(dp)", weft_mesh_comm(r->m.mesh, dims, 1, &r->dp_comm));
  const char *names[1] = {"dp"};
  TRY("weft_mesh_create(dp)", weft_mesh_create(r->dp_comm, 1, &o->dp, names, NULL, &r->zmesh));
  weft_tensor_t t[NPARAMS];
  const char *pnames[NPARAMS];
  float *init[NPARAMS];
  const int n = r->last - r->first;
  r->ngrads = 0;
  for (int i = r->first; i < r->last; ++i) r->ngrads += r->m.p[i].count;
  r->grads = calloc(r->ngrads, sizeof(double));
  r->grad32 = calloc(r->ngrads, sizeof(float));
  for (size_t i = (size_t)r->first, off = 0; i < (size_t)r->last; off += r->m.p[i].count, ++i)
    r->m.p[i].grad = r->grads + off;
  for (int i = 0; i < n; ++i) {
    struct param *p = &r->m.p[r->first + i];
    init[i] = malloc(sizeof(float) * p->count);
    model_init_values(&r->m, r->first + i, init[i]);
    t[i] = (weft_tensor_t){init[i], WEFT_DEVICE_CPU, 0, p->ndim, WEFT_FLOAT32, p->shape, NULL, 0};
    pnames[i] = p->name;
  }
  weft_zero_config_t zc = WEFT_ZERO_CONFIG_INIT;
  zc.stage = o->zero;
  zc.optimizer.kind = WEFT_OPTIMIZER_ADAM;
  zc.optimizer.lr = (float)o->lr;
  zc.optimizer.weight_decay = 0.0f;
  zc.names = pnames;
  /* The gradient arrives summed over dp already (float64, optimizer_step): dp rank 0 gives it,
   * the others zeros, so ZeRO's float32 sum is exact in any order (g + 0 + ... = g). */
  zc.grad_op = WEFT_SUM;
  weft_status_t st = weft_zero_create(r->zmesh, "dp", t, (size_t)n, &zc, &r->zero);
  for (int i = 0; i < n; ++i) free(init[i]);
  if (st != WEFT_OK) return report("weft_zero_create", st);
  return 0;
}

static int refresh_params(struct run *r) {
  for (int i = r->first; i < r->last; ++i) {
    weft_tensor_t v;
    TRY("weft_zero_param", weft_zero_param(r->zero, (size_t)(i - r->first), &v));
    r->m.p[i].value = v.data;
  }
  return 0;
}

/* The micro-batch count: the auto-tuner's fastest for this schedule (weft_schedule_tune on the
 * simulator) among those whose micro-batches split evenly over the tp/ep ranks, unless given.
 * Costs per sample are the blocks' flops at 1 ns per flop (plain loops on a busy core) and
 * 0.15 ms per compute action for its collectives and the executor: constants fitted to measured
 * runs with m = 1..8 on the 2-core CI machine (8 ranks). Every rank computes the same numbers,
 * so all agree on m without communicating. */
static int tune(const struct options *o, struct history *h, int world_rank) {
  const double fa = 2.0 * (IN_DIM * HIDDEN + 2.0 * HIDDEN * FFN / o->tp) * 1e-9;
  const double fb = 2.0 * (HIDDEN * EXPERTS + TOPK * 2.0 * HIDDEN * EXPERT_FFN + HIDDEN * CLASSES) / o->tp * 1e-9;
  const double fwd[2] = {fa, fb}, bwd[2] = {2 * fa, 2 * fb};
  weft_tune_config_t tc = WEFT_TUNE_CONFIG_INIT;
  tc.ranks = o->pp;
  tc.layers = 2;
  tc.layer_forward = fwd;
  tc.layer_backward = bwd;
  tc.global_batch = o->global_batch / o->dp;
  tc.microbatch_overhead = 0.15e-3;
  tc.boundary_bytes_per_sample = HIDDEN * sizeof(float);
  tc.kinds = &o->schedule;
  tc.nkinds = 1;
  tc.max_microbatches = tc.global_batch < MAX_MICROBATCHES ? tc.global_batch : MAX_MICROBATCHES;
  size_t count = 0;
  int best = -1;
  TRY("weft_schedule_tune", weft_schedule_tune(&tc, NULL, 0, &count, &best));
  weft_tune_candidate_t *c = malloc(sizeof *c * (count ? count : 1));
  weft_status_t st = weft_schedule_tune(&tc, c, count, &count, &best);
  if (st != WEFT_OK) {
    free(c);
    return report("weft_schedule_tune", st);
  }
  h->microbatches = 0;
  h->tuner_candidates = (int)count;
  for (size_t i = 0; i < count; ++i) {
    const int ok = c[i].fits && c[i].stages_per_rank == 1 && c[i].microbatch_size % o->tp == 0;
    const int wanted = o->microbatches ? c[i].microbatches == o->microbatches : 1;
    if (ok && wanted) { /* sorted by simulated step time: the first that qualifies is the best */
      h->microbatches = c[i].microbatches;
      h->bubble_simulated = c[i].bubble_fraction;
      if (world_rank == 0)
        printf("tuner: %s, %d ranks, %zu candidates simulated; %s m = %d (micro-batch %d), simulated step %.2f ms, "
               "bubble %.1f%%\n",
               o->schedule_name, o->pp, count, o->microbatches ? "given" : "chose", c[i].microbatches,
               c[i].microbatch_size, 1e3 * c[i].step_time, 100.0 * c[i].bubble_fraction);
      break;
    }
  }
  free(c);
  if (h->microbatches == 0) {
    fprintf(stderr, "moe_digits: no micro-batch count fits: --microbatches %d must divide the %d samples per "
                    "data-parallel replica into micro-batches that split evenly over --tp %d\n",
            o->microbatches, o->global_batch / o->dp, o->tp);
    return 1;
  }
  return 0;
}

static int make_pipeline(struct run *r, const struct options *o, int m) {
  const int pdim[1] = {1};
  TRY("weft_mesh_comm(pp)", weft_mesh_comm(r->m.mesh, pdim, 1, &r->pp_comm));
  /* The executor gets a communicator of its own (pipeline.h: a failed run leaves it unusable). */
  TRY("weft_comm_dup(pp)", weft_comm_dup(r->pp_comm, &r->pipe_comm));
  weft_schedule_config_t sc = WEFT_SCHEDULE_CONFIG_INIT;
  sc.ranks = o->pp;
  sc.microbatches = m;
  weft_schedule_t sched;
  TRY("weft_schedule_generate", weft_schedule_generate(o->schedule, &sc, &sched));
  static int64_t shape[2];
  shape[0] = (int64_t)r->s.mb_size;
  shape[1] = HIDDEN;
  weft_tensor_t boundary = {NULL, WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, shape, NULL, 0};
  weft_pipeline_config_t pc = WEFT_PIPELINE_CONFIG_INIT;
  pc.forward = stage_forward;
  pc.backward = stage_backward;
  pc.backward_input = stage_backward_input;
  pc.backward_weight = stage_backward_weight;
  pc.user_data = &r->s;
  pc.boundaries = &boundary;
  pc.nboundaries = (size_t)(o->pp - 1);
  pc.record = 1;
  weft_status_t st = weft_pipeline_create(r->pipe_comm, sched, &pc, &r->pipe);
  weft_schedule_destroy(sched);
  if (st != WEFT_OK) return report("weft_pipeline_create", st);
  return 0;
}

static int setup(struct run *r, const struct options *o, weft_comm_t world, struct history *h) {
  TRY("weft_comm_rank", weft_comm_rank(world, &r->world_rank));
  const int shape[3] = {o->dp, o->pp, o->tp};
  const char *names[3] = {"dp", "pp", "tp"};
  TRY("weft_mesh_create", weft_mesh_create(world, 3, shape, names, NULL, &r->m.mesh));
  int coords[3];
  TRY("weft_mesh_coords", weft_mesh_coords(r->m.mesh, coords, NULL));
  r->dp_rank = coords[0];
  r->pp_rank = coords[1];
  r->m.lay = (struct layout){o->dp, o->pp, o->tp, o->zero, coords[2], EXPERTS / o->tp};
  r->m.has_a = coords[1] == 0;
  r->m.has_b = coords[1] == o->pp - 1;
  r->first = r->m.has_a ? 0 : FIRST_B;
  r->last = r->m.has_b ? NPARAMS : FIRST_B;
  model_shapes(&r->m);
  const int tdim[1] = {2};
  TRY("weft_mesh_comm(tp)", weft_mesh_comm(r->m.mesh, tdim, 1, &r->m.tp_comm));
  if (r->m.has_b) {
    weft_moe_config_t mc = WEFT_MOE_CONFIG_INIT;
    mc.experts = EXPERTS;
    mc.hidden = HIDDEN;
    mc.dtype = WEFT_FLOAT32;
    TRY("weft_moe_create", weft_moe_create(r->m.tp_comm, &mc, &r->m.moe));
  }
  if (make_zero(r, o) || refresh_params(r) || tune(o, h, r->world_rank)) return 1;
  r->s.m = &r->m;
  r->s.microbatches = h->microbatches;
  r->s.mb_size = (size_t)(o->global_batch / o->dp / h->microbatches);
  r->s.scale = 1.0 / o->global_batch;
  r->s.h1 = calloc(r->s.mb_size * HIDDEN, sizeof(float));
  r->s.dh1 = calloc(r->s.mb_size * HIDDEN, sizeof(float));
  return make_pipeline(r, o, h->microbatches);
}

/* Held-out accuracy: block A on the whole held-out set, handed to block B's ranks, which each
 * classify their chunk; returns this rank's correct count (block B ranks only, else 0). */
static int evaluate(struct run *r, const struct digits *d, double *correct) {
  const size_t n = d->ntest;
  float *h1 = calloc(n * HIDDEN, sizeof(float));
  struct dense_cache dc = {0};
  struct moe_cache mc = {0};
  int rc = 0;
  if (r->m.has_a) rc = dense_forward(&r->m, &dc, d->test_x, n, h1);
  if (!rc && r->m.has_a && !r->m.has_b) {
    weft_status_t st = weft_send(h1, n * HIDDEN, WEFT_FLOAT32, 1, r->pp_comm, NULL, NULL);
    if (st != WEFT_OK) rc = report("evaluate: weft_send", st);
  }
  if (!rc && r->m.has_b && !r->m.has_a) {
    weft_status_t st = weft_recv(h1, n * HIDDEN, WEFT_FLOAT32, 0, r->pp_comm, NULL, NULL);
    if (st != WEFT_OK) rc = report("evaluate: weft_recv", st);
  }
  if (!rc && r->m.has_b) {
    size_t start, len;
    double unused = 0.0;
    chunk_of(n, r->m.lay.tp_rank, r->m.lay.tp, &start, &len);
    rc = moe_forward(&r->m, &mc, h1, start, len, d->test_y, 0.0, &unused, correct);
  }
  moe_free(&mc);
  dense_free(&dc);
  free(h1);
  return rc;
}

/* The step's batch for this data-parallel replica: global samples [step*GB + dp*B, ... + B) of
 * the training set, wrapping around; every layout reads the same global batch. */
static void fill_batch(const struct run *r, const struct options *o, const struct digits *d, int step, float *x,
                       int *y) {
  const size_t b = (size_t)(o->global_batch / o->dp);
  for (size_t j = 0; j < b; ++j) {
    const size_t g = ((size_t)step * (size_t)o->global_batch + (size_t)r->dp_rank * b + j) % d->ntrain;
    memcpy(x + j * IN_DIM, d->train_x + g * IN_DIM, sizeof(float) * IN_DIM);
    y[j] = d->train_y[g];
  }
}

/* Why float64 sums. MoE routing is discontinuous (a token whose 2nd and 3rd expert scores nearly
 * tie changes experts on a 1-ulp change of its input) and Adam carries every change forward, so
 * float32 reductions whose order depends on the layout make the 8-rank loss curve drift from the
 * 1-rank one: measured, 6e-5 relative at step 36 and 0.15 by step 104. Every sum whose order
 * depends on the layout (the TP partial sums, gradients over micro-batches, ep and dp ranks) is
 * therefore taken in float64 and rounded to float32 once at its end: two orders of a float64 sum
 * differ by ~n 2^-53 relative, so the rounded float32 results are equal unless the sum lies that
 * close to a float32 rounding boundary (probability ~n 2^-29 per element). */
static int optimizer_step(struct run *r, const struct options *o, int step) {
  /* The injection proof: one rank's gradient of one bias (used by every token) is off by 0.05
   * per element once, at step 2, as a wrong or missing reduction would make it; the comparison
   * with one process must fail. */
  if (o->inject && step == 2 && r->world_rank == 0)
    for (size_t k = 0; k < r->m.p[r->last - 1].count; ++k) r->m.p[r->last - 1].grad[k] += 0.05;
  /* Block B's router and head are replicated over the ep ranks, which saw different tokens:
   * their gradients are summed there first (block A's replicated ones are equal already), in
   * one all-reduce of the three packed together (one latency instead of three). */
  if (r->m.has_b && o->tp > 1) {
    const int shared[3] = {P_WR, P_WO, P_BO};
    double packed[HIDDEN * EXPERTS + HIDDEN * CLASSES + CLASSES];
    size_t n = 0;
    for (int k = 0; k < 3; ++k) {
      const struct param *p = &r->m.p[shared[k]];
      if (n + p->count > sizeof packed / sizeof packed[0]) {
        fprintf(stderr, "moe_digits: the router's and head's gradients outgrew their packing buffer\n");
        return 1;
      }
      memcpy(packed + n, p->grad, sizeof(double) * p->count);
      n += p->count;
    }
    TRY("weft_allreduce(ep grads)", weft_allreduce(packed, packed, n, WEFT_FLOAT64, WEFT_SUM, r->m.tp_comm, NULL, NULL));
    n = 0;
    for (int k = 0; k < 3; ++k) {
      struct param *p = &r->m.p[shared[k]];
      memcpy(p->grad, packed + n, sizeof(double) * p->count);
      n += p->count;
    }
  }
  /* Data parallel: the float64 sum over the dp group, rounded once; ZeRO-1 then reduce-scatters
   * it (from dp rank 0; zeros elsewhere), runs Adam on each rank's shard and all-gathers the
   * parameters. The price of a reproducible curve: one more all-reduce, 8 bytes a parameter. */
  if (o->dp > 1)
    TRY("weft_allreduce(dp grads)",
        weft_allreduce(r->grads, r->grads, r->ngrads, WEFT_FLOAT64, WEFT_SUM, r->dp_comm, NULL, NULL));
  for (size_t k = 0; k < r->ngrads; ++k) r->grad32[k] = r->dp_rank == 0 ? (float)r->grads[k] : 0.0f;
  for (int i = r->last - 1; i >= r->first; --i) {
    struct param *p = &r->m.p[i];
    float *g32 = r->grad32 + (p->grad - r->grads);
    weft_tensor_t g = {g32, WEFT_DEVICE_CPU, 0, p->ndim, WEFT_FLOAT32, p->shape, NULL, 0};
    TRY("weft_zero_grad_ready", weft_zero_grad_ready(r->zero, (size_t)(i - r->first), &g));
  }
  TRY("weft_zero_step", weft_zero_step(r->zero, NULL));
  memset(r->grads, 0, sizeof(double) * r->ngrads);
  return refresh_params(r);
}

static int run_step(struct run *r, const struct options *o, const struct digits *d, int step, float *x, int *y,
                    struct history *h, weft_comm_t world) {
  fill_batch(r, o, d, step, x, y);
  r->s.inputs = x;
  r->s.labels = y;
  r->s.loss = r->s.correct = 0.0;
  const double t0 = now(), c0 = cpu_now();
  weft_timeline_t tl = NULL;
  TRY("weft_pipeline_run", weft_pipeline_run(r->pipe, &tl));
  const double t1 = now();
  if (optimizer_step(r, o, step)) return 1;
  double stats[6] = {r->s.loss, r->s.correct, 0.0, now() - t0, t1 - t0, cpu_now() - c0};
  const int eval = step % o->eval_every == 0 || step == o->steps - 1;
  if (eval && evaluate(r, d, &stats[2])) return 1;
  if (r->dp_rank != 0) stats[2] = 0.0; /* every replica evaluates; one counts */
  double sum[6], mx[6];
  TRY("weft_allreduce(stats)", weft_allreduce(stats, sum, 6, WEFT_FLOAT64, WEFT_SUM, world, NULL, NULL));
  TRY("weft_allreduce(time)", weft_allreduce(stats, mx, 6, WEFT_FLOAT64, WEFT_MAX, world, NULL, NULL));
  weft_timeline_info_t ti = WEFT_TIMELINE_INFO_INIT;
  TRY("weft_timeline_info", weft_timeline_info(tl, &ti));
  if (r->world_rank == 0) {
    h->loss[step] = sum[0] / o->global_batch;
    h->test_acc[step] = eval ? sum[2] / (double)d->ntest : (step ? h->test_acc[step - 1] : 0.0);
    h->step_s[step] = mx[3];
    h->pipeline_s[step] = mx[4];
    h->cpu_s[step] = sum[5];
    h->bubble_measured[step] = ti.bubble_fraction;
    h->train_acc_last = sum[1] / o->global_batch;
    h->steps = step + 1;
    if (step == o->trace_step && o->out) {
      char path[4096];
      snprintf(path, sizeof path, "%s/trace.json", o->out);
      TRY("weft_timeline_write(chrome trace)", weft_timeline_write(tl, WEFT_TIMELINE_CHROME_TRACE, path));
    }
  }
  weft_timeline_destroy(tl);
  return 0;
}

int train(const struct options *o, weft_comm_t world, const struct digits *d, struct history *h) {
  static struct run r;
  memset(&r, 0, sizeof r);
  if (setup(&r, o, world, h)) return 1;
  const size_t b = (size_t)(o->global_batch / o->dp);
  float *x = malloc(sizeof(float) * b * IN_DIM);
  int *y = malloc(sizeof(int) * b);
  int rc = 0;
  for (int step = 0; step < o->steps && !rc; ++step) {
    rc = run_step(&r, o, d, step, x, y, h, world);
    if (!rc && r.world_rank == 0) {
      char ref[96] = "";
      if (step < h->reference_steps)
        snprintf(ref, sizeof ref, " (1 rank %.5f, rel diff %.1e)", h->reference[step],
                 relative_difference(h->loss[step], h->reference[step]));
      printf("step %3d  loss %.5f%s  held-out acc %5.1f%%  %6.0f samples/s  "
             "bubble measured %4.1f%% simulated %4.1f%%\n",
             step, h->loss[step], ref, 100.0 * h->test_acc[step], o->global_batch / h->step_s[step],
             100.0 * h->bubble_measured[step], 100.0 * h->bubble_simulated);
      fflush(stdout);
    }
  }
  free(x);
  free(y);
  weft_pipeline_destroy(r.pipe);
  weft_comm_destroy(r.pipe_comm);
  weft_zero_destroy(r.zero);
  weft_mesh_destroy(r.zmesh);
  weft_moe_destroy(r.m.moe);
  weft_mesh_destroy(r.m.mesh);
  free(r.grads);
  free(r.grad32);
  free(r.s.h1);
  free(r.s.dh1);
  return rc;
}
