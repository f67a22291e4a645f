/* sched_comm.c: communicators of a Schedule (sched.h): partitions of the
 * ranks into groups from a color per rank, stored once per distinct
 * partition (communicators that partition alike share their arrays), and
 * what a rank reaches through them. */
#include "sched/sched.h"

#include <string.h>

#include "base/util.h"
#include "sched/sched_private.h"

/* The arrays of a communicator are GRcBox blocks, shared with the
 * communicators that partition the ranks alike (sched.h). */
void
st_sched_comm_free(gpointer data)
{
  StComm *c = data;
  g_free(c->name);
  g_rc_box_release(c->group_of);
  g_rc_box_release(c->index_of);
  g_rc_box_release(c->offsets);
  g_rc_box_release(c->members);
  g_free(c);
}

/* Dense group ids in order of color. Colors in a range not much wider than
 * the ranks (every strategy's) go through a table over the range: group of
 * color k is id[k - lo]; others through a sort into group_of. */
typedef struct {
  int32_t lo;         /* the least color */
  int32_t *id;        /* [range]: a color's group, -1 when no rank has it; NULL: sparse */
  int n_groups;
} ColorGroups;

static void
color_groups_init(ColorGroups *cg, int n_ranks, const int32_t *color)
{
  int32_t lo = G_MAXINT32, hi = -1;
  for (int r = 0; r < n_ranks; r++)
    if (color[r] >= 0) {
      lo = MIN(lo, color[r]);
      hi = MAX(hi, color[r]);
    }
  *cg = (ColorGroups){.lo = lo};
  if (hi < 0)
    cg->lo = 0, hi = -1;
  if ((int64_t)hi - cg->lo >= 4 * (int64_t)n_ranks + 1024)
    return;
  cg->id = g_new0(int32_t, (gsize)MAX(hi - cg->lo + 1, 1));
  for (int r = 0; r < n_ranks; r++)
    if (color[r] >= 0)
      cg->id[color[r] - cg->lo] = 1;
  for (int64_t k = 0; k <= (int64_t)hi - cg->lo; k++)
    cg->id[k] = cg->id[k] ? cg->n_groups++ : -1;
}

static inline int32_t
color_group(const ColorGroups *cg, int32_t color)
{
  return color >= 0 ? cg->id[color - cg->lo] : -1;
}

/* The groups of a sparse coloring, through a sort. */
static int
sparse_groups(int n_ranks, const int32_t *color, int32_t *group_of)
{
  int n_groups = 0;
  g_autoptr(GArray) colors = g_array_new(FALSE, FALSE, sizeof(int32_t));
  for (int r = 0; r < n_ranks; r++)
    if (color[r] >= 0)
      g_array_append_val(colors, color[r]);
  g_array_sort(colors, (GCompareFunc)st_compare_int32);
  g_autoptr(GHashTable) group_of_color = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (guint i = 0; i < colors->len; i++) {
    int32_t col = g_array_index(colors, int32_t, i);
    if (!g_hash_table_contains(group_of_color, GINT_TO_POINTER(col)))
      g_hash_table_insert(group_of_color, GINT_TO_POINTER(col), GINT_TO_POINTER(n_groups++));
  }
  for (int r = 0; r < n_ranks; r++)
    group_of[r] = color[r] >= 0 ? GPOINTER_TO_INT(g_hash_table_lookup(
                                    group_of_color, GINT_TO_POINTER(color[r])))
                                : -1;
  return n_groups;
}

/* An earlier communicator whose groups these colors make, or NULL; read
 * from the colors, so that a communicator equal to one before costs no
 * array of its own. */
static const StComm *
same_partition(const StSchedule *s, const ColorGroups *cg, const int32_t *color)
{
  for (guint i = 0; i < s->comms->len; i++) {
    const StComm *c = st_schedule_comm(s, i);
    if (c->n_groups != cg->n_groups)
      continue;
    int r = 0;
    while (r < s->n_ranks && c->group_of[r] == color_group(cg, color[r]))
      r++;
    if (r == s->n_ranks)
      return c;
  }
  return NULL;
}

/* `c` takes the arrays of `same` (a reference each). */
static void
share_partition(StComm *c, const StComm *same)
{
  c->n_groups = same->n_groups;
  c->group_of = g_rc_box_acquire(same->group_of);
  c->index_of = g_rc_box_acquire(same->index_of);
  c->offsets = g_rc_box_acquire(same->offsets);
  c->members = g_rc_box_acquire(same->members);
  c->n_members = same->n_members;
}

