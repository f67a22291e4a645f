/* test_memory_conformance.c: the simulator's memory of every strategy's
 * schedule against what the executor really allocates running it.
 *
 * Exact (0 bytes of tolerance: the executor's pool records the bytes asked
 * for, not its size classes). Small models using every layer type
 * (tests/data/memory, whose layers tests/test_memory_layers.c checks one by
 * one) and the shipped test models (tests/data/exec), built as dp, zero
 * 1-3, cdp (rules v1 and v2, chain and collective reductions, ZeRO's relay),
 * pipeline (GPipe and 1F1B, with and without checkpointing), selective and
 * full recomputation under every strategy that runs passes, burst,
 * multiplex (a small background) and sparse (dp, zero, pipeline), one rank
 * per GPU, simulated and run on the host backend:
 * - every op's allocations and frees, by category, per run of the op, are
 *   the same in both timelines (which op allocates what does not depend on
 *   timing; per run, since a multiplexed background repeats its iteration
 *   as often as the timing allows);
 * - where every rank has a GPU of its own and its transient buffers come and
 *   go on one stream, each GPU's memory peak and what each category holds
 *   at it are equal too (with more streams, the order in which a transfer,
 *   a gather or a reduce-scatter interleaves with the compute moves the peak
 *   in time, and with ranks sharing a GPU so does their interleaving).
 * The executor refuses an opaque buffer of the schedule (a pass's scratch,
 * compressed values, a packed transfer, a received partial sum, a tied
 * head's parked gradient) that is not exactly what it uses, so an
 * over-declared one fails here too.
 */
#include <string.h>

#include "engine/engine.h"
#include "exec/exec.h"
#include "output/output.h"
#include "strategy/strategy.h"
#include "testutil.h"

/* Small models that use every implemented layer type (and some of their
 * variants: grouped, without bias or affine, with dropout, causal, tied). */
static const char *const MODELS[] = {
  "tests/data/memory/img.json",
  "tests/data/memory/img2.json",
  "tests/data/memory/vit.json",
  "tests/data/memory/gpt.json",
  "tests/data/memory/lm.json",
  "tests/data/memory/llama.json",
  "tests/data/memory/moe.json",
};

/* The models the executor tests run (custom.json has no real math). */
static const char *const SHIPPED[] = {
  "tests/data/exec/tiny-mlp.json",
  "tests/data/exec/tiny-mlp3.json",
  "tests/data/exec/tiny-gpt.json",
  "tests/data/exec/tiny-llama.json",
  "tests/data/exec/tiny-moe.json",
  "models/mlp.json",
};

/* ---- per run ----------------------------------------------------------------- */

/* A run: a strategy with options by name ("zero-stage=3 recompute=full"),
 * on `ranks` ranks, one per GPU, `accumulation` x ranks x micro-batch
 * samples per step. */
typedef struct {
  const char *strategy;
  int ranks, accumulation;
  StPrecision precision;
  const char *settings; /* space-separated name=value, or NULL */
  gboolean profiled;    /* with profile_fc2_flat(): burst's widths then differ */
  int gpus;             /* of the cluster; 0: `ranks` */
} Case;

#define MS 1e6 /* ns */

/* fc1 and fc3 scale with the batch, fc2 costs the same at any batch: burst
 * runs fc2 on one GPU between fc1 and fc3 on all (tests/test_exec_burst.c
 * works the plan out), so samples move both ways. */
static StProfile *
profile_fc2_flat(const char *device)
{
  StProfile *p = st_profile_new();
  for (int x = 1; x <= 16; x *= 2) {
    for (int k = 1; k <= 3; k += 2) {
      g_autofree char *name = g_strdup_printf("fc%d", k);
      st_profile_add_layer(p, device, name, NULL, ST_PASS_FWD, x, 0.5 * MS * x, 0);
      st_profile_add_layer(p, device, name, NULL, ST_PASS_BWD, x, 1.0 * MS * x, 0);
    }
    st_profile_add_layer(p, device, "fc2", NULL, ST_PASS_FWD, x, 1.0 * MS, 0);
    st_profile_add_layer(p, device, "fc2", NULL, ST_PASS_BWD, x, 1.0 * MS, 0);
  }
  return p;
}

