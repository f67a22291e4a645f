/* test_chakra_import_fold.c: rank files folded on import
 * (sim/interop/chakra_import_fold.c) give the schedule the unfolded import
 * gives, and fold nothing they should not.
 *
 * - Every strategy's exported trace, imported folded and unfolded: the same
 *   schedule JSON, and the same simulated step time; data parallelism's
 *   ranks fold all but the first, megatron's (tensor, pipeline and data
 *   groups renamed from rank to rank) fold too.
 * - One rank that differs (one COMP node on another stream) keeps its own
 *   program; one that names a group of its communicator it is not in (the
 *   renaming would fit otherwise) fails as unfolded.
 * - A foreign trace of four ranks alike folds; ranks whose process groups
 *   differ by name fold only onto ranks naming the same; ranks whose peers
 *   sit at other indices of their group do not fold.
 * - Mutated rank files: folded and unfolded import both fail with the same
 *   message, or both give the same schedule.
 */
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

#include "engine/engine.h"
#include "interop/chakra.h"
#include "interop/chakra_private.h"
#include "chakra_trace.h"
#include "testutil.h"

/* The import of `prefix`, folded or not, as schedule JSON text (NULL with
 * `*error` when refused). Transfer full. */
static char *
import_text(const char *prefix, const StCluster *c, gboolean no_fold, int *folded,
            GError **error)
{
  g_autoptr(StProfile) profile = st_profile_new();
  StChakraImportOptions io = {.cluster = c, .profile = profile,
                              .precision = ST_PRECISION_FP32, .optimizer = ST_OPTIMIZER_ADAM,
                              .no_fold = no_fold};
  StChakraImportStats stats = {0};
  g_autoptr(StSchedule) s = st_chakra_import(prefix, &io, &stats, error);
  if (folded != NULL)
    *folded = stats.folded;
  st_chakra_import_stats_clear(&stats);
  if (s == NULL)
    return NULL;
  g_autoptr(cJSON) json = st_schedule_to_json(s);
  char *text = cJSON_PrintUnformatted(json);
  char *out = g_strdup(text);
  cJSON_free(text);
  return out;
}

static StSchedule *
import_schedule(const char *prefix, const StCluster *c, gboolean no_fold)
{
  g_autoptr(GError) error = NULL;
  StChakraImportOptions io = {.cluster = c, .precision = ST_PRECISION_FP32,
                              .optimizer = ST_OPTIMIZER_ADAM, .no_fold = no_fold};
  StSchedule *s = st_chakra_import(prefix, &io, NULL, &error);
  g_assert_no_error(error);
  return s;
}

static int64_t
step_ns(const StSchedule *s)
{
  g_autoptr(StTimeline) t = NULL;
  g_autoptr(StSummary) sum = st_test_simulate(s, "auto", FALSE, &t);
  return sum->step_time_ns;
}

/* Exports `strategy` on `c` to DIR/NAME/et/trace; returns the prefix. */
static char *
export(const char *dir, const char *strategy, const char *model, const StCluster *c,
       const char *const *kv)
{
  g_autoptr(StModel) m = st_test_model_named(model);
  StOptions o;
  st_options_init(&o);
  o.micro_batch = 2;
  o.steps = 2;
  for (; kv != NULL && kv[0] != NULL; kv += 2)
    g_assert_true(st_options_set(&o, kv[0], kv[1], NULL));
  g_autoptr(StSchedule) s = st_test_build(strategy, m, c, &o);
  st_options_clear(&o);
  char *prefix = g_build_filename(dir, strategy, "et", "trace", NULL);
  g_autoptr(GError) error = NULL;
  StChakraExportOptions eo = {NULL, "auto"};
  g_assert_true(st_chakra_export(s, prefix, &eo, NULL, &error));
  g_assert_no_error(error);
  return prefix;
}

