/* weft's main demo: a small MoE classifier of handwritten digits trained on 8 local ranks as
 * DP 2 x PP 2 x EP/TP 2 with ZeRO-1 over DP and a 1F1B (or ZB) schedule whose micro-batch count
 * the auto-tuner chose. Any other layout of the same model can be tried with the flags; --ranks 1
 * is the same training in one process, and --reference compares a run's loss curve with it.
 *   scripts/demo                       (installs, builds, runs both, checks, writes out/demo)
 *   build/bin/weftrun -n 8 build/bin/moe_digits --out DIR --reference REF/loss.csv */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model.h"
#include "outputs.h"
#include "profile.h"

static const char *usage =
    "usage: moe_digits [--dp N] [--pp 1|2] [--tp N] [--ep N] [--zero 0|1|2] [--schedule 1f1b|gpipe|zb-h1|zb-h2]\n"
    "                  [--microbatches M (0 = auto-tuner)] [--ranks N] [--steps N] [--batch N] [--lr X]\n"
    "                  [--eval-every N] [--trace-step N] [--out DIR] [--reference loss.csv] [--tolerance X]\n"
    "                  [--min-accuracy X] [--layout-json PATH] [--data digits.csv.gz] [--validate]\n"
    "                  [--profile-layers PATH]\n"
    "Defaults: dp 2, pp 2, tp = ep = 2, ZeRO-1, 1f1b, the tuner's m, 120 steps of 128 samples, Adam lr 0.004.\n"
    "--ranks 1 sets dp = pp = tp = ep = 1: the same training in one process.\n"
    "--validate checks the layout only (no ranks needed) and exits 0, or 2 saying what is wrong.\n"
    "--profile-layers PATH times the blocks per sample on every rank at once and writes weft-plan's model\n"
    "file (docs/planner.md); no training.\n";

static int parse_schedule(const char *s, weft_schedule_kind_t *k) {
  static const struct {
    const char *name;
    weft_schedule_kind_t kind;
  } table[] = {{"1f1b", WEFT_SCHEDULE_ONE_F_ONE_B}, {"gpipe", WEFT_SCHEDULE_GPIPE}, {"zb-h1", WEFT_SCHEDULE_ZB_H1},
               {"zb-h2", WEFT_SCHEDULE_ZB_H2}};
  for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i)
    if (strcmp(s, table[i].name) == 0) {
      *k = table[i].kind;
      return 0;
    }
  if (!strcmp(s, "interleaved") || !strcmp(s, "zb-v") || !strcmp(s, "dualpipe-v"))
    fprintf(stderr, "moe_digits: --schedule %s needs 2 stages per rank; this model has 2 blocks, one stage per "
                    "pipeline rank: use 1f1b, gpipe, zb-h1 or zb-h2\n", s);
  else
    fprintf(stderr, "moe_digits: unknown --schedule %s (1f1b, gpipe, zb-h1, zb-h2)\n", s);
  return 1;
}

static int parse(int argc, char **argv, struct options *o) {
  *o = (struct options){0, 2, 2, 2, 2, 1, WEFT_SCHEDULE_ONE_F_ONE_B, "1f1b", 0, 120, 128, 1, 3, 0.004,
                        NULL, NULL, NULL, DIGITS_CSV, 1e-4, 0, 0, NULL};
  int tp_given = 0, ep_given = 0;
  const char *inj = getenv("WEFT_TEST_INJECT");
  o->inject = inj && strcmp(inj, "1") == 0;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--validate")) continue;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(usage, stdout);
      exit(0);
    }
    if (!v) {
      fprintf(stderr, "moe_digits: %s needs a value\n%s", a, usage);
      return 1;
    }
    ++i;
    if (!strcmp(a, "--dp")) o->dp = atoi(v);
    else if (!strcmp(a, "--pp")) o->pp = atoi(v);
    else if (!strcmp(a, "--tp")) o->tp = atoi(v), tp_given = 1;
    else if (!strcmp(a, "--ep")) o->ep = atoi(v), ep_given = 1;
    else if (!strcmp(a, "--zero")) o->zero = atoi(v);
    else if (!strcmp(a, "--microbatches")) o->microbatches = atoi(v);
    else if (!strcmp(a, "--ranks")) o->ranks = atoi(v);
    else if (!strcmp(a, "--steps")) o->steps = atoi(v);
    else if (!strcmp(a, "--batch")) o->global_batch = atoi(v);
    else if (!strcmp(a, "--lr")) o->lr = atof(v);
    else if (!strcmp(a, "--eval-every")) o->eval_every = atoi(v);
    else if (!strcmp(a, "--trace-step")) o->trace_step = atoi(v);
    else if (!strcmp(a, "--out")) o->out = v;
    else if (!strcmp(a, "--reference")) o->reference = v;
    else if (!strcmp(a, "--tolerance")) o->tolerance = atof(v);
    else if (!strcmp(a, "--min-accuracy")) o->min_accuracy = atof(v);
    else if (!strcmp(a, "--layout-json")) o->layout_json = v;
    else if (!strcmp(a, "--data")) o->data = v;
    else if (!strcmp(a, "--profile-layers")) o->profile_layers = v;
    else if (!strcmp(a, "--schedule")) {
      o->schedule_name = v;
      if (parse_schedule(v, &o->schedule)) return 1;
    } else {
      fprintf(stderr, "moe_digits: unknown option %s\n%s", a, usage);
      return 1;
    }
  }
  if (tp_given && !ep_given) o->ep = o->tp; /* one dim serves both: naming one names the other */
  if (ep_given && !tp_given) o->tp = o->ep;
  if (o->ranks == 1) o->dp = o->pp = o->tp = o->ep = 1;
  return 0;
}

