/* profile_import_kineto_links.c: NCCL kernels of a PyTorch profiler trace
 * as link measurements (profile_import_kineto.h, "Links"). */
#include "profile/profile_kineto_private.h"

#include <string.h>

#include "base/limits.h"
#include "base/util.h"

static int
dtype_bytes(const char *t)
{
  g_autofree char *s = g_ascii_strdown(t, -1);
  if (strstr(s, "double") || strstr(s, "float64") || strstr(s, "long") || strstr(s, "int64"))
    return 8;
  if (strstr(s, "half") || strstr(s, "bfloat16") || strstr(s, "float16") || strstr(s, "short"))
    return 2;
  if (strstr(s, "float") || strstr(s, "int"))
    return 4;
  if (strstr(s, "byte") || strstr(s, "char") || strstr(s, "bool") || strstr(s, "int8"))
    return 1;
  return 0;
}

/* The collective of an NCCL kernel: from its operator's name, else the
 * kernel's. FALSE for a point-to-point one (*p2p) or an unknown one. */
static gboolean
collective_of(const char *op, const char *kernel, StCollKind *coll, gboolean *p2p)
{
  static const struct { const char *key; StCollKind coll; } names[] = {
    {"allreduce", ST_COLL_ALL_REDUCE},     {"all_reduce", ST_COLL_ALL_REDUCE},
    {"reducescatter", ST_COLL_REDUCE_SCATTER}, {"reduce_scatter", ST_COLL_REDUCE_SCATTER},
    {"allgather", ST_COLL_ALL_GATHER},     {"all_gather", ST_COLL_ALL_GATHER},
    {"broadcast", ST_COLL_BROADCAST},      {"reduce", ST_COLL_REDUCE},
  };
  *p2p = FALSE;
  for (int pass = 0; pass < 2; pass++) {
    const char *text = pass == 0 ? op : kernel;
    if (text == NULL || (pass == 0 && strcmp(text, "record_param_comms") == 0))
      continue;
    g_autofree char *low = g_ascii_strdown(text, -1);
    if (strstr(low, "sendrecv") || strstr(low, "send") || strstr(low, "recv")) {
      *p2p = TRUE;
      return FALSE;
    }
    for (gsize i = 0; i < G_N_ELEMENTS(names); i++)
      if (strstr(low, names[i].key)) {
        *coll = names[i].coll;
        return TRUE;
      }
  }
  return FALSE;
}

/* Elements of the first tensor of "Input Dims", -1 when unknown or over
 * ST_MAX_BYTES (no message is that large). */
static int64_t
first_input_elems(const cJSON *args)
{
  const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(args, "Input Dims"), 0);
  if (!cJSON_IsArray(first))
    return -1;
  int64_t n = 1;
  const cJSON *d;
  cJSON_ArrayForEach(d, first)
  {
    int64_t dim = json_whole(d, -1);
    if (dim < 0 || !st_mul_i64(n, dim, &n) || n > ST_MAX_BYTES)
      return -1;
  }
  return n;
}

typedef struct {
  StCollKind coll;
  gboolean p2p;
  int ranks;
  int64_t bytes;
  GArray *ns; /* double */
} Link;

static void
free_link(gpointer p)
{
  Link *l = p;
  g_array_unref(l->ns);
  g_free(l);
}

/* One NCCL kernel as a measurement, or FALSE when its size or group is unknown. */
static gboolean
link_of(const Kineto *k, const Ev *kernel, const Ev *op, int world, Link *out)
{
  if (!collective_of(op->name, kernel->name, &out->coll, &out->p2p) && !out->p2p)
    return FALSE;
  const cJSON *a = op->args;
  const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(a, "dtype");
  const cJSON *types = cJSON_GetObjectItemCaseSensitive(a, "Input type");
  int elem = cJSON_IsString(dtype) ? dtype_bytes(dtype->valuestring)
             : cJSON_IsString(cJSON_GetArrayItem(types, 0))
               ? dtype_bytes(cJSON_GetArrayItem(types, 0)->valuestring)
               : 0;
  int64_t in = arg_int(a, "In msg nelems", first_input_elems(a));
  int64_t outn = arg_int(a, "Out msg nelems", -1);
  int64_t ranks = arg_int(a, "Group size", world);
  if (elem <= 0 || in < 0 || in > ST_MAX_BYTES || ranks < 2 - out->p2p || ranks > ST_MAX_GPUS)
    return FALSE;
  out->ranks = (int)ranks;
  int64_t elems = in;
  if (!out->p2p && out->coll == ST_COLL_ALL_GATHER) /* nccl-tests' size: the output */
    elems = outn > 0 ? MIN(outn, ST_MAX_BYTES) : in * out->ranks; /* < 2^50 * 2^24 */
  return st_mul_i64(elems, elem, &out->bytes) && out->bytes > 0 && out->bytes <= ST_MAX_BYTES;
}

void
kineto_add_links(const Kineto *k, StProfile *p, const char *device, StLinkClass link_class,
          GHashTable *launch, int world, StKinetoImport *stats)
{
  g_autoptr(GHashTable) links = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, free_link);
  g_autoptr(GPtrArray) order = g_ptr_array_new();
  for (guint i = 0; i < k->ev->len; i++) {
    const Ev *e = ev_at(k, i);
    if (e->kind != EV_NCCL)
      continue;
    gpointer l = e->corr >= 0 ? g_hash_table_lookup(launch, &e->corr) : NULL;
    const Ev *anchor = l != NULL ? ev_at(k, GPOINTER_TO_INT(l) - 1) : NULL;
    Link m = {0};
    if (anchor == NULL || anchor->in_comm < 0 ||
        !link_of(k, e, ev_at(k, anchor->in_comm), world, &m)) {
      stats->comm_unknown++;
      continue;
    }
    g_autofree char *key = g_strdup_printf("%d/%d/%d/%" G_GINT64_FORMAT, m.coll, m.p2p, m.ranks,
                                           m.bytes);
    Link *found = g_hash_table_lookup(links, key);
    if (found == NULL) {
      found = g_new(Link, 1);
      *found = m;
      found->ns = g_array_new(FALSE, FALSE, sizeof(double));
      g_hash_table_insert(links, g_steal_pointer(&key), found);
      g_ptr_array_add(order, found);
    }
    double ns = (double)(e->end - e->ts);
    g_array_append_val(found->ns, ns);
  }
  for (guint i = 0; i < order->len; i++) {
    Link *m = g_ptr_array_index(order, i);
    qsort(m->ns->data, m->ns->len, sizeof(double), st_compare_double);
    const double *v = (const double *)(const void *)m->ns->data;
    int n = (int)m->ns->len;
    double median = st_quantile(v, n, 0.5), spread = st_quantile(v, n, 0.9) - st_quantile(v, n, 0.1);
    if (m->p2p)
      st_profile_add_p2p(p, device, link_class, m->bytes, median, spread);
    else
      st_profile_add_link_measured(p, device, m->coll, link_class, m->ranks, m->bytes, median,
                                   spread);
    stats->links++;
  }
}
