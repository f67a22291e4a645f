/* compare.h: a prediction against a measurement of the same schedule.
 *
 * Step time; time per op class (forward, backward, optimizer, collectives,
 * transfers, copies, other compute), summed over one rank's ops in the steady
 * steps and divided by their number (communication from when the rank could
 * start it, its wait for peers included); the memory peak of device 0 and what
 * each category held at that moment.
 * Errors are (predicted - measured) / measured. Both summaries borrowed.
 */
#pragma once

#include "output/output.h"

typedef enum {
  ST_CLASS_FORWARD = 0,
  ST_CLASS_BACKWARD,
  ST_CLASS_OPTIMIZER,
  ST_CLASS_OTHER_COMPUTE,
  ST_CLASS_COLLECTIVE,
  ST_CLASS_P2P,
  ST_CLASS_COPY,
  ST_CLASS_N,
} StOpClass;

const char *st_op_class_name(StOpClass c);

/* A figure both sides report (multiplexing's slowdown, throughput, ...). */
typedef struct {
  char name[64];
  double predicted, measured;
} StCompareFigure;

typedef struct {
  const StSummary *predicted, *measured;
  int32_t rank;                       /* whose ops are classed */
  double class_ns[2][ST_CLASS_N];     /* [0] predicted, [1] measured: per steady step */
  int64_t peak[2][ST_MEM_N];          /* device 0's categories at its peak */
  int64_t peak_total[2];
  double step_error;                  /* relative */
  double peak_error;                  /* relative, total of device 0 */
  /* Multiplexed schedules: report.json's "multiplex" figures of both sides
   * (foreground slowdown, background samples/s, ...), else empty. */
  StCompareFigure multiplex[16];
  int n_multiplex;
} StComparison;

/* Compares on the first recorded rank of both (rank 0 unless folded away). */
void st_compare(const StSummary *predicted, const StSummary *measured, StComparison *out);

struct cJSON *st_compare_to_json(const StComparison *c);
/* The table of one comparison, as `stagger validate` prints it. */
void st_compare_print(const StComparison *c, const char *name, FILE *out);
