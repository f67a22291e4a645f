/* device_registry.c: the device backends by name. The host backend is built
 * in; cuda is a module (module.h), loaded the first time it is asked for. */
#include <string.h>

#include "exec/device.h"
#include "exec/exec.h"
#include "exec/module.h"

typedef struct {
  const char *name;
  const StDeviceBackend *builtin; /* or NULL: a module */
  const char *module, *needs;     /* the module, and what configure must find to build it */
} Entry;

/* In the order "auto" tries them, from the fastest. */
static const Entry BACKENDS[] = {
  {"cuda", NULL, "cuda", "CUDA toolkit (nvcc)"},
  {"host", &st_device_host, NULL, NULL},
};

const StDeviceBackend *
st_device_backend_load(const char *name, GError **error)
{
  for (gsize i = 0; i < G_N_ELEMENTS(BACKENDS); i++) {
    const Entry *e = &BACKENDS[i];
    if (strcmp(e->name, name) != 0)
      continue;
    if (e->builtin != NULL)
      return e->builtin;
    g_autofree char *what = g_strdup_printf("the %s device backend", name);
    g_autofree char *symbol = g_strdup_printf("st_device_%s", name);
    return st_module_symbol(e->module, symbol, what, e->needs, error);
  }
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
              "unknown device backend '%s' (known: host, cuda, auto)", name);
  return NULL;
}

StExecDevice *
st_device_open(const char *name, int gpu, GError **error)
{
  if (g_strcmp0(name, "auto") == 0) {
    g_autoptr(GError) no_gpu = NULL;
    const StDeviceBackend *cuda = st_device_backend_load("cuda", &no_gpu);
    StExecDevice *dev = cuda != NULL ? cuda->open(gpu, &no_gpu) : NULL;
    if (dev != NULL)
      return dev;
    g_debug("auto: the host backend, since %s", no_gpu->message);
    return st_device_host.open(0, error);
  }
  const StDeviceBackend *b = st_device_backend_load(name, error);
  return b != NULL ? b->open(gpu, error) : NULL;
}
