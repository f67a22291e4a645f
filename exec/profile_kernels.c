/* profile_kernels.c: st_profiler_model (profiler.h): the layers of a model,
 * the optimizer steps, the sparse modifier's compress and expand, and
 * copies, each measured alone (and layers together, with --sharing).
 *
 * Layers with equal signatures (a transformer's blocks) are measured once
 * and written under each name; the model's first layer is measured on its
 * own, since the executor skips its input gradient. Buffers that do not fit
 * on the device skip that layer and batch with a note, so one large batch
 * does not lose the rest.
 */
#include <string.h>

#include "exec/check.h"
#include "exec/layer_impl.h"
#include "exec/profile_private.h"

/* Layers measured together: the first of them, and every name. */
typedef struct {
  int first;
  GPtrArray *names; /* char *, borrowed from the model */
} Group;

static void
group_free(gpointer data)
{
  Group *g = data;
  g_ptr_array_unref(g->names);
  g_free(g);
}

static GPtrArray *
layer_groups(ProfDev *d, const StModel *m)
{
  GPtrArray *groups = g_ptr_array_new_with_free_func(group_free);
  g_autoptr(GHashTable) by_key = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (int i = 0; i < m->n_layers; i++) {
    const StLayer *l = &m->layers[i];
    if (st_layer_impl_find(l->type->name) == NULL) {
      prof_note(d, "layer '%s' (%s): no real implementation, not profiled (the simulator "
                   "keeps its roofline estimate)",
                l->name, l->type->name);
      continue;
    }
    g_autofree char *key = g_strdup_printf("%s%s", l->signature, i == 0 ? "\x1f" "first" : "");
    Group *g = g_hash_table_lookup(by_key, key);
    if (g == NULL) {
      g = g_new0(Group, 1);
      g->first = i;
      g->names = g_ptr_array_new();
      g_ptr_array_add(groups, g);
      g_hash_table_insert(by_key, g_steal_pointer(&key), g);
    }
    g_ptr_array_add(g->names, l->name);
  }
  return groups;
}

/* Buffers that do not fit are skipped with a note; other errors are not. */
static gboolean
out_of_memory(GError *error)
{
  return g_error_matches(error, ST_EXEC_ERROR, ST_EXEC_ERROR_OOM);
}

/* ---- layers ------------------------------------------------------------------ */

static gboolean
profile_group(ProfDev *d, const StModel *m, const Group *g, int batch, StProfile *profile,
              GError **error)
{
  const StLayer *l = &m->layers[g->first];
  int steps = 2 + (d->o->sharing ? 6 : 0);
  GError *local = NULL;
  ProfLayer *benches[PROF_STREAMS] = {NULL};
  benches[0] = prof_layer_new(d, m, g->first, batch, &local);
  if (benches[0] == NULL) {
    if (!out_of_memory(local)) {
      g_propagate_error(error, local);
      return FALSE;
    }
    prof_note(d, "%s: skipped: %s", l->name, local->message);
    g_error_free(local);
    for (int i = 0; i < steps; i++)
      prof_step(d, l->name);
    return TRUE;
  }
  gboolean ok = prof_layer_prepare(benches[0], error);
  double alone[2] = {0, 0};
  for (int pass = 0; ok && pass < 2; pass++) {
    StPass p = pass == 0 ? ST_PASS_FWD : ST_PASS_BWD;
    StReplayPart part = {d->streams[0], pass == 0 ? prof_layer_fwd : prof_layer_bwd, benches[0]};
    ProfTiming t;
    ok = prof_measure(d, &part, 1, TRUE, &t, error);
    if (!ok)
      break;
    alone[pass] = t.span_ns;
    for (guint i = 0; i < g->names->len; i++)
      st_profile_add_layer(profile, d->device_name, g_ptr_array_index(g->names, i), l->signature,
                           p, batch, t.span_ns, t.spread_ns);
    g_autofree char *what = g_strdup_printf("%s %s batch %d", l->name, st_pass_name(p), batch);
    prof_step(d, what);
  }
  if (ok && d->o->sharing) {
    gboolean fits = TRUE;
    for (int i = 1; ok && fits && i < PROF_STREAMS; i++) {
      benches[i] = prof_layer_new(d, m, g->first, batch, &local);
      if (benches[i] == NULL) {
        fits = FALSE;
        ok = out_of_memory(local);
        if (ok) {
          prof_note(d, "%s: sharing at batch %d skipped: %s", l->name, batch, local->message);
          g_clear_error(&local);
        } else {
          g_propagate_error(error, g_steal_pointer(&local));
        }
      } else {
        ok = prof_layer_prepare(benches[i], error);
      }
    }
    for (int pass = 0; ok && pass < 2; pass++) {
      StPass p = pass == 0 ? ST_PASS_FWD : ST_PASS_BWD;
      /* A pass too short for the clock to see says nothing about sharing. */
      if (fits && alone[pass] > 0) {
        ok = prof_sharing(d, benches, l, g->names, p, batch, alone[pass], profile, error);
        continue;
      }
      if (fits)
        prof_note(d, "%s %s at batch %d: too short to time, sharing not measured", l->name,
                  st_pass_name(p), batch);
      for (int i = 0; i < 3; i++)
        prof_step(d, l->name);
    }
  }
  for (int i = 0; i < PROF_STREAMS; i++)
    prof_layer_free(benches[i]);
  if (!ok && error != NULL && *error != NULL)
    g_prefix_error(error, "layer '%s', batch %d: ", l->name, batch);
  return ok;
}

