/* nettrace.c: the links' record of a simulation, and what the outputs
 * compute from it (see nettrace.h).
 *
 * Every computation sweeps the rate records in time order, applying the
 * records of one instant together: a flow's change from its old rate to its
 * new one moves the load of each link of its list by coef x the difference.
 * A link (or class) with no flow running is set to exactly 0, so float
 * residue never shows as traffic on an idle link.
 */
#include "output/nettrace.h"

#include <string.h>

StNetTrace *
st_net_trace_new(void)
{
  StNetTrace *t = g_new0(StNetTrace, 1);
  t->links = g_array_new(FALSE, FALSE, sizeof(StNetLink));
  t->uses = g_array_new(FALSE, FALSE, sizeof(StNetUse));
  t->list_start = g_array_new(FALSE, FALSE, sizeof(int32_t));
  int32_t zero = 0;
  g_array_append_val(t->list_start, zero);
  t->rates = g_array_new(FALSE, FALSE, sizeof(StNetRate));
  return t;
}

void
st_net_trace_free(StNetTrace *t)
{
  if (t == NULL)
    return;
  for (guint i = 0; i < t->links->len; i++)
    g_free(g_array_index(t->links, StNetLink, i).name);
  g_array_unref(t->links);
  g_array_unref(t->uses);
  g_array_unref(t->list_start);
  g_array_unref(t->rates);
  g_free(t);
}

int
st_net_trace_add_list(StNetTrace *t, const StNetUse *uses, int n)
{
  g_array_append_vals(t->uses, uses, (guint)n);
  int32_t end = (int32_t)t->uses->len;
  g_array_append_val(t->list_start, end);
  return st_net_trace_n_lists(t) - 1;
}

/* ---- class rates ------------------------------------------------------------- */

void
st_net_trace_class_rates(const StNetTrace *t, StNetClassVisit visit, gpointer data)
{
  int n_lists = st_net_trace_n_lists(t);
  /* Per list, what one byte/s of the flow's rate sends on each class. */
  g_autofree double *weight = g_new0(double, (gsize)MAX(n_lists, 1) * ST_LINK_N);
  for (int l = 0; l < n_lists; l++) {
    int n;
    const StNetUse *u = st_net_trace_list(t, l, &n);
    for (int i = 0; i < n; i++) {
      const StNetLink *link = &g_array_index(t->links, StNetLink, u[i].link);
      if (link->sends)
        weight[l * ST_LINK_N + link->link_class] += u[i].coef * link->stands_for;
    }
  }
  g_autofree double *flow_rate = g_new0(double, MAX(t->n_flows, 1));
  double rate[ST_LINK_N] = {0};
  int active[ST_LINK_N] = {0};
  const StNetRate *r = (const StNetRate *)t->rates->data;
  guint n = t->rates->len;
  if (n == 0 || r[0].t_ns > 0)
    visit(data, 0, rate);
  for (guint i = 0; i < n;) {
    int64_t now = r[i].t_ns;
    for (; i < n && r[i].t_ns == now; i++) {
      double old = flow_rate[r[i].flow];
      flow_rate[r[i].flow] = r[i].rate;
      const double *w = &weight[r[i].list * ST_LINK_N];
      for (int c = 0; c < ST_LINK_N; c++) {
        if (w[c] == 0)
          continue;
        active[c] += (r[i].rate > 0) - (old > 0);
        rate[c] = active[c] > 0 ? rate[c] + (r[i].rate - old) * w[c] : 0.0;
      }
    }
    visit(data, now, rate);
  }
}

/* ---- link loads ---------------------------------------------------------------- */

typedef struct {
  double load;
  int32_t active;  /* flows with a rate on it */
  int64_t since;   /* when load last changed */
} LinkState;

/* Applies record `r` to the links of its list; `touch` (may be NULL) sees each
 * link before its load changes. */
