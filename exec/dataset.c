/* dataset.c: a labelled CSV data set, its split and order, and the
 * held-out evaluation (dataset.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/dataset.h"
#include "exec/exec.h"
#include "exec/layer_impl.h"
#include "exec/mix.h"

/* The split's seed: fixed, so that every run holds out the same rows. */
#define SPLIT_SEED UINT64_C(0x5eed0d1a)
#define MIN_ROWS 10

void
st_dataset_free(StDataset *ds)
{
  if (ds == NULL)
    return;
  g_free(ds->path);
  g_free(ds->x);
  g_free(ds->y);
  g_free(ds->train);
  g_free(ds->heldout);
  g_free(ds);
}

/* Parses the comma-separated numbers of `line` into `out` (appending);
 * FALSE with the 1-based column of the first that is not a number. */
static gboolean
parse_row(char *line, GArray *out, int *bad_col)
{
  int col = 1;
  for (char *s = line;; col++) {
    char *end;
    errno = 0;
    double v = g_ascii_strtod(s, &end);
    while (*end == ' ' || *end == '\t' || *end == '\r')
      end++;
    if (end == s || errno != 0 || !isfinite(v) || (*end != ',' && *end != '\0')) {
      *bad_col = col;
      return FALSE;
    }
    float f = (float)v;
    g_array_append_val(out, f);
    if (*end == '\0')
      return TRUE;
    s = end + 1;
  }
}

static gboolean
malformed(GError **error, const char *path, int line, const char *fmt, ...) G_GNUC_PRINTF(4, 5);

static gboolean
malformed(GError **error, const char *path, int line, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  if (line > 0)
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED, "%s:%d: %s", path, line, what);
  else
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED, "%s: %s", path, what);
  return FALSE;
}

/* Seeded Fisher-Yates over v[0 .. n-1]. */
static void
shuffle(int32_t *v, int n, uint64_t seed)
{
  for (int i = n - 1; i > 0; i--) {
    int j = (int)(st_splitmix64(seed ^ st_splitmix64((uint64_t)i)) % (uint64_t)(i + 1));
    int32_t t = v[i];
    v[i] = v[j];
    v[j] = t;
  }
}

StDataset *
st_dataset_load(const char *path, GError **error)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, error))
    return NULL;
  g_autoptr(StDataset) ds = g_new0(StDataset, 1);
  ds->path = g_strdup(path);
  g_autoptr(GArray) x = g_array_new(FALSE, FALSE, sizeof(float));
  g_autoptr(GArray) y = g_array_new(FALSE, FALSE, sizeof(int32_t));
  g_autoptr(GArray) row = g_array_new(FALSE, FALSE, sizeof(float));
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  int width = 0;
  for (int i = 0; lines[i] != NULL; i++) {
    char *line = g_strstrip(lines[i]);
    if (*line == '\0')
      continue;
    int bad = 0;
    g_array_set_size(row, 0);
    if (!parse_row(line, row, &bad)) {
      if (ds->n_rows == 0 && width == 0 && i == 0)
        continue; /* a header */
      return malformed(error, path, i + 1, "column %d is not a number", bad), NULL;
    }
    if (width == 0) {
      if (row->len < 2)
        return malformed(error, path, i + 1, "a row needs features and a label"), NULL;
      width = (int)row->len;
    } else if ((int)row->len != width) {
      return malformed(error, path, i + 1, "%u columns, the first row has %d", row->len, width),
             NULL;
    }
    float label = g_array_index(row, float, width - 1);
    if (label < 0 || label != floorf(label) || label > 65535)
      return malformed(error, path, i + 1, "label %g is not a class index (0, 1, ...)",
                       (double)label),
             NULL;
    int32_t c = (int32_t)label;
    g_array_append_vals(x, row->data, (guint)width - 1);
    g_array_append_val(y, c);
    ds->classes = MAX(ds->classes, c + 1);
    ds->n_rows++;
  }
  if (ds->n_rows < MIN_ROWS)
    return malformed(error, path, 0, "%d rows, at least %d needed", ds->n_rows, MIN_ROWS), NULL;
  ds->n_features = width - 1;
  float big = 0;
  for (guint i = 0; i < x->len; i++)
    big = MAX(big, fabsf(g_array_index(x, float, i)));
  ds->scale = big > 0 ? big : 1;
  for (guint i = 0; i < x->len; i++)
    g_array_index(x, float, i) /= ds->scale;
  ds->x = (float *)g_array_free(g_steal_pointer(&x), FALSE);
  ds->y = (int32_t *)g_array_free(g_steal_pointer(&y), FALSE);

  int32_t *order = g_new(int32_t, ds->n_rows);
  for (int i = 0; i < ds->n_rows; i++)
    order[i] = i;
  shuffle(order, ds->n_rows, SPLIT_SEED);
  ds->n_heldout = MAX(1, (int)(ds->n_rows * ST_DATASET_HELDOUT));
  ds->n_train = ds->n_rows - ds->n_heldout;
  ds->train = g_memdup2(order, sizeof(int32_t) * (size_t)ds->n_train);
  ds->heldout = g_memdup2(order + ds->n_train, sizeof(int32_t) * (size_t)ds->n_heldout);
  g_free(order);
  return g_steal_pointer(&ds);
}

