/* cli.h: the `stagger` command table and what the subcommands share.
 *
 * Each subcommand is one file (cmd_<name>.c) with its own GOptionContext and
 * --help, exporting one StCommand; cli_commands.c lists them. main() prints
 * an error once ("stagger sim: ...") and picks the exit code: 0 success,
 * 1 failure, 2 bad usage (an error in ST_CLI_ERROR / G_OPTION_ERROR).
 */
#pragma once

#include <glib.h>

#include "cluster/cluster.h"
#include "model/model.h"
#include "profile/profile.h"
#include "strategy/options.h"
#include "strategy/strategy.h"

#define ST_CLI_ERROR (st_cli_error_quark())
GQuark st_cli_error_quark(void);

typedef enum {
  ST_CLI_ERROR_USAGE = 1, /* exit 2 */
} StCliError;

typedef struct {
  const char *name;
  const char *summary;
  /* argv[0] is the subcommand's name. Returns TRUE on success. */
  gboolean (*run)(int argc, char **argv, GError **error);
} StCommand;

/* NULL-terminated. */
const StCommand *const *st_commands(void);

/* ---- shared options (cli_options.c) ---------------------------------- */

/* The model, cluster and profile paths and the strategy list, beside the
 * StOptions every strategy reads. */
typedef struct {
  char *model;
  char *cluster;
  char *profile;
  char *strategy;     /* comma list as given */
  char *out;
  StOptions options;  /* set through the option table (strategy/options.h) */
  gboolean no_fold;   /* --no-fold (sim, plan) */
  GOptionEntry *entries; /* built from the option table, owned */
} StCliShared;

void st_cli_shared_init(StCliShared *shared);
void st_cli_shared_clear(StCliShared *shared);
/* The option group with --model, --cluster, --profile, --strategy, --out and
 * every option of the option table (strategy/options.h). The group writes into
 * `shared`; a bad value is a usage error. */
GOptionGroup *st_cli_shared_group(StCliShared *shared);

/* What the shared options point at, loaded: the model, the cluster resized by
 * --nodes / --gpus, and the profile (NULL without --profile). */
typedef struct {
  StModel *model;
  StCluster *cluster;
  StProfile *profile;
} StCliInputs;

gboolean st_cli_load_inputs(const StCliShared *shared, StCliInputs *inputs, GError **error);
void st_cli_inputs_clear(StCliInputs *inputs);

/* The --strategy list (default "dp"), every name checked. Transfer full. */
char **st_cli_strategy_names(const StCliShared *shared, GError **error);

/* Sets a usage error. */
gboolean st_cli_usage_error(GError **error, const char *format, ...) G_GNUC_PRINTF(2, 3);