int
st_schedule_add_comm(StSchedule *s, const char *name, const int32_t *color)
{
  StComm *c = g_new0(StComm, 1);
  c->name = g_strdup(name);
  ColorGroups cg;
  color_groups_init(&cg, s->n_ranks, color);
  const StComm *same = cg.id != NULL ? same_partition(s, &cg, color) : NULL;
  if (same != NULL) {
    g_free(cg.id);
    share_partition(c, same);
    g_ptr_array_add(s->comms, c);
    return (int)s->comms->len - 1;
  }
  c->group_of = g_rc_box_alloc(sizeof(int32_t) * (gsize)s->n_ranks);
  if (cg.id != NULL) {
    c->n_groups = cg.n_groups;
    for (int r = 0; r < s->n_ranks; r++)
      c->group_of[r] = color_group(&cg, color[r]);
    g_free(cg.id);
  } else {
    c->n_groups = sparse_groups(s->n_ranks, color, c->group_of);
  }
  c->offsets = g_rc_box_alloc0(sizeof(int32_t) * ((gsize)c->n_groups + 1));
  for (int r = 0; r < s->n_ranks; r++)
    if (c->group_of[r] >= 0)
      c->offsets[c->group_of[r] + 1]++;
  for (int g = 0; g < c->n_groups; g++)
    c->offsets[g + 1] += c->offsets[g];
  c->n_members = c->offsets[c->n_groups];
  c->index_of = g_rc_box_alloc(sizeof(int32_t) * (gsize)s->n_ranks);
  c->members = g_rc_box_alloc(sizeof(int32_t) * (gsize)MAX(c->n_members, 1));
  g_autofree int32_t *fill = g_new0(int32_t, MAX(c->n_groups, 1));
  for (int r = 0; r < s->n_ranks; r++) {
    int g = c->group_of[r];
    c->index_of[r] = g >= 0 ? fill[g] : -1;
    if (g >= 0)
      c->members[c->offsets[g] + fill[g]++] = r;
  }
  g_ptr_array_add(s->comms, c);
  return (int)s->comms->len - 1;
}

int
st_schedule_add_world(StSchedule *s, const char *name)
{
  /* A world already there: its arrays, without a color per rank. */
  for (guint i = 0; i < s->comms->len; i++) {
    const StComm *w = st_schedule_comm(s, i);
    if (w->n_groups == 1 && w->n_members == s->n_ranks) {
      StComm *c = g_new0(StComm, 1);
      c->name = g_strdup(name);
      share_partition(c, w);
      g_ptr_array_add(s->comms, c);
      return (int)s->comms->len - 1;
    }
  }
  g_autofree int32_t *color = g_new0(int32_t, s->n_ranks);
  return st_schedule_add_comm(s, name, color);
}

int
st_schedule_find_comm(const StSchedule *s, const char *name)
{
  for (guint i = 0; i < s->comms->len; i++)
    if (strcmp(st_schedule_comm(s, i)->name, name) == 0)
      return (int)i;
  return -1;
}

int
st_schedule_peer_rank(const StSchedule *s, int rank, int comm, int peer)
{
  const StComm *c = st_schedule_comm(s, comm);
  int g = c->group_of[rank];
  if (g < 0 || peer < 0 || peer >= c->offsets[g + 1] - c->offsets[g])
    return -1;
  return c->members[c->offsets[g] + peer];
}

void
st_schedule_group_shape(const StSchedule *s, int comm, int group, StGroupShape *shape)
{
  const StComm *c = st_schedule_comm(s, comm);
  int n = c->offsets[group + 1] - c->offsets[group];
  g_autofree int32_t *gpus = g_new(int32_t, n);
  for (int i = 0; i < n; i++)
    gpus[i] = s->ranks[c->members[c->offsets[group] + i]].device;
  st_cluster_group_shape(s->cluster, gpus, n, shape);
}

GPtrArray *
st_schedule_p2p_ops(const StSchedule *s)
{
  GPtrArray *all = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
  for (guint k = 0; k < s->programs->len; k++) {
    const StProgram *p = g_ptr_array_index(s->programs, k);
    GArray *ops = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    for (guint i = 0; i < p->ops->len; i++) {
      uint8_t kind = st_program_op(p, i)->kind;
      if (kind == ST_OP_COMM_SEND || kind == ST_OP_COMM_RECV)
        g_array_append_val(ops, i);
    }
    g_ptr_array_add(all, ops);
  }
  return all;
}