/* ---- element-wise kernels: optimizer, compress, expand ------------------------ */

typedef enum { ELEM_ADAM, ELEM_SGD, ELEM_COMPRESS, ELEM_EXPAND, ELEM_N } ElemKind;

typedef struct {
  ProfDev *d;
  ElemKind kind;
  size_t n;
  float *master, *m, *v;  /* fp32 states (master: the weights themselves under fp32) */
  void *grad, *param;     /* dt */
  void *values, *dense;   /* dt: n packed values, 2n dense entries */
  int32_t *index;         /* every other dense entry */
} Elem;

static gboolean
elem_body(gpointer data, void *stream, GError **error)
{
  Elem *e = data;
  const StKernels *k = e->d->k;
  StKDtype dt = e->d->dt;
  switch (e->kind) {
  case ELEM_ADAM:
    ST_KCHECK(k->adamw(stream, e->master, e->m, e->v, e->grad, dt, e->param, dt, e->n, 1e-3f,
                       0.9f, 0.999f, 1e-8f, 0.0f, 1, 1.0f),
              k->name, error);
    return TRUE;
  case ELEM_SGD:
    ST_KCHECK(k->sgd(stream, e->master, e->m, e->grad, dt, e->param, dt, e->n, 1e-2f, 0.9f, 0.0f,
                     1.0f),
              k->name, error);
    return TRUE;
  case ELEM_COMPRESS:
    ST_KCHECK(k->compress(stream, e->values, dt, e->dense, dt, e->index, e->n), k->name, error);
    return TRUE;
  default:
    ST_KCHECK(k->expand(stream, e->dense, dt, e->values, dt, e->index, e->n), k->name, error);
    return TRUE;
  }
}

static void
elem_clear(Elem *e)
{
  void *bufs[] = {e->m, e->v, e->grad, e->param, e->values, e->dense, e->index};
  for (gsize i = 0; i < G_N_ELEMENTS(bufs); i++)
    if (bufs[i] != NULL)
      e->d->k->free(bufs[i]);
  if (e->master != NULL && e->master != e->param)
    e->d->k->free(e->master);
}

