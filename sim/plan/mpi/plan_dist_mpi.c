/* plan_dist_mpi.c: the MPI backend of a search spread over processes
 * (plan/plan_dist.h), built as the module libstagger-mpi.so when CMake
 * finds MPI (exec/CMakeLists.txt: modules are loaded on demand, so nothing
 * else maps MPI's libraries). The planner's main thread is the only one
 * that calls MPI (MPI_THREAD_FUNNELED); its worker threads never do. */
#include <mpi.h>
#include <stdint.h>

#include "base/error.h"
#include "exec/module.h"
#include "plan/plan.h"
#include "plan/plan_dist.h"

const StModuleStamp st_module_stamp = ST_MODULE_STAMP;

static gboolean
mpi_failed(int code, const char *call, GError **error)
{
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(code, text, &n);
  g_set_error(error, ST_PLAN_ERROR, ST_ERROR_FAILED, "%s failed: %.*s", call, n, text);
  return FALSE;
}

/* Waits for `request` without spinning: a rank that finished its share
 * early would otherwise burn a core its neighbour's simulations need (MPI's
 * blocking collectives poll). */
static int
wait_quietly(MPI_Request *request)
{
  int done = 0, code;
  while ((code = MPI_Test(request, &done, MPI_STATUS_IGNORE)) == MPI_SUCCESS && !done)
    g_usleep(200);
  return code;
}

static gboolean
allgather(const StPlanDist *dist, GBytes *mine, GBytes **all, GError **error)
{
  gsize size;
  const void *data = g_bytes_get_data(mine, &size);
  if (size > INT32_MAX)
    return mpi_failed(MPI_ERR_COUNT, "MPI_Allgatherv (over 2 GiB from one process)", error);
  int n = (int)size, p = dist->size;
  g_autofree int *counts = g_new(int, p);
  g_autofree int *offsets = g_new(int, p);
  MPI_Request request;
  int code = MPI_Iallgather(&n, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD, &request);
  if (code == MPI_SUCCESS)
    code = wait_quietly(&request);
  if (code != MPI_SUCCESS)
    return mpi_failed(code, "MPI_Iallgather", error);
  int64_t total = 0;
  for (int r = 0; r < p; r++) {
    offsets[r] = (int)total;
    total += counts[r];
  }
  if (total > INT32_MAX)
    return mpi_failed(MPI_ERR_COUNT, "MPI_Allgatherv (over 2 GiB in all)", error);
  guint8 *buffer = g_malloc(MAX(total, 1));
  code = MPI_Iallgatherv(data, n, MPI_BYTE, buffer, counts, offsets, MPI_BYTE, MPI_COMM_WORLD,
                         &request);
  if (code == MPI_SUCCESS)
    code = wait_quietly(&request);
  if (code != MPI_SUCCESS) {
    g_free(buffer);
    return mpi_failed(code, "MPI_Iallgatherv", error);
  }
  for (int r = 0; r < p; r++)
    all[r] = g_bytes_new(buffer + offsets[r], (gsize)counts[r]);
  g_free(buffer);
  return TRUE;
}

static gboolean
open_dist(StPlanDist *dist, GError **error)
{
  int provided = 0, code = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
  if (code != MPI_SUCCESS)
    return mpi_failed(code, "MPI_Init_thread", error);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  *dist = (StPlanDist){.allgather = allgather};
  MPI_Comm_rank(MPI_COMM_WORLD, &dist->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &dist->size);
  return TRUE;
}

static void
close_dist(StPlanDist *dist)
{
  (void)dist;
  MPI_Finalize();
}

const StPlanDistBackend st_plan_dist_mpi = {"mpi", open_dist, close_dist};
