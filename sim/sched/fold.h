/* fold.h: identical ranks folded together so the simulator runs each kind
 * of rank once per kind of device.
 *
 * Two ranks are in one class when they run the same program, their devices
 * host the same mix of classes, their groups in every communicator have the
 * same shape, and their point-to-point peers are of the same classes (found by
 * partition refinement). Devices hosting the same mix are in one device class;
 * the simulator runs every rank of one representative device per device class
 * (the lowest-numbered) and lets it stand for the others. In data parallelism
 * over 1024 GPUs that is 1 device instead of 1024.
 *
 * Folding is exact only when the representatives of a group's members are in
 * that group themselves (so a collective can complete among simulated ranks);
 * when a communicator breaks that, folding is off and `why_not` says why.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "sched/sched.h"

typedef struct {
  gboolean folded;        /* FALSE: every rank and device stands for itself */
  char *why_not;          /* when folding was asked for but is not exact, else NULL */
  int32_t n_rank_classes;
  int32_t n_device_classes;
  int32_t *rank_rep;      /* [n_ranks]: the simulated rank that stands for each rank */
  int32_t *device_rep;    /* [n_devices]: the simulated device that stands for each device */
  int32_t n_sim_ranks;
  int32_t *sim_ranks;     /* [n_sim_ranks], ascending: the ranks the simulator runs (a folded
                             run's few, not an array over every rank) */
} StFold;

/* `enable` FALSE gives the identity (every rank simulated). Never fails. */
StFold *st_fold_new(const StSchedule *schedule, gboolean enable);
void st_fold_free(StFold *fold);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StFold, st_fold_free)