static gboolean
elem_setup(Elem *e, GError **error)
{
  ProfDev *d = e->d;
  size_t n = e->n, es = st_kdt_size(d->dt);
  if (e->kind == ELEM_ADAM || e->kind == ELEM_SGD) {
    gboolean mixed = d->dt != ST_KDT_F32;
    if (!prof_alloc(d, &e->param, n * es, "weights", error) ||
        !prof_alloc(d, &e->grad, n * es, "gradients", error) ||
        !prof_alloc(d, (void **)&e->m, n * 4, "optimizer states", error) ||
        (e->kind == ELEM_ADAM && !prof_alloc(d, (void **)&e->v, n * 4, "optimizer states", error)))
      return FALSE;
    if (!mixed)
      e->master = e->param; /* fp32: the weights are their own master copy */
    else if (!prof_alloc(d, (void **)&e->master, n * 4, "master weights", error))
      return FALSE;
    return TRUE;
  }
  if (!prof_alloc(d, &e->values, n * es, "packed values", error) ||
      !prof_alloc(d, &e->dense, 2 * n * es, "dense tensor", error) ||
      !prof_alloc(d, (void **)&e->index, n * sizeof(int32_t), "index", error))
    return FALSE;
  g_autofree int32_t *index = g_new(int32_t, MAX(n, 1));
  for (size_t i = 0; i < n; i++)
    index[i] = (int32_t)(2 * i);
  return prof_upload(d, e->index, index, n * sizeof(int32_t), error);
}

