/* chakra_arena.c: where a trace file's nodes are decoded (EtArena, see
 * chakra_private.h).
 *
 * protobuf-c allocates every part of a decoded node on its own (the node,
 * its name, its dependency arrays, each attribute and its strings) and
 * frees them one by one: at 10^6 nodes that was a third of a Chakra
 * import (unpacking, freeing, and the allocator's fragmentation between
 * them). The nodes of a file live exactly as long as the file, so they are
 * cut from large blocks instead and released together; protobuf-c's free
 * does nothing.
 */
#include "interop/chakra_private.h"

#define BLOCK_BYTES ((size_t)1 << 20)
#define ALIGN 16 /* any field protobuf-c places (int64, double, pointers) */

struct EtArena {
  GPtrArray *blocks; /* owned, g_free */
  char *at;          /* the free part of the last block */
  size_t left;       /* its bytes */
};

EtArena *
et_arena_new(void)
{
  EtArena *a = g_new0(EtArena, 1);
  a->blocks = g_ptr_array_new_with_free_func(g_free);
  return a;
}

void
et_arena_free(EtArena *a)
{
  if (a == NULL)
    return;
  g_ptr_array_unref(a->blocks);
  g_free(a);
}

static void *
arena_alloc(void *data, size_t size)
{
  EtArena *a = data;
  size = (size + ALIGN - 1) / ALIGN * ALIGN;
  if (size > a->left) {
    size_t block = MAX(size, BLOCK_BYTES);
    a->at = g_malloc(block);
    a->left = block;
    g_ptr_array_add(a->blocks, a->at);
  }
  void *p = a->at;
  a->at += size;
  a->left -= size;
  return p;
}

static void
arena_free(void *data, void *p)
{
  (void)data;
  (void)p; /* released with the arena */
}

ProtobufCAllocator
et_arena_allocator(EtArena *a)
{
  return (ProtobufCAllocator){.alloc = arena_alloc, .free = arena_free, .allocator_data = a};
}
