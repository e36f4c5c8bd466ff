/* The planner (weft/plan.h): describe a model and a cluster in code, rank the parallel layouts
 * by predicted step time, print the best three and the Amdahl/Gustafson report.
 *
 * The model is a small MoE transformer: an embedding, 8 dense blocks, 2 MoE blocks of 8 experts
 * (top-2) and an output head, with per-sample flops, activations and outputs as one would
 * measure or count them. The cluster is 2 hosts of 4 ranks with 16 GiB each, a fast link inside
 * a host and a slower one between hosts. Nothing runs on those machines: a plan is arithmetic
 * on the descriptions plus the pipeline simulator, so this runs anywhere in a fraction of a
 * second. The program checks what it prints against plan.h's definitions (layouts in order, the
 * ranks they use, Amdahl's and Gustafson's laws) and exits non-zero when one does not hold.
 *   build/bin/weftrun -n 1 build/bin/plan_layouts_example   (or run it directly) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <weft/weft.h>

#include "example_check.h"

static int failures = 0;

/* A check of this program's own: prints what was expected when it does not hold. */
static void expect(int ok, const char *what, double got, double want) {
  if (!ok) {
    fprintf(stderr, "CHECK FAILED: %s: got %.9g, expected %.9g\n", what, got, want);
    ++failures;
  }
}

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)); }

