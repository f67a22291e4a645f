/* engine_share.c: flows sharing links max-min fairly.
 *
 * Every flow in its bandwidth part loads the links of its use list, link l
 * with coef_l x its rate. Rates are max-min fair in what each flow puts on
 * a link: on a full link, every flow held back by it carries as many
 * bytes/s there as any other flow on it (a link arbitrates between the
 * streams that cross it, and a collective's crossing of a NIC is one stream
 * there whatever share of the collective it carries; Bertsekas and
 * Gallager, Data Networks, 2nd ed., 1992, section 6.5.2). They are found by
 * progressive filling, as SimGrid solves its flow-level network models
 * (Velho et al., On the validity of flow-level TCP network models for grid
 * and cloud simulations, ACM TOMACS 23(4), 2013): a common level rises;
 * each unfrozen flow's load rises with it at unit speed on its tightest
 * link (capacity left per unfrozen flow there, over its coefficient, least)
 * and in proportion on its other links, until a link is full or a flow
 * meets its own cap (a measured rate); the flows of full links and capped
 * flows freeze, the tightest links are chosen again, and the others go on.
 * No link ever carries more than its capacity, a flow is slowed only by the
 * links it crosses, and equal flows on the same links get equal rates.
 *
 * A flow that arrives or leaves marks its links dirty; share_flush re-rates,
 * once per instant (the engine calls it before time moves on), the connected
 * components of the dirty links (flows joined by the links they share): a
 * flow elsewhere keeps its rate and its event. A flow whose rate changes is
 * brought up to date (bytes moved at the old rate since its last update),
 * rescheduled at its new finish time and written to the trace.
 *
 * Cost of a re-rating: O(I x F x U) for F flows with U uses each in the
 * component and I rounds of filling (at most one per distinct bottleneck;
 * one when the flows share one link).
 */
#include "engine/engine_internal.h"

#include <math.h>

/* A link is full when what is left is below this share of its capacity. */
#define FULL_EPS 1e-12

void
share_init(Engine *e)
{
  e->dirty = g_array_new(FALSE, FALSE, sizeof(int32_t));
  e->comp = g_ptr_array_new();
  e->comp_links = g_array_new(FALSE, FALSE, sizeof(int32_t));
}

void
share_clear(Engine *e)
{
  g_clear_pointer(&e->dirty, g_array_unref);
  g_clear_pointer(&e->comp, g_ptr_array_unref);
  g_clear_pointer(&e->comp_links, g_array_unref);
}

static inline NetLink *
link_at(Engine *e, int slot)
{
  return &g_array_index(e->links, NetLink, slot);
}

static void
mark_dirty(Engine *e, int slot)
{
  NetLink *l = link_at(e, slot);
  if (l->dirty)
    return;
  l->dirty = TRUE;
  g_array_append_val(e->dirty, slot);
}

static inline const StNetUse *
flow_uses(Engine *e, const Flow *f, int *n)
{
  return st_net_trace_list(e->trace, f->lists[f->phase], n);
}

/* Writes the flow's rate to the trace when it changed. */
static void
record(Engine *e, Flow *f, double rate)
{
  if (rate == f->recorded)
    return;
  f->recorded = rate;
  StNetRate r = {e->now, f->trace_id, f->lists[f->phase], rate};
  g_array_append_val(e->trace->rates, r);
}

void
share_attach(Engine *e, Flow *f, int list)
{
  g_assert(!f->attached && list == f->lists[f->phase]);
  f->attached = TRUE;
  f->rate = f->share = 0;
  f->recorded = 0;
  f->last_ns = e->now;
  f->trace_id = e->trace->n_flows++;
  int n;
  const StNetUse *u = flow_uses(e, f, &n);
  for (int i = 0; i < n; i++) {
    NetLink *l = link_at(e, u[i].link);
    if (l->n_on == l->max_on) {
      l->max_on = MAX(4, 2 * l->max_on);
      l->on = g_renew(Attach, l->on, l->max_on);
    }
    l->on[l->n_on++] = (Attach){f, u[i].coef};
    mark_dirty(e, u[i].link);
  }
}

