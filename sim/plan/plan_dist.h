/* plan_dist.h: a search spread over processes (MPI ranks under mpirun).
 *
 * Every process runs the same search on the same inputs: it expands and
 * prepares the whole space (cheap), and in each wave it builds, bounds and
 * simulates only its share of the wave (the k-th configuration launched
 * in a wave belongs to process k mod size, which also simulates it, with
 * the schedule it kept). When the wave's phase ends, every process gives
 * the points it evaluated to all (allgather): each then holds every point
 * exactly as one process alone would have made it, and takes the same
 * pruning decisions, so the plan, and every byte written from it, is the
 * single-process plan's. Results travel as the points' bytes, so all
 * processes must run the same build of stagger on the same architecture.
 *
 * A backend is a small table; the MPI one is the module libstagger-mpi.so
 * (sim/plan/mpi/plan_dist_mpi.c, built when CMake finds MPI), which the
 * command loads when it runs under a launcher (st_plan_dist_launched). */
#pragma once

#include <glib.h>

typedef struct StPlanDist StPlanDist;
struct StPlanDist {
  int rank, size;     /* this process, of size (size 1: alone) */
  /* Every process passes its bytes; each receives all processes' bytes in
   * rank order (all[size], transfer full). Collective: every process calls
   * it the same number of times. */
  gboolean (*allgather)(const StPlanDist *dist, GBytes *mine, GBytes **all, GError **error);
  gpointer data;      /* the backend's */
};

/* What a distribution module exports, as the symbol ST_PLAN_DIST_SYMBOL. */
typedef struct {
  const char *name;
  /* Joins the processes the launcher started (MPI_Init); fills `dist`. */
  gboolean (*open)(StPlanDist *dist, GError **error);
  /* Leaves them (MPI_Finalize). */
  void (*close)(StPlanDist *dist);
} StPlanDistBackend;

#define ST_PLAN_DIST_SYMBOL "st_plan_dist_mpi"

/* The number of processes a launcher started this one among (mpirun: its
 * environment says so; OpenMPI's, PMI's or PMIx's variables), 1 when none. */
int st_plan_dist_launched(void);
