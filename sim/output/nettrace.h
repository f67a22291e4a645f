/* nettrace.h: which links a simulation loaded, and how fast, over time.
 *
 * The engine runs every transfer as flows over links (cluster/links.h) that
 * share each link max-min fairly. It records the links it used (under
 * folding, one representative link stands for the links that behave alike:
 * `stands_for`), the use lists of its flows (which links a flow loads and
 * by how much per byte/s of its rate), and every change of a flow's rate.
 * A link's load at any time is the sum over the flows on it of coef x rate,
 * never above its capacity: every per-link and per-class figure (comm.csv,
 * links.csv, the report's bottleneck) is computed from this. A measured
 * timeline (the executor) has none; its communication is its StCommRecords.
 *
 * Rates are in bytes/s. Records are in time order.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "base/kinds.h"

typedef struct {
  char *name;          /* "gpu3 out", "node1 nic2 in", "leaf0 up" (cluster/links.h) */
  int32_t id;          /* its id in cluster/links.h */
  uint8_t kind;        /* StNetKind */
  uint8_t link_class;  /* StLinkClass whose traffic it carries */
  gboolean sends;      /* its bytes count as bytes sent (st_net_kind_sends) */
  double capacity;     /* bytes/s, one direction */
  int32_t stands_for;  /* links of the cluster it stands for, itself included */
} StNetLink;

typedef struct {
  int32_t link;        /* index into StNetTrace.links */
  double coef;         /* bytes/s on the link per byte/s of the flow's rate */
} StNetUse;

typedef struct {
  int64_t t_ns;
  int32_t flow;        /* flow phase, 0 .. n_flows - 1 */
  int32_t list;        /* its use list */
  double rate;         /* from t_ns on; 0 when it ended */
} StNetRate;

typedef struct {
  GArray *links;       /* StNetLink */
  GArray *uses;        /* StNetUse, the lists back to back */
  GArray *list_start;  /* int32 [n_lists + 1]: list i is uses[list_start[i] .. [i + 1]) */
  GArray *rates;       /* StNetRate, in time order */
  int32_t n_flows;
} StNetTrace;

StNetTrace *st_net_trace_new(void);
void st_net_trace_free(StNetTrace *trace);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StNetTrace, st_net_trace_free)

/* Appends a use list; returns its index. */
int st_net_trace_add_list(StNetTrace *trace, const StNetUse *uses, int n);

static inline const StNetUse *
st_net_trace_list(const StNetTrace *t, int list, int *n)
{
  int a = g_array_index(t->list_start, int32_t, list);
  *n = g_array_index(t->list_start, int32_t, list + 1) - a;
  return &g_array_index(t->uses, StNetUse, a);
}

static inline int
st_net_trace_n_lists(const StNetTrace *t)
{
  return (int)t->list_start->len - 1;
}

/* ---- what the outputs compute from it (nettrace.c) ------------------------ */

/* The send rate of each link class over time, summed over the links whose
 * bytes count as sent (each transfer once) and the links they stand for:
 * `visit` sees time 0, then every instant a class's rate changes, with the
 * rates from then on (bytes/s). O(R + L) for R records over lists of L
 * uses in all. */
typedef void (*StNetClassVisit)(gpointer data, int64_t t_ns, const double rate[ST_LINK_N]);
void st_net_trace_class_rates(const StNetTrace *trace, StNetClassVisit visit, gpointer data);

/* One link over a window. */
typedef struct {
  double bytes;        /* carried in the window (one link, not those it stands for) */
  double peak;         /* highest load in the window, bytes/s */
  int64_t busy_ns;     /* time it carried anything */
  double busy_fraction; /* busy_ns over the window */
  double utilization;  /* bytes / (capacity x window): the mean load's share of capacity */
} StNetLinkStats;

/* Stats of every link over [start, end). [links->len], transfer full.
 * O(R x list length). */
StNetLinkStats *st_net_trace_link_stats(const StNetTrace *trace, int64_t start_ns, int64_t end_ns);

/* The load of `n` chosen links over time: `visit` sees time 0 and every
 * instant one of them changes, with their loads (bytes/s) in the order of
 * `links`. */
typedef void (*StNetLinkVisit)(gpointer data, int64_t t_ns, const double *load);
void st_net_trace_link_loads(const StNetTrace *trace, const int32_t *links, int n,
                             StNetLinkVisit visit, gpointer data);
