/* profile_lockstep.c: see profile_lockstep.h. A barrier is a counter and a
 * generation under one lock: the last thread to arrive starts the next
 * generation and wakes the others. A failure is published at the barrier,
 * so every thread sees it at the same iteration and they all stop there:
 * none is left waiting for a thread that quit. */
#include "exec/profile_lockstep.h"

typedef struct {
  GMutex lock;
  GCond cond;
  int n, waiting;
  guint64 generation;
  gboolean failed;        /* some thread published an error */
  gboolean released_failed; /* `failed` when the last barrier released: what every thread
                               it released acts on, though another may fail before a slow
                               one wakes */
  GError *error;          /* the first one */
  StLockstepFn lead, each;
  gpointer ctx;
  int iterations;
} Lockstep;

typedef struct {
  Lockstep *ls;
  int part;
} Worker;

/* Waits for every thread; returns whether some thread failed so far. */
static gboolean
barrier(Lockstep *ls, GError *mine)
{
  g_mutex_lock(&ls->lock);
  if (mine != NULL) {
    if (ls->error == NULL)
      ls->error = mine;
    else
      g_error_free(mine);
    ls->failed = TRUE;
  }
  guint64 gen = ls->generation;
  if (++ls->waiting == ls->n) {
    ls->waiting = 0;
    ls->generation++;
    ls->released_failed = ls->failed;
    g_cond_broadcast(&ls->cond);
  } else {
    while (gen == ls->generation)
      g_cond_wait(&ls->cond, &ls->lock);
  }
  /* No later barrier can release before this thread reaches it. */
  gboolean failed = ls->released_failed;
  g_mutex_unlock(&ls->lock);
  return failed;
}

static gpointer
work(gpointer data)
{
  Worker *w = data;
  Lockstep *ls = w->ls;
  GError *mine = NULL;
  for (int it = 0; it < ls->iterations; it++) {
    if (barrier(ls, g_steal_pointer(&mine)))
      return NULL;
    if (ls->lead != NULL) {
      if (w->part == 0)
        ls->lead(ls->ctx, 0, it, &mine);
      if (barrier(ls, g_steal_pointer(&mine)))
        return NULL;
    }
    ls->each(ls->ctx, w->part, it, &mine);
  }
  barrier(ls, g_steal_pointer(&mine));
  return NULL;
}

gboolean
st_lockstep_run(int n, int iterations, StLockstepFn lead, StLockstepFn each, gpointer ctx,
                GError **error)
{
  g_return_val_if_fail(n >= 1 && each != NULL, FALSE);
  Lockstep ls = {.n = n, .lead = lead, .each = each, .ctx = ctx, .iterations = iterations};
  g_mutex_init(&ls.lock);
  g_cond_init(&ls.cond);
  g_autofree Worker *workers = g_new(Worker, n);
  g_autofree GThread **threads = g_new0(GThread *, n);
  for (int p = 0; p < n; p++)
    workers[p] = (Worker){&ls, p};
  for (int p = 1; p < n; p++)
    threads[p] = g_thread_new("replay-part", work, &workers[p]);
  work(&workers[0]);
  for (int p = 1; p < n; p++)
    g_thread_join(threads[p]);
  g_mutex_clear(&ls.lock);
  g_cond_clear(&ls.cond);
  if (ls.error != NULL) {
    g_propagate_error(error, ls.error);
    return FALSE;
  }
  return TRUE;
}