void
share_detach(Engine *e, Flow *f)
{
  g_assert(f->attached);
  f->attached = FALSE;
  record(e, f, 0);
  int n;
  const StNetUse *u = flow_uses(e, f, &n);
  for (int i = 0; i < n; i++) {
    NetLink *l = link_at(e, u[i].link);
    for (int j = 0; j < l->n_on; j++)
      if (l->on[j].flow == f) {
        l->on[j] = l->on[--l->n_on];
        break;
      }
    mark_dirty(e, u[i].link);
  }
}

/* The flows and links connected to the dirty links, into e->comp and
 * e->comp_links. */
static void
collect(Engine *e)
{
  uint32_t stamp = ++e->stamp;
  g_ptr_array_set_size(e->comp, 0);
  g_array_set_size(e->comp_links, 0);
  for (guint i = 0; i < e->dirty->len; i++) {
    int slot = g_array_index(e->dirty, int32_t, i);
    NetLink *l = link_at(e, slot);
    l->dirty = FALSE;
    if (l->mark == stamp)
      continue;
    l->mark = stamp;
    g_array_append_val(e->comp_links, slot);
  }
  g_array_set_size(e->dirty, 0);
  /* Breadth first over links -> flows -> links. */
  for (guint k = 0; k < e->comp_links->len; k++) {
    NetLink *l = link_at(e, g_array_index(e->comp_links, int32_t, k));
    for (int j = 0; j < l->n_on; j++) {
      Flow *f = l->on[j].flow;
      if (f->mark == stamp)
        continue;
      f->mark = stamp;
      g_ptr_array_add(e->comp, f);
      int n;
      const StNetUse *u = flow_uses(e, f, &n);
      for (int i = 0; i < n; i++) {
        NetLink *m = link_at(e, u[i].link);
        if (m->mark == stamp)
          continue;
        m->mark = stamp;
        g_array_append_val(e->comp_links, u[i].link);
      }
    }
  }
}

/* Freezes a flow of the component: off its links' unfrozen counts. */
static void
freeze(Engine *e, Flow *f)
{
  f->frozen = TRUE;
  int n;
  const StNetUse *u = flow_uses(e, f, &n);
  for (int j = 0; j < n; j++)
    link_at(e, u[j].link)->open--;
}

/* How fast a flow's rate rises per unit of the common level this round: so
 * that its load rises at unit speed on its tightest link (the one whose
 * capacity left per unfrozen flow, over the flow's coefficient there, is
 * least): flows meeting on a bottleneck there fill it at equal loads. */
static double
pace(Engine *e, const Flow *f)
{
  int n;
  const StNetUse *u = flow_uses(e, f, &n);
  double best = INFINITY, coef = 1;
  for (int j = 0; j < n; j++) {
    const NetLink *l = link_at(e, u[j].link);
    double room = l->left / l->open / u[j].coef;
    if (room < best) {
      best = room;
      coef = u[j].coef;
    }
  }
  return 1 / coef;
}

/* A flow alone on its links: the least over them of capacity / coef, or
 * its cap. */
static double
alone(Engine *e, const Flow *f)
{
  int n;
  const StNetUse *u = flow_uses(e, f, &n);
  double cap = f->plan.phases[f->phase].cap, rate = INFINITY;
  for (int j = 0; j < n; j++)
    rate = MIN(rate, link_at(e, u[j].link)->capacity / u[j].coef);
  return cap > 0 ? MIN(rate, cap) : rate;
}

