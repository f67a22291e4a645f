/* queue.h: the event queue, an intrusive binary min-heap.
 *
 * Events are ordered by (time, sequence): the sequence is taken from a
 * counter when an event is pushed, so two events at the same time pop in the
 * order they were pushed, and a run is deterministic. Nodes live inside the
 * objects they schedule (a kernel, a flow), so pushing allocates nothing but
 * the occasional growth of the index array.
 *
 * Complexity: push, pop and remove O(log n); peek O(1). A node is in at most
 * one queue; `index` is -1 while it is not queued.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

typedef struct {
  int64_t time_ns;
  uint64_t seq;
  int32_t index; /* position in the heap, -1 when not queued */
} StEventNode;

typedef struct {
  StEventNode **heap;
  int32_t size;
  int32_t capacity;
  uint64_t next_seq;
} StEventQueue;

void st_queue_init(StEventQueue *q);
void st_queue_clear(StEventQueue *q);

static inline void
st_event_node_init(StEventNode *node)
{
  node->index = -1;
}

static inline gboolean
st_event_queued(const StEventNode *node)
{
  return node->index >= 0;
}

/* Schedules `node` at `time_ns`; it must not be queued already. */
void st_queue_push(StEventQueue *q, StEventNode *node, int64_t time_ns);
/* Removes a queued node. */
void st_queue_remove(StEventQueue *q, StEventNode *node);
/* Moves a node to a new time (pushing it if it is not queued); it takes a
 * new sequence number, as if pushed now. */
void st_queue_reschedule(StEventQueue *q, StEventNode *node, int64_t time_ns);
/* The earliest node, removed; NULL when empty. */
StEventNode *st_queue_pop(StEventQueue *q);

static inline StEventNode *
st_queue_peek(const StEventQueue *q)
{
  return q->size > 0 ? q->heap[0] : NULL;
}
