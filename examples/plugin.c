/* Plugins: load the example C plugin (plugins/c_reduce), list what it offers, call two of its
 * functions by name (no prototype compiled in: weft calls them through libffi by the manifest's
 * signature), hand it a callback made at run time, and all-reduce with the two reduction
 * operators it adds (absmax, and logsumexp: the log of a sum of exponentials, without
 * overflow), plus one operator this program registers itself. Every result is checked.
 *   build/bin/weftrun -n 4 build/bin/plugin_example [path/to/libweft_c_reduce.so]
 * Without a path it looks beside the build: <bin>/../plugins/libweft_c_reduce.so. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/weft.h>

#include "example_check.h"

enum { COUNT = 1000 };

static const char *kind_name(weft_plugin_kind_t kind) {
  static const char *names[] = {"function", "reduce_op", "codec_bytes", "codec_encode",
                                "codec_decode", "router", "schedule", "cost_model"};
  return (unsigned)kind < WEFT_PLUGIN_NUM_KINDS ? names[kind] : "?";
}

/* The plugin's file: argv[1], or <directory of this program>/../plugins/libweft_c_reduce.so. */
static void plugin_path(int argc, char **argv, char *path, size_t size) {
  if (argc > 1) {
    snprintf(path, size, "%s", argv[1]);
    return;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    fprintf(stderr, "cannot find this program's directory; pass the plugin's path\n");
    exit(2);
  }
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (slash) *slash = '\0';
  snprintf(path, size, "%s/../plugins/libweft_c_reduce.so", exe);
}

/* A handler any binding could write: the plugin's apply_twice calls it as double f(double). */
static weft_status_t halve(const weft_value_t *args, size_t nargs, weft_value_t *result, void *user) {
  (void)nargs;
  (void)user;
  result->f = args[0].f / 2.0;
  return WEFT_OK;
}

/* An operator of this program's own: of two values, the one closer to zero. */
static weft_status_t absmin(void *dst, const void *a, const void *b, size_t count, weft_dtype_t dtype, void *user) {
  (void)user;
  if (dtype != WEFT_FLOAT32) return WEFT_ERR_INVALID_ARGUMENT;
  const float *x = a, *y = b;
  float *out = dst;
  for (size_t i = 0; i < count; ++i) out[i] = fabsf(x[i]) <= fabsf(y[i]) ? x[i] : y[i];
  return WEFT_OK;
}

static int lookup_op(weft_plugin_t plugin, const char *name) {
  weft_plugin_entry_t entry = WEFT_PLUGIN_ENTRY_INIT;
  CHECK(weft_plugin_lookup(plugin, name, &entry));
  return entry.id;
}

static float value(int rank, int i) { return sinf((float)(rank * 131 + i)) * (float)(rank + 1); }

