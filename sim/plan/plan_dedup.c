/* plan_dedup.c: a fingerprint of a schedule as the engine sees it, so that
 * configurations whose options do not change what runs (an option a
 * strategy ignores, such as gradient buckets for one that reduces per
 * stage) are simulated once (see plan.h).
 *
 * What goes in is everything the simulation and the planner's numbers read:
 * the cluster's shape, the steps and warm-up, the settings the cost models
 * read (precision, optimizer, batch, framework, memory format,
 * recomputation), the jobs, devices, ranks (device, program, start), the
 * communicators' groups, and every program's streams (priorities), buffers
 * (category, persistence, size), ops (every field but the label), their
 * dependencies and memory effects; plus the communication algorithm. Names,
 * descriptions, labels and notes are left out: they change no number.
 *
 * Two independent 64-bit hashes over the same values make the 128-bit key;
 * O(ops + dependencies + ranks + communicator members). The first
 * configuration of a set with one key to be built is simulated; the others
 * copy its results.
 */
#include "plan/plan_private.h"

#include <string.h>

typedef struct {
  guint64 a, b;
} Hash;

/* Two lanes with different multipliers and shifts, one value at a time. */
static inline void
mix(Hash *h, int64_t value)
{
  guint64 v = (guint64)value;
  h->a = (h->a ^ v) * 0x100000001b3ULL;
  h->a ^= h->a >> 29;
  h->b = (h->b + v + 0x9e3779b97f4a7c15ULL) * 0xbf58476d1ce4e5b9ULL;
  h->b = (h->b << 31) | (h->b >> 33);
}

static void
mix_text(Hash *h, const char *text)
{
  mix(h, text != NULL ? (int64_t)strlen(text) : -1);
  for (const char *p = text; p != NULL && *p != '\0'; p++)
    mix(h, (unsigned char)*p);
}

/* Every setting the engine and its cost models read (sched/work.c,
 * cost/, engine/): a layout whose ops are the same but whose kernels cost
 * differently (--memory-format, --framework) is another schedule. */
static void
mix_settings(Hash *h, const StSettings *st)
{
  mix(h, st->precision);
  mix(h, st->optimizer);
  mix(h, st->micro_batch);
  mix(h, st->global_batch);
  mix_text(h, st->compute_model);
  mix_text(h, st->framework);
  mix(h, st->nchw);
  mix(h, st->recompute);
  mix(h, st->recompute_ops);
  mix(h, st->gather_bucket_bytes);
}

/* A model by its name and totals: within one search the main model is the
 * same for every configuration, and jobs beside it are told apart by these. */
static void
mix_model(Hash *h, const StModel *m)
{
  mix_text(h, m->name);
  mix(h, m->n_layers);
  mix(h, m->params);
  mix(h, m->act_bytes);
  mix(h, (int64_t)m->fwd_flops);
  mix(h, (int64_t)m->bwd_flops);
}

static void
mix_program(Hash *h, const StProgram *p)
{
  mix(h, p->job);
  mix(h, p->streams->len);
  for (guint i = 0; i < p->streams->len; i++)
    mix(h, g_array_index(p->streams, StStream, i).priority);
  mix(h, p->buffers->len);
  for (guint i = 0; i < p->buffers->len; i++) {
    const StBuffer *b = &g_array_index(p->buffers, StBuffer, i);
    mix(h, b->category);
    mix(h, b->persistent);
    mix(h, b->bytes);
  }
  mix(h, p->ops->len);
  for (guint i = 0; i < p->ops->len; i++) {
    const StOp *op = st_program_op(p, i);
    const int64_t fields[] = {op->kind,  op->sub,   op->stream, op->layer, op->micro,
                              op->batch, op->comm,  op->peer,   op->tag,   op->version,
                              op->bytes, op->elems, op->n_deps, op->n_alloc, op->n_free};
    for (gsize f = 0; f < G_N_ELEMENTS(fields); f++)
      mix(h, fields[f]);
    const StDep *deps = st_program_deps(p, op);
    for (guint d = 0; d < op->n_deps; d++) {
      mix(h, deps[d].op);
      mix(h, deps[d].step_offset);
    }
    const uint32_t *mem = st_program_allocs(p, op);
    for (guint k = 0; k < (guint)op->n_alloc + op->n_free; k++)
      mix(h, mem[k]);
  }
}

