/* strategy_multiplex.c: DeepPool's GPU multiplexing (Park et al., MLSys 2022).
 *
 * A foreground job (--foreground: burst, dp or zero, built by that strategy)
 * shares its GPUs with background jobs (--background MODEL:bBATCH[:local|dp];
 * none by default, which leaves the foreground alone as a reference).
 * The foreground keeps its streams, raised to high priority. Each background
 * job adds one rank per GPU running a program of its own model (a job of the
 * schedule, st_schedule_add_job): forward and backward of its batch and an
 * optimizer step, on a low-priority stream marked background, whose compute
 * runs in pieces of --mux-piece-us that the device's admission control lets in
 * (sched/admission.h, the engine's engine_admission.c). "local" trains an
 * independent copy on every GPU, as DeepPool's background jobs do; "dp" one
 * copy over all GPUs with its gradient buckets all-reduced on a second
 * background stream.
 *
 * Steps: the foreground first runs two steps alone (warm-up, then the
 * reference its slowdown is measured against), then one step in which the
 * background starts, then --steps multiplexed steps, which the step time
 * covers. The background is best effort: it runs for as long as the
 * foreground does. The report's "multiplex" section gives the foreground's
 * slowdown against its alone step, background samples per second, cluster
 * throughput and the GPU time left idle.
 */
#include <math.h>
#include <string.h>

#include "strategy/strategy_common.h"

/* Foreground steps alone before the background may start: warm-up, then
 * one step measured alone. */
#define ALONE_STEPS 2

static const char *const FOREGROUNDS[] = {"burst", "dp", "zero"};

typedef struct {
  char *model;   /* as written */
  int batch;     /* samples per iteration of one copy */
  gboolean dp;   /* one copy over all GPUs; else one per GPU */
} BgSpec;

static void
bg_spec_free(gpointer p)
{
  BgSpec *b = p;
  g_free(b->model);
  g_free(b);
}

static gboolean
bad_background(GError **error, const char *text, const char *item, const char *why)
{
  g_set_error(error, ST_STRATEGY_ERROR, ST_ERROR_INVALID,
              "--background %s: '%s': %s (expected MODEL:bBATCH[:local|dp], comma-separated)",
              text, item, why);
  return FALSE;
}

static gboolean
parse_background(const char *text, GPtrArray *out, GError **error)
{
  if (strcmp(text, "none") == 0 || text[0] == '\0')
    return TRUE;
  g_auto(GStrv) items = g_strsplit(text, ",", -1);
  for (char **item = items; *item != NULL; item++) {
    g_strstrip(*item);
    g_auto(GStrv) parts = g_strsplit(*item, ":", -1);
    guint n = g_strv_length(parts);
    if (n < 2 || n > 3 || parts[0][0] == '\0')
      return bad_background(error, text, *item, "not MODEL:bBATCH");
    char *end = NULL;
    gint64 batch = parts[1][0] == 'b' ? g_ascii_strtoll(parts[1] + 1, &end, 10) : 0;
    if (end == NULL || *end != '\0' || batch < 1 || batch > 1000000)
      return bad_background(error, text, *item, "the batch must be b followed by 1 to 1000000");
    if (n == 3 && strcmp(parts[2], "local") != 0 && strcmp(parts[2], "dp") != 0)
      return bad_background(error, text, *item, "the strategy must be local or dp");
    BgSpec *b = g_new0(BgSpec, 1);
    b->model = g_strdup(parts[0]);
    b->batch = (int)batch;
    b->dp = n == 3 && strcmp(parts[2], "dp") == 0;
    g_ptr_array_add(out, b);
  }
  return TRUE;
}

/* A file as given; else models/NAME.json under $STAGGER_DATA_DIR, beside the
 * foreground's model file, or in the source tree this was built from. */
