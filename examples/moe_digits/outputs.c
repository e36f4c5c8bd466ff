/* See outputs.h. */
#include "outputs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double relative_difference(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-30); }

int read_reference(const char *path, double **loss, double **step_s, int *steps) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "moe_digits: cannot read the reference loss curve %s\n", path);
    return 1;
  }
  int cap = 1024, n = 0;
  double *l = malloc(sizeof(double) * (size_t)cap), *t = malloc(sizeof(double) * (size_t)cap);
  char line[512];
  while (fgets(line, sizeof line, f)) {
    int step;
    double v, acc, sec;
    if (sscanf(line, "%d,%lf,%lf,%lf", &step, &v, &acc, &sec) != 4) continue; /* the header */
    if (step != n || n == cap) break;
    t[n] = sec;
    l[n++] = v;
  }
  fclose(f);
  if (n == 0) {
    fprintf(stderr, "moe_digits: %s holds no loss curve (rows \"step,loss,...\" from step 0)\n", path);
    free(l);
    free(t);
    return 1;
  }
  *step_s = t;
  *loss = l;
  *steps = n;
  return 0;
}

int write_csv(const char *path, const struct history *h) {
  FILE *f = fopen(path, "w");
  if (!f) return 1;
  fprintf(f, "step,loss,heldout_accuracy,step_seconds,bubble_measured,bubble_simulated\n");
  for (int s = 0; s < h->steps; ++s)
    fprintf(f, "%d,%.9g,%.6f,%.6f,%.4f,%.4f\n", s, h->loss[s], h->test_acc[s], h->step_s[s], h->bubble_measured[s],
            h->bubble_simulated);
  return fclose(f) != 0;
}

/* A polyline of values v[0..n) scaled into the plot box. */
static void polyline(FILE *f, const double *v, int n, double lo, double hi, const char *style) {
  fprintf(f, "<polyline fill=\"none\" %s points=\"", style);
  for (int s = 0; s < n; ++s) {
    const double x = 60.0 + 520.0 * s / (n > 1 ? n - 1 : 1);
    const double y = 340.0 - 300.0 * (v[s] - lo) / (hi - lo);
    fprintf(f, "%.1f,%.1f ", x, y);
  }
  fprintf(f, "\"/>\n");
}

int write_svg(const char *path, const struct history *h) {
  FILE *f = fopen(path, "w");
  if (!f) return 1;
  double hi = 0.0;
  for (int s = 0; s < h->steps; ++s) hi = fmax(hi, h->loss[s]);
  hi = ceil(hi * 2.0) / 2.0;
  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"400\" font-family=\"sans-serif\" "
             "font-size=\"12\">\n<rect width=\"640\" height=\"400\" fill=\"white\"/>\n");
  fprintf(f, "<text x=\"320\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">weft MoE digits demo: training loss "
             "and held-out accuracy</text>\n");
  fprintf(f, "<path d=\"M60 40 V340 H580 V40\" fill=\"none\" stroke=\"#444\"/>\n");
  for (int k = 0; k <= 4; ++k) {
    const double y = 340.0 - 75.0 * k;
    fprintf(f, "<text x=\"54\" y=\"%.0f\" text-anchor=\"end\">%.2f</text>\n", y + 4, hi * k / 4.0);
    fprintf(f, "<text x=\"586\" y=\"%.0f\">%d%%</text>\n", y + 4, 25 * k);
    fprintf(f, "<path d=\"M60 %.0f H580\" stroke=\"#ddd\"/>\n", y);
  }
  fprintf(f, "<text x=\"320\" y=\"370\" text-anchor=\"middle\">step (0 .. %d)</text>\n", h->steps - 1);
  polyline(f, h->test_acc, h->steps, 0.0, 1.0, "stroke=\"#2a2\" stroke-width=\"2\"");
  polyline(f, h->loss, h->steps, 0.0, hi, "stroke=\"#15c\" stroke-width=\"2\"");
  if (h->reference && h->reference_steps >= h->steps)
    polyline(f, h->reference, h->steps, 0.0, hi, "stroke=\"#e70\" stroke-width=\"1.5\" stroke-dasharray=\"5,4\"");
  fprintf(f, "<text x=\"70\" y=\"390\" fill=\"#15c\">loss (left axis)</text>\n");
  fprintf(f, "<text x=\"230\" y=\"390\" fill=\"#e70\">loss, --ranks 1 (dashed)</text>\n");
  fprintf(f, "<text x=\"430\" y=\"390\" fill=\"#2a2\">held-out accuracy (right)</text>\n</svg>\n");
  return fclose(f) != 0;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median_of(const double *step_s, int steps) {
  const int skip = steps > 4 ? 2 : 0, n = steps - skip;
  if (n <= 0) return 0.0;
  double *v = malloc(sizeof(double) * (size_t)n);
  memcpy(v, step_s + skip, sizeof(double) * (size_t)n);
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  const double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  free(v);
  return med;
}