static const char *schedule_name(weft_schedule_kind_t k) {
  static const char *names[] = {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipe-v"};
  return k >= 0 && k < WEFT_SCHEDULE_NUM_KINDS ? names[k] : "custom";
}

int main(void) {
  /* Sizes of one sample: a sequence of 256 tokens of width 512 in bf16. */
  const double tokens = 256, width = 512, hidden = 4 * width, act_bytes = tokens * width * 2;
  const double block_params = 4 * width * width + 2 * width * hidden; /* attention + MLP */
  const double expert_params = 2 * width * hidden;
  weft_plan_layer_t layers[4] = {
      /* Per sample: forward flops, activation bytes kept, output bytes (context bytes 0: cp only
       * splits the work). Unset fields are 0: times come from flops / the cluster's flops. */
      {.name = "embed", .count = 1, .top_k = 1, .tensor_parallel = 0, .params = 32000 * width,
       .forward_flops = 2 * tokens * width, .activation_bytes = act_bytes, .output_bytes = act_bytes},
      {.name = "block", .count = 8, .top_k = 1, .tensor_parallel = 1, .params = block_params,
       .forward_flops = 2 * tokens * block_params, .activation_bytes = 10 * act_bytes, .output_bytes = act_bytes},
      {.name = "moe_block", .count = 2, .experts = 8, .top_k = 2, .tensor_parallel = 1,
       .params = 4 * width * width + 8 * expert_params, .forward_flops = 2 * tokens * (4 * width * width + 2 * expert_params),
       .activation_bytes = 14 * act_bytes, .output_bytes = act_bytes},
      {.name = "head", .count = 1, .top_k = 1, .tensor_parallel = 1, .params = 32000 * width,
       .forward_flops = 2 * tokens * 32000 * width, .activation_bytes = tokens * 32000 * 2, .output_bytes = 64},
  };
  weft_plan_cluster_t cluster = WEFT_PLAN_CLUSTER_INIT;
  cluster.hosts = 2;
  cluster.ranks_per_host = 4;
  cluster.memory_per_rank = 16.0 * (1 << 30);
  cluster.flops_per_rank = 100e12;   /* sustained, well under an accelerator's peak */
  cluster.intra_bandwidth = 100e9;   /* within a host */
  cluster.intra_latency = 5e-6;
  cluster.inter_bandwidth = 12.5e9;  /* 100 Gbit/s between hosts */
  cluster.inter_latency = 20e-6;

  weft_plan_config_t config = WEFT_PLAN_CONFIG_INIT;
  config.layers = layers;
  config.num_layers = sizeof layers / sizeof layers[0];
  config.cluster = &cluster;
  config.global_batch = 64;
  config.microbatch_overhead = 50e-6; /* launches and framework time per compute action */
  config.top = 100; /* keep enough to find three different shapes below */
  weft_plan_t plan;
  CHECK(weft_plan_create(&config, &plan));

  weft_plan_info_t info = WEFT_PLAN_INFO_INIT;
  CHECK(weft_plan_info(plan, &info));
  printf("%zu layouts predicted for %d ranks at a global batch of %d; %zu fit in %.0f GiB per rank\n",
         info.searched, info.ranks, info.global_batch, info.feasible, cluster.memory_per_rank / (1 << 30));

  /* Layouts that differ only in the ZeRO stage or the schedule often tie on time (the ZeRO stage
   * changes the memory, not the step, when the gradients' all-reduce is the same total): show the
   * best three different shapes (dp, tp, pp, ep, cp), each with its best ZeRO stage and schedule. */
  printf("the best three shapes:\n");
  double previous = 0;
  int shapes[3][5], nshapes = 0;
  for (size_t i = 0; i < info.count && nshapes < 3; ++i) {
    weft_plan_layout_t l = WEFT_PLAN_LAYOUT_INIT;
    CHECK(weft_plan_layout(plan, i, &l));
    int seen = 0;
    for (int j = 0; j < nshapes; ++j)
      seen |= shapes[j][0] == l.dp && shapes[j][1] == l.tp && shapes[j][2] == l.pp && shapes[j][3] == l.ep &&
              shapes[j][4] == l.cp;
    if (seen) continue;
    shapes[nshapes][0] = l.dp, shapes[nshapes][1] = l.tp, shapes[nshapes][2] = l.pp;
    shapes[nshapes][3] = l.ep, shapes[nshapes][4] = l.cp;
    ++nshapes;
    printf("  %d. dp %d tp %d pp %d ep %d cp %d, ZeRO-%d, %s with %d micro-batches: step %.2f ms "
           "(compute %.2f, communication %.2f, bubble %.1f%%), %.2f GiB per rank, %.1f MiB sent per step\n",
           nshapes, l.dp, l.tp, l.pp, l.ep, l.cp, l.zero_stage, schedule_name(l.schedule), l.microbatches,
           l.step_seconds * 1e3, l.compute_seconds * 1e3, l.communication_seconds * 1e3, 100 * l.bubble_fraction,
           l.memory_per_rank / (1 << 30), l.communication_bytes / (1 << 20));
    /* plan.h: N = dp tp pp cp, ep divides dp tp, layouts sorted by step, kept ones fit. */
    expect(l.dp * l.tp * l.pp * l.cp == info.ranks, "dp tp pp cp = ranks", l.dp * l.tp * l.pp * l.cp, info.ranks);
    expect((l.dp * l.tp) % l.ep == 0, "ep divides dp tp", l.ep, l.dp * l.tp);
    expect(l.step_seconds >= previous, "sorted by step time", l.step_seconds, previous);
    expect(l.fits && l.memory_per_rank <= cluster.memory_per_rank, "fits the memory", l.memory_per_rank,
           cluster.memory_per_rank);
    expect(near(l.memory_per_rank, l.static_bytes + l.activation_bytes), "memory = static + activations",
           l.memory_per_rank, l.static_bytes + l.activation_bytes);
    previous = l.step_seconds;
  }
  expect(nshapes == 3, "three different shapes among the kept layouts", nshapes, 3);

  /* The report, as the library writes it. */
  size_t length = 0;
  CHECK(weft_plan_format(plan, WEFT_PLAN_FORMAT_REPORT, NULL, 0, &length));
  char *report = malloc(length + 1);
  if (!report) return 1;
  CHECK(weft_plan_format(plan, WEFT_PLAN_FORMAT_REPORT, report, length + 1, &length));
  printf("\n%s\n", report);
  free(report);

  /* Its numbers against Amdahl's and Gustafson's laws, computed here. */
  weft_plan_scaling_t s = WEFT_PLAN_SCALING_INIT;
  size_t npoints = 0;
  CHECK(weft_plan_scaling(plan, &s, NULL, 0, &npoints));
  weft_plan_scaling_point_t *points = calloc(npoints ? npoints : 1, sizeof *points);
  if (!points) return 1;
  CHECK(weft_plan_scaling(plan, &s, points, npoints, &npoints));
  const double n = s.ranks;
  expect(near(s.speedup, s.one_rank_seconds / s.step_seconds), "speedup = one rank / step", s.speedup,
         s.one_rank_seconds / s.step_seconds);
  expect(near(s.efficiency, s.speedup / n), "efficiency = speedup / N", s.efficiency, s.speedup / n);
  expect(near(1 / (s.serial_fraction + (1 - s.serial_fraction) / n), s.speedup), "Amdahl at N gives the speedup",
         1 / (s.serial_fraction + (1 - s.serial_fraction) / n), s.speedup);
  expect(near(s.gustafson_speedup, n - s.serial_fraction * (n - 1)), "Gustafson N - s (N - 1)", s.gustafson_speedup,
         n - s.serial_fraction * (n - 1));
  const double last = npoints ? points[npoints - 1].ranks : 0;
  expect(npoints >= 2 && last == n, "the curve ends at N", last, n);
  for (size_t i = 0; i < npoints; ++i) {
    const double k = points[i].ranks, a = 1 / (s.serial_fraction + (1 - s.serial_fraction) / k);
    expect(near(points[i].amdahl_speedup, a), "Amdahl's curve", points[i].amdahl_speedup, a);
  }
  free(points);
  CHECK(weft_plan_destroy(plan));
  if (failures) {
    fprintf(stderr, "plan_layouts: %d check(s) failed\n", failures);
    return 1;
  }
  printf("plan_layouts: every check holds\n");
  return 0;
}