static StModel *
load_background_model(const char *name, const StModel *fg, GError **error)
{
  g_autoptr(GPtrArray) tried = g_ptr_array_new_with_free_func(g_free);
  g_autofree char *file = g_str_has_suffix(name, ".json") ? g_strdup(name)
                                                         : g_strdup_printf("%s.json", name);
  g_ptr_array_add(tried, g_strdup(name));
  const char *data = g_getenv("STAGGER_DATA_DIR");
  if (data != NULL)
    g_ptr_array_add(tried, g_build_filename(data, "models", file, NULL));
  if (fg->path != NULL) {
    g_autofree char *dir = g_path_get_dirname(fg->path);
    g_ptr_array_add(tried, g_build_filename(dir, file, NULL));
  }
  g_autofree char *here = g_path_get_dirname(__FILE__); /* <source>/sim/strategy */
  g_ptr_array_add(tried, g_build_filename(here, "..", "..", "models", file, NULL));
  for (guint i = 0; i < tried->len; i++) {
    const char *path = g_ptr_array_index(tried, i);
    if (g_file_test(path, G_FILE_TEST_IS_REGULAR))
      return st_model_load(path, error);
  }
  g_autoptr(GString) list = g_string_new(NULL);
  for (guint i = 0; i < tried->len; i++)
    g_string_append_printf(list, "%s%s", i ? ", " : "", (const char *)g_ptr_array_index(tried, i));
  g_set_error(error, ST_STRATEGY_ERROR, ST_ERROR_INVALID,
              "--background: no model '%s' (tried %s)", name, list->str);
  return NULL;
}

static void
admission_policy(const StOptions *o, StAdmissionPolicy *p)
{
  st_admission_policy_init(p);
  if (o->mux_piece_us > 0)
    p->piece_ns = llround(o->mux_piece_us * 1e3);
  if (o->mux_slowdown > 0)
    p->slowdown_limit = o->mux_slowdown / 100.0;
  if (o->mux_long_recv_us > 0)
    p->long_recv_ns = llround(o->mux_long_recv_us * 1e3);
  if (o->mux_bg_pieces > 0)
    p->bg_pieces = o->mux_bg_pieces;
  if (o->mux_bg_pieces_alone > 0)
    p->bg_pieces_alone = o->mux_bg_pieces_alone;
  if (o->mux_fg_pieces > 0)
    p->fg_pieces = o->mux_fg_pieces;
  p->from_step = ALONE_STEPS;
}

/* ---- background programs ------------------------------------------------- */

typedef struct {
  StDpFrame *frame;
  int sync_stream;
  const StBucket *buckets;
  int n_buckets, next_bucket;
  uint32_t last_reduce;
} BgSync;

static void
bg_after_pass(gpointer data, StPass pass, int layer, int micro, uint32_t op)
{
  BgSync *b = data;
  if (pass != ST_PASS_BWD || b->next_bucket >= b->n_buckets ||
      layer != b->buckets[b->next_bucket].last)
    return;
  StProgram *p = b->frame->program;
  const StBucket *k = &b->buckets[b->next_bucket];
  StOp reduce = st_op_coll(b->sync_stream, ST_COLL_ALL_REDUCE, b->frame->world,
                           k->params * b->frame->bytes.grad);
  g_autofree char *label = g_strdup_printf("bucket %d", b->next_bucket);
  reduce.label = st_program_label(p, label);
  reduce.micro = micro;
  st_op_moves(&reduce, ST_DATA_GRADS, k->last, k->first);
  st_program_begin(p, &reduce);
  st_program_after(p, op);
  b->last_reduce = st_program_commit(p);
  b->next_bucket++;
}

static int
background_stream(StProgram *p, const char *name, const StAdmissionPolicy *policy)
{
  int k = st_program_add_stream(p, name, -1);
  StStream *st = &g_array_index(p->streams, StStream, k);
  st->background = TRUE;
  st->admission = *policy;
  return k;
}

/* One iteration of a background copy: forward, backward (dp: gradient
 * buckets all-reduced over `world`), optimizer step. */