/* Progressive filling over the component: new rates into `rate`. */
static void
fill(Engine *e, double *rate)
{
  guint nf = e->comp->len, nl = e->comp_links->len;
  if (nf == 1) {
    rate[0] = alone(e, g_ptr_array_index(e->comp, 0));
    return;
  }
  for (guint k = 0; k < nl; k++) {
    NetLink *l = link_at(e, g_array_index(e->comp_links, int32_t, k));
    l->left = l->capacity;
    l->open = l->n_on;
  }
  g_autofree double *speed = g_new(double, MAX(nf, 1));
  for (guint i = 0; i < nf; i++) {
    ((Flow *)g_ptr_array_index(e->comp, i))->frozen = FALSE;
    rate[i] = 0;
  }
  guint unfrozen = nf;
  while (unfrozen > 0) {
    for (guint k = 0; k < nl; k++)
      link_at(e, g_array_index(e->comp_links, int32_t, k))->weight = 0;
    for (guint i = 0; i < nf; i++) {
      Flow *f = g_ptr_array_index(e->comp, i);
      if (f->frozen)
        continue;
      speed[i] = pace(e, f);
      int n;
      const StNetUse *u = flow_uses(e, f, &n);
      for (int j = 0; j < n; j++)
        link_at(e, u[j].link)->weight += u[j].coef * speed[i];
    }
    /* The largest common rise before a link fills or a flow meets its cap;
     * what sets it freezes for sure, whatever the rounding. */
    double step = INFINITY;
    NetLink *full = NULL;
    Flow *capped = NULL;
    for (guint k = 0; k < nl; k++) {
      NetLink *l = link_at(e, g_array_index(e->comp_links, int32_t, k));
      if (l->open > 0 && l->left / l->weight < step) {
        step = l->left / l->weight;
        full = l;
      }
    }
    for (guint i = 0; i < nf; i++) {
      Flow *f = g_ptr_array_index(e->comp, i);
      double cap = f->plan.phases[f->phase].cap;
      if (!f->frozen && cap > 0 && (cap - rate[i]) / speed[i] < step) {
        step = (cap - rate[i]) / speed[i];
        capped = f;
        full = NULL;
      }
    }
    g_assert(isfinite(step));
    step = MAX(step, 0);
    for (guint i = 0; i < nf; i++)
      if (!((Flow *)g_ptr_array_index(e->comp, i))->frozen)
        rate[i] += speed[i] * step;
    for (guint k = 0; k < nl; k++) {
      NetLink *l = link_at(e, g_array_index(e->comp_links, int32_t, k));
      l->left -= l->weight * step;
    }
    if (full != NULL)
      full->left = 0;
    /* Freeze the flows of full links, and capped flows. */
    for (guint i = 0; i < nf; i++) {
      Flow *f = g_ptr_array_index(e->comp, i);
      if (f->frozen)
        continue;
      double cap = f->plan.phases[f->phase].cap;
      gboolean stop = f == capped || (cap > 0 && rate[i] >= cap * (1 - FULL_EPS));
      int n;
      const StNetUse *u = flow_uses(e, f, &n);
      for (int j = 0; j < n && !stop; j++) {
        NetLink *l = link_at(e, u[j].link);
        stop = l->left <= l->capacity * FULL_EPS;
      }
      if (stop) {
        freeze(e, f);
        unfrozen--;
      }
    }
  }
}

/* Brings a flow's bytes up to now at its old rate, then gives it `share`.
 * Its finish is rounded up to whole nanoseconds; it runs at the rate that
 * moves exactly its bytes by then (at most its share), so that the trace's
 * rates integrate to the bytes moved. */
static void
rerate(Engine *e, Flow *f, double share)
{
  f->remaining -= (double)(e->now - f->last_ns) * 1e-9 * f->rate;
  if (f->remaining < 0)
    f->remaining = 0;
  f->last_ns = e->now;
  f->share = share;
  int64_t ns = st_ns_ceil(f->remaining / share * 1e9);
  f->rate = ns > 0 ? MIN(share, f->remaining / ((double)ns * 1e-9)) : share;
  st_queue_reschedule(&e->queue, &f->ev.node, st_time_add(e->now, ns));
  record(e, f, f->rate);
}

void
share_flush(Engine *e)
{
  while (e->dirty->len > 0) {
    collect(e);
    guint nf = e->comp->len;
    if (nf == 0)
      continue;
    double stack[64];
    double *rate = nf <= 64 ? stack : g_new(double, nf);
    fill(e, rate);
    for (guint i = 0; i < nf; i++) {
      Flow *f = g_ptr_array_index(e->comp, i);
      if (rate[i] != f->share || !st_event_queued(&f->ev.node))
        rerate(e, f, rate[i]);
    }
    if (rate != stack)
      g_free(rate);
  }
}
