/*
 * pipeline-bench: the pipeline executor (weft/pipeline.h) against the simulator, and its own
 * cost per action. Public C ABI only.
 *
 *   build/bin/weftrun -n 4 build/bin/pipeline-bench [--f-ms 2] [--b-ms 4] [--m-per-rank 4] [--steps 5]
 *                                                   [--overhead-m 64]
 *
 * For p = 2 and p = 4 (those <= the job's size; a sub-communicator of the first p ranks) and
 * every generator: stage callbacks that sleep F = f-ms, B = b-ms, I = W = b-ms / 2 (no
 * arithmetic: the executor's scheduling and transfers are what is measured), m = m-per-rank * p
 * micro-batches (interleaved: v = 2). The measured makespan (the recorded timeline of the step,
 * median over `steps` steps) is printed beside weft_schedule_simulate's with the same costs, and
 * their ratio (1.00 = the executor adds nothing to the schedule's own time). A sleep lasts
 * longer than asked (the more so on a loaded machine), so the table also gives `stretch`
 * (measured callback time / nominal) and `sim2`, the simulation with the measured mean
 * durations per kind, and ratio2 = measured / sim2: the part of the gap that is the executor's.
 * overhead: the same schedules with callbacks that return at once, m = overhead-m micro-batches,
 * no recording: the step's wall time over the rank's action count (the slowest rank), in us.
 * Rows start with the commit (WEFT_COMMIT from the caller, or "unknown").
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft/weft.h>

#define CHECK(call)                                                                                  \
  do {                                                                                               \
    weft_status_t st_ = (call);                                                                      \
    if (st_ != WEFT_OK) {                                                                            \
      fprintf(stderr, "%s failed: %s\n  %s\n", #call, weft_status_string(st_), weft_last_error()); \
      exit(3);                                                                                       \
    }                                                                                                \
  } while (0)

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_s(double s) {
  struct timespec t;
  t.tv_sec = (time_t)s;
  t.tv_nsec = (long)((s - (double)t.tv_sec) * 1e9);
  nanosleep(&t, NULL);
}

struct costs {
  double f, b; /* seconds; 0 = return at once */
};

static weft_status_t on_forward(const weft_stage_call_t *c, void *u) {
  (void)c;
  const struct costs *k = u;
  if (k->f > 0) sleep_s(k->f);
  return WEFT_OK;
}
static weft_status_t on_backward(const weft_stage_call_t *c, void *u) {
  (void)c;
  const struct costs *k = u;
  if (k->b > 0) sleep_s(k->b);
  return WEFT_OK;
}
static weft_status_t on_half(const weft_stage_call_t *c, void *u) {
  (void)c;
  const struct costs *k = u;
  if (k->b > 0) sleep_s(k->b / 2);
  return WEFT_OK;
}

static const struct {
  weft_schedule_kind_t kind;
  const char *name;
} kKinds[] = {
    {WEFT_SCHEDULE_GPIPE, "gpipe"}, {WEFT_SCHEDULE_ONE_F_ONE_B, "1f1b"}, {WEFT_SCHEDULE_INTERLEAVED_1F1B, "interleaved"},
    {WEFT_SCHEDULE_ZB_H1, "zbh1"},  {WEFT_SCHEDULE_ZB_H2, "zbh2"},       {WEFT_SCHEDULE_ZB_V, "zbv"},
    {WEFT_SCHEDULE_DUALPIPE_V, "dualpipev"},
};

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static weft_pipeline_t make_pipeline(weft_comm_t comm, weft_schedule_t s, struct costs *k, int record) {
  weft_schedule_info_t info = WEFT_SCHEDULE_INFO_INIT;
  CHECK(weft_schedule_info(s, &info));
  static int64_t shape[1] = {256};
  weft_tensor_t *b = calloc((size_t)info.stages, sizeof *b);
  for (int i = 0; i + 1 < info.stages; ++i) {
    b[i].device_type = WEFT_DEVICE_CPU;
    b[i].ndim = 1;
    b[i].dtype = WEFT_FLOAT32;
    b[i].shape = shape;
  }
  weft_pipeline_config_t pc = WEFT_PIPELINE_CONFIG_INIT;
  pc.forward = on_forward;
  pc.backward = on_backward;
  pc.backward_input = on_half;
  pc.backward_weight = on_half;
  pc.user_data = k;
  pc.boundaries = b;
  pc.nboundaries = (size_t)(info.stages - 1);
  pc.record = record;
  weft_pipeline_t p;
  CHECK(weft_pipeline_create(comm, s, &pc, &p));
  free(b);
  return p;
}

