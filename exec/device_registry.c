/* device_registry.c: the device backends, in the order "auto" tries them
 * from the fastest. */
#include <string.h>

#include "exec/device.h"

static const StDeviceBackend *const BACKENDS[] = {
  &st_device_cuda,
  &st_device_host,
  NULL,
};

const StDeviceBackend *const *
st_device_backends(void)
{
  return BACKENDS;
}

const StDeviceBackend *
st_device_backend_find(const char *name)
{
  for (const StDeviceBackend *const *b = BACKENDS; *b != NULL; b++)
    if (strcmp((*b)->name, name) == 0)
      return *b;
  return NULL;
}