int main(int argc, char **argv) {
  char path[PATH_MAX + 64];
  plugin_path(argc, argv, path, sizeof path);
  weft_plugin_t plugin;
  CHECK(weft_plugin_load(path, &plugin));

  weft_comm_t comm;
  CHECK(weft_comm_init_from_env(&comm, NULL));
  int rank, size;
  CHECK(weft_comm_rank(comm, &rank));
  CHECK(weft_comm_size(comm, &size));

  weft_plugin_info_t info = WEFT_PLUGIN_INFO_INIT;
  CHECK(weft_plugin_info(plugin, &info));
  if (rank == 0) {
    printf("plugin %s %s (plugin ABI %d.%d), %zu entries:\n", info.name, info.version, info.abi_major,
           info.abi_minor, info.nentries);
    for (size_t i = 0; i < info.nentries; ++i) {
      weft_plugin_entry_t e = WEFT_PLUGIN_ENTRY_INIT;
      CHECK(weft_plugin_entry(plugin, i, &e));
      printf("  %-10s %-12s id %-3d %s\n", kind_name(e.kind), e.name, e.id, e.doc);
    }
  }
  int ok = 1;

  /* Calls by name: add_i64(40, 2) and dot_f64(x, y, 3). */
  weft_value_t args[3] = {WEFT_VALUE_INIT, WEFT_VALUE_INIT, WEFT_VALUE_INIT}, result = WEFT_VALUE_INIT;
  args[0].type = WEFT_TYPE_I64, args[0].i = 40;
  args[1].type = WEFT_TYPE_I64, args[1].i = 2;
  CHECK(weft_plugin_call(plugin, "add_i64", args, 2, &result));
  ok &= result.type == WEFT_TYPE_I64 && result.i == 42;
  const double x[3] = {1, 2, 3}, y[3] = {4, 5, 6};
  args[0].type = WEFT_TYPE_PTR, args[0].p = x;
  args[1].type = WEFT_TYPE_PTR, args[1].p = y;
  args[2].type = WEFT_TYPE_SIZE, args[2].i = 3;
  CHECK(weft_plugin_call(plugin, "dot_f64", args, 3, &result));
  ok &= result.type == WEFT_TYPE_F64 && result.f == 32.0;

  /* A callback made at run time: apply_twice(halve, 10) = 2.5. */
  const weft_value_type_t f64_arg[1] = {WEFT_TYPE_F64};
  weft_closure_t closure;
  void *fn;
  CHECK(weft_closure_create(WEFT_TYPE_F64, f64_arg, 1, halve, NULL, &closure, &fn));
  args[0].type = WEFT_TYPE_FN, args[0].p = fn;
  args[1].type = WEFT_TYPE_F64, args[1].f = 10.0;
  CHECK(weft_plugin_call(plugin, "apply_twice", args, 2, &result));
  ok &= result.f == 2.5;
  CHECK(weft_closure_destroy(closure));

  /* The plugin's operators in collectives, checked against a loop over every rank's values. */
  const weft_op_t op_absmax = (weft_op_t)lookup_op(plugin, "absmax");
  const weft_op_t op_lse = (weft_op_t)lookup_op(plugin, "logsumexp");
  const weft_dtype_t f32 = WEFT_FLOAT32;
  weft_op_config_t own = WEFT_OP_CONFIG_INIT;
  own.name = "absmin", own.fn = absmin, own.dtypes = &f32, own.ndtypes = 1;
  weft_op_t op_absmin;
  CHECK(weft_op_create(&own, &op_absmin));

  static float buf[COUNT];
  const weft_op_t ops[3] = {op_absmax, op_lse, op_absmin};
  const char *names[3] = {"absmax", "logsumexp", "absmin"};
  for (int k = 0; k < 3; ++k) {
    for (int i = 0; i < COUNT; ++i) buf[i] = value(rank, i);
    CHECK(weft_allreduce(buf, buf, COUNT, WEFT_FLOAT32, ops[k], comm, NULL, NULL));
    double worst = 0;
    for (int i = 0; i < COUNT; ++i) {
      double want = value(0, i);
      if (k == 1) {
        /* log(sum_r exp(v_r)) in double: max + log(sum exp(v_r - max)). */
        double m = -INFINITY, s = 0;
        for (int r = 0; r < size; ++r) m = fmax(m, value(r, i));
        for (int r = 0; r < size; ++r) s += exp(value(r, i) - m);
        want = m + log(s);
      } else {
        /* Folded like a reduction: on one rank the operator is never applied (MPI's rule too). */
        for (int r = 1; r < size; ++r) {
          const float v = value(r, i);
          if (k == 0) want = fmax(fabs(want), fabsf(v));
          if (k == 2 && fabsf(v) < fabs(want)) want = v;
        }
      }
      worst = fmax(worst, fabs(buf[i] - want));
    }
    /* absmax and absmin pick one of the inputs: exact. logsumexp: a merge m + log1p(exp(min - m))
     * is 1-Lipschitz in its inputs (its partial derivatives are softmax weights that sum to 1), so
     * the errors of an element's size - 1 merges add, in any order the algorithm picks. Each merge
     * rounds expf and log1pf (glibc: within 2 ulp, values <= 1: 2 * eps each) and one addition of
     * magnitude <= M = max|v| + log(size) <= size + 3 (0.5 * M * eps); the result's rounding adds
     * one more. So |error| <= size * (4 + (size + 3) / 2) * eps; the bound is twice that. */
    const double bound = k == 1 ? size * (size + 11) * (double)FLT_EPSILON : 0.0;
    if (worst > bound) ok = 0;
    if (rank == 0) printf("allreduce with %-9s over %d ranks: worst error %.3g (bound %.3g)\n", names[k], size, worst, bound);
  }

  CHECK(weft_op_destroy(op_absmin));
  CHECK(weft_comm_destroy(comm));
  CHECK(weft_plugin_destroy(plugin));
  printf("rank %d: %s\n", rank, ok ? "correct" : "WRONG");
  return ok ? 0 : 1;
}