/* The schedule of case `c`, with the profile it was built from (or NULL),
 * which the simulation uses too. */
static StSchedule *
build(const StModel *m, const Case *c, int micro_batch, StProfile **prof)
{
  g_autofree char *path = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StCluster) cl = st_cluster_load(path, &error);
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(cl, 0, c->gpus > 0 ? c->gpus : c->ranks, &error));
  *prof = c->profiled ? profile_fc2_flat(cl->gpu.name) : NULL;
  StOptions o;
  st_options_init(&o);
  o.framework = g_strdup("ideal"); /* 16-bit gradients, 25 MiB buckets */
  o.ranks = c->ranks;
  o.micro_batch = micro_batch;
  o.global_batch = (int64_t)c->ranks * micro_batch * c->accumulation;
  o.steps = 3;
  o.precision = c->precision;
  o.bucket_bytes = 0;
  g_auto(GStrv) settings = g_strsplit(c->settings != NULL ? c->settings : "", " ", -1);
  for (char **kv = settings; *kv != NULL; kv++) {
    if (**kv == '\0')
      continue;
    g_auto(GStrv) pair = g_strsplit(*kv, "=", 2);
    g_assert_true(st_options_set(&o, pair[0], pair[1], &error));
  }
  StSchedule *s = st_strategy_build(st_strategy_find(c->strategy), m, cl, *prof, &o, &error);
  g_assert_no_error(error);
  st_options_clear(&o);
  return s;
}

/* Per rank and op, over every step: bytes[category][0 alloc, 1 free] and
 * how often the op ran; op n_ops (the rank's program's) stands for the
 * persistent buffers allocated before the first step. */
typedef struct {
  int64_t bytes[ST_MEM_N][2];
  int64_t runs;
} PerOp;

typedef struct {
  PerOp *cells;
  size_t *first; /* [n_ranks + 1]: rank r's ops are cells[first[r] .. first[r + 1]) */
} PerRank;

static PerOp *
cell_of(PerRank *pr, int rank, guint op)
{
  g_assert_cmpuint(pr->first[rank] + op, <, pr->first[rank + 1]);
  return &pr->cells[pr->first[rank] + op];
}

