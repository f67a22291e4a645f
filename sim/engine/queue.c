/* queue.c: see queue.h. A classic array heap over node pointers, each node
 * remembering its slot so it can be removed or moved in O(log n). */
#include "engine/queue.h"

static inline gboolean
before(const StEventNode *a, const StEventNode *b)
{
  return a->time_ns < b->time_ns || (a->time_ns == b->time_ns && a->seq < b->seq);
}

static inline void
place(StEventQueue *q, int32_t i, StEventNode *node)
{
  q->heap[i] = node;
  node->index = i;
}

static void
sift_up(StEventQueue *q, int32_t i)
{
  StEventNode *node = q->heap[i];
  while (i > 0) {
    int32_t parent = (i - 1) / 2;
    if (!before(node, q->heap[parent]))
      break;
    place(q, i, q->heap[parent]);
    i = parent;
  }
  place(q, i, node);
}

static void
sift_down(StEventQueue *q, int32_t i)
{
  StEventNode *node = q->heap[i];
  for (;;) {
    int32_t child = 2 * i + 1;
    if (child >= q->size)
      break;
    if (child + 1 < q->size && before(q->heap[child + 1], q->heap[child]))
      child++;
    if (!before(q->heap[child], node))
      break;
    place(q, i, q->heap[child]);
    i = child;
  }
  place(q, i, node);
}

void
st_queue_init(StEventQueue *q)
{
  *q = (StEventQueue){0};
}

void
st_queue_clear(StEventQueue *q)
{
  for (int32_t i = 0; i < q->size; i++)
    q->heap[i]->index = -1;
  g_free(q->heap);
  *q = (StEventQueue){0};
}

void
st_queue_push(StEventQueue *q, StEventNode *node, int64_t time_ns)
{
  g_return_if_fail(node->index < 0);
  if (q->size == q->capacity) {
    q->capacity = q->capacity ? 2 * q->capacity : 64;
    q->heap = g_renew(StEventNode *, q->heap, q->capacity);
  }
  node->time_ns = time_ns;
  node->seq = q->next_seq++;
  place(q, q->size++, node);
  sift_up(q, node->index);
}

void
st_queue_remove(StEventQueue *q, StEventNode *node)
{
  g_return_if_fail(node->index >= 0 && node->index < q->size && q->heap[node->index] == node);
  int32_t i = node->index;
  node->index = -1;
  q->size--;
  if (i == q->size)
    return;
  StEventNode *last = q->heap[q->size];
  place(q, i, last);
  if (i > 0 && before(last, q->heap[(i - 1) / 2]))
    sift_up(q, i);
  else
    sift_down(q, i);
}

void
st_queue_reschedule(StEventQueue *q, StEventNode *node, int64_t time_ns)
{
  if (node->index >= 0)
    st_queue_remove(q, node);
  st_queue_push(q, node, time_ns);
}

StEventNode *
st_queue_pop(StEventQueue *q)
{
  if (q->size == 0)
    return NULL;
  StEventNode *top = q->heap[0];
  st_queue_remove(q, top);
  return top;
}
