/* pool.h: the instrumented memory pool of one rank.
 *
 * Every allocation and free goes through here, tagged with a memory category
 * and with the op (and schedule buffer) that caused it; the measured memory
 * timeline is built from these records, placed at the measured start (for an
 * allocation) or end (for a free) of that op. Device memory is cached: a
 * freed block is kept and reused by a later allocation of a size that fits
 * (blocks are rounded up to size classes), as framework allocators do, so
 * the device-level footprint is the pool's high water mark and no allocation
 * synchronizes the device. A reused block may still be read by the op that
 * freed it on another stream: its end event travels with the block and the
 * new user's stream waits on it.
 *
 * Not thread-safe by itself: one pool per rank, used under the rank's lock.
 */
#pragma once

#include <glib.h>

#include "base/kinds.h"
#include "exec/device.h"

typedef struct StPool StPool;

/* A record of the logical memory timeline: op UINT32_MAX for allocations
 * before the first step, -1 step for those. */
typedef struct {
  int32_t step;
  uint32_t op;
  int32_t buffer;       /* schedule buffer, -1 when the executor's own */
  int64_t delta;        /* bytes: + allocation, - free */
  uint8_t category;     /* StMemCategory */
} StPoolRecord;

StPool *st_pool_new(StExecDevice *dev, int rank, int64_t capacity_bytes);
void st_pool_free(StPool *pool);

/* Allocates `bytes` (zero bytes gives a NULL pointer and no record). On the
 * first use of a recycled block, `stream` waits for its last user. FALSE with
 * ST_EXEC_ERROR_OOM naming `what` when the device is out of memory or the
 * rank's capacity would be exceeded. */
gboolean st_pool_alloc(StPool *pool, size_t bytes, StMemCategory category, int32_t step,
                       uint32_t op, int32_t buffer, const char *what, void *stream, void **ptr,
                       GError **error);

/* Returns a block; `last_use` (an event, may be NULL on the host) marks when
 * the device is done with it; the pool takes it. */
void st_pool_release(StPool *pool, void *ptr, int32_t step, uint32_t op, void *last_use);

/* The logical timeline so far (StPoolRecord), and the bytes in use now. */
const GArray *st_pool_records(const StPool *pool);
int64_t st_pool_in_use(const StPool *pool);
/* Device bytes the pool holds (in use and cached): its footprint. */
int64_t st_pool_footprint(const StPool *pool);