static weft_schedule_t generate(int k, int p, int m) {
  weft_schedule_config_t sc = WEFT_SCHEDULE_CONFIG_INIT;
  sc.ranks = p;
  sc.microbatches = m;
  sc.stages_per_rank = kKinds[k].kind == WEFT_SCHEDULE_INTERLEAVED_1F1B ? 2 : 0;
  weft_schedule_t s;
  CHECK(weft_schedule_generate(kKinds[k].kind, &sc, &s));
  return s;
}

/* Simulated makespan (seconds) of s with the given costs per action kind (B's halves: I and W). */
static double simulate(weft_schedule_t s, double f_s, double b_s, double i_s, double w_s) {
  weft_schedule_info_t info = WEFT_SCHEDULE_INFO_INIT;
  CHECK(weft_schedule_info(s, &info));
  const size_t n = (size_t)info.stages;
  double *f = malloc(sizeof(double) * n), *b = malloc(sizeof(double) * n), *hi = malloc(sizeof(double) * n),
         *hw = malloc(sizeof(double) * n);
  for (size_t i = 0; i < n; ++i) f[i] = f_s, b[i] = b_s, hi[i] = i_s, hw[i] = w_s;
  weft_pipeline_costs_t c = WEFT_PIPELINE_COSTS_INIT;
  c.nstages = info.stages;
  c.forward = f;
  c.backward = b;
  c.backward_input = hi;
  c.backward_weight = hw;
  weft_timeline_t t;
  CHECK(weft_schedule_simulate(s, &c, &t));
  weft_timeline_info_t ti = WEFT_TIMELINE_INFO_INIT;
  CHECK(weft_timeline_info(t, &ti));
  CHECK(weft_timeline_destroy(t));
  free(f), free(b), free(hi), free(hw);
  return ti.makespan;
}

/* The mean measured duration of each compute kind (F, B, I, W) over every rank of timeline t. */
static void mean_durations(weft_schedule_t s, weft_timeline_t t, int p, double mean[4]) {
  double sum[4] = {0}, count[4] = {0};
  for (int r = 0; r < p; ++r) {
    const weft_action_t *a;
    const double *start, *end;
    size_t n, nt;
    CHECK(weft_schedule_actions(s, r, &a, &n));
    CHECK(weft_timeline_rank(t, r, &start, &end, &nt, NULL));
    for (size_t k = 0; k < n && k < nt; ++k) {
      if (a[k].kind > WEFT_ACTION_W) continue;
      sum[a[k].kind] += end[k] - start[k];
      count[a[k].kind] += 1;
    }
  }
  for (int k = 0; k < 4; ++k) mean[k] = count[k] > 0 ? sum[k] / count[k] : 0.0;
}

