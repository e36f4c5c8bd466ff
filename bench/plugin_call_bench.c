/* plugin-call-bench: the overhead of weft_plugin_call (the entry looked up by name, the tagged
 * arguments checked, the call made through libffi) against a direct call of the same symbol
 * through a function pointer from dlsym, for a 2-argument and a 3-argument function. Prints
 * ns/call for both and their ratio; every result is checked (exit 1 on a wrong one).
 *
 *   plugin-call-bench --plugin PATH [-n CALLS] [-r REPEATS]
 *
 * PATH is a plugin with tests/plugins/good_plugin.c's add_i64 (I64(I64, I64): a + b, symbol
 * tp_add_i64) and mix3 (F64(I32, I64, F64): a + 2 b + 4 c, symbol tp_mix3): the test fixture
 * libweft_test_plugin_good.so. The best of REPEATS runs of CALLS calls each is reported. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weft/weft.h>

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

typedef int64_t (*add_fn)(int64_t, int64_t);
typedef double (*mix3_fn)(int32_t, int64_t, double);

static int failed = 0;

static void report(const char *what, double ffi_ns, double direct_ns) {
  printf("%-28s weft_plugin_call %7.1f ns/call   direct %6.2f ns/call   ratio %6.1fx   overhead %6.1f ns\n", what,
         ffi_ns, direct_ns, ffi_ns / direct_ns, ffi_ns - direct_ns);
}

int main(int argc, char **argv) {
  const char *path = NULL;
  long calls = 1000000, repeats = 5;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--plugin") && i + 1 < argc) path = argv[++i];
    else if (!strcmp(argv[i], "-n") && i + 1 < argc) calls = atol(argv[++i]);
    else if (!strcmp(argv[i], "-r") && i + 1 < argc) repeats = atol(argv[++i]);
    else {
      fprintf(stderr, "usage: plugin-call-bench --plugin PATH [-n CALLS] [-r REPEATS]\n");
      return 2;
    }
  }
  if (!path || calls < 1 || repeats < 1) {
    fprintf(stderr, "usage: plugin-call-bench --plugin PATH [-n CALLS] [-r REPEATS]\n");
    return 2;
  }
  weft_plugin_t plugin = NULL;
  if (weft_plugin_load(path, &plugin) != WEFT_OK) {
    fprintf(stderr, "plugin-call-bench: %s\n", weft_last_error());
    return 1;
  }
  /* The same library (dlopen returns weft's handle to it): the direct calls' symbols. */
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  void *add_sym = lib ? dlsym(lib, "tp_add_i64") : NULL, *mix_sym = lib ? dlsym(lib, "tp_mix3") : NULL;
  if (!add_sym || !mix_sym) {
    fprintf(stderr, "plugin-call-bench: %s has no tp_add_i64 / tp_mix3\n", path);
    return 1;
  }
  add_fn add;
  mix3_fn mix;
  memcpy(&add, &add_sym, sizeof add);
  memcpy(&mix, &mix_sym, sizeof mix);

  double best[4] = {1e300, 1e300, 1e300, 1e300};
  for (long rep = 0; rep < repeats; ++rep) {
    /* add_i64 through weft_plugin_call */
    weft_value_t args[3] = {WEFT_VALUE_INIT, WEFT_VALUE_INIT, WEFT_VALUE_INIT}, r = WEFT_VALUE_INIT;
    args[0].type = WEFT_TYPE_I64;
    args[1].type = WEFT_TYPE_I64;
    int64_t sum = 0;
    double t0 = now_ns();
    for (long i = 0; i < calls; ++i) {
      args[0].i = i;
      args[1].i = 3;
      if (weft_plugin_call(plugin, "add_i64", args, 2, &r) != WEFT_OK) {
        fprintf(stderr, "plugin-call-bench: %s\n", weft_last_error());
        return 1;
      }
      sum += r.i;
    }
    double t = (now_ns() - t0) / (double)calls;
    if (t < best[0]) best[0] = t;
    int64_t want = (int64_t)calls * (calls - 1) / 2 + 3 * (int64_t)calls;
    if (sum != want) failed = 1;
    /* add_i64 directly */
    sum = 0;
    t0 = now_ns();
    for (long i = 0; i < calls; ++i) sum += add(i, 3);
    t = (now_ns() - t0) / (double)calls;
    if (t < best[1]) best[1] = t;
    if (sum != want) failed = 1;
    /* mix3 through weft_plugin_call */
    args[0].type = WEFT_TYPE_I32;
    args[1].type = WEFT_TYPE_I64;
    args[2].type = WEFT_TYPE_F64;
    double fsum = 0;
    t0 = now_ns();
    for (long i = 0; i < calls; ++i) {
      args[0].i = i & 1023;
      args[1].i = 2;
      args[2].f = 0.5;
      if (weft_plugin_call(plugin, "mix3", args, 3, &r) != WEFT_OK) {
        fprintf(stderr, "plugin-call-bench: %s\n", weft_last_error());
        return 1;
      }
      fsum += r.f;
    }
    t = (now_ns() - t0) / (double)calls;
    if (t < best[2]) best[2] = t;
    /* the reference: sum of (i & 1023) + 2 * 2 + 4 * 0.5, exact in double at these sizes */
    double fwant = 0;
    for (long i = 0; i < calls; ++i) fwant += (double)(i & 1023) + 6.0;
    if (fsum != fwant) failed = 1;
    /* mix3 directly */
    fsum = 0;
    t0 = now_ns();
    for (long i = 0; i < calls; ++i) fsum += mix((int32_t)(i & 1023), 2, 0.5);
    t = (now_ns() - t0) / (double)calls;
    if (t < best[3]) best[3] = t;
    if (fsum != fwant) failed = 1;
  }
  printf("plugin-call-bench: %ld calls x %ld repeats (best), plugin %s\n", calls, repeats, path);
  report("add_i64 (I64, I64)", best[0], best[1]);
  report("mix3 (I32, I64, F64)", best[2], best[3]);
  weft_plugin_destroy(plugin);
  if (failed) printf("plugin-call-bench: FAILED: a result differs from the reference\n");
  return failed;
}