static void
test_same_schedule(void)
{
  g_autofree char *dir = st_test_tmpdir();
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 2, 16);
  for (const StStrategy *const *st = st_strategies(); *st != NULL; st++) {
    g_autofree char *sub = g_build_filename(dir, "all", NULL);
    g_autofree char *prefix = export(sub, (*st)->name, "mlp", c, NULL);
    g_autoptr(GError) error = NULL;
    int folded = -1, unfolded = -1;
    g_autofree char *a = import_text(prefix, c, FALSE, &folded, &error);
    g_assert_no_error(error);
    g_autofree char *b = import_text(prefix, c, TRUE, &unfolded, &error);
    g_assert_no_error(error);
    g_test_message("%s: %d of 16 rank files folded", (*st)->name, folded);
    g_assert_cmpint(unfolded, ==, 0);
    g_assert_cmpstr(a, ==, b);
    if (strcmp((*st)->name, "dp") == 0)
      g_assert_cmpint(folded, ==, 15);
  }
  /* Megatron, tensor 2 x pipeline 2 x data 4: each rank names its own
   * tensor, pipeline and data groups, renamed from replica to replica. */
  static const char *const tp_pp[] = {"tensor-parallel", "2", "pipeline-stages", "2",
                                      "global-batch", "16", NULL};
  g_autofree char *sub = g_build_filename(dir, "megatron", NULL);
  g_autofree char *prefix = export(sub, "megatron", "gpt2-124m", c, tp_pp);
  g_autoptr(GError) error = NULL;
  int folded = -1;
  g_autofree char *a = import_text(prefix, c, FALSE, &folded, &error);
  g_assert_no_error(error);
  g_autofree char *b = import_text(prefix, c, TRUE, NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(a, ==, b);
  g_test_message("megatron tp 2 pp 2 dp 4: %d of 16 rank files folded", folded);
  g_assert_cmpint(folded, >=, 12); /* replicas 2 to 4 are the first renamed */
  g_autoptr(StSchedule) sa = import_schedule(prefix, c, FALSE);
  g_autoptr(StSchedule) sb = import_schedule(prefix, c, TRUE);
  g_assert_cmpint(step_ns(sa), ==, step_ns(sb));
}

/* Rewrites rank `rank`'s file, changing it with `edit`. */
static void
rewrite(const char *prefix, int rank, void (*edit)(EtFile *f, gpointer data), gpointer data)
{
  g_autofree char *path = st_chakra_rank_path(prefix, rank);
  g_autoptr(GError) error = NULL;
  g_autoptr(EtFile) f = et_file_read(path, &error);
  g_assert_no_error(error);
  edit(f, data);
  EtWriter *w = et_writer_open(path, &error);
  g_assert_no_error(error);
  g_assert_true(et_writer_add(w, &f->meta->base, &error));
  for (guint k = 0; k < f->nodes->len; k++)
    g_assert_true(et_writer_add(w, g_ptr_array_index(f->nodes, k), &error));
  g_assert_true(et_writer_close(w, &error));
  g_assert_no_error(error);
}

/* The last COMP node moved to the other of the program's two streams (a
 * stagger trace's COMP nodes are costed again from their layer, so their
 * FLOPs would not tell). */
static void
move_stream(EtFile *f, gpointer data)
{
  (void)data;
  for (guint k = f->nodes->len; k-- > 0;) {
    EtNode *n = g_ptr_array_index(f->nodes, k);
    EtAttr *a = (EtAttr *)et_attr_find(n->attr, n->n_attr, "stream");
    if (n->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE && a != NULL) {
      a->int64_val = 1 - a->int64_val;
      return;
    }
  }
  g_assert_not_reached();
}

typedef struct {
  const char *from, *to;
} PgSwap;

/* Every pg_name `from` set to `to`. */
static void
swap_pg(EtFile *f, gpointer data)
{
  const PgSwap *swap = data;
  int swapped = 0;
  for (guint k = 0; k < f->nodes->len; k++) {
    EtNode *n = g_ptr_array_index(f->nodes, k);
    EtAttr *a = (EtAttr *)et_attr_find(n->attr, n->n_attr, "pg_name");
    if (a != NULL && strcmp(a->string_val, swap->from) == 0) {
      /* The node lives in its file's arena, which frees no part alone:
       * `to` outlives the file. */
      a->string_val = (char *)swap->to;
      swapped++;
    }
  }
  g_assert_cmpint(swapped, >, 0);
}

/* The id of the process group whose members are `members` ("2,3"). */
static char *
pg_of(const char *prefix, const char *members)
{
  g_autofree char *path = st_chakra_groups_path(prefix);
  g_autofree char *text = st_test_read(path, NULL);
  g_autoptr(cJSON) root = cJSON_Parse(text);
  const cJSON *g;
  cJSON_ArrayForEach(g, root)
  {
    g_autoptr(GString) s = g_string_new(NULL);
    const cJSON *m;
    cJSON_ArrayForEach(m, g)
      g_string_append_printf(s, "%s%d", s->len > 0 ? "," : "", m->valueint);
    if (strcmp(s->str, members) == 0)
      return g_strdup(g->string);
  }
  g_assert_not_reached();
}