void
st_plan_fingerprint(const StSchedule *s, const char *comm_algo, guint64 out[2])
{
  Hash h = {0xcbf29ce484222325ULL, 0x2545f4914f6cdd1dULL};
  mix_text(&h, comm_algo);
  mix(&h, s->cluster->nodes);
  mix(&h, s->cluster->gpus_per_node);
  mix(&h, s->cluster->gpus);
  mix(&h, s->steps);
  mix(&h, s->warmup_steps);
  mix_settings(&h, &s->settings);
  mix_model(&h, s->model);
  mix(&h, s->jobs->len);
  for (guint j = 0; j < s->jobs->len; j++) {
    const StJob *job = g_ptr_array_index(s->jobs, j);
    mix_model(&h, job->model);
    mix_settings(&h, &job->settings);
  }
  mix(&h, s->n_devices);
  mix(&h, s->n_ranks);
  for (int r = 0; r < s->n_ranks; r++) {
    mix(&h, s->ranks[r].device);
    mix(&h, s->ranks[r].program);
    mix(&h, s->ranks[r].start_ns);
  }
  mix(&h, s->comms->len);
  for (guint c = 0; c < s->comms->len; c++) {
    const StComm *comm = g_ptr_array_index(s->comms, c);
    mix(&h, comm->n_groups);
    for (int g = 0; g <= comm->n_groups; g++)
      mix(&h, comm->offsets[g]);
    for (int k = 0; k < comm->offsets[comm->n_groups]; k++)
      mix(&h, comm->members[k]);
  }
  mix(&h, s->programs->len);
  for (guint p = 0; p < s->programs->len; p++)
    mix_program(&h, g_ptr_array_index(s->programs, p));
  out[0] = h.a;
  out[1] = h.b;
}

/* ---- configurations that share a schedule ---------------------------------- */

static guint
key_hash(gconstpointer p)
{
  return (guint)((const guint64 *)p)[0];
}

static gboolean
key_equal(gconstpointer a, gconstpointer b)
{
  return memcmp(a, b, 2 * sizeof(guint64)) == 0;
}

GHashTable *
st_plan_fingerprints_new(void)
{
  return g_hash_table_new(key_hash, key_equal);
}

int
st_plan_fingerprints_first(GHashTable *first, const StPlan *plan, int i)
{
  gpointer rep = NULL;
  if (g_hash_table_lookup_extended(first, plan->points[i].fingerprint, NULL, &rep))
    return GPOINTER_TO_INT(rep);
  g_hash_table_insert(first, (gpointer)plan->points[i].fingerprint, GINT_TO_POINTER(i));
  return i;
}

void
st_plan_copy_result(StPlanPoint *dst, const StPlanPoint *src)
{
  dst->status = src->status;
  dst->simulated = src->simulated;
  g_free(dst->reason);
  dst->reason = g_strdup(src->reason);
  dst->unbuilt = src->unbuilt;
  dst->unbuilt_who = src->unbuilt_who;
  dst->unbuilt_bound = src->unbuilt_bound;
  dst->unbuilt_best = src->unbuilt_best;
  g_clear_pointer(&dst->sim, g_free);
  /* the same schedule runs the same training run: its step too (the run
   * objectives rank on it; the step's power source is not kept) */
  if (src->sim != NULL)
    dst->sim = g_memdup2(src->sim, sizeof *src->sim);
  dst->step_time_ns = src->step_time_ns;
  dst->samples_per_s = src->samples_per_s;
  dst->gpus_used = src->gpus_used;
  dst->peak_bytes = src->peak_bytes;
  dst->device_bytes = src->device_bytes;
}
