/* burst_pack.c: branch packing (st_burst_pack, burst.h).
 *
 * DeepPool's planner (parallelizationPlanner.py, searchBestSplitsV3 and its
 * backwardBranch) places the branches of a block side by side: the longest
 * on the block's GPUs, each other branch on GPUs of its own unless moving
 * its samples there costs more than it saves (then it runs after the
 * others on the same GPUs), and branches that fit one after another within
 * the longest one's time share GPUs ("GPU packing"). Here the same choice is
 * made on the step's timeline: a branch is the set of nodes from one
 * successor of a fork up to the fork's join; a move shifts a whole branch
 * (its nested branches with it) to start at another rank, and the best move
 * is taken while the predicted step (st_burst_step_at_ns) gets faster. Two
 * branches may end up on the same GPUs (then they run one after the other,
 * as DeepPool packs them) or on disjoint ones (side by side).
 *
 * Cost: each round tries every branch at every first rank, one timeline
 * each: O(branches x ranks x (nodes x ranks)) per round.
 */
#include "burst/burst.h"

#include <string.h>

#define PACK_ROUNDS 64

typedef struct {
  int32_t head;    /* its first node (a successor of the fork) */
  GArray *nodes;   /* int32: the branch's nodes, the join excluded */
} Branch;

static void
branch_clear(gpointer data)
{
  g_array_unref(((Branch *)data)->nodes);
}

/* Immediate post-dominators of a graph whose nodes are in topological
 * order (the join of each fork). */
static void
post_dominators(int n, GArray **succs, int32_t *ipdom, int32_t *depth)
{
  for (int v = n - 1; v >= 0; v--) {
    GArray *next = succs[v];
    if (next->len == 0) {
      ipdom[v] = -1;
      depth[v] = 0;
      continue;
    }
    int a = g_array_index(next, int32_t, 0);
    for (guint i = 1; i < next->len && a >= 0; i++) {
      int b = g_array_index(next, int32_t, i);
      while (a != b && a >= 0 && b >= 0) {
        if (depth[a] >= depth[b])
          a = ipdom[a];
        else
          b = ipdom[b];
      }
      if (a != b)
        a = -1;
    }
    ipdom[v] = a;
    depth[v] = a >= 0 ? depth[a] + 1 : 0;
  }
}

/* Every branch of every fork: the nodes reachable from one successor
 * before its fork's join. */
static GArray *
find_branches(const StBurstGraph *g)
{
  int n = (int)g->nodes->len;
  g_autofree GArray **succs = g_new(GArray *, n);
  for (int v = 0; v < n; v++)
    succs[v] = g_array_new(FALSE, FALSE, sizeof(int32_t));
  for (int v = 0; v < n; v++) {
    const StBurstNode *x = st_burst_graph_node(g, v);
    for (int i = 0; i < x->n_preds; i++) {
      int32_t vv = v;
      g_array_append_val(succs[x->preds[i]], vv);
    }
  }
  g_autofree int32_t *ipdom = g_new(int32_t, n);
  g_autofree int32_t *depth = g_new(int32_t, n);
  post_dominators(n, succs, ipdom, depth);
  GArray *branches = g_array_new(FALSE, FALSE, sizeof(Branch));
  g_array_set_clear_func(branches, branch_clear);
  g_autofree gboolean *in = g_new(gboolean, n);
  for (int f = 0; f < n; f++) {
    int J = ipdom[f];
    if (succs[f]->len < 2 || J < 0)
      continue;
    for (guint i = 0; i < succs[f]->len; i++) {
      int head = g_array_index(succs[f], int32_t, i);
      if (head == J)
        continue; /* a skip connection: nothing to place */
      Branch b = {.head = head, .nodes = g_array_new(FALSE, FALSE, sizeof(int32_t))};
      memset(in, 0, sizeof(gboolean) * n);
      in[head] = TRUE;
      /* Topological order: a node is in the branch when one of its inputs is. */
      for (int v = head; v < J; v++) {
        const StBurstNode *x = st_burst_graph_node(g, v);
        for (int k = 0; !in[v] && k < x->n_preds; k++)
          in[v] = x->preds[k] != f && x->preds[k] >= head && in[x->preds[k]];
        if (in[v])
          g_array_append_val(b.nodes, v);
      }
      g_array_append_val(branches, b);
    }
  }
  for (int v = 0; v < n; v++)
    g_array_unref(succs[v]);
  return branches;
}

/* Shifts branch `b` so that its head starts at rank `at`; FALSE when a set
 * would leave the ranks. */
static gboolean
shift(const StBurstGraph *g, const Branch *b, const int32_t *width, const int32_t *from,
      int at, int32_t *to)
{
  int delta = at - from[b->head];
  for (guint i = 0; i < b->nodes->len; i++) {
    int v = g_array_index(b->nodes, int32_t, i);
    int lo = from[v] + delta;
    if (lo < 0 || lo + g->widths[width[v]] > g->n_ranks)
      return FALSE;
    to[v] = lo;
  }
  return TRUE;
}

int
st_burst_pack(const StBurstGraph *g, const int32_t *width, int32_t *first)
{
  g_return_val_if_fail(g != NULL && width != NULL && first != NULL, 0);
  int n = (int)g->nodes->len;
  g_autoptr(GArray) branches = find_branches(g);
  if (branches->len == 0 || g->n_ranks < 2)
    return 0;
  g_autofree int32_t *start = g_memdup2(first, sizeof(int32_t) * n);
  g_autofree int32_t *trial = g_new(int32_t, n);
  g_autofree int32_t *best_lo = g_new(int32_t, n);
  double best = st_burst_step_at_ns(g, width, first);
  for (int round = 0; round < PACK_ROUNDS; round++) {
    double bt = best * (1 - 1e-9);
    gboolean found = FALSE;
    for (guint i = 0; i < branches->len; i++) {
      const Branch *b = &g_array_index(branches, Branch, i);
      for (int at = 0; at < g->n_ranks; at++) {
        if (at == first[b->head])
          continue;
        memcpy(trial, first, sizeof(int32_t) * n);
        if (!shift(g, b, width, first, at, trial))
          continue;
        double t = st_burst_step_at_ns(g, width, trial);
        if (t < bt) {
          bt = t;
          found = TRUE;
          memcpy(best_lo, trial, sizeof(int32_t) * n);
        }
      }
    }
    if (!found)
      break;
    memcpy(first, best_lo, sizeof(int32_t) * n);
    best = bt;
  }
  int moved = 0;
  for (guint i = 0; i < branches->len; i++) {
    const Branch *b = &g_array_index(branches, Branch, i);
    moved += first[b->head] != start[b->head];
  }
  return moved;
}
