/* memory.c: host memory for the host table: malloc, memmove, memset. The
 * "device" is this process, so every copy kind is a plain copy. */
#include <stdlib.h>
#include <string.h>

#include "kernels/ref/ref.h"

int
st_ref_alloc(void **ptr, size_t bytes)
{
  if (ptr == NULL)
    return ST_K_EINVAL;
  *ptr = NULL;
  if (bytes == 0)
    return 0;
  *ptr = malloc(bytes);
  return *ptr != NULL ? 0 : ST_K_ENOMEM;
}

int
st_ref_free(void *ptr)
{
  free(ptr);
  return 0;
}

int
st_ref_copy(void *stream, void *dst, const void *src, size_t bytes, int kind)
{
  if (kind < 0 || kind > 2)
    return ST_K_EINVAL;
  if (bytes == 0)
    return 0;
  if (dst == NULL || src == NULL)
    return ST_K_EINVAL;
  memmove(dst, src, bytes);
  return 0;
}

int
st_ref_memset0(void *stream, void *ptr, size_t bytes)
{
  if (bytes == 0)
    return 0;
  if (ptr == NULL)
    return ST_K_EINVAL;
  memset(ptr, 0, bytes);
  return 0;
}
