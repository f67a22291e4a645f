/* engine_budget.c: what a simulation will hold, estimated from the
 * schedule's shape before it starts, against budget.max_memory; and the
 * progress counters a caller may watch from another thread.
 *
 * The estimate counts op executions: every simulated rank runs each op of
 * its program once per step, and each execution leaves an op record, the
 * memory events of its buffers, its share of the link trace, and the rows
 * the outputs are written from. Measured (docs/RELIABILITY.md): ZeRO-3 of
 * GPT-3 1.3B on 8000 GPUs unfolded, 1.14M executions, peaks at 280 MiB
 * simulated alone (258 B each) and 419 MiB writing report, CSVs and the
 * Perfetto trace (387 B each); 512 B each leaves room for heavier ops. The
 * engine's own state per simulated rank (op counters and waiters, 12 B per
 * op of its program, 8 B per communicator) comes on top.
 */
#include "engine/engine_internal.h"

#include "base/units.h"
#include "output/steady.h"

#define BYTES_PER_EXECUTION 512

gboolean
engine_budget(Engine *e, GError **error)
{
  const StSchedule *s = e->s;
  const StFold *fold = e->fold;
  int64_t per_step = 0, state = 0;
  for (int i = 0; i < fold->n_sim_ranks; i++) {
    const StProgram *p = st_schedule_program_of(s, fold->sim_ranks[i]);
    per_step += p->ops->len;
    state += 12 * (int64_t)p->ops->len + 8 * (int64_t)s->comms->len;
  }
  /* Each factor is bounded (ranks, ops in memory, steps <= 10^6): the
   * products fit in int64, but saturate anyway rather than trust that. */
  /* --steps auto (0) runs until the state repeats, at most the cap. */
  int steps = s->steps > 0 ? s->steps : st_steady_cap(s);
  int64_t executions, bytes;
  if (!st_mul_i64(per_step, MAX(steps, 1), &executions))
    executions = INT64_MAX;
  if (!st_mul_i64(executions, BYTES_PER_EXECUTION, &bytes))
    bytes = INT64_MAX;
  bytes = st_time_add(bytes, state); /* a saturating sum of non-negative numbers */
  if (e->budget.progress != NULL)
    atomic_store_explicit(&e->budget.progress->ops_total, executions, memory_order_relaxed);
  int64_t limit = e->budget.max_memory;
  if (limit <= 0 || bytes <= limit)
    return TRUE;

  g_autofree char *need = st_format_bytes(bytes);
  g_autofree char *have = st_format_bytes(limit);
  /* What would help, most effective first. */
  g_autoptr(GPtrArray) what = g_ptr_array_new_with_free_func(g_free);
  if (e->options->no_fold && s->n_ranks > 1)
    g_ptr_array_add(what, g_strdup("fold identical ranks (drop --no-fold)"));
  if (s->steps > 1)
    g_ptr_array_add(what, g_strdup_printf("fewer --steps (%d now)", s->steps));
  else if (s->steps == 0 && steps > 1)
    g_ptr_array_add(what, g_strdup_printf("a small fixed --steps (auto runs up to %d)", steps));
  if (fold->n_sim_ranks > 1 && !e->options->no_fold)
    g_ptr_array_add(what, g_strdup_printf("fewer ranks or GPUs (--ranks, --nodes, --gpus; %s)",
                                          fold->why_not != NULL ? fold->why_not
                                                                : "these ranks differ"));
  else if (fold->n_sim_ranks > 1)
    g_ptr_array_add(what, g_strdup("fewer ranks or GPUs (--ranks, --nodes, --gpus)"));
  g_ptr_array_add(what, g_strdup("a larger --max-memory where the machine has it"));
  g_ptr_array_add(what, NULL);
  g_autofree char *advice = g_strjoinv(", or ", (char **)what->pdata);
  g_autofree char *how_long = s->steps > 0
                                ? g_strdup_printf("%d step%s", steps, steps == 1 ? "" : "s")
                                : g_strdup_printf("up to %d steps (--steps auto)", steps);
  g_set_error(error, ST_ENGINE_ERROR, ST_ERROR_UNSUPPORTED,
              "simulating %d of %d ranks for %s means %" G_GINT64_FORMAT
              " op executions, about %s with their records and outputs, more than the %s "
              "allowed (--max-memory; by default what this machine has available): %s",
              fold->n_sim_ranks, s->n_ranks, how_long, executions, need, have, advice);
  return FALSE;
}

void
engine_report_progress(Engine *e)
{
  StEngineProgress *p = e->budget.progress;
  if (p == NULL)
    return;
  atomic_store_explicit(&p->events, e->events, memory_order_relaxed);
  atomic_store_explicit(&p->ops_done, e->ops_done, memory_order_relaxed);
}
