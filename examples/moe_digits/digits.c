/* See digits.h. zlib's gz* functions read gzip and plain files alike. */
#include "digits.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "model.h"

enum { MAX_SAMPLES = 4096 };

int digits_load(const char *path, size_t ntest, struct digits *d) {
  memset(d, 0, sizeof *d);
  gzFile f = gzopen(path, "rb");
  if (!f) {
    fprintf(stderr, "moe_digits: cannot open %s (Debian's python3-sklearn ships it: apt-get install python3-sklearn)\n",
            path);
    return 1;
  }
  float *x = malloc(sizeof(float) * MAX_SAMPLES * IN_DIM);
  int *y = malloc(sizeof(int) * MAX_SAMPLES);
  size_t n = 0;
  char line[1024];
  while (gzgets(f, line, sizeof line)) {
    if (line[0] == '\n' || line[0] == '\0') continue;
    if (n == MAX_SAMPLES) break;
    char *p = line;
    int col = 0;
    for (; col <= IN_DIM; ++col) {
      char *end;
      const double v = strtod(p, &end);
      if (end == p) break;
      if (col < IN_DIM) x[n * IN_DIM + (size_t)col] = (float)(v / 16.0);
      else y[n] = (int)v;
      p = end;
      if (*p == ',') ++p;
    }
    if (col != IN_DIM + 1 || y[n] < 0 || y[n] >= CLASSES) {
      fprintf(stderr, "moe_digits: %s line %zu: expected 64 pixels and a label 0-9\n", path, n + 1);
      gzclose(f);
      free(x);
      free(y);
      return 1;
    }
    ++n;
  }
  gzclose(f);
  if (n <= ntest) {
    fprintf(stderr, "moe_digits: %s holds %zu samples, fewer than the %zu held out\n", path, n, ntest);
    free(x);
    free(y);
    return 1;
  }
  /* A fixed Fisher-Yates shuffle (a 64-bit LCG): the file is ordered by writer, not random. */
  size_t *order = malloc(sizeof(size_t) * n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  uint64_t s = 0x0d161753ull;
  for (size_t i = n - 1; i > 0; --i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const size_t j = (size_t)((s >> 33) % (i + 1));
    const size_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  d->ntest = ntest;
  d->ntrain = n - ntest;
  d->train_x = malloc(sizeof(float) * d->ntrain * IN_DIM);
  d->test_x = malloc(sizeof(float) * ntest * IN_DIM);
  d->train_y = malloc(sizeof(int) * d->ntrain);
  d->test_y = malloc(sizeof(int) * ntest);
  for (size_t i = 0; i < n; ++i) {
    const size_t src = order[i];
    float *dst = i < d->ntrain ? d->train_x + i * IN_DIM : d->test_x + (i - d->ntrain) * IN_DIM;
    memcpy(dst, x + src * IN_DIM, sizeof(float) * IN_DIM);
    if (i < d->ntrain) d->train_y[i] = y[src];
    else d->test_y[i - d->ntrain] = y[src];
  }
  free(order);
  free(x);
  free(y);
  return 0;
}

void digits_free(struct digits *d) {
  free(d->train_x);
  free(d->test_x);
  free(d->train_y);
  free(d->test_y);
  memset(d, 0, sizeof *d);
}