int main(int argc, char **argv) {
  double f_ms = 2, b_ms = 4;
  int m_per_rank = 4, steps = 5, overhead_m = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--f-ms")) f_ms = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--b-ms")) b_ms = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--m-per-rank")) m_per_rank = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--overhead-m")) overhead_m = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (steps < 1 || m_per_rank < 2 || overhead_m < 1) {
    fprintf(stderr, "--steps >= 1, --m-per-rank >= 2 (DualPipeV needs m >= 2p), --overhead-m >= 1\n");
    return 2;
  }
  const char *commit = getenv("WEFT_COMMIT") ? getenv("WEFT_COMMIT") : "unknown";
  weft_comm_t world;
  CHECK(weft_comm_init_from_env(&world, NULL));
  int rank, size;
  CHECK(weft_comm_rank(world, &rank));
  CHECK(weft_comm_size(world, &size));
  if (rank == 0) {
    printf("# pipeline-bench: F %.2f ms, B %.2f ms (I = W = B/2); overhead: empty callbacks, m = %d\n", f_ms, b_ms,
           overhead_m);
    printf("%-10s %5s %-12s %4s %9s %9s %6s %9s %9s %6s %9s\n", "commit", "ranks", "schedule", "m", "sim_ms",
           "run_ms", "ratio", "stretch", "sim2_ms", "ratio2", "us/action");
  }
  const int counts[2] = {2, 4};
  for (int ci = 0; ci < 2; ++ci) {
    const int p = counts[ci];
    if (p > size) continue;
    weft_comm_t comm = NULL;
    CHECK(weft_comm_split(world, rank < p ? 0 : WEFT_SPLIT_NOCOLOR, rank, &comm, NULL));
    if (comm) {
      for (int k = 0; k < (int)(sizeof kKinds / sizeof kKinds[0]); ++k) {
        const int m = m_per_rank * p;
        struct costs sleepy = {f_ms * 1e-3, b_ms * 1e-3}, empty = {0, 0};
        weft_schedule_t s = generate(k, p, m);
        const double sim = simulate(s, sleepy.f, sleepy.b, sleepy.b / 2, sleepy.b / 2);
        weft_pipeline_t pl = make_pipeline(comm, s, &sleepy, 1);
        double *spans = malloc(sizeof(double) * (size_t)steps), *sims = malloc(sizeof(double) * (size_t)steps);
        double busy = 0, nominal = 0;
        for (int i = 0; i < steps; ++i) {
          weft_timeline_t t;
          CHECK(weft_pipeline_run(pl, &t));
          weft_timeline_info_t ti = WEFT_TIMELINE_INFO_INIT;
          CHECK(weft_timeline_info(t, &ti));
          spans[i] = ti.makespan;
          /* The schedule's own time with the callbacks' measured durations (sleeps overshoot,
           * more so on a loaded machine): what is left of the ratio is the executor's. */
          double mean[4];
          mean_durations(s, t, p, mean);
          sims[i] = simulate(s, mean[0], mean[1], mean[2], mean[3]);
          busy += mean[0] + (mean[1] > 0 ? mean[1] : mean[2] + mean[3]);
          nominal += sleepy.f + sleepy.b;
          CHECK(weft_timeline_destroy(t));
        }
        qsort(spans, (size_t)steps, sizeof(double), cmp_double);
        qsort(sims, (size_t)steps, sizeof(double), cmp_double);
        const double measured = spans[steps / 2], sim2 = sims[steps / 2];
        free(spans);
        free(sims);
        CHECK(weft_pipeline_destroy(pl));
        CHECK(weft_schedule_destroy(s));

        /* Overhead: empty callbacks, many micro-batches; one warm-up step, then one timed. */
        weft_schedule_t so = generate(k, p, overhead_m * (kKinds[k].kind == WEFT_SCHEDULE_INTERLEAVED_1F1B ? p : 1));
        weft_pipeline_t po = make_pipeline(comm, so, &empty, 0);
        const weft_action_t *actions;
        size_t nactions;
        CHECK(weft_schedule_actions(so, rank, &actions, &nactions));
        CHECK(weft_pipeline_run(po, NULL));
        CHECK(weft_barrier(comm, NULL, NULL));
        const double t0 = now_s();
        CHECK(weft_pipeline_run(po, NULL));
        double per_op = (now_s() - t0) / (double)nactions * 1e6, worst;
        CHECK(weft_allreduce(&per_op, &worst, 1, WEFT_FLOAT64, WEFT_MAX, comm, NULL, NULL));
        CHECK(weft_pipeline_destroy(po));
        CHECK(weft_schedule_destroy(so));
        if (rank == 0) {
          printf("%-10s %5d %-12s %4d %9.2f %9.2f %6.3f %9.3f %9.2f %6.3f %9.2f\n", commit, p, kKinds[k].name, m,
                 1e3 * sim, 1e3 * measured, measured / sim, busy / nominal, 1e3 * sim2, measured / sim2, worst);
          fflush(stdout);
        }
      }
      CHECK(weft_comm_destroy(comm));
    }
    CHECK(weft_barrier(world, NULL, NULL));
  }
  CHECK(weft_comm_destroy(world));
  return 0;
}