static void
apply(const StNetTrace *t, const StNetRate *r, double *flow_rate, LinkState *links,
      void (*touch)(gpointer, int, const LinkState *, int64_t), gpointer data)
{
  double old = flow_rate[r->flow];
  flow_rate[r->flow] = r->rate;
  int n;
  const StNetUse *u = st_net_trace_list(t, r->list, &n);
  for (int i = 0; i < n; i++) {
    LinkState *s = &links[u[i].link];
    if (touch != NULL)
      touch(data, u[i].link, s, r->t_ns);
    s->active += (r->rate > 0) - (old > 0);
    s->load = s->active > 0 ? s->load + (r->rate - old) * u[i].coef : 0.0;
    s->since = r->t_ns;
  }
}

typedef struct {
  StNetLinkStats *stats;
  int64_t start, end;
} StatsCtx;

/* Accounts the interval a link held its load until `now`, clipped to the window. */
static void
account(gpointer data, int link, const LinkState *s, int64_t now)
{
  StatsCtx *x = data;
  int64_t a = MAX(s->since, x->start), b = MIN(now, x->end);
  if (b <= a || s->load <= 0)
    return;
  StNetLinkStats *st = &x->stats[link];
  st->bytes += s->load * (double)(b - a) * 1e-9;
  st->busy_ns += b - a;
  st->peak = MAX(st->peak, s->load);
}

StNetLinkStats *
st_net_trace_link_stats(const StNetTrace *t, int64_t start_ns, int64_t end_ns)
{
  guint n_links = t->links->len;
  StatsCtx x = {g_new0(StNetLinkStats, MAX(n_links, 1)), start_ns, end_ns};
  g_autofree LinkState *links = g_new0(LinkState, MAX(n_links, 1));
  g_autofree double *flow_rate = g_new0(double, MAX(t->n_flows, 1));
  for (guint i = 0; i < t->rates->len; i++)
    apply(t, &g_array_index(t->rates, StNetRate, i), flow_rate, links, account, &x);
  for (guint l = 0; l < n_links; l++) {
    account(&x, (int)l, &links[l], end_ns);
    double capacity = g_array_index(t->links, StNetLink, l).capacity;
    if (end_ns > start_ns && capacity > 0)
      x.stats[l].utilization = x.stats[l].bytes / (capacity * (double)(end_ns - start_ns) * 1e-9);
    if (end_ns > start_ns)
      x.stats[l].busy_fraction = (double)x.stats[l].busy_ns / (double)(end_ns - start_ns);
  }
  return x.stats;
}

void
st_net_trace_link_loads(const StNetTrace *t, const int32_t *chosen, int n_chosen,
                        StNetLinkVisit visit, gpointer data)
{
  guint n_links = t->links->len;
  g_autofree int32_t *column = g_new(int32_t, MAX(n_links, 1));
  for (guint l = 0; l < n_links; l++)
    column[l] = -1;
  for (int i = 0; i < n_chosen; i++)
    column[chosen[i]] = i;
  g_autofree LinkState *links = g_new0(LinkState, MAX(n_links, 1));
  g_autofree double *flow_rate = g_new0(double, MAX(t->n_flows, 1));
  g_autofree double *load = g_new0(double, MAX(n_chosen, 1));
  const StNetRate *r = (const StNetRate *)t->rates->data;
  guint n = t->rates->len;
  if (n == 0 || r[0].t_ns > 0)
    visit(data, 0, load);
  for (guint i = 0; i < n;) {
    int64_t now = r[i].t_ns;
    gboolean changed = FALSE;
    for (; i < n && r[i].t_ns == now; i++) {
      int k;
      const StNetUse *u = st_net_trace_list(t, r[i].list, &k);
      for (int j = 0; j < k && !changed; j++)
        changed = column[u[j].link] >= 0;
      apply(t, &r[i], flow_rate, links, NULL, NULL);
    }
    if (!changed)
      continue;
    for (int c = 0; c < n_chosen; c++)
      load[c] = links[chosen[c]].load;
    visit(data, now, load);
  }
}