double median_step_seconds(const struct history *h) { return median_of(h->step_s, h->steps); }

static double mean_bubble(const struct history *h) {
  double s = 0.0;
  for (int i = 0; i < h->steps; ++i) s += h->bubble_measured[i];
  return h->steps ? s / h->steps : 0.0;
}

int write_layout_json(const char *path, const struct options *o, const struct history *h, int ranks) {
  FILE *f = fopen(path, "w");
  if (!f) return 1;
  const double med = median_step_seconds(h);
  fprintf(f,
          "{\n  \"ranks\": %d, \"dp\": %d, \"pp\": %d, \"tp\": %d, \"ep\": %d, \"zero\": %d,\n"
          "  \"schedule\": \"%s\", \"microbatches\": %d, \"global_batch\": %d, \"steps\": %d,\n"
          "  \"step_seconds_median\": %.6f, \"pipeline_seconds_median\": %.6f, \"cpu_seconds_median\": %.6f,\n"
          "  \"samples_per_second\": %.1f,\n"
          "  \"bubble_measured_mean\": %.4f, \"bubble_simulated\": %.4f,\n"
          "  \"final_loss\": %.6f, \"heldout_accuracy\": %.4f\n}\n",
          ranks, o->dp, o->pp, o->tp, o->ep, o->zero, o->schedule_name, h->microbatches, o->global_batch, h->steps, med,
          median_of(h->pipeline_s, h->steps), median_of(h->cpu_s, h->steps), med > 0 ? o->global_batch / med : 0.0, mean_bubble(h), h->bubble_simulated,
          h->steps ? h->loss[h->steps - 1] : 0.0, h->steps ? h->test_acc[h->steps - 1] : 0.0);
  return fclose(f) != 0;
}

void write_summary(FILE *f, const struct options *o, const struct history *h, int ranks) {
  const double med = median_step_seconds(h);
  const int last = h->steps - 1;
  fprintf(f, "summary: %d ranks = dp %d x pp %d x tp/ep %d, ZeRO-%d over dp, %s with m = %d (auto-tuner: %d "
             "candidates)\n",
          ranks, o->dp, o->pp, o->tp, o->zero, o->schedule_name, h->microbatches, h->tuner_candidates);
  fprintf(f, "summary: %d steps of %d samples; loss %.4f -> %.4f; held-out accuracy %.1f%% on %d digits (chance "
             "10%%); last batch's training accuracy %.1f%%\n",
          h->steps, o->global_batch, h->loss[0], h->loss[last], 100.0 * h->test_acc[last], h->ntest,
          100.0 * h->train_acc_last);
  fprintf(f, "summary: median step %.1f ms = %.0f samples/s; pipeline bubble measured %.1f%% (mean) vs simulated "
             "%.1f%%\n",
          1e3 * med, med > 0 ? o->global_batch / med : 0.0, 100.0 * mean_bubble(h), 100.0 * h->bubble_simulated);
  /* Was it a good layout? Measured against the same training in one process (Amdahl's view:
   * what the ranks buy is bounded by what stays serial and what they must communicate). */
  if (h->reference_step_s && h->reference_steps >= 1 && ranks > 1 && med > 0) {
    const double one = median_of(h->reference_step_s, h->reference_steps), speedup = one / med;
    fprintf(f, "summary: vs one process (median step %.1f ms): speedup %.2fx, efficiency %.0f%% on %d ranks: %s\n",
            1e3 * one, speedup, 100.0 * speedup / ranks, ranks,
            speedup >= 0.5 * ranks ? "a good layout for this machine"
            : speedup >= 1.0      ? "faster than one process, but far from linear: communication and the bubble "
                                    "dominate"
                                  : "slower than one process: this model (~20 kflop per sample) is too small for its "
                                    "collectives, and the ranks outnumber the cores");
  }
}
