/* framework_registry.c: the framework presets (framework.h). Adding one is a
 * framework_<name>.c file and one line here. */
#include "cost/framework.h"

#include <string.h>

extern const StFramework st_framework_pytorch;
extern const StFramework st_framework_megatron;
extern const StFramework st_framework_torchtitan;
extern const StFramework st_framework_fsdp;
extern const StFramework st_framework_deepspeed;
extern const StFramework st_framework_automodel;
extern const StFramework st_framework_axonn;
extern const StFramework st_framework_ideal;

static const StFramework *const FRAMEWORKS[] = {
  &st_framework_pytorch,
  &st_framework_megatron,
  &st_framework_torchtitan,
  &st_framework_fsdp,
  &st_framework_deepspeed,
  &st_framework_automodel,
  &st_framework_axonn,
  &st_framework_ideal,
  NULL,
};

const StFramework *const *
st_frameworks(void)
{
  return FRAMEWORKS;
}

const StFramework *
st_framework_find(const char *name)
{
  for (const StFramework *const *f = FRAMEWORKS; name != NULL && *f != NULL; f++)
    if (strcmp((*f)->name, name) == 0)
      return *f;
  return NULL;
}

const StFramework *
st_framework_default(const char *strategy, gboolean sparse)
{
  if (strategy == NULL || sparse)
    return &st_framework_ideal;
  if (strcmp(strategy, "megatron") == 0)
    return &st_framework_megatron;
  if (strcmp(strategy, "zero") == 0)
    return &st_framework_deepspeed;
  return &st_framework_pytorch;
}
