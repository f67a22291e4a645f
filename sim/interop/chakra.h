/* chakra.h: MLCommons Chakra execution traces (ETs) out of and into stagger
 * (docs/INTEROP.md has the whole mapping; docs/FORMATS.md the files).
 *
 * Files. A trace of R ranks at PREFIX is R files PREFIX.<rank>.et, each a
 * stream of length-delimited protobuf messages (chakra_et.proto: a varint
 * byte count, then the message), the GlobalMetadata first and then one Node
 * per operation of that rank, plus PREFIX.comm_groups.json, ASTRA-sim's
 * communicator-group file ({"1": [ranks], ...}). This is the layout
 * ASTRA-sim's --workload-configuration=PREFIX and
 * --comm-group-configuration=PREFIX.comm_groups.json read.
 *
 * Export writes one training step of every rank (folded ranks are
 * expanded: every rank gets its file). Each op is a node: COMP_NODE,
 * COMM_COLL_NODE, COMM_SEND_NODE, COMM_RECV_NODE, and copies as
 * MEM_LOAD_NODE (h2d, d2d) or MEM_STORE_NODE (d2h). The attributes
 * ASTRA-sim's feeder reads carry what they can (comm_type, comm_size,
 * comm_src, comm_dst, comm_tag, pg_name, num_ops, tensor_size, is_cpu_op,
 * inputs / outputs for its memory tracker, "stream"); data_deps are the
 * op's dependencies, ctrl_deps its stream predecessor; duration_micros the
 * op's time alone on the exporting cluster. What Chakra has no place for
 * (the model, settings, passes, buffers' categories, previous-step
 * dependencies) travels in attributes named stagger_*.
 *
 * Import reads such a trace back into an equal Schedule (the same
 * simulated report), or a foreign trace (PyTorch's converter, Chakra's
 * generators) into a Schedule with one synthesized model of custom layers:
 * a foreign COMP node costs its duration_micros when it has one (as a
 * profile entry: a measured time), else its num_ops and tensor_size
 * through the compute cost model. Nodes stagger cannot simulate (METADATA,
 * unsupported collectives, ...) are contracted (their dependencies pass
 * through) and, with every attribute or field it did not use, counted in
 * one warning. Malformed input is an error naming the file and the node.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "cluster/cluster.h"
#include "profile/profile.h"
#include "sched/sched.h"

#define ST_CHAKRA_ERROR (st_chakra_error_quark())
GQuark st_chakra_error_quark(void);

/* The schema revision whose fields the files use (GlobalMetadata.version). */
#define ST_CHAKRA_SCHEMA_VERSION "0.0.4"

/* Node types as Chakra numbers them (chakra_et.proto NodeType). */
#define ST_CHAKRA_N_NODE_TYPES 11

/* The files of a trace. Transfer full. */
char *st_chakra_rank_path(const char *prefix, int rank);
char *st_chakra_groups_path(const char *prefix);

/* ---- export --------------------------------------------------------------- */

typedef struct {
  const StProfile *profile; /* borrowed, may be NULL: for duration_micros */
  const char *comm_algo;    /* "auto" or an algorithm, as the simulator's --comm-algo */
} StChakraExportOptions;

typedef struct {
  int files;                                /* rank files written */
  int groups;                               /* process groups in the group file */
  int64_t nodes[ST_CHAKRA_N_NODE_TYPES];    /* nodes written, by Chakra node type */
} StChakraExportStats;

/* Writes PREFIX.<rank>.et for every rank and PREFIX.comm_groups.json,
 * creating PREFIX's folder. `stats` may be NULL. */
gboolean st_chakra_export(const StSchedule *schedule, const char *prefix,
                          const StChakraExportOptions *options, StChakraExportStats *stats,
                          GError **error);

/* A one-line summary of `stats` ("8 files, 1200 nodes: 800 COMP_NODE, ...").
 * Transfer full. */
char *st_chakra_export_describe(const StChakraExportStats *stats);
/* ---- import --------------------------------------------------------------- */

typedef struct {
  const StCluster *cluster; /* borrowed: the cluster to simulate on (copied) */
  /* Costs of foreign COMP nodes with a duration_micros are added to this
   * profile (for cluster->gpu.name); may be NULL when the trace was
   * written by stagger (then nothing is added). */
  StProfile *profile;
  /* Settings a foreign trace does not say (a stagger trace carries its
   * own): precision (for the compute dtype), optimizer, global batch
   * (samples per step, for samples/s; 0: unknown). */
  StPrecision precision;
  StOptimizer optimizer;
  int64_t global_batch;
  int32_t steps;            /* > 0: run this many steps; 0: the trace's (1 if foreign) */
  const char *groups_path;  /* NULL: PREFIX.comm_groups.json when it exists */
  /* TRUE: decode and convert every rank file; FALSE: a file equal to an
   * earlier one up to the renaming of ranks takes that one's program
   * undecoded (the same schedule, faster; chakra_import_fold.c). */
  gboolean no_fold;
} StChakraImportOptions;

typedef struct {
  int ranks;
  gboolean from_stagger;  /* written by st_chakra_export */
  int64_t nodes;          /* nodes read */
  int64_t ops;            /* ops of the schedule made from them */
  int folded;             /* rank files not decoded: equal to an earlier one */
  /* One line naming everything read and not used, with counts ("not
   * simulated: 12 METADATA_NODE; not understood: attribute 'rf_id' on 400
   * nodes, ..."), or NULL when everything was used. */
  char *warning;
} StChakraImportStats;

void st_chakra_import_stats_clear(StChakraImportStats *stats);

/* Reads PREFIX.<rank>.et for ranks 0, 1, ... (the trace says how many, or
 * the files do) into a Schedule on `options->cluster`, checked. `stats`
 * may be NULL. Transfer full. */
StSchedule *st_chakra_import(const char *prefix, const StChakraImportOptions *options,
                             StChakraImportStats *stats, GError **error);