/* Refuses layouts this model cannot take, saying which rule and what would work. */
static int check_layout(const struct options *o, int world) {
  const int n = o->dp * o->pp * o->tp;
  if (o->dp < 1 || o->pp < 1 || o->tp < 1 || o->ep < 1) {
    fprintf(stderr, "moe_digits: invalid layout: --dp, --pp, --tp and --ep must be >= 1\n");
  } else if (o->tp != o->ep) {
    fprintf(stderr, "moe_digits: invalid layout: --tp %d and --ep %d differ; one mesh dim serves as TP in the dense "
                    "block and as EP in the MoE block, so they must be equal\n", o->tp, o->ep);
  } else if (o->pp > 2) {
    fprintf(stderr, "moe_digits: invalid layout: --pp %d; the model has 2 blocks (dense, MoE+head): --pp 1 or 2\n",
            o->pp);
  } else if (EXPERTS % o->tp || FFN % o->tp) {
    fprintf(stderr, "moe_digits: invalid layout: --tp/--ep %d must divide the %d experts and the %d hidden units "
                    "(1, 2, 4 or 8)\n", o->tp, EXPERTS, FFN);
  } else if (n != world || (o->ranks && o->ranks != world)) {
    fprintf(stderr, "moe_digits: invalid layout: dp %d x pp %d x tp/ep %d = %d ranks, but %d were started%s "
                    "(weftrun -n %d)\n", o->dp, o->pp, o->tp, n, world, o->ranks ? " or asked for with --ranks" : "",
            n);
  } else if (o->global_batch < 1 || o->global_batch % (o->dp * o->tp)) {
    fprintf(stderr, "moe_digits: invalid layout: --batch %d must be a multiple of dp x tp/ep = %d\n", o->global_batch,
            o->dp * o->tp);
  } else if (o->microbatches < 0 || (o->microbatches &&
                                       ((o->global_batch / o->dp) % o->microbatches ||
                                        (o->global_batch / o->dp / o->microbatches) % o->tp))) {
    fprintf(stderr, "moe_digits: invalid layout: --microbatches %d must split the %d samples per data-parallel "
                    "replica into equal micro-batches that split evenly over tp/ep %d (0 = the tuner's choice)\n",
            o->microbatches, o->global_batch / o->dp, o->tp);
  } else if (o->zero < 0 || o->zero > 2) {
    fprintf(stderr, "moe_digits: --zero %d: use 0, 1 or 2 (stage 3 gathers parameters per use; this demo does not)\n",
            o->zero);
  } else if (o->steps < 1 || o->eval_every < 1 || !(o->lr > 0.0)) {
    fprintf(stderr, "moe_digits: --steps, --eval-every and --lr must be positive\n");
  } else {
    return 0;
  }
  return 1;
}

static int write_all(const struct options *o, const struct history *h, int ranks) {
  if (!o->out) return 0;
  char p[4096];
  int bad = 0;
  snprintf(p, sizeof p, "%s/loss.csv", o->out);
  bad |= write_csv(p, h);
  snprintf(p, sizeof p, "%s/loss.svg", o->out);
  bad |= write_svg(p, h);
  snprintf(p, sizeof p, "%s/layout.json", o->out);
  bad |= write_layout_json(p, o, h, ranks);
  snprintf(p, sizeof p, "%s/summary.txt", o->out);
  FILE *f = fopen(p, "w");
  if (f) {
    write_summary(f, o, h, ranks);
    bad |= fclose(f) != 0;
  } else {
    bad = 1;
  }
  if (bad) fprintf(stderr, "moe_digits: could not write the outputs in %s: %s\n", o->out, strerror(errno));
  return bad;
}