/* Classes of the model's loss, and positions it averages over. */
static int64_t
model_classes(const StModel *m, int *positions)
{
  const StLayer *loss = &m->layers[m->n_layers - 1];
  *positions = loss->in_shape.n_dims >= 2 ? (int)loss->in_shape.dims[0] : 1;
  return loss->in_shape.dims[loss->in_shape.n_dims - 1];
}

gboolean
st_dataset_fits(const StDataset *ds, const StModel *m, GError **error)
{
  int positions;
  int64_t classes = model_classes(m, &positions);
  int64_t in = st_shape_elems(&m->input);
  if (st_layer_takes_ids(&m->layers[0]))
    return malformed(error, ds->path, 0,
                     "model '%s' reads token ids; a data set of features needs a model whose "
                     "input is %d values",
                     m->name, ds->n_features);
  if (in != ds->n_features)
    return malformed(error, ds->path, 0, "%d features a row, but model '%s' takes %" G_GINT64_FORMAT
                     " inputs", ds->n_features, m->name, in);
  if (positions != 1 || classes < ds->classes)
    return malformed(error, ds->path, 0,
                     "labels of %d classes, but model '%s''s loss has %" G_GINT64_FORMAT
                     " class%s at %d position%s",
                     ds->classes, m->name, classes, classes == 1 ? "" : "es", positions,
                     positions == 1 ? "" : "s");
  return TRUE;
}

static uint64_t
gcd(uint64_t a, uint64_t b)
{
  while (b != 0) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

int32_t
st_dataset_train_row(const StDataset *ds, uint64_t seed, uint64_t g)
{
  uint64_t n = (uint64_t)ds->n_train, e = g / n, i = g % n;
  uint64_t h = st_splitmix64(seed ^ st_splitmix64(e ^ UINT64_C(0xda7a)));
  uint64_t a = 1 + (h >> 32) % (n > 1 ? n - 1 : 1), b = (h & 0xffffffffu) % n;
  while (gcd(a, n) != 1) /* a coprime to n: the map is a permutation */
    a = a % (n - 1) + 1;
  return ds->train[(a * i + b) % n];
}

static void *
eval_scratch(gpointer pool, size_t bytes)
{
  void *p = g_malloc0(MAX(bytes, 1));
  g_ptr_array_add(pool, p);
  return p;
}

#define EVAL_BATCH 64

gboolean
st_dataset_evaluate(const StDataset *ds, const StModel *m, const GPtrArray *weights,
                    double *loss, double *accuracy, GError **error)
{
  g_return_val_if_fail(weights != NULL && weights->len == (guint)m->n_layers, FALSE);
  if (!st_dataset_fits(ds, m, error))
    return FALSE;
  const StKernels *k = st_kernels_host();
  int L = m->n_layers, positions;
  int64_t classes = model_classes(m, &positions);
  double loss_sum = 0;
  int64_t right = 0;
  /* Every layer but the loss: its input are the logits. */
  for (int first = 0; first < ds->n_heldout; first += EVAL_BATCH) {
    int b = MIN(EVAL_BATCH, ds->n_heldout - first);
    g_autoptr(GPtrArray) pool = g_ptr_array_new_with_free_func(g_free);
    float *in = eval_scratch(pool, sizeof(float) * (size_t)b * (size_t)ds->n_features);
    for (int j = 0; j < b; j++)
      memcpy(in + (size_t)j * ds->n_features, ds->x + (size_t)ds->heldout[first + j] * ds->n_features,
             sizeof(float) * (size_t)ds->n_features);
    void *act = in;
    for (int i = 0; i < L - 1; i++) {
      const StLayer *l = &m->layers[i];
      const StLayerImpl *impl = st_layer_impl_find(l->type->name);
      const GArray *w = g_ptr_array_index(weights, i);
      if (impl == NULL || st_model_tied_layer(m, i) >= 0)
        return malformed(error, ds->path, 0, "layer '%s' (%s): not evaluated on the host",
                         l->name, l->type->name);
      StLayerCtx c = {.k = k, .dt = ST_KDT_F32, .scratch = eval_scratch, .pool = pool,
                      .seed = 0};
      void *out = eval_scratch(pool, sizeof(float) * (size_t)b * (size_t)st_shape_elems(&l->out_shape));
      void *saved = eval_scratch(pool, impl->saved_bytes(l, b, ST_KDT_F32));
      int rc = impl->forward(&c, l, b, w->len > 0 ? w->data : NULL, act, out, saved);
      if (rc != 0)
        return malformed(error, ds->path, 0, "layer '%s': forward failed (%d)", l->name, rc);
      act = out;
    }
    const float *logits = act; /* [b, classes] */
    for (int j = 0; j < b; j++) {
      const float *z = logits + (size_t)j * classes;
      int best = 0;
      double top = z[0], sum = 0;
      for (int c = 1; c < classes; c++)
        if (z[c] > top) {
          top = z[c];
          best = c;
        }
      for (int c = 0; c < classes; c++)
        sum += exp((double)z[c] - top);
      int32_t y = ds->y[ds->heldout[first + j]];
      loss_sum += log(sum) + top - z[y];
      right += best == y;
    }
  }
  *loss = loss_sum / ds->n_heldout;
  *accuracy = (double)right / ds->n_heldout;
  return TRUE;
}