static int
program_of(const char *json, int rank)
{
  g_autoptr(cJSON) root = cJSON_Parse(json);
  cJSON *r = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "ranks"), rank);
  return cJSON_GetObjectItem(r, "program")->valueint;
}

static void
test_one_rank_differs(void)
{
  g_autofree char *dir = st_test_tmpdir();
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 4);
  g_autofree char *prefix = export(dir, "dp", "mlp", c, NULL);
  rewrite(prefix, 2, move_stream, NULL);
  g_autoptr(GError) error = NULL;
  int folded = -1;
  g_autofree char *a = import_text(prefix, c, FALSE, &folded, &error);
  g_assert_no_error(error);
  g_autofree char *b = import_text(prefix, c, TRUE, NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(a, ==, b);
  g_assert_cmpint(folded, ==, 2); /* ranks 1 and 3 on rank 0; rank 2 its own */
  g_assert_cmpint(program_of(a, 1), ==, program_of(a, 0));
  g_assert_cmpint(program_of(a, 2), !=, program_of(a, 0));

  /* Megatron, tensor 2 x data 2: rank 3 names the tensor group of ranks 0
   * and 1 (the same communicator, the same size) for its own of 2 and 3:
   * refused, folded or not, in one message. */
  static const char *const tp[] = {"tensor-parallel", "2", "global-batch", "8", NULL};
  g_autofree char *sub = g_build_filename(dir, "tp", NULL);
  g_autofree char *mp = export(sub, "megatron", "gpt2-124m", c, tp);
  g_autofree char *own = pg_of(mp, "2,3"), *other = pg_of(mp, "0,1");
  rewrite(mp, 3, swap_pg, &(PgSwap){own, other});
  g_autoptr(GError) ea = NULL, eb = NULL;
  g_autofree char *fa = import_text(mp, c, FALSE, NULL, &ea);
  g_autofree char *fb = import_text(mp, c, TRUE, NULL, &eb);
  g_assert_null(fa);
  g_assert_null(fb);
  g_assert_nonnull(ea);
  g_assert_nonnull(eb);
  g_test_message("%s", ea->message);
  g_assert_nonnull(strstr(ea->message, "rank 3 is not in process group"));
  g_assert_cmpstr(ea->message, ==, eb->message);
}

/* ---- a foreign trace ----------------------------------------------------------------- */

/* A node on `dep` (0: none). */
static void
node(EtWriter *w, uint64_t id, const char *name, int type, uint64_t duration_us, uint64_t dep,
     EtAttrs *a)
{
  st_test_et_node(w, id, name, type, duration_us, &dep, dep != 0, a);
}

/* Rank r of 4: compute, an all-reduce over process group `pg`, with `ring`
 * a send to r + 1 and a receive from r - 1, compute. */
static void
write_foreign_rank(const char *prefix, int r, const char *pg, gboolean ring)
{
  EtWriter *w = st_test_et_open(prefix, r);
  node(w, 1, "fwd", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 100, 0, NULL);
  EtAttrs a;
  et_attrs_init(&a);
  et_attrs_int64(&a, "comm_type", CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_REDUCE);
  et_attrs_int64(&a, "comm_size", 1 << 20);
  et_attrs_string(&a, "pg_name", pg);
  node(w, 2, "all_reduce", CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE, 0, 1, &a);
  et_attrs_clear(&a);
  for (int send = 1; ring && send >= 0; send--) {
    et_attrs_init(&a);
    et_attrs_int32(&a, "comm_src", send ? r : (r + 3) % 4);
    et_attrs_int32(&a, "comm_dst", send ? (r + 1) % 4 : r);
    et_attrs_int32(&a, "comm_tag", 7);
    et_attrs_int64(&a, "comm_size", 4096);
    node(w, send ? 3 : 4, send ? "send" : "recv",
         send ? CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE
              : CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE, 0, 2, &a);
    et_attrs_clear(&a);
  }
  node(w, 5, "bwd", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 200, ring ? 4 : 2, NULL);
  st_test_et_close(w);
}