static gint
compare_int64(gconstpointer a, gconstpointer b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The sizes optimizer steps run over: each layer's parameters (per-layer
 * steps), the whole model's, and its halves down to the smallest layer
 * (ZeRO's shards, pipeline stages); compress and expand use the same.
 * Ascending, each once. Transfer full. */
static GArray *
elementwise_sizes(const StModel *m)
{
  g_autoptr(GArray) all = g_array_new(FALSE, FALSE, sizeof(int64_t));
  int64_t smallest = G_MAXINT64;
  for (int i = 0; i < m->n_layers; i++)
    if (m->layers[i].params > 0) {
      smallest = MIN(smallest, m->layers[i].params);
      g_array_append_val(all, m->layers[i].params);
    }
  for (int64_t n = m->params; n > 0 && n >= MIN(smallest, m->params); n /= 2)
    g_array_append_val(all, n);
  g_array_sort(all, compare_int64);
  GArray *sizes = g_array_new(FALSE, FALSE, sizeof(int64_t));
  for (guint i = 0; i < all->len; i++) {
    int64_t n = g_array_index(all, int64_t, i);
    if (sizes->len == 0 || g_array_index(sizes, int64_t, sizes->len - 1) != n)
      g_array_append_val(sizes, n);
  }
  return sizes;
}

/* With --sharing: the kernel of `e` (measured alone in `alone_ns`) as 2 and 4
 * copies on their own streams and buffers, all started together, and the
 * fill they give (profile_sharing.c's rule) on its entry: an optimizer step
 * of every rank sharing a device runs at once. Copies that do not fit are a
 * note, not an error. */
static gboolean
elem_sharing(ProfDev *d, const Elem *e, const char *name, StPass pass, double alone_ns,
             StProfile *profile, GError **error)
{
  static const int counts[] = {2, 4};
  Elem copies[PROF_STREAMS];
  copies[0] = *e;
  int made = 1;
  GError *local = NULL;
  for (; made < PROF_STREAMS; made++) {
    copies[made] = (Elem){.d = d, .kind = e->kind, .n = e->n};
    if (!elem_setup(&copies[made], &local)) {
      elem_clear(&copies[made]);
      break;
    }
  }
  double span[G_N_ELEMENTS(counts)];
  gboolean ok = local == NULL;
  for (gsize c = 0; ok && c < G_N_ELEMENTS(counts); c++) {
    StReplayPart parts[PROF_STREAMS];
    for (int p = 0; p < counts[c]; p++)
      parts[p] = (StReplayPart){d->streams[p], elem_body, &copies[p]};
    ProfTiming t;
    ok = prof_measure(d, parts, counts[c], TRUE, &t, &local);
    span[c] = ok ? t.span_ns : 0;
  }
  for (int s = 0; s < PROF_N_STREAMS; s++)
    d->b->stream_sync(d->dev, d->streams[s], NULL);
  for (int i = 1; i < made; i++)
    elem_clear(&copies[i]);
  if (!ok && local != NULL && out_of_memory(local)) {
    prof_note(d, "%s of %zu elements: sharing skipped: %s", name, e->n, local->message);
    g_clear_error(&local);
    return TRUE;
  }
  if (!ok) {
    g_propagate_prefixed_error(error, local, "%s of %zu elements, together: ", name, e->n);
    return FALSE;
  }
  gboolean bound = FALSE;
  double fill = st_profiler_fill(alone_ns, counts, span, (int)G_N_ELEMENTS(counts),
                                 PROF_NO_SLOWDOWN, &bound);
  st_profile_set_layer_fill(profile, d->device_name, name, NULL, pass, (int64_t)e->n, fill,
                            bound);
  return TRUE;
}

static gboolean
profile_elementwise(ProfDev *d, const GArray *sizes, StProfile *profile, GError **error)
{
  static const struct {
    ElemKind kind;
    StPass pass;
  } kinds[] = {{ELEM_ADAM, ST_PASS_OPTIM},
               {ELEM_SGD, ST_PASS_OPTIM},
               {ELEM_COMPRESS, ST_PASS_COMPRESS},
               {ELEM_EXPAND, ST_PASS_EXPAND}};
  for (gsize k = 0; k < G_N_ELEMENTS(kinds); k++) {
    /* The names the simulator looks up (engine.c: the optimizer's name, or
     * the pass's). */
    const char *name = kinds[k].kind == ELEM_ADAM  ? st_optimizer_name(ST_OPTIMIZER_ADAM)
                       : kinds[k].kind == ELEM_SGD ? st_optimizer_name(ST_OPTIMIZER_SGD)
                                                   : st_pass_name(kinds[k].pass);
    for (guint i = 0; i < sizes->len; i++) {
      Elem e = {.d = d, .kind = kinds[k].kind, .n = (size_t)g_array_index(sizes, int64_t, i)};
      GError *local = NULL;
      ProfTiming t;
      gboolean ok = elem_setup(&e, &local);
      if (ok) {
        StReplayPart part = {d->streams[0], elem_body, &e};
        ok = prof_measure(d, &part, 1, TRUE, &t, &local);
      }
      for (int s = 0; s < PROF_N_STREAMS; s++)
        d->b->stream_sync(d->dev, d->streams[s], NULL);
      /* The entry first: the fill goes onto it. */
      if (ok)
        st_profile_add_layer(profile, d->device_name, name, NULL, kinds[k].pass, (int64_t)e.n,
                             t.span_ns, t.spread_ns);
      if (ok && d->o->sharing && t.span_ns > 0 &&
          !elem_sharing(d, &e, name, kinds[k].pass, t.span_ns, profile, error)) {
        elem_clear(&e);
        return FALSE;
      }
      elem_clear(&e);
      if (!ok && out_of_memory(local)) {
        prof_note(d, "%s of %zu elements: skipped: %s", name, e.n, local->message);
        g_clear_error(&local);
      } else if (!ok) {
        g_propagate_prefixed_error(error, local, "%s of %zu elements: ", name, e.n);
        return FALSE;
      }
      g_autofree char *what = g_strdup_printf("%s of %zu elements", name, e.n);
      prof_step(d, what);
    }
  }
  return TRUE;
}

/* ---- copies ------------------------------------------------------------------ */

typedef struct {
  ProfDev *d;
  StCopyKind kind;
  void *dst, *src;
  size_t bytes;
} Copy;

static gboolean
copy_body(gpointer data, void *stream, GError **error)
{
  Copy *c = data;
  /* The kernel table's kinds: 0 device to device, 1 host to device, 2 device to host. */
  int kind = c->kind == ST_COPY_D2D ? 0 : c->kind == ST_COPY_H2D ? 1 : 2;
  ST_KCHECK(c->d->k->copy(stream, c->dst, c->src, c->bytes, kind), c->d->k->name, error);
  return TRUE;
}

/* Copies from and to page-locked host memory (as a GPU's copy engines see
 * it at its best). A device-to-host copy waits for the host in the kernel
 * table, which a graph cannot capture: it is timed without one. */
static gboolean
profile_copies(ProfDev *d, const GArray *sizes, StProfile *profile, GError **error)
{
  static const StCopyKind kinds[] = {ST_COPY_D2D, ST_COPY_H2D, ST_COPY_D2H};
  for (guint i = 0; i < sizes->len; i++) {
    size_t bytes = (size_t)g_array_index(sizes, int64_t, i);
    void *a = NULL, *b = NULL, *host = d->b->host_alloc(d->dev, bytes);
    GError *local = NULL;
    gboolean ok = host != NULL;
    if (!ok)
      g_set_error(&local, ST_EXEC_ERROR, ST_EXEC_ERROR_OOM, "no page-locked host memory");
    ok = ok && prof_alloc(d, &a, bytes, "copy source", &local) &&
         prof_alloc(d, &b, bytes, "copy destination", &local);
    for (gsize k = 0; k < G_N_ELEMENTS(kinds); k++) {
      Copy c = {d, kinds[k], kinds[k] == ST_COPY_H2D ? a : host,
                kinds[k] == ST_COPY_H2D ? host : b, bytes};
      if (kinds[k] == ST_COPY_D2D)
        c.dst = a, c.src = b;
      ProfTiming t;
      StReplayPart part = {d->streams[0], copy_body, &c};
      if (ok && prof_measure(d, &part, 1, kinds[k] != ST_COPY_D2H, &t, &local))
        st_profile_add_copy(profile, d->device_name, kinds[k], (int64_t)bytes, t.span_ns,
                            t.spread_ns);
      else
        ok = FALSE;
      g_autofree char *what = g_strdup_printf("%s copy of %zu bytes", st_copy_name(kinds[k]),
                                              bytes);
      prof_step(d, what);
    }
    d->b->stream_sync(d->dev, d->streams[0], NULL);
    if (a != NULL)
      d->k->free(a);
    if (b != NULL)
      d->k->free(b);
    if (host != NULL)
      d->b->host_free(d->dev, host);
    if (local != NULL && out_of_memory(local)) {
      prof_note(d, "copies of %zu bytes: skipped: %s", bytes, local->message);
      g_clear_error(&local);
    } else if (local != NULL) {
      g_propagate_prefixed_error(error, local, "copies of %zu bytes: ", bytes);
      return FALSE;
    }
  }
  return TRUE;
}

/* ---- the whole model ------------------------------------------------------------- */

gboolean
st_profiler_model(const StModel *model, const int *batches, int n_batches,
                  const StProfilerOptions *o, StProfile *profile, StProfilerReport *report,
                  GError **error)
{
  g_return_val_if_fail(model != NULL && batches != NULL && n_batches > 0, FALSE);
  ProfDev d;
  if (!prof_open(&d, o, 0, report, error)) {
    prof_close(&d);
    return FALSE;
  }
  prof_name_profile(&d, profile);
  gboolean host = d.b == &st_device_host;
  int64_t min_bytes = o->min_bytes > 0 ? o->min_bytes : 1024;
  int64_t max_bytes = o->max_bytes > 0 ? o->max_bytes : host ? 16 << 20 : 256 << 20;
  g_autoptr(GPtrArray) groups = layer_groups(&d, model);
  g_autoptr(GArray) elem_sizes = elementwise_sizes(model);
  g_autoptr(GArray) copy_sizes = prof_sizes(min_bytes, max_bytes);
  d.total = (int)groups->len * n_batches * (2 + (o->sharing ? 6 : 0)) +
            4 * (int)elem_sizes->len + 3 * (int)copy_sizes->len;
  gboolean ok = TRUE;
  for (guint g = 0; ok && g < groups->len; g++)
    for (int b = 0; ok && b < n_batches; b++)
      ok = profile_group(&d, model, g_ptr_array_index(groups, g), batches[b], profile, error);
  ok = ok && profile_elementwise(&d, elem_sizes, profile, error) &&
       profile_copies(&d, copy_sizes, profile, error);
  prof_close(&d);
  return ok;
}