static StProgram *
background_program(const StModel *m, const BgSpec *spec, int world, const StOptions *o,
                   const StAdmissionPolicy *policy)
{
  g_autofree char *name = g_strdup_printf("background %s b%d", m->name, spec->batch);
  StOptions bo;
  st_options_copy(&bo, o);
  bo.micro_batch = spec->batch;
  bo.accumulation = 1;
  StDpFrame f = {.program = st_program_new(name), .model = m, .options = &bo, .world = world};
  st_state_bytes(&bo, &f.bytes);
  StProgram *p = f.program;
  f.compute = background_stream(p, "background", policy);
  const int last = m->n_layers - 1;
  const StData data[3] = {ST_DATA_PARAMS, ST_DATA_GRADS, ST_DATA_OPTIM};
  const StMemCategory cat[3] = {ST_MEM_PARAMS, ST_MEM_GRADS, ST_MEM_OPTIMIZER};
  const int per[3] = {f.bytes.weight, f.bytes.grad, f.bytes.optimizer};
  const char *what[3] = {"params", "grads", "optimizer states"};
  for (int c = 0; c < 3; c++) {
    uint32_t id = st_program_add_buffer(p, what[c], cat[c], m->params * per[c], TRUE);
    st_program_buffer_holds(p, id, data[c], 0, last, -1, 1);
  }
  g_autoptr(GArray) buckets = st_grad_buckets(m, o->bucket_bytes, f.bytes.grad);
  BgSync sync = {&f, -1, (const StBucket *)buckets->data, (int)buckets->len, 0, UINT32_MAX};
  if (spec->dp)
    sync.sync_stream = background_stream(p, "background sync", policy);
  StPassHooks hooks = {&sync, NULL, spec->dp ? bg_after_pass : NULL};
  st_dp_emit_micro_batch(&f, 0, &hooks);
  StOp step = st_op_elementwise(f.compute, ST_PASS_OPTIM, -1, m->params,
                                m->params * f.bytes.optim_traffic);
  st_program_begin(p, &step);
  if (sync.last_reduce != UINT32_MAX)
    st_program_after(p, sync.last_reduce);
  st_program_commit(p);
  st_options_clear(&bo);
  return p;
}

/* ---- assembling -------------------------------------------------------------- */

/* A schedule with the foreground's ranks, communicators and programs (taken
 * from `fg`), its streams raised to high priority, and `extra` more ranks on
 * `placement_extra`. */
static StSchedule *
adopt_foreground(StSchedule *fg, int extra, const int32_t *placement_extra)
{
  int R = fg->n_ranks, n = R + extra;
  g_autofree int32_t *placement = g_new(int32_t, n);
  for (int r = 0; r < R; r++)
    placement[r] = fg->ranks[r].device;
  if (extra > 0)
    memcpy(placement + R, placement_extra, sizeof(int32_t) * extra);
  StSchedule *s = st_schedule_new(st_model_copy(fg->model), st_cluster_copy(fg->cluster), n,
                                  placement);
  g_autofree int32_t *color = g_new(int32_t, n);
  for (guint c = 0; c < fg->comms->len; c++) {
    const StComm *comm = st_schedule_comm(fg, c);
    for (int r = 0; r < n; r++)
      color[r] = r < R ? comm->group_of[r] : -1;
    st_schedule_add_comm(s, comm->name, color);
  }
  while (fg->programs->len > 0) {
    StProgram *p = g_ptr_array_steal_index(fg->programs, 0);
    for (guint k = 0; k < p->streams->len; k++)
      g_array_index(p->streams, StStream, k).priority += 1;
    st_schedule_add_program(s, p);
  }
  /* The samples each rank computes (a pipeline's stages share their
   * replica's) and SAMO's mask (settings.sparsity) are the foreground's:
   * the executor reads both. */
  for (int r = 0; r < R; r++) {
    s->ranks[r].program = fg->ranks[r].program;
    s->ranks[r].start_ns = fg->ranks[r].start_ns;
    s->ranks[r].replica = fg->ranks[r].replica;
  }
  s->steps = fg->steps;
  s->warmup_scale = fg->warmup_scale;
  s->settings = (StSettings){
    .precision = fg->settings.precision,
    .optimizer = fg->settings.optimizer,
    .micro_batch = fg->settings.micro_batch,
    .accumulation = fg->settings.accumulation,
    .global_batch = fg->settings.global_batch,
    .sparsity = fg->settings.sparsity,
  };
  for (guint i = 0; i < fg->notes->len; i++) {
    const StNote *note = &g_array_index(fg->notes, StNote, i);
    if (note->text != NULL)
      st_schedule_note_text(s, note->key, note->text);
    else
      st_schedule_note_number(s, note->key, note->number);
  }
  return s;
}

