/* plan_unlisted.c: the configurations of a large space refused before
 * listing, counted by reason (see st_plan_expand_listed in plan_private.h). */
#include "plan/plan_private.h"

#include "strategy/strategy.h"

typedef struct {
  StPlan *plan;
  GHashTable *by_reason; /* reason (the entry's) -> index + 1 in plan->unlisted */
  GHashTable *clusters;  /* (nodes, GPUs) -> the cluster resized, owned */
} Lister;

static void
unlisted_clear(gpointer data)
{
  StPlanUnlisted *u = data;
  g_free(u->reason);
  g_free(u->example);
}

static void
unlist(Lister *l, const StPlanConfig *c, const char *reason)
{
  StPlan *plan = l->plan;
  plan->counts.unlisted++;
  guint at = GPOINTER_TO_UINT(g_hash_table_lookup(l->by_reason, reason));
  if (at > 0) {
    g_array_index(plan->unlisted, StPlanUnlisted, at - 1).count++;
    return;
  }
  g_autofree char *label = st_plan_config_label(c);
  StPlanUnlisted u = {
    g_strdup(reason),
    g_strdup_printf("%s%s%s, %d GPUs on %d node%s, micro-batch %d", c->strategy->name,
                    *label ? " " : "", label, c->gpus, c->nodes, c->nodes == 1 ? "" : "s",
                    c->micro_batch),
    1,
  };
  g_array_append_val(plan->unlisted, u);
  g_hash_table_insert(l->by_reason, u.reason, GUINT_TO_POINTER(plan->unlisted->len));
}

/* StPlanKeep: what prepare() would find infeasible from the options and
 * the batch split alone is counted by reason instead of listed. */
static gboolean
keep_config(const StPlanConfig *c, gpointer data)
{
  Lister *l = data;
  const StPlan *plan = l->plan;
  g_autoptr(GError) error = NULL;
  StOptions options;
  if (!st_plan_config_options(plan->spec, c, &options, &error)) {
    unlist(l, c, error->message);
    return FALSE;
  }
  gpointer key = GINT_TO_POINTER(c->nodes * 65536 + c->gpus);
  StCluster *cluster = g_hash_table_lookup(l->clusters, key);
  if (cluster == NULL) {
    cluster = st_cluster_copy(plan->cluster);
    if (!st_cluster_resize(cluster, c->nodes, c->gpus, NULL))
      g_clear_pointer(&cluster, st_cluster_free);
    else
      g_hash_table_insert(l->clusters, key, cluster);
  }
  /* Kept: a shape the cluster refuses, and a stale update (excluded, listed). */
  gboolean stale = c->strategy->update(&options).kind == ST_UPDATE_STALE;
  gboolean ok = cluster == NULL || (stale && !plan->spec->allow_stale) ||
                st_strategy_resolve(c->strategy, &options, cluster, &error);
  if (!ok)
    unlist(l, c, error->message);
  st_options_clear(&options);
  return ok;
}

GArray *
st_plan_expand_listed(StPlan *plan, GError **error)
{
  plan->unlisted = g_array_new(FALSE, FALSE, sizeof(StPlanUnlisted));
  g_array_set_clear_func(plan->unlisted, unlisted_clear);
  Lister lister = {plan, g_hash_table_new(g_str_hash, g_str_equal),
                   g_hash_table_new_full(NULL, NULL, NULL, (GDestroyNotify)st_cluster_free)};
  GArray *configs = st_plan_space_expand(plan->spec, plan->model, plan->cluster, plan->strings,
                                         keep_config, &lister, error);
  g_hash_table_unref(lister.by_reason);
  g_hash_table_unref(lister.clusters);
  return configs;
}
