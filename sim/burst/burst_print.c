/* burst_print.c: a plan as a table and as a one-line summary (see burst.h). */
#include "burst/burst.h"

#include "base/units.h"

static char *
ms(double ns)
{
  return g_strdup_printf("%.3f", ns / 1e6);
}

char *
st_burst_plan_table(const StBurstPlan *plan, const StBurstGraph *g, const StBurstParams *p)
{
  GString *out = g_string_new(NULL);
  g_string_append_printf(out,
                         "burst plan: batch %" G_GINT64_FORMAT " over up to %d GPUs; "
                         "amplification limit %.2f (layers under %.0f us on one GPU exempt)\n",
                         g->batch, plan->dp_gpus, p->amp_limit, p->exempt_ns / 1e3);
  g_string_append_printf(out, "%-4s %-22s %5s %5s %6s %11s %9s %9s %6s %9s\n", "#", "layer",
                         "GPUs", "first", "batch", "compute_ms", "sync_ms", "xfer_ms", "amp",
                         "end_ms");
  for (int v = 0; v < plan->n_nodes; v++) {
    const StBurstChoice *c = &plan->nodes[v];
    g_autofree char *compute = ms(c->compute_ns), *sync = ms(c->sync_ns),
                    *x = ms(c->xfer_in_ns), *end = ms(c->end_ns);
    g_string_append_printf(out, "%-4d %-22s %5d %5d %6d %11s %9s %9s %6.2f %9s\n", v,
                           st_burst_graph_node(g, v)->name, c->gpus, c->first_rank, c->batch,
                           compute, sync, x, c->amplification, end);
  }
  g_autofree char *step = ms(plan->step_ns), *dp_step = ms(plan->dp_step_ns);
  g_autofree char *unpacked = ms(plan->unpacked_step_ns);
  g_autofree char *it = ms(plan->iteration_ns), *dp = ms(plan->dp_iteration_ns);
  g_autofree char *gpu = ms(plan->gpu_ns), *dp_gpu = ms(plan->dp_gpu_ns);
  g_string_append_printf(out,
                         "predicted step %s ms (data parallel on %d GPUs: %s ms, %.2fx): the "
                         "all-reduces beside the backward, the optimizer step after; "
                         "%d layer%s widened or narrowed from the dynamic programming's; "
                         "%d branch%s packed on other GPUs (every set from rank 0: %s ms)\n",
                         step, plan->dp_gpus, dp_step,
                         plan->step_ns > 0 ? plan->dp_step_ns / plan->step_ns : 0, plan->refined,
                         plan->refined == 1 ? "" : "s", plan->packed,
                         plan->packed == 1 ? "" : "es", unpacked);
  g_string_append_printf(out,
                         "DeepPool's objective (end_ms: compute, sync and transfers in turn) %s "
                         "ms (data parallel: %s ms); GPU-time %s GPU-ms (data parallel: %s "
                         "GPU-ms, %.2fx); estimates from the cost models\n",
                         it, dp, gpu, dp_gpu,
                         plan->dp_gpu_ns > 0 ? plan->gpu_ns / plan->dp_gpu_ns : 0);
  return g_string_free(out, FALSE);
}

void
st_burst_plan_print(const StBurstPlan *plan, const StBurstGraph *g, const StBurstParams *p,
                    FILE *out)
{
  g_autofree char *text = st_burst_plan_table(plan, g, p);
  fputs(text, out);
}

char *
st_burst_plan_summary(const StBurstPlan *plan, const StBurstGraph *g)
{
  GString *out = g_string_new(NULL);
  for (int v = 0; v < plan->n_nodes;) {
    int end = v;
    while (end + 1 < plan->n_nodes && plan->nodes[end + 1].gpus == plan->nodes[v].gpus &&
           plan->nodes[end + 1].first_rank == plan->nodes[v].first_rank)
      end++;
    const char *first = st_burst_graph_node(g, v)->name;
    g_autofree char *at = plan->nodes[v].first_rank > 0
                            ? g_strdup_printf("@%d", plan->nodes[v].first_rank)
                            : g_strdup("");
    if (end == v)
      g_string_append_printf(out, "%s%s:%d%s", out->len ? " " : "", first, plan->nodes[v].gpus,
                             at);
    else
      g_string_append_printf(out, "%s%s-%s:%d%s", out->len ? " " : "", first,
                             st_burst_graph_node(g, end)->name, plan->nodes[v].gpus, at);
    v = end + 1;
  }
  return g_string_free(out, FALSE);
}