static StSchedule *
build(const StStrategyInput *in, GError **error)
{
  const StOptions *o = in->options;
  g_autoptr(GPtrArray) specs = g_ptr_array_new_with_free_func(bg_spec_free);
  if (o->mux_background != NULL && !parse_background(o->mux_background, specs, error))
    return NULL;
  g_autoptr(GPtrArray) models = g_ptr_array_new_with_free_func((GDestroyNotify)st_model_free);
  for (guint k = 0; k < specs->len; k++) {
    const BgSpec *b = g_ptr_array_index(specs, k);
    StModel *m = load_background_model(b->model, in->model, error);
    if (m == NULL)
      return NULL;
    g_ptr_array_add(models, m);
  }

  /* The foreground, with its alone steps and the transition step first. */
  const char *fg_name = FOREGROUNDS[CLAMP(o->mux_foreground, 0, 2)];
  StOptions fo;
  st_options_copy(&fo, o);
  fo.steps = o->steps > 0 ? ALONE_STEPS + 1 + o->steps : 0; /* 0: auto */
  StStrategyInput fin = {in->model, in->cluster, in->profile, &fo};
  g_autoptr(StSchedule) fg = st_strategy_find(fg_name)->build(&fin, error);
  st_options_clear(&fo);
  if (fg == NULL) {
    g_prefix_error(error, "multiplex: foreground %s: ", fg_name);
    return NULL;
  }
  g_assert(fg->jobs->len == 0);

  int D = fg->n_devices, K = (int)specs->len;
  g_autofree int32_t *placement = g_new(int32_t, (gsize)K * D);
  for (int i = 0; i < K * D; i++)
    placement[i] = i % D;
  int R = fg->n_ranks;
  StSchedule *s = adopt_foreground(fg, K * D, placement);
  /* Steady steps come after the alone and start steps; admission's moving
   * averages settle over a few more. */
  s->warmup_steps = ALONE_STEPS + 1;
  s->warmup_scale += ALONE_STEPS + 1;

  StAdmissionPolicy policy;
  admission_policy(o, &policy);
  g_autoptr(GString) jobs = g_string_new(NULL);
  for (int k = 0; k < K; k++) {
    const BgSpec *b = g_ptr_array_index(specs, k);
    StModel *m = g_ptr_array_steal_index(models, 0);
    g_autofree char *label = g_strdup_printf("%s:b%d:%s", m->name, b->batch,
                                             b->dp ? "dp" : "local");
    g_string_append_printf(jobs, "%s%s", k ? "," : "", label);
    g_autofree char *what = g_strdup_printf("background %s: %s", b->dp ? "dp" : "local",
                                            b->dp ? "one copy over every GPU"
                                                  : "a copy on each GPU");
    StSettings bs = {
      .strategy = (char *)(b->dp ? "dp" : "local"),
      .description = what,
      .precision = o->precision,
      .optimizer = o->optimizer,
      .micro_batch = b->batch,
      .accumulation = 1,
      .global_batch = (int64_t)b->batch * (b->dp ? D : 1),
    };
    int job = st_schedule_add_job(s, label, m, &bs);
    g_autofree int32_t *color = g_new(int32_t, s->n_ranks);
    for (int r = 0; r < s->n_ranks; r++)
      color[r] = r >= R + k * D && r < R + (k + 1) * D ? (b->dp ? 0 : r - R - k * D) : -1;
    g_autofree char *comm_name = g_strdup_printf("background %d", job);
    int world = st_schedule_add_comm(s, comm_name, color);
    StProgram *p = background_program(st_schedule_job_model(s, job), b, world, o, &policy);
    p->job = job;
    int id = st_schedule_add_program(s, p);
    for (int d = 0; d < D; d++)
      s->ranks[R + k * D + d].program = id;
  }

  s->settings.strategy = g_strdup("multiplex");
  g_autofree char *multiplexed =
    o->steps > 0 ? g_strdup_printf("%d", o->steps) : g_strdup("until steady,");
  s->settings.description =
    g_strdup_printf("multiplex: %s foreground (%s) + background %s on %d GPUs; %d steps alone, "
                    "1 to start, %s multiplexed",
                    fg_name, fg->settings.description ? fg->settings.description : "",
                    K > 0 ? jobs->str : "none", D, ALONE_STEPS, multiplexed);
  st_schedule_note_text(s, "foreground", fg_name);
  st_schedule_note_text(s, "background", K > 0 ? jobs->str : "none");
  st_schedule_note_number(s, "alone_steps", ALONE_STEPS);
  st_schedule_note_number(s, "piece_us", policy.piece_ns / 1e3);
  st_schedule_note_number(s, "slowdown_limit", policy.slowdown_limit);
  st_schedule_note_number(s, "long_recv_us", policy.long_recv_ns / 1e3);
  st_schedule_note_number(s, "bg_pieces", policy.bg_pieces);
  st_schedule_note_number(s, "bg_pieces_alone", policy.bg_pieces_alone);
  st_schedule_note_number(s, "fg_pieces", policy.fg_pieces);
  return s;
}

