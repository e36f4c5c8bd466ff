/* What a run leaves in its output folder (rank 0 writes them):
 *   loss.csv     step, loss, held-out accuracy, step seconds, measured and simulated bubble
 *   loss.svg     the loss curve (and the --ranks 1 curve when compared) and held-out accuracy
 *   trace.json   a Chrome trace of one pipeline step (written by train.c through weft)
 *   layout.json  the layout, the tuner's micro-batch count and the measured step time: the
 *                input a planner's validation needs (--layout-json also names another copy)
 *   summary.txt  the final summary printed at the end */
#ifndef MOE_DIGITS_OUTPUTS_H
#define MOE_DIGITS_OUTPUTS_H

#include <stdio.h>

#include "train.h"

/* Reads a loss.csv: the losses and step times (both malloc'ed). Returns 0, or prints why and
 * returns 1. */
int read_reference(const char *path, double **loss, double **step_s, int *steps);
int write_csv(const char *path, const struct history *h);
int write_svg(const char *path, const struct history *h);
int write_layout_json(const char *path, const struct options *o, const struct history *h, int ranks);
/* The summary to f: layout, throughput, final loss and accuracy. */
void write_summary(FILE *f, const struct options *o, const struct history *h, int ranks);
/* Median step time over the steps after the first two (warm-up). */
double median_step_seconds(const struct history *h);

#endif
