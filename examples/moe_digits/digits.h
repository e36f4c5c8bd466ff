/* The handwritten digits of scikit-learn (1797 8x8 images, 16 grey levels, labels 0-9), read
 * from the CSV Debian's python3-sklearn ships, and split into a training and a held-out set by
 * a fixed shuffle (the same on every rank and every layout). */
#ifndef MOE_DIGITS_DIGITS_H
#define MOE_DIGITS_DIGITS_H

#include <stddef.h>

#define DIGITS_CSV "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"

struct digits {
  size_t ntrain, ntest;
  float *train_x, *test_x; /* [n, 64], pixels / 16 */
  int *train_y, *test_y;
};

/* Reads `path` (gzip or plain CSV: 64 pixel columns then the label); holds `ntest` samples out.
 * Returns 0, or prints what is wrong and returns 1. */
int digits_load(const char *path, size_t ntest, struct digits *d);
void digits_free(struct digits *d);

#endif
