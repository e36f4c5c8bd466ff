/*
 * training-bench: the gradient bucketer's overlap and ZeRO's step time and memory (issue 12).
 * Public C ABI only.
 *
 *   build/bin/weftrun -n 4 build/bin/training-bench overlap [--layers 8] [--mib 4] [--sleep-ms 6] [--bucket-mib 25]
 *   build/bin/weftrun -n 4 build/bin/training-bench zero --stage 2 [--layers 8] [--mib 4] [--steps 10] [--dtype bf16]
 *
 * overlap: a backward of `layers` layers, each producing a float32 gradient of `mib` MiB after
 *   sleeping `sleep-ms` (the layer's compute). Run two ways per repeat: (a) overlapped - each
 *   gradient is marked ready as its layer finishes, finish() at the end; (b) not overlapped -
 *   the same sleeps, then every gradient marked and finished. (b)'s finish time is the whole
 *   communication; (a)'s is what backward did not hide. Prints both and hidden = 1 - a/b.
 * zero: `steps` training steps of a model of `layers` float32 parameters of `mib` MiB each with
 *   AdamW at the given stage (0 = plain data parallel): stage 3 gathers each group before its
 *   forward (prefetching the next) and again in backward, gradients are handed over last layer
 *   first. No model compute: the step time is ZeRO's communication and optimizer. Prints ms per
 *   step (median of the steps after the first), ZeRO's memory formula beside weft's memory
 *   report, and how much the peak RSS grew from before the handle was made.
 * Rows start with the commit (WEFT_COMMIT from the caller, or "unknown").
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

static void sleep_ms(double ms) {
  struct timespec t = {(time_t)(ms / 1000), (long)((ms - 1000 * (double)(time_t)(ms / 1000)) * 1e6)};
  nanosleep(&t, NULL);
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static const char *commit(void) {
  const char *c = getenv("WEFT_COMMIT");
  return c && *c ? c : "unknown";
}

struct Opts {
  int layers, steps, stage;
  double mib, sleep_ms, bucket_mib;
  int bf16;  // zero: bf16 parameters and gradients, float32 master weights (ZeRO's K = 12)
};

static void overlap(weft_comm_t comm, int rank, int size, const struct Opts *o) {
  const size_t n = (size_t)(o->mib * (1 << 20) / 4);
  float **g = calloc((size_t)o->layers, sizeof *g);
  int64_t *shape = calloc((size_t)o->layers, sizeof *shape);
  weft_tensor_t *views = calloc((size_t)o->layers, sizeof *views);
  for (int l = 0; l < o->layers; ++l) {
    g[l] = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; ++i) g[l][i] = (float)((i + (size_t)l) % 7);
    shape[l] = (int64_t)n;
    views[l] = (weft_tensor_t){g[l], WEFT_DEVICE_CPU, 0, 1, WEFT_FLOAT32, &shape[l], NULL, 0};
  }
  weft_bucketer_config_t cfg = WEFT_BUCKETER_CONFIG_INIT;
  cfg.bucket_bytes = (size_t)(o->bucket_mib * (1 << 20));
  weft_bucketer_t b;
  CHECK(weft_bucketer_create(comm, views, (size_t)o->layers, &cfg, &b));
  size_t nb;
  CHECK(weft_bucketer_num_buckets(b, &nb));
  enum { kRepeats = 6 };
  double exposed[kRepeats + 1], alone[kRepeats + 1], step_a[kRepeats + 1], step_b[kRepeats + 1];  // [0]: warm-up
  for (int rep = 0; rep < kRepeats + 1; ++rep) {
    for (int way = 0; way < 2; ++way) {
      CHECK(weft_barrier(comm, NULL, NULL));
      const double t0 = now_s();
      for (int l = 0; l < o->layers; ++l) {
        sleep_ms(o->sleep_ms);
        if (way == 0) CHECK(weft_bucketer_mark_ready(b, (size_t)l, g[l], NULL));
      }
      if (way == 1) {
        for (int l = 0; l < o->layers; ++l) CHECK(weft_bucketer_mark_ready(b, (size_t)l, g[l], NULL));
      }
      const double t1 = now_s();
      CHECK(weft_bucketer_finish(b, NULL));
      const double t2 = now_s();
      (way == 0 ? exposed : alone)[rep] = (t2 - t1) * 1e3;
      (way == 0 ? step_a : step_b)[rep] = (t2 - t0) * 1e3;
    }
  }
  if (rank == 0) {
    const double e = median(exposed + 1, kRepeats), a = median(alone + 1, kRepeats);
    printf("%s overlap ranks=%d layers=%d grad=%.1fMiB buckets=%zu compute=%.1fms/layer: step %.1f ms overlapped vs %.1f ms "
           "serial; exposed comm %.2f ms of %.2f ms -> hidden %.0f%%\n",
           commit(), size, o->layers, o->mib, nb, o->sleep_ms, median(step_a + 1, kRepeats), median(step_b + 1, kRepeats), e, a,
           100.0 * (1.0 - e / a));
  }
  CHECK(weft_bucketer_destroy(b));
  for (int l = 0; l < o->layers; ++l) free(g[l]);
  free(g);
  free(shape);
  free(views);
}

static void zero(weft_comm_t comm, int rank, int size, const struct Opts *o) {
  const char *dp = "dp";
  weft_mesh_t mesh;
  CHECK(weft_mesh_create(comm, 1, &size, &dp, NULL, &mesh));
  const size_t n = (size_t)(o->mib * (1 << 20) / 4);
  float *init = calloc(n, sizeof(float)), *grad = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; ++i) grad[i] = 1e-3f * (float)((i + (size_t)rank) % 13);
  /* bf16 gradients: the upper halves of the float32 ones (truncation is fine for timing). */
  uint16_t *grad16 = malloc(n * sizeof(uint16_t));
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    memcpy(&bits, &grad[i], sizeof bits);
    grad16[i] = (uint16_t)(bits >> 16);
  }
  struct rusage before;
  getrusage(RUSAGE_SELF, &before);
  int64_t shape[1] = {(int64_t)n};
  weft_tensor_t *params = calloc((size_t)o->layers, sizeof *params);
  int *groups = calloc((size_t)o->layers, sizeof *groups);
  for (int l = 0; l < o->layers; ++l) {
    params[l] = (weft_tensor_t){init, WEFT_DEVICE_CPU, 0, 1, WEFT_FLOAT32, shape, NULL, 0};
    groups[l] = l;  // one group (FSDP unit) per layer
  }
  weft_zero_config_t cfg = WEFT_ZERO_CONFIG_INIT;
  cfg.stage = o->stage;
  cfg.groups = groups;
  cfg.param_dtype = o->bf16 ? WEFT_BFLOAT16 : WEFT_FLOAT32;
  weft_zero_t z;
  CHECK(weft_zero_create(mesh, "dp", params, (size_t)o->layers, &cfg, &z));
  double *ms = calloc((size_t)o->steps, sizeof *ms);
  weft_zero_step_info_t info = WEFT_ZERO_STEP_INFO_INIT;
  const weft_tensor_t gview = {o->bf16 ? (void *)grad16 : (void *)grad, WEFT_DEVICE_CPU, 0, 1,
                               o->bf16 ? WEFT_BFLOAT16 : WEFT_FLOAT32, shape, NULL, 0};
  for (int s = 0; s < o->steps; ++s) {
    CHECK(weft_barrier(comm, NULL, NULL));
    const double t0 = now_s();
    for (int pass = 0; pass < 2; ++pass) {  // forward, then backward
      weft_request_t next = NULL;
      for (int k = 0; k < o->layers; ++k) {
        const int l = pass == 0 ? k : o->layers - 1 - k;
        if (next) {
          CHECK(weft_wait(next));
          CHECK(weft_request_free(next));
          next = NULL;
        } else {
          CHECK(weft_zero_gather(z, (size_t)l, NULL));
        }
        const int following = pass == 0 ? l + 1 : l - 1;
        if (following >= 0 && following < o->layers) CHECK(weft_zero_gather(z, (size_t)following, &next));
        weft_tensor_t p;
        CHECK(weft_zero_param(z, (size_t)l, &p));
        if (pass == 1) CHECK(weft_zero_grad_ready(z, (size_t)l, &gview));
        CHECK(weft_zero_release(z, (size_t)l));
      }
    }
    CHECK(weft_zero_step(z, &info));
    ms[s] = (now_s() - t0) * 1e3;
  }
  weft_zero_memory_t mem = WEFT_ZERO_MEMORY_INIT;
  CHECK(weft_zero_memory(z, &mem));
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  if (rank == 0) {
    const double P = (double)o->layers * (double)n, N = (double)size, MiB = 1 << 20;
    /* ZeRO's formula for params + grads + optimizer state, bytes: p and g bytes per parameter,
     * K bytes of optimizer state (Adam: m, v, and the float32 master copy with bf16). */
    const double pb = o->bf16 ? 2 : 4, K = o->bf16 ? 12 : 8;
    const double formula = o->stage == 0   ? (pb + pb + K) * P
                           : o->stage == 1 ? (pb + pb) * P + K * P / N
                           : o->stage == 2 ? pb * P + (pb + K) * P / N
                                           : (pb + pb + K) * P / N;
    const double held = (double)(mem.params + mem.grads + mem.optimizer);
    printf("%s zero stage=%d ranks=%d params=%.1fM %s: %.2f ms/step; comm %.2f P/step; formula %.1f MiB, weft holds "
           "%.1f MiB (params %.1f grads %.1f optimizer %.1f) + buffers(peak) %.1f MiB; peak RSS grew %.1f MiB\n",
           commit(), o->stage, size, P / 1e6, o->bf16 ? "bf16" : "f32", median(ms + 1, o->steps - 1),
           (double)info.comm_elements / P, formula / MiB, held / MiB, (double)mem.params / MiB, (double)mem.grads / MiB,
           (double)mem.optimizer / MiB, (double)mem.buffers_peak / MiB,
           (double)(ru.ru_maxrss - before.ru_maxrss) / 1024.0);
  }
  CHECK(weft_zero_destroy(z));
  CHECK(weft_mesh_destroy(mesh));
  free(ms);
  free(params);
  free(groups);
  free(init);
  free(grad);
  free(grad16);
}

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "overlap") && strcmp(argv[1], "zero"))) {
    fprintf(stderr, "usage: training-bench overlap|zero [--layers N] [--mib X] [--sleep-ms T] [--bucket-mib B] [--stage S] [--steps K] [--dtype f32|bf16]\n");
    return 2;
  }
  struct Opts o = {8, 10, 2, 4.0, 6.0, 25.0, 0};
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--layers")) o.layers = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--steps")) o.steps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--stage")) o.stage = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--mib")) o.mib = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--sleep-ms")) o.sleep_ms = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--bucket-mib")) o.bucket_mib = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--dtype")) o.bf16 = !strcmp(argv[i + 1], "bf16");
    else {
      fprintf(stderr, "training-bench: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (o.layers < 1 || o.steps < 2 || o.mib <= 0) {
    fprintf(stderr, "training-bench: --layers >= 1, --steps >= 2, --mib > 0\n");
    return 2;
  }
  weft_comm_t comm;
  CHECK(weft_comm_init_from_env(&comm, NULL));
  int rank, size;
  CHECK(weft_comm_rank(comm, &rank));
  CHECK(weft_comm_size(comm, &size));
  if (!strcmp(argv[1], "overlap")) overlap(comm, rank, size, &o);
  else zero(comm, rank, size, &o);
  CHECK(weft_comm_destroy(comm));
  return 0;
}
