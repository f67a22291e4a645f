/* plan_closed.c: closed-form bounds of a configuration's steady step,
 * before building it (plan_private.h), one function per strategy family in
 * a table; a strategy without one is built to be bounded, as before.
 *
 * Why a closed form. Building a schedule, checking it, fingerprinting it
 * and sorting its groups' shapes costs O(ranks) even when its program is
 * one for every rank (dp, zero), so a search over 1-N nodes cost O(N^2),
 * almost all of it on configurations the bound then pruned. A closed form
 * costs O(layers x micro-batches) whatever the rank count; the planner
 * prunes with it before building and builds only what can still win or
 * reach a Pareto front.
 *
 * Validity. Each form follows one cycle of the schedule its strategy
 * would build: a chain of ops that really exist, each at the time the
 * engine gives it alone (st_compute_time, st_comm_plan_collective: the
 * same calls plan_bound.c makes on a built schedule), joined by
 * dependencies that really exist. Leaving ops or dependencies out only
 * shortens the chain, so a form may omit what it cannot follow cheaply
 * (offload copies, ZeRO-3's gathers) and stays a lower bound; it returns 0
 * for options that change the chain's ops themselves (--sparsity,
 * --offload, hybrid sharding). The steady-step argument is plan_bound.c's:
 * an op that runs once a step ends at least the cycle's length after its
 * previous instance. tests/test_plan_closed.c holds every form under the
 * simulated steps of several models and strategies.
 *
 * The group of every rank. A collective over all the devices 0 .. n-1 has
 * the shape its first node and its last (maybe partial) node give, which
 * st_plan_world_shape finds in O(GPUs per node) instead of sorting n
 * devices.
 */
#include "plan/plan_private.h"

#include <math.h>
#include <string.h>

#include "base/limits.h"

typedef struct {
  const char *strategy;  /* registered name */
  int64_t (*cycle)(const StStrategyInput *in, gboolean zero, StPlanClosedCache *cache);
  gboolean zero;         /* passed on: one form serves dp and zero */
} Closed;

static const Closed CLOSED[] = {
  {"dp", st_plan_closed_dp_cycle, FALSE},
  {"zero", st_plan_closed_dp_cycle, TRUE},
};

int64_t
st_plan_closed_cycle(const StStrategy *strategy, const StStrategyInput *in,
                     StPlanClosedCache *cache)
{
  g_return_val_if_fail(strategy != NULL && in != NULL, 0);
  for (gsize i = 0; i < G_N_ELEMENTS(CLOSED); i++)
    if (strcmp(CLOSED[i].strategy, strategy->name) == 0)
      return CLOSED[i].cycle(in, CLOSED[i].zero, cache);
  return 0;
}

/* ---- the passes' costs, once per plan --------------------------------------- */

struct StPlanClosedCache {
  const StModel *model;  /* the only model cached (a derived one may reuse a freed address) */
  GHashTable *ns;        /* Key -> int64_t ns */
};

/* What st_compute_time reads of a pass and its context besides the GPU
 * (one for every cluster of a plan): zeroed first, padding included. */
typedef struct {
  int64_t batch, elems, bytes;
  const StLayer *layer;
  const char *kernel;     /* static names */
  const void *framework, *profile;
  double share;
  int32_t pass, dtype, nchw, fp8;
  uint32_t again_ops, pad;
  char compute_model[48];
} Key;

static guint
key_hash(gconstpointer p)
{
  const Key *k = p;
  return g_direct_hash(k->layer) * 31u + (guint)k->pass * 7u + (guint)k->batch * 13u +
         (guint)k->elems;
}

static gboolean
key_equal(gconstpointer a, gconstpointer b)
{
  return memcmp(a, b, sizeof(Key)) == 0;
}

StPlanClosedCache *
st_plan_closed_cache_new(const StModel *model)
{
  StPlanClosedCache *c = g_new0(StPlanClosedCache, 1);
  c->model = model;
  c->ns = g_hash_table_new_full(key_hash, key_equal, g_free, g_free);
  return c;
}

void
st_plan_closed_cache_free(StPlanClosedCache *cache)
{
  if (cache == NULL)
    return;
  g_hash_table_unref(cache->ns);
  g_free(cache);
}

int64_t
st_plan_closed_comp_ns(StPlanClosedCache *cache, const StComputeCtx *ctx, const StWork *w)
{
  Key key;
  gboolean cached = cache != NULL && ctx->model == cache->model &&
                    (ctx->fallback == NULL || strlen(ctx->fallback) < sizeof key.compute_model);
  if (cached) {
    memset(&key, 0, sizeof key); /* field by field: a literal's padding is unspecified */
    key.batch = w->batch;
    key.elems = w->elems;
    key.bytes = w->bytes;
    key.layer = w->layer;
    key.kernel = w->kernel;
    key.framework = ctx->framework;
    key.profile = ctx->profile;
    key.share = w->share;
    key.pass = (int32_t)w->pass;
    key.dtype = (int32_t)ctx->dtype;
    key.nchw = ctx->nchw;
    key.fp8 = ctx->fp8;
    key.again_ops = w->again_ops;
    if (ctx->fallback != NULL)
      g_strlcpy(key.compute_model, ctx->fallback, sizeof key.compute_model);
    int64_t *found = g_hash_table_lookup(cache->ns, &key);
    if (found != NULL)
      return *found;
  }
  StCostSource source;
  double t = st_compute_time(ctx, w, &source);
  int64_t ns = isfinite(t) && t > 0 ? st_ns_floor(t) : 0;
  if (cached)
    g_hash_table_insert(cache->ns, g_memdup2(&key, sizeof key), g_memdup2(&ns, sizeof ns));
  return ns;
}

gboolean
st_plan_closed_known(const StStrategy *strategy)
{
  for (gsize i = 0; i < G_N_ELEMENTS(CLOSED); i++)
    if (strcmp(CLOSED[i].strategy, strategy->name) == 0)
      return TRUE;
  return FALSE;
}

void
st_plan_world_shape(const StCluster *c, int n, StGroupShape *shape)
{
  g_return_if_fail(c != NULL && shape != NULL && n >= 0);
  int per = c->gpus_per_node;
  if (n <= 2 * per || per <= 0) {
    /* Small: as st_cluster_group_shape counts it. */
    g_autofree int32_t *gpus = g_new(int32_t, MAX(n, 1));
    for (int i = 0; i < n; i++)
      gpus[i] = i;
    st_cluster_group_shape(c, gpus, n, shape);
    return;
  }
  /* Every full node is the first one shifted; the last may be partial. */
  g_autofree int32_t *list = g_new(int32_t, 2 * per);
  int full = n / per, rest = n % per;
  for (int i = 0; i < per; i++)
    list[i] = i;
  for (int i = 0; i < rest; i++)
    list[per + i] = full * per + i;
  StGroupShape first, last;
  st_cluster_group_shape(c, list, per, &first);
  st_cluster_group_shape(c, list + per, rest, &last);
  int nodes = full + (rest > 0);
  int leaf = MAX(c->fabric.leaf_nodes, 1);
  *shape = (StGroupShape){
    .ranks = n,
    .devices = n,
    .nodes = nodes,
    .per_node = first.per_node,
    .per_device = 1,
    .per_nic = MAX(first.per_nic, last.per_nic),
    .leaves = (nodes - 1) / leaf + 1,
    .nic_share = MAX(first.nic_share, last.nic_share),
  };
}