static void
test_foreign(void)
{
  /* Four ranks alike: three fold onto rank 0. Then ranks 0 and 1 reduce
   * over process group "1", ranks 2 and 3 over "2" (a communicator each in
   * a foreign trace): 1 folds onto 0, 3 onto 2. Then a ring of transfers: each rank's
   * peer is at another index of the world group, so no program is another's
   * and nothing folds. Each time the schedule is the unfolded import's. */
  g_autofree char *dir = st_test_tmpdir();
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 4);
  g_autofree char *prefix = g_build_filename(dir, "f", NULL);
  g_autofree char *groups = st_chakra_groups_path(prefix);
  g_assert_true(g_file_set_contents(groups, "{\"1\": [0, 1], \"2\": [2, 3]}", -1, NULL));
  static const int want[] = {3, 2, 0};
  for (int round = 0; round < 3; round++) {
    for (int r = 0; r < 4; r++)
      write_foreign_rank(prefix, r, round != 1 ? "" : r < 2 ? "1" : "2", round == 2);
    g_autoptr(GError) error = NULL;
    int folded = -1;
    g_autofree char *a = import_text(prefix, c, FALSE, &folded, &error);
    g_assert_no_error(error);
    g_autofree char *b = import_text(prefix, c, TRUE, NULL, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(a, ==, b);
    g_assert_cmpint(folded, ==, want[round]);
    if (round == 0)
      g_assert_cmpint(program_of(a, 3), ==, program_of(a, 0));
    if (round == 1)
      g_assert_cmpint(program_of(a, 3), ==, program_of(a, 2));
    if (round >= 1)
      g_assert_cmpint(program_of(a, 2), !=, program_of(a, 0));
  }
}

static void
test_mutations(void)
{
  /* Rank 1 of 4 (ZeRO-3: gathers and reduce-scatters) with bytes flipped,
   * set or cut at random (a fixed seed): whatever the unfolded import
   * says, the folded one says too. */
  g_autofree char *dir = st_test_tmpdir();
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 4);
  static const char *const zero3[] = {"zero-stage", "3", NULL};
  g_autofree char *prefix = export(dir, "zero", "mlp", c, zero3);
  g_autofree char *f1 = st_chakra_rank_path(prefix, 1);
  gsize n;
  g_autofree guint8 *orig = (guint8 *)st_test_read(f1, &n);
  GRand *rand = g_rand_new_with_seed(26);
  int same = 0, refused = 0;
  for (int i = 0; i < 300; i++) {
    GByteArray *b = g_byte_array_new();
    g_byte_array_append(b, orig, (guint)n);
    int kind = g_rand_int_range(rand, 0, 3);
    guint at = (guint)g_rand_int_range(rand, 0, (gint32)n);
    if (kind == 0)
      b->data[at] ^= (guint8)(1u << g_rand_int_range(rand, 0, 8));
    else if (kind == 1)
      b->data[at] = (guint8)g_rand_int_range(rand, 0, 256);
    else
      g_byte_array_set_size(b, at);
    FILE *out = fopen(f1, "wb");
    g_assert_nonnull(out);
    g_assert_cmpuint(fwrite(b->data, 1, b->len, out), ==, b->len);
    g_assert_cmpint(fclose(out), ==, 0);
    g_byte_array_unref(b);
    g_autoptr(GError) ea = NULL, eb = NULL;
    g_autofree char *ta = import_text(prefix, c, FALSE, NULL, &ea);
    g_autofree char *tb = import_text(prefix, c, TRUE, NULL, &eb);
    g_assert_true((ta == NULL) == (tb == NULL));
    if (ta != NULL) {
      g_assert_cmpstr(ta, ==, tb);
      same++;
    } else {
      g_assert_cmpstr(ea->message, ==, eb->message);
      refused++;
    }
  }
  g_rand_free(rand);
  g_test_message("%d mutated traces imported alike, %d refused alike", same, refused);
  g_assert_cmpint(same, >, 0);
  g_assert_cmpint(refused, >, 0);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/chakra/import-fold/same-schedule", test_same_schedule);
  g_test_add_func("/chakra/import-fold/one-rank-differs", test_one_rank_differs);
  g_test_add_func("/chakra/import-fold/foreign", test_foreign);
  g_test_add_func("/chakra/import-fold/mutations", test_mutations);
  return g_test_run();
}