/* Rank 0's verdict: the outputs, the equivalence with one process, accuracy and a falling loss. */
static int verdict(const struct options *o, struct history *h, int ranks) {
  int bad = write_all(o, h, ranks);
  if (o->layout_json) bad |= write_layout_json(o->layout_json, o, h, ranks);
  write_summary(stdout, o, h, ranks);
  const int last = h->steps - 1;
  if (h->reference) {
    double worst = 0.0;
    int at = 0;
    const int n = h->steps < h->reference_steps ? h->steps : h->reference_steps;
    for (int s = 0; s < n; ++s) {
      const double d = relative_difference(h->loss[s], h->reference[s]);
      if (d > worst || isnan(d)) worst = d, at = s;
    }
    const int ok = n == h->steps && worst <= o->tolerance;
    printf("equivalence with --ranks 1: largest relative loss difference %.2e at step %d over %d steps (bound %.0e): "
           "%s\n", worst, at, n, o->tolerance, ok ? "OK" : "FAILED");
    bad |= !ok;
  }
  if (h->steps >= 5 && !(h->loss[last] < h->loss[0])) {
    printf("FAILED: the loss did not fall (%.4f -> %.4f)\n", h->loss[0], h->loss[last]);
    bad = 1;
  }
  if (o->min_accuracy > 0.0 && !(h->test_acc[last] >= o->min_accuracy)) {
    printf("FAILED: held-out accuracy %.1f%% is below --min-accuracy %.1f%%\n", 100.0 * h->test_acc[last],
           100.0 * o->min_accuracy);
    bad = 1;
  }
  return bad;
}

int main(int argc, char **argv) {
  struct options o;
  if (parse(argc, argv, &o)) return 2;
  /* --validate: only the layout rules, before any rank is started (scripts/demo asks first). */
  for (int i = 1; i < argc; ++i)
    if (!strcmp(argv[i], "--validate")) return check_layout(&o, o.dp * o.pp * o.tp) ? 2 : 0;
  weft_comm_t world;
  if (weft_comm_init_from_env(&world, NULL) != WEFT_OK) {
    fprintf(stderr, "moe_digits: weft_comm_init_from_env: %s (run under weftrun)\n", weft_last_error());
    return 1;
  }
  int rank, size;
  weft_comm_rank(world, &rank);
  weft_comm_size(world, &size);
  struct digits d;
  if (o.profile_layers) { /* any number of ranks: each times the whole model on its own */
    int rc = digits_load(o.data, 297, &d) ? 2 : profile_layers(&o, world, &d, o.profile_layers);
    if (rc != 2) digits_free(&d);
    weft_comm_destroy(world);
    return rc;
  }
  if (check_layout(&o, size) || digits_load(o.data, 297, &d)) {
    weft_comm_destroy(world);
    return 2;
  }
  struct history h = {0};
  h.ntest = (int)d.ntest;
  h.loss = calloc((size_t)o.steps, sizeof(double));
  h.test_acc = calloc((size_t)o.steps, sizeof(double));
  h.step_s = calloc((size_t)o.steps, sizeof(double));
  h.bubble_measured = calloc((size_t)o.steps, sizeof(double));
  h.pipeline_s = calloc((size_t)o.steps, sizeof(double));
  h.cpu_s = calloc((size_t)o.steps, sizeof(double));
  double *ref = NULL, *ref_s = NULL;
  if (rank == 0 && o.reference && read_reference(o.reference, &ref, &ref_s, &h.reference_steps) == 0) {
    h.reference = ref;
    h.reference_step_s = ref_s;
  }
  if (rank == 0 && o.out) mkdir(o.out, 0755); /* may exist; its parent must */
  int bad = rank == 0 && o.reference && !ref;
  if (!bad && rank == 0)
    printf("moe_digits: %d ranks = dp %d x pp %d x tp/ep %d, ZeRO-%d, %s; %zu training and %zu held-out digits; "
           "model: 64 -> %d, dense MLP %d (TP), MoE %d experts top-%d (EP), 10 classes\n",
           size, o.dp, o.pp, o.tp, o.zero, o.schedule_name, d.ntrain, d.ntest, HIDDEN, FFN, EXPERTS, TOPK);
  /* Every rank trains (a missing reference is rank 0's problem, decided after the run). */
  bad |= train(&o, world, &d, &h);
  if (!bad && rank == 0) bad = verdict(&o, &h, size);
  fflush(stdout); /* weftrun stops the others as soon as one rank exits non-zero */
  int all_bad = 0;
  weft_allreduce(&bad, &all_bad, 1, WEFT_INT32, WEFT_MAX, world, NULL, NULL);
  free(ref);
  free(ref_s);
  free(h.loss);
  free(h.test_acc);
  free(h.step_s);
  free(h.bubble_measured);
  free(h.pipeline_s);
  free(h.cpu_s);
  digits_free(&d);
  weft_comm_destroy(world);
  return all_bad ? 1 : 0;
}