static void
per_rank_clear(PerRank *pr)
{
  g_free(pr->cells);
  g_free(pr->first);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(PerRank, per_rank_clear)

static void
per_op(const StSchedule *s, const StTimeline *t, PerRank *pr)
{
  pr->first = g_new0(size_t, (size_t)s->n_ranks + 1);
  for (int r = 0; r < s->n_ranks; r++)
    pr->first[r + 1] = pr->first[r] + st_schedule_program_of(s, r)->ops->len + 1;
  pr->cells = g_new0(PerOp, pr->first[s->n_ranks]);
  for (guint k = 0; k < t->ops->len; k++) {
    const StOpRecord *rec = &g_array_index(t->ops, StOpRecord, k);
    cell_of(pr, rec->rank, rec->op)->runs++;
  }
  for (guint k = 0; k < t->mem->len; k++) {
    const StMemEvent *e = &g_array_index(t->mem, StMemEvent, k);
    g_assert_cmpint(e->rank, >=, 0);
    guint n = st_schedule_program_of(s, e->rank)->ops->len;
    guint op = e->op == UINT32_MAX ? n : e->op;
    cell_of(pr, e->rank, op)->bytes[e->category][e->delta < 0] += e->delta;
  }
  for (int r = 0; r < s->n_ranks; r++)
    cell_of(pr, r, st_schedule_program_of(s, r)->ops->len)->runs = 1;
}

/* The highest total of each device over the run, and what each category
 * held then ([n_devices][ST_MEM_N + 1], the total last). */
static int64_t *
device_peaks(const StSchedule *s, const StTimeline *t)
{
  int64_t *peak = g_new0(int64_t, (size_t)s->n_devices * (ST_MEM_N + 1));
  g_autofree int64_t *now = g_new0(int64_t, (size_t)s->n_devices * (ST_MEM_N + 1));
  for (guint k = 0; k < t->mem->len; k++) {
    const StMemEvent *e = &g_array_index(t->mem, StMemEvent, k);
    int64_t *n = now + (size_t)e->device * (ST_MEM_N + 1);
    n[e->category] += e->delta;
    n[ST_MEM_N] += e->delta;
    if (n[ST_MEM_N] > peak[(size_t)e->device * (ST_MEM_N + 1) + ST_MEM_N])
      memcpy(peak + (size_t)e->device * (ST_MEM_N + 1), n, sizeof(int64_t) * (ST_MEM_N + 1));
  }
  return peak;
}

/* Whether the peak of every device is the same whatever the timing: one
 * rank per device, and each rank's transient buffers come and go on one
 * stream, in program order. */
static gboolean
peak_is_timeless(const StSchedule *s)
{
  if (s->n_ranks != s->n_devices)
    return FALSE;
  for (int r = 0; r < s->n_ranks; r++) {
    const StProgram *p = st_schedule_program_of(s, r);
    int stream = -1;
    for (guint o = 0; o < p->ops->len; o++) {
      const StOp *op = st_program_op(p, o);
      if (op->n_alloc + op->n_free == 0)
        continue;
      if (stream >= 0 && op->stream != stream)
        return FALSE;
      stream = op->stream;
    }
  }
  return TRUE;
}

static void
check_run(const char *name, const StModel *m, const Case *c)
{
  int micro_batch = 3;
  g_autoptr(StProfile) prof = NULL;
  g_autoptr(StSchedule) s = build(m, c, micro_batch, &prof);
  g_autoptr(GError) error = NULL;
  StEngineOptions eo = {prof, "auto", NULL, TRUE, NULL}; /* every rank recorded */
  g_autoptr(StTimeline) predicted = st_simulate(s, &eo, NULL, &error);
  g_assert_no_error(error);
  StExecOptions xo;
  st_exec_options_init(&xo);
  xo.device = "host";
  xo.timeout_s = 120;
  StExecResult result;
  g_autoptr(StTimeline) measured = st_execute(s, &xo, &result, &error);
  g_assert_no_error(error);
  st_exec_result_clear(&result);

  /* Per run of each op, so that a multiplexed background, which repeats
   * its iteration as often as the timing allows, compares too: a * m == b * n
   * for a bytes over n runs predicted and b over m measured (an op that ran
   * on one side only compares nothing: see `covered`). */
  g_auto(PerRank) want = {0};
  g_auto(PerRank) got = {0};
  per_op(s, predicted, &want);
  per_op(s, measured, &got);
  int differ = 0;
  /* Every program compared on some rank in full: a background beside a busy
   * foreground may not get to run at all on one side. */
  g_autofree gboolean *covered = g_new0(gboolean, s->programs->len);
  for (int rank = 0; rank < s->n_ranks; rank++) {
    const StProgram *p = st_schedule_program_of(s, rank);
    gboolean all = TRUE;
    for (guint o = 0; o <= p->ops->len; o++) {
      const PerOp *a = cell_of(&want, rank, o), *b = cell_of(&got, rank, o);
      if (o < p->ops->len && (a->runs == 0 || b->runs == 0) &&
          st_program_op(p, o)->n_alloc + st_program_op(p, o)->n_free > 0)
        all = FALSE;
      for (int cat = 0; cat < ST_MEM_N; cat++)
        for (int way = 0; way < 2; way++) {
          if (a->bytes[cat][way] * b->runs == b->bytes[cat][way] * a->runs)
            continue;
          g_autofree char *what = o < p->ops->len ? st_op_describe(s, p, o)
                                                  : g_strdup("persistent");
          g_test_message("%s: rank %d, op %u '%s', %s %s: predicted %" G_GINT64_FORMAT
                         " in %" G_GINT64_FORMAT " runs, measured %" G_GINT64_FORMAT " in %"
                         G_GINT64_FORMAT,
                         name, rank, o, what, st_mem_name((StMemCategory)cat),
                         way ? "freed" : "allocated", a->bytes[cat][way], a->runs,
                         b->bytes[cat][way], b->runs);
          differ++;
        }
    }
    covered[s->ranks[rank].program] |= all;
  }
  g_assert_cmpint(differ, ==, 0);
  for (guint k = 0; k < s->programs->len; k++)
    if (!covered[k])
      g_error("%s: program '%s' ran no op on some side on every rank that runs it", name,
              ((const StProgram *)g_ptr_array_index(s->programs, k))->name);

  if (!peak_is_timeless(s))
    return;
  g_autofree int64_t *pp = device_peaks(s, predicted);
  g_autofree int64_t *mp = device_peaks(s, measured);
  for (int d = 0; d < s->n_devices; d++) {
    const int64_t *a = pp + (size_t)d * (ST_MEM_N + 1), *b = mp + (size_t)d * (ST_MEM_N + 1);
    g_test_message("%s: GPU %d peak %" G_GINT64_FORMAT " predicted, %" G_GINT64_FORMAT
                   " measured", name, d, a[ST_MEM_N], b[ST_MEM_N]);
    for (int cat = 0; cat <= ST_MEM_N; cat++)
      g_assert_cmpint(a[cat], ==, b[cat]);
  }
}

static const Case CASES[] = {
  {"dp", 1, 1, ST_PRECISION_FP32, NULL, FALSE, 0},
  {"zero", 1, 1, ST_PRECISION_FP32, "zero-stage=1", FALSE, 0},
  {"zero", 1, 1, ST_PRECISION_FP32, "zero-stage=2", FALSE, 0},
  {"zero", 1, 1, ST_PRECISION_FP32, "zero-stage=3", FALSE, 0},
};

static char *
label_of(const char *model, const Case *c)
{
  return g_strdup_printf("%s %s %s, %d ranks, %d micro-batches, %s", model, c->strategy,
                         c->settings != NULL ? c->settings : "", c->ranks, c->accumulation,
                         st_precision_name(c->precision));
}

static void
check_cases(const char *name, const StModel *m, const Case *cases, gsize n)
{
  for (gsize k = 0; k < n; k++) {
    g_autofree char *label = label_of(name, &cases[k]);
    check_run(label, m, &cases[k]);
  }
}

static void
test_runs_inline(void)
{
  for (gsize k = 0; k < G_N_ELEMENTS(MODELS); k++) {
    g_autoptr(StModel) m = st_test_model(MODELS[k]);
    check_cases(m->name, m, CASES, G_N_ELEMENTS(CASES));
  }
}

static void
test_runs_shipped(void)
{
  for (gsize k = 0; k < G_N_ELEMENTS(SHIPPED); k++) {
    g_autoptr(StModel) m = st_test_model(SHIPPED[k]);
    check_cases(SHIPPED[k], m, CASES, G_N_ELEMENTS(CASES));
  }
}

static void
test_runs_variants(void)
{
  /* Accumulation (two micro-batches' tensors, a tied head parked per
   * micro-batch under ZeRO-2), 16-bit activations, and two ranks, whose
   * collectives allocate beside the passes. */
  g_autoptr(StModel) gpt = st_test_model("tests/data/exec/tiny-gpt.json");
  g_autoptr(StModel) img = st_test_model(MODELS[0]);
  const Case variants[] = {
    {"dp", 1, 2, ST_PRECISION_FP32, NULL, FALSE, 0},
    {"zero", 1, 2, ST_PRECISION_FP32, "zero-stage=2", FALSE, 0},
    {"dp", 1, 1, ST_PRECISION_MIXED, NULL, FALSE, 0},
    {"zero", 1, 1, ST_PRECISION_MIXED, "zero-stage=3", FALSE, 0},
    {"dp", 2, 1, ST_PRECISION_FP32, NULL, FALSE, 0},
    {"zero", 2, 2, ST_PRECISION_FP32, "zero-stage=3", FALSE, 0},
    /* Deferred reductions: each bucket's whole gradient held across the
     * micro-batches, a shard of one rank's never reduced. */
    {"zero", 1, 2, ST_PRECISION_FP32, "zero-stage=2 defer-grad-sync=on", FALSE, 0},
    {"zero", 2, 2, ST_PRECISION_FP32, "zero-stage=3 defer-grad-sync=on", FALSE, 0},
    /* Gathered parameters kept to the backward, or to the step's last. */
    {"zero", 2, 2, ST_PRECISION_FP32, "zero-stage=3 reshard=backward", FALSE, 0},
    {"zero", 2, 2, ST_PRECISION_FP32, "zero-stage=3 reshard=step defer-grad-sync=on", FALSE, 0},
  };
  check_cases("tiny-gpt", gpt, variants, G_N_ELEMENTS(variants));
  check_cases("img", img, variants, G_N_ELEMENTS(variants));
}

static void
test_runs_cdp(void)
{
  /* Cyclic DP: stages of layers with a delayed (v1) or mixed (v2) update
   * rule, gradients reduced along a chain (a receive adds into a buffer of
   * its own) or by one all-reduce, and ZeRO's relay of a stage's weights. */
  g_autoptr(StModel) gpt = st_test_model("tests/data/exec/tiny-gpt.json");
  g_autoptr(StModel) img = st_test_model(MODELS[0]);
  const Case cases[] = {
    {"cdp", 1, 1, ST_PRECISION_FP32, "update-rule=v1 stages=3", FALSE, 0},
    {"cdp", 1, 2, ST_PRECISION_FP32, "update-rule=v2 stages=3", FALSE, 0},
    {"cdp", 1, 1, ST_PRECISION_MIXED, "update-rule=v2 stages=2", FALSE, 0},
    {"cdp", 2, 1, ST_PRECISION_FP32, "update-rule=v1 stages=3 cdp-reduce=chain", FALSE, 0},
    {"cdp", 3, 1, ST_PRECISION_FP32, "update-rule=v2 stages=3 cdp-reduce=chain", FALSE, 0},
    {"cdp", 2, 1, ST_PRECISION_FP32, "update-rule=v2 stages=2 cdp-reduce=collective", FALSE, 0},
    {"cdp", 3, 1, ST_PRECISION_FP32, "update-rule=v1 stages=3 zero-stage=1", FALSE, 0},
    {"cdp", 3, 1, ST_PRECISION_FP32, "update-rule=v2 stages=3 zero-stage=2", FALSE, 0},
    {"cdp", 4, 2, ST_PRECISION_FP32, "update-rule=v1 stages=2 zero-stage=3", FALSE, 0},
  };
  check_cases("tiny-gpt", gpt, cases, G_N_ELEMENTS(cases));
  check_cases("img", img, cases, G_N_ELEMENTS(cases));
  /* Model parallelism: each stage a rank of its own, activations and their
   * gradients sent between a worker's stages, two workers sharing each
   * stage's GPU (the executor runs no tied head split from its embedding
   * there, so not tiny-gpt). */
  g_autoptr(StModel) mlp3 = st_test_model("tests/data/exec/tiny-mlp3.json");
  const Case mp[] = {
    {"cdp", 2, 1, ST_PRECISION_FP32, "update-rule=v1 stages=2 model-parallel=true", FALSE, 8},
    {"cdp", 2, 1, ST_PRECISION_FP32, "update-rule=v2 stages=3 model-parallel=true", FALSE, 8},
  };
  check_cases("tiny-mlp3", mlp3, mp, G_N_ELEMENTS(mp));
  check_cases("img", img, mp, G_N_ELEMENTS(mp));
}

static void
test_runs_pipeline(void)
{
  /* Stage inputs received, outputs and their gradients sent, GPipe and
   * 1F1B orders, checkpointing's kept inputs and recomputes; tiny-gpt's
   * head split from its embedding keeps a copy of it. */
  g_autoptr(StModel) gpt = st_test_model("tests/data/exec/tiny-gpt.json");
  g_autoptr(StModel) img = st_test_model(MODELS[0]);
  const Case cases[] = {
    {"pipeline", 2, 1, ST_PRECISION_FP32, "pipeline-stages=2 pipeline-schedule=gpipe", FALSE, 0},
    {"pipeline", 2, 2, ST_PRECISION_FP32, "pipeline-stages=2 pipeline-schedule=1f1b", FALSE, 0},
    {"pipeline", 3, 1, ST_PRECISION_FP32,
     "pipeline-stages=3 pipeline-schedule=gpipe recompute=full", FALSE, 0},
    {"pipeline", 2, 2, ST_PRECISION_MIXED,
     "pipeline-stages=2 pipeline-schedule=1f1b recompute=full", FALSE, 0},
    {"pipeline", 4, 1, ST_PRECISION_FP32, "pipeline-stages=2 pipeline-schedule=1f1b", FALSE, 0},
  };
  check_cases("tiny-gpt", gpt, cases, G_N_ELEMENTS(cases));
  check_cases("img", img, cases, G_N_ELEMENTS(cases));
}

static void
test_runs_burst(void)
{
  /* Burst: fc2 of tiny-mlp3 on one GPU between fc1 and fc3 on all, so
   * samples are gathered and scattered, forward and backward; tiny-gpt's
   * layers all wide. Multiplexing: the same plan beside a small background
   * copy of tiny-mlp on every GPU, which the simulator lets run where the
   * foreground leaves its GPU idle (fc2's passes on GPU 0). */
  g_autoptr(StModel) mlp3 = st_test_model("tests/data/exec/tiny-mlp3.json");
  g_autoptr(StModel) gpt = st_test_model("tests/data/exec/tiny-gpt.json");
  g_autofree char *bg = st_test_src("tests/data/exec/tiny-mlp.json");
  g_autofree char *local = g_strdup_printf("background=%s:b2", bg);
  const Case cases[] = {
    {"burst", 1, 1, ST_PRECISION_FP32, NULL, TRUE, 0},
    {"burst", 2, 1, ST_PRECISION_FP32, NULL, TRUE, 0},
    {"burst", 4, 2, ST_PRECISION_FP32, NULL, TRUE, 0},
    {"burst", 2, 1, ST_PRECISION_MIXED, NULL, TRUE, 0},
  };
  check_cases("tiny-mlp3", mlp3, cases, G_N_ELEMENTS(cases));
  check_cases("tiny-gpt", gpt, cases, G_N_ELEMENTS(cases));
  const Case mux[] = {
    {"multiplex", 2, 1, ST_PRECISION_FP32, local, TRUE, 0},
    {"multiplex", 4, 1, ST_PRECISION_FP32, local, TRUE, 0},
  };
  check_cases("tiny-mlp3", mlp3, mux, G_N_ELEMENTS(mux));
}

static void
test_runs_recompute(void)
{
  /* Selective recomputation: each layer with attention scores keeps its
   * saved block less them, its forward takes them as workspace, a recompute
   * op allocates them again for the backward; full recomputation
   * (checkpointing) for every strategy that runs passes, not only
   * pipelines. Dense and flash LLaMA layers, GPT blocks with dropout, MoE
   * (checkpointed only: it keeps nothing selective recomputation drops). */
  g_autoptr(StModel) llama = st_test_model("tests/data/memory/llama.json");
  g_autoptr(StModel) gpt = st_test_model("tests/data/memory/gpt.json");
  g_autoptr(StModel) moe = st_test_model("tests/data/exec/tiny-moe.json");
  const Case cases[] = {
    {"dp", 1, 2, ST_PRECISION_FP32, "recompute=selective", FALSE, 0},
    {"dp", 1, 1, ST_PRECISION_MIXED, "recompute=full", FALSE, 0},
    {"zero", 2, 1, ST_PRECISION_FP32, "zero-stage=3 recompute=selective", FALSE, 0},
    {"zero", 2, 2, ST_PRECISION_FP32, "zero-stage=3 recompute=full", FALSE, 0},
    {"cdp", 2, 1, ST_PRECISION_FP32, "update-rule=v1 stages=2 recompute=selective", FALSE, 0},
    {"cdp", 2, 1, ST_PRECISION_FP32, "update-rule=v2 stages=2 recompute=full", FALSE, 0},
    {"pipeline", 2, 2, ST_PRECISION_FP32,
     "pipeline-stages=2 pipeline-schedule=1f1b recompute=selective", FALSE, 0},
    {"burst", 2, 1, ST_PRECISION_FP32, "recompute=selective", FALSE, 0},
    {"burst", 2, 1, ST_PRECISION_FP32, "recompute=full", FALSE, 0},
  };
  check_cases("llama", llama, cases, G_N_ELEMENTS(cases));
  check_cases("gpt", gpt, cases, G_N_ELEMENTS(cases));
  const Case moe_cases[] = {cases[1], cases[3]};
  check_cases("tiny-moe", moe, moe_cases, G_N_ELEMENTS(moe_cases));
}

static void
test_runs_recompute_every(void)
{
  /* --recompute-every K: only the K-th, 2K-th, ... transformer layers are
   * checkpointed, the rest keep their saved blocks, so a checkpointed layer
   * sits beside kept ones on both sides (its input kept by it or freed by
   * the kept layer before it, its output read by a kept backward), for
   * every strategy that runs passes. */
  g_autoptr(StModel) gpt = st_test_model("tests/data/memory/gpt.json");
  g_autoptr(StModel) llama = st_test_model("tests/data/memory/llama.json");
  const Case cases[] = {
    {"dp", 1, 2, ST_PRECISION_FP32, "recompute=full recompute-every=1", FALSE, 0},
    {"dp", 1, 1, ST_PRECISION_MIXED, "recompute=full recompute-every=2", FALSE, 0},
    {"zero", 2, 2, ST_PRECISION_FP32, "zero-stage=3 recompute=full recompute-every=2", FALSE, 0},
    {"cdp", 2, 1, ST_PRECISION_FP32, "update-rule=v1 stages=2 recompute=full recompute-every=2",
     FALSE, 0},
    {"pipeline", 2, 2, ST_PRECISION_FP32,
     "pipeline-stages=2 pipeline-schedule=1f1b recompute=full recompute-every=2", FALSE, 0},
    {"burst", 2, 1, ST_PRECISION_FP32, "recompute=full recompute-every=1", FALSE, 0},
  };
  check_cases("gpt", gpt, cases, G_N_ELEMENTS(cases));
  check_cases("llama", llama, cases, G_N_ELEMENTS(cases));
}

static void
test_runs_sparse(void)
{
  /* SAMO: each backward's dense gradient compressed through a workspace of
   * the compress op; the step's compressed weights expanded. */
  g_autoptr(StModel) gpt = st_test_model("tests/data/exec/tiny-gpt.json");
  g_autoptr(StModel) mlp = st_test_model("tests/data/exec/tiny-mlp3.json");
  const Case cases[] = {
    {"dp", 1, 1, ST_PRECISION_FP32, "sparsity=0.5", FALSE, 0},
    {"dp", 2, 2, ST_PRECISION_MIXED, "sparsity=0.9", FALSE, 0},
    {"zero", 1, 1, ST_PRECISION_FP32, "zero-stage=1 sparsity=0.5", FALSE, 0},
    {"zero", 2, 1, ST_PRECISION_FP32, "zero-stage=2 sparsity=0.9", FALSE, 0},
    {"zero", 2, 2, ST_PRECISION_FP32, "zero-stage=3 sparsity=0.9", FALSE, 0},
    {"pipeline", 2, 2, ST_PRECISION_FP32, "pipeline-stages=2 sparsity=0.9", FALSE, 0},
    {"pipeline", 2, 1, ST_PRECISION_MIXED,
     "pipeline-stages=2 pipeline-schedule=gpipe recompute=full sparsity=0.5", FALSE, 0},
  };
  check_cases("tiny-gpt", gpt, cases, G_N_ELEMENTS(cases));
  check_cases("tiny-mlp3", mlp, cases, G_N_ELEMENTS(cases));
}

static void
test_runs_tp(void)
{
  /* Megatron's tensor parallelism (t = 2; with sequence parallelism: the
   * all-gathers' and the partial sums' comm buffers, the rank's rows of a
   * block's x1), 16-bit activations, a pipeline of two stages, and the LLaMA
   * blocks of the memory models (parallel residual, LayerNorm, GELU with
   * biases, dense attention, the attention half alone): each split pass's
   * scratch is the simulator's (st_layer_memory under tp), exactly. */
  const char *models[] = {"tests/data/exec/tiny-llama.json", "tests/data/memory/llama-tp.json"};
  const Case cases[] = {
    {"megatron", 4, 1, ST_PRECISION_FP32, "tensor-parallel=2 vocab-multiple=1", FALSE, 0},
    {"megatron", 4, 1, ST_PRECISION_FP32,
     "tensor-parallel=2 vocab-multiple=1 sequence-parallel=true", FALSE, 0},
    {"megatron", 4, 1, ST_PRECISION_MIXED,
     "tensor-parallel=2 vocab-multiple=1 sequence-parallel=true", FALSE, 0},
    {"megatron", 8, 1, ST_PRECISION_FP32,
     "tensor-parallel=2 vocab-multiple=1 sequence-parallel=true pipeline-stages=2", FALSE, 0},
    {"megatron", 4, 1, ST_PRECISION_FP32, "tensor-parallel=2 zero-stage=3", FALSE, 0},
    {"megatron", 4, 2, ST_PRECISION_FP32,
     "tensor-parallel=2 zero-stage=3 reshard=step defer-grad-sync=on", FALSE, 0},
  };
  for (gsize k = 0; k < G_N_ELEMENTS(models); k++) {
    g_autoptr(StModel) m = st_test_model(models[k]);
    check_cases(models[k], m, cases, k == 0 ? G_N_ELEMENTS(cases) : 2);
  }
}

static void
test_runs_ep(void)
{
  /* Megatron's expert parallelism (tiny-moe, 4 experts): the all-to-alls'
   * send and receive buffers (comm), the slots' tokens and gates and the
   * combined rows (activations), each owned expert's saved block and
   * scratch at batch E b, the router output's gradient made by the
   * combine's gradient: every op's as the simulator has it, with two
   * micro-batches, 16-bit activations, ZeRO 1, a pipeline, recomputation
   * (the experts' saved blocks stay), and experts split over a tensor group
   * (a backward's frees on the all-reduce that ends it). */
  g_autoptr(StModel) moe = st_test_model("tests/data/exec/tiny-moe.json");
  const Case cases[] = {
    {"megatron", 2, 2, ST_PRECISION_FP32, "expert-parallel=2", FALSE, 0},
    {"megatron", 4, 1, ST_PRECISION_MIXED, "expert-parallel=4", FALSE, 0},
    {"megatron", 2, 1, ST_PRECISION_FP32, "expert-parallel=2 zero-stage=1", FALSE, 0},
    {"megatron", 4, 2, ST_PRECISION_FP32, "expert-parallel=2 pipeline-stages=2", FALSE, 0},
    {"megatron", 2, 1, ST_PRECISION_FP32, "expert-parallel=2 recompute=full expert-recompute=off",
     FALSE, 0},
    {"megatron", 2, 1, ST_PRECISION_FP32, "tensor-parallel=2", FALSE, 0},
    {"megatron", 4, 2, ST_PRECISION_MIXED, "tensor-parallel=2 expert-parallel=2", FALSE, 0},
  };
  check_cases("tiny-moe", moe, cases, G_N_ELEMENTS(cases));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/memory/runs/inline", test_runs_inline);
  g_test_add_func("/memory/runs/shipped", test_runs_shipped);
  g_test_add_func("/memory/runs/variants", test_runs_variants);
  g_test_add_func("/memory/runs/cdp", test_runs_cdp);
  g_test_add_func("/memory/runs/pipeline", test_runs_pipeline);
  g_test_add_func("/memory/runs/burst", test_runs_burst);
  g_test_add_func("/memory/runs/sparse", test_runs_sparse);
  g_test_add_func("/memory/runs/recompute", test_runs_recompute);
  g_test_add_func("/memory/runs/recompute-every", test_runs_recompute_every);
  g_test_add_func("/memory/runs/tensor-parallel", test_runs_tp);
  g_test_add_func("/memory/runs/expert-parallel", test_runs_ep);
  return g_test_run();
}
