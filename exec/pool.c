/* pool.c: see pool.h. */
#include "exec/pool.h"

#include "exec/check.h"

typedef struct {
  void *ptr;
  size_t size;        /* the size class it was allocated with */
  size_t requested;   /* what the current user asked for */
  uint8_t category;
  int32_t buffer;     /* the schedule buffer it holds, -1 when the executor's own */
  void *last_use;     /* event of the previous user, or NULL */
} Block;

struct StPool {
  StExecDevice *dev;
  const StKernels *k;
  int rank;
  int64_t capacity;
  int64_t in_use;
  int64_t footprint;
  GHashTable *live;   /* ptr -> Block *, in use */
  GHashTable *cached; /* size class -> GPtrArray of Block *, free */
  GArray *records;    /* StPoolRecord */
};

/* Size classes: 512 B steps up to 1 MiB, 2 MiB steps above, so blocks of
 * near sizes (the same layer at another micro-batch) are shared. */
static size_t
size_class(size_t bytes)
{
  size_t step = bytes < (1u << 20) ? 512 : (2u << 20);
  return (bytes + step - 1) / step * step;
}

static void
block_free(StPool *pool, Block *b)
{
  if (b->last_use != NULL)
    pool->dev->backend->event_free(pool->dev, b->last_use);
  pool->k->free(b->ptr);
  g_free(b);
}

StPool *
st_pool_new(StExecDevice *dev, int rank, int64_t capacity_bytes)
{
  StPool *pool = g_new0(StPool, 1);
  pool->dev = dev;
  pool->k = dev->backend->kernels(dev);
  pool->rank = rank;
  pool->capacity = capacity_bytes;
  pool->live = g_hash_table_new(g_direct_hash, g_direct_equal);
  pool->cached = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
                                       (GDestroyNotify)g_ptr_array_unref);
  pool->records = g_array_new(FALSE, FALSE, sizeof(StPoolRecord));
  return pool;
}

void
st_pool_free(StPool *pool)
{
  if (pool == NULL)
    return;
  GHashTableIter it;
  gpointer value;
  g_hash_table_iter_init(&it, pool->live);
  while (g_hash_table_iter_next(&it, NULL, &value))
    block_free(pool, value);
  g_hash_table_iter_init(&it, pool->cached);
  while (g_hash_table_iter_next(&it, NULL, &value)) {
    GPtrArray *list = value;
    for (guint i = 0; i < list->len; i++)
      block_free(pool, g_ptr_array_index(list, i));
    g_ptr_array_set_size(list, 0);
  }
  g_hash_table_unref(pool->live);
  g_hash_table_unref(pool->cached);
  g_array_unref(pool->records);
  g_free(pool);
}

static void
record(StPool *pool, int32_t step, uint32_t op, int32_t buffer, int64_t delta, uint8_t category)
{
  StPoolRecord r = {step, op, buffer, delta, category};
  g_array_append_val(pool->records, r);
  pool->in_use += delta;
}

gboolean
st_pool_alloc(StPool *pool, size_t bytes, StMemCategory category, int32_t step, uint32_t op,
              int32_t buffer, const char *what, void *stream, void **ptr, GError **error)
{
  *ptr = NULL;
  if (bytes == 0)
    return TRUE;
  if (pool->capacity > 0 && pool->in_use + (int64_t)bytes > pool->capacity) {
    g_autofree char *need = g_format_size_full(bytes, G_FORMAT_SIZE_IEC_UNITS);
    g_autofree char *used = g_format_size_full(pool->in_use, G_FORMAT_SIZE_IEC_UNITS);
    g_autofree char *cap = g_format_size_full(pool->capacity, G_FORMAT_SIZE_IEC_UNITS);
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_OOM,
                "out of memory on rank %d allocating %s for %s: %s in use of %s", pool->rank,
                need, what, used, cap);
    return FALSE;
  }
  gint64 klass = (gint64)size_class(bytes);
  GPtrArray *list = g_hash_table_lookup(pool->cached, &klass);
  Block *b = list != NULL && list->len > 0 ? g_ptr_array_steal_index_fast(list, list->len - 1)
                                           : NULL;
  if (b != NULL && b->last_use != NULL) {
    GError *local = NULL;
    gboolean ok = pool->dev->backend->stream_wait(pool->dev, stream, b->last_use, &local);
    pool->dev->backend->event_free(pool->dev, b->last_use);
    b->last_use = NULL;
    if (!ok) {
      g_propagate_error(error, local);
      block_free(pool, b);
      return FALSE;
    }
  }
  if (b == NULL) {
    b = g_new0(Block, 1);
    b->size = (size_t)klass;
    int status = pool->k->alloc(&b->ptr, b->size);
    if (status != 0 || b->ptr == NULL) {
      g_free(b);
      g_autofree char *need = g_format_size_full(bytes, G_FORMAT_SIZE_IEC_UNITS);
      g_autofree char *held = g_format_size_full(pool->footprint, G_FORMAT_SIZE_IEC_UNITS);
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_OOM,
                  "out of device memory on rank %d allocating %s for %s (the pool holds %s): "
                  "%s",
                  pool->rank, need, what, held,
                  st_exec_status_text(pool->k->name, status != 0 ? status : 2));
      return FALSE;
    }
    pool->footprint += (int64_t)b->size;
  }
  b->requested = bytes;
  b->category = (uint8_t)category;
  b->buffer = buffer;
  g_hash_table_insert(pool->live, b->ptr, b);
  record(pool, step, op, buffer, (int64_t)bytes, (uint8_t)category);
  *ptr = b->ptr;
  return TRUE;
}

void
st_pool_release(StPool *pool, void *ptr, int32_t step, uint32_t op, void *last_use)
{
  if (ptr == NULL)
    return;
  Block *b = g_hash_table_lookup(pool->live, ptr);
  g_return_if_fail(b != NULL);
  g_hash_table_remove(pool->live, ptr);
  record(pool, step, op, b->buffer, -(int64_t)b->requested, b->category);
  b->last_use = last_use;
  gint64 klass = (gint64)b->size;
  GPtrArray *list = g_hash_table_lookup(pool->cached, &klass);
  if (list == NULL) {
    list = g_ptr_array_new();
    g_hash_table_insert(pool->cached, g_memdup2(&klass, sizeof klass), list);
  }
  g_ptr_array_add(list, b);
}

const GArray *
st_pool_records(const StPool *pool)
{
  return pool->records;
}

int64_t
st_pool_in_use(const StPool *pool)
{
  return pool->in_use;
}

int64_t
st_pool_footprint(const StPool *pool)
{
  return pool->footprint;
}