static const StStrategyKnob KNOBS[] = {
  {"foreground", "burst,dp"},
  {"recompute", NULL},  /* the foreground's */
  {"recompute-every", NULL},
  {"recompute-ops", NULL},
  {"zero-stage", NULL}, /* a zero foreground's */
  {NULL},
};

/* The foreground's: the background jobs train models of their own. */
static StUpdate
update(const StOptions *o)
{
  const StStrategy *fg = st_strategy_find(FOREGROUNDS[CLAMP(o->mux_foreground, 0, 2)]);
  StUpdate u = fg->update(o);
  if (u.kind == ST_UPDATE_SYNC)
    u.what = "synchronous SGD/Adam (the foreground's; background jobs train models of their "
             "own)";
  return u;
}

/* Before building (StStrategy.estimate): the foreground's memory bound.
 * Its programs run unchanged beside the background's, on the same GPUs, so
 * whatever it surely holds at once is held there too. No time bound: the
 * background slows it. */
static gboolean
estimate(const StStrategyInput *in, StEstimate *est, GError **error)
{
  const StStrategy *fg = st_strategy_find(FOREGROUNDS[CLAMP(in->options->mux_foreground, 0, 2)]);
  StEstimate alone = *est;
  if (fg->estimate == NULL || !fg->estimate(in, &alone, NULL))
    return TRUE;
  est->peak_bytes = alone.peak_bytes;
  est->refuse_in_turn = TRUE; /* in its wave, where building found it over: same waves */
  return TRUE;
}

const StStrategy st_strategy_multiplex = {
  .name = "multiplex",
  .summary = "DeepPool GPU multiplexing: a foreground job on high-priority streams, background "
             "jobs admitted in small pieces on low-priority streams",
  .citation = "Park et al., Efficient Strong Scaling Through Burst Parallel Training "
              "(DeepPool), MLSys 2022",
  .build = build,
  .estimate = estimate,
  .knobs = KNOBS,
  .update = update,
};
