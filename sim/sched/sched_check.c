/* sched_check.c: st_schedule_check (see sched.h).
 *
 * Programs are shared: 1024 data-parallel ranks may run one program. So the
 * properties of a program alone (indices, order, buffers) are checked once
 * per program, and only what depends on the rank (membership, peers, the
 * pairing of sends and receives, the agreement of collectives) per rank.
 *
 * Complexity, with R ranks, P programs, N ops, E dependencies and M memory
 * entries over all programs, C communicators:
 *   - per program: O(N + E + M), plus the buffer reachability test of
 *     O((N + E) * ceil(Q / 64)) for Q buffers (64 buffers per bit-parallel
 *     sweep, each sweep only over the ops between their allocations and frees);
 *   - per rank: O(communicators its program uses + its p2p ops);
 *   - sends and receives: O(total p2p ops over all ranks), hashed by
 *     (sender, receiver, tag);
 *   - collectives: O(sum of group sizes) <= O(R * C), plus one sequence
 *     comparison per distinct (program, program, communicator) that meet in
 *     a group; ranks with the same program agree by construction.
 * Memory: O(P * C + N) for the per-program collective index.
 * 1024 ranks sharing a 500-op program check in well under a millisecond.
 */
#include "sched/sched.h"

#include <stdarg.h>
#include <string.h>

#include "base/error.h"

/* What the cross-rank checks need of one program, built once per program. */
typedef struct {
  int32_t first_rank;  /* lowest rank running it, -1 when none */
  GArray *uses;        /* Use: the communicators its ops use, with the first op using each */
  GArray *p2p;         /* uint32_t: its SEND/RECV ops in array order */
  int32_t *coll_off;   /* [n_comms + 1]: collectives on comm c: coll_ops[off[c] .. off[c + 1]) */
  uint32_t *coll_ops;  /* op indices, by comm then array order */
} ProgramIndex;

typedef struct {
  const StSchedule *s;
  ProgramIndex *prog; /* [n_programs] */
} Check;

typedef struct {
  int32_t comm;
  uint32_t op;
} Use;

static void
check_clear(Check *k)
{
  for (guint p = 0; p < k->s->programs->len; p++) {
    ProgramIndex *x = &k->prog[p];
    g_clear_pointer(&x->uses, g_array_unref);
    g_clear_pointer(&x->p2p, g_array_unref);
    g_free(x->coll_off);
    g_free(x->coll_ops);
  }
  g_free(k->prog);
}

static gboolean
sub_valid(const StOp *op)
{
  switch ((StOpKind)op->kind) {
  case ST_OP_COMP:
    return op->sub > ST_PASS_INVALID && op->sub < ST_PASS_N;
  case ST_OP_COMM_COLL:
    return op->sub > ST_COLL_INVALID && op->sub < ST_COLL_N;
  case ST_OP_COPY:
    return op->sub > ST_COPY_INVALID && op->sub < ST_COPY_N;
  case ST_OP_COMM_SEND:
  case ST_OP_COMM_RECV:
    return TRUE;
  default:
    return FALSE;
  }
}

/* st_op_describe, except for ops whose kind or label it cannot name. */
static char *
describe(const StSchedule *s, const StProgram *p, uint32_t op)
{
  const StOp *o = st_program_op(p, op);
  if (!sub_valid(o) || o->label >= (int32_t)p->labels->len)
    return g_strdup_printf("kind %d/%d", o->kind, o->sub);
  return st_op_describe(s, p, op);
}

static char *
where(const StSchedule *s, int rank, int program, uint32_t op)
{
  const StProgram *p = g_ptr_array_index(s->programs, program);
  g_autofree char *what = describe(s, p, op);
  if (rank < 0)
    return g_strdup_printf("program '%s' (run by no rank), op %u (%s)", p->name, op, what);
  return g_strdup_printf("rank %d, program '%s', op %u (%s)", rank, p->name, op, what);
}

static gboolean G_GNUC_PRINTF(2, 3)
fail(GError **error, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error_literal(error, ST_SCHED_ERROR, ST_ERROR_INVALID, message);
  return FALSE;
}

/* ---- per program ------------------------------------------------------------ */

static gboolean
is_comm(const StOp *op)
{
  return op->kind >= ST_OP_COMM_COLL && op->kind <= ST_OP_COMM_RECV;
}

static gboolean
is_layer_pass(const StOp *op)
{
  return op->kind == ST_OP_COMP &&
         (op->sub == ST_PASS_FWD || st_pass_is_backward((StPass)op->sub) ||
          op->sub == ST_PASS_FWDBWD || op->sub == ST_PASS_RECOMPUTE);
}

/* Indices, kinds and same-step order of one op; NULL when fine, else why. */
static char *
op_problem(const StSchedule *s, const StProgram *p, uint32_t i)
{
  const StOp *op = st_program_op(p, i);
  if (op->kind <= ST_OP_INVALID || op->kind >= ST_OP_N)
    return g_strdup_printf("invalid op kind %d", op->kind);
  if (!sub_valid(op))
    return g_strdup_printf("invalid %s sub-kind %d", st_op_kind_name(op->kind), op->sub);
  if (op->stream >= p->streams->len)
    return g_strdup_printf("stream %u is out of range (the program has %u streams)",
                           op->stream, p->streams->len);
  const StModel *model = st_program_model(s, p);
  if (op->layer < -1 || op->layer >= model->n_layers)
    return g_strdup_printf("layer %d is out of range (the model has %d layers)", op->layer,
                           model->n_layers);
  if (op->data >= ST_DATA_N)
    return g_strdup_printf("invalid data kind %d", op->data);
  if (op->data != ST_DATA_NONE &&
      (op->layer < 0 || op->layer_last < op->layer || op->layer_last >= model->n_layers))
    return g_strdup_printf("moves %s of layers %d-%d, not a range of the model's %d layers",
                           st_data_name(op->data), op->layer, op->layer_last, model->n_layers);
  if (op->label < -1 || op->label >= (int32_t)p->labels->len)
    return g_strdup_printf("label %d is out of range (the program has %u labels)", op->label,
                           p->labels->len);
  if (op->comm < -1 || op->comm >= (int32_t)s->comms->len || (is_comm(op) && op->comm < 0))
    return g_strdup_printf("communicator %d is out of range (the schedule has %u)", op->comm,
                           s->comms->len);
  if (is_comm(op) && op->kind != ST_OP_COMM_COLL && op->peer < 0)
    return g_strdup_printf("peer %d is out of range", op->peer);
  if (is_layer_pass(op) && (op->batch <= 0 || op->layer < 0))
    return g_strdup_printf("a layer pass needs a batch > 0 and a layer (batch %d, layer %d)",
                           op->batch, op->layer);
  if (op->bytes < 0 || op->elems < 0 || op->batch < 0)
    return g_strdup("negative bytes, elems or batch");
  if (op->part > 0) {
    double share[ST_TP_PARTS_MAX];
    int parts = op->layer >= 0 && (op->kind == ST_OP_COMM_COLL || is_layer_pass(op))
                  ? st_layer_tp_parts(&model->layers[op->layer], ST_PASS_FWD, share)
                  : 0;
    if (op->part > parts)
      return g_strdup_printf("part %d of a pass of layer %d, which runs its passes in %d "
                             "part%s", op->part, op->layer, parts, parts == 1 ? "" : "s");
  }
  if (op->kind == ST_OP_COMP && op->tag != -1) {
    int part = is_layer_pass(op) ? st_layer_cp_part(&model->layers[op->layer]) : -1;
    int step = st_op_cp_step(op), steps = st_op_cp_steps(op);
    if (part < 0 || part != op->part || steps < 3 || step >= steps)
      return g_strdup_printf("step %d of %d (tag %d) of a pass of layer %d, part %d: not a "
                             "part a context-parallel rank cuts in steps",
                             step, steps, op->tag, op->layer, op->part);
  }
  gboolean moves_samples = (op->kind == ST_OP_COMM_SEND || op->kind == ST_OP_COMM_RECV ||
                            op->kind == ST_OP_COPY) &&
                           (op->data == ST_DATA_OUTPUT || op->data == ST_DATA_INPUT_GRAD);
  if (op->sample_stride > 0 && ((!is_layer_pass(op) && !moves_samples) || op->batch <= 0))
    return g_strdup_printf("samples [%d, %d] on an op that is neither a layer pass nor a move "
                           "of activations, or with no batch (%d)",
                           op->sample_first, op->sample_stride, op->batch);
  if ((guint64)op->dep_first + op->n_deps > p->deps->len ||
      (guint64)op->mem_first + op->n_alloc + op->n_free > p->mem->len)
    return g_strdup("dependency or memory list out of the program's arrays");
  const StDep *d = st_program_deps(p, op);
  for (uint32_t j = 0; j < op->n_deps; j++) {
    if (d[j].step_offset == 0 && d[j].op >= i)
      return g_strdup_printf("dependency on op %u, which does not come before it "
                             "(cycle or forward dependency)", d[j].op);
    if (d[j].step_offset > 0 || d[j].op >= p->ops->len)
      return g_strdup_printf("dependency on op %u of step %+d does not exist", d[j].op,
                             d[j].step_offset);
  }
  const uint32_t *mem = st_program_allocs(p, op);
  for (uint32_t j = 0; j < (uint32_t)op->n_alloc + op->n_free; j++)
    if (mem[j] >= p->buffers->len)
      return g_strdup_printf("buffer %u is out of range (the program has %u buffers)", mem[j],
                             p->buffers->len);
  return NULL;
}

static const char *
buffer_name(const StProgram *p, uint32_t b)
{
  return g_array_index(p->buffers, StBuffer, b).name;
}

typedef struct {
  uint32_t alloc, free, buffer;
} Span;

static int
span_by_alloc(gconstpointer a, gconstpointer b)
{
  const Span *x = a, *y = b;
  return x->alloc != y->alloc ? (x->alloc < y->alloc ? -1 : 1)
                              : (x->buffer < y->buffer ? -1 : x->buffer > y->buffer);
}

/* Which spans' free op is not reached from their alloc op through
 * same-step dependencies and stream order. 64 spans per sweep, one bit each:
 * reach[i] holds the bits of the allocations that op i runs after. Returns
 * the lowest failing buffer, or -1. */
static int64_t
unreached(const StProgram *p, Span *spans, guint n)
{
  if (n == 0)
    return -1;
  guint n_ops = p->ops->len;
  g_autofree int32_t *prev = g_new(int32_t, n_ops);
  g_autofree int32_t *last = g_new(int32_t, p->streams->len);
  for (guint s = 0; s < p->streams->len; s++)
    last[s] = -1;
  for (guint i = 0; i < n_ops; i++) {
    const StOp *op = st_program_op(p, i);
    prev[i] = last[op->stream];
    last[op->stream] = (int32_t)i;
  }
  qsort(spans, n, sizeof(Span), span_by_alloc);
  g_autofree guint64 *reach = g_new(guint64, n_ops);
  int64_t worst = -1;
  for (guint first = 0; first < n; first += 64) {
    guint count = MIN(64, n - first);
    uint32_t lo = spans[first].alloc, hi = lo;
    for (guint j = 0; j < count; j++)
      hi = MAX(hi, spans[first + j].free);
    memset(reach + lo, 0, sizeof(guint64) * (hi - lo + 1));
    for (guint j = 0; j < count; j++)
      reach[spans[first + j].alloc] |= G_GUINT64_CONSTANT(1) << j;
    for (uint32_t i = lo; i <= hi; i++) {
      const StOp *op = st_program_op(p, i);
      guint64 bits = reach[i];
      if (prev[i] >= (int32_t)lo)
        bits |= reach[prev[i]];
      const StDep *d = st_program_deps(p, op);
      for (uint32_t k = 0; k < op->n_deps; k++)
        if (d[k].step_offset == 0 && d[k].op >= lo)
          bits |= reach[d[k].op];
      reach[i] = bits;
    }
    for (guint j = 0; j < count; j++) {
      const Span *sp = &spans[first + j];
      if (!(reach[sp->free] & (G_GUINT64_CONSTANT(1) << j)) &&
          (worst < 0 || sp->buffer < worst))
        worst = sp->buffer;
    }
  }
  return worst;
}

/* Buffers with slots (versions alternating by step) are persistent, hold
 * data, and the buffers of the same data and layers have slots 0 .. n-1,
 * each once. */
static gboolean
check_slots(const StProgram *p, guint b, GError **error)
{
  const StBuffer *buf = &g_array_index(p->buffers, StBuffer, b);
  int n = 0, same = 0;
  for (guint j = 0; j < p->buffers->len; j++) {
    const StBuffer *o = &g_array_index(p->buffers, StBuffer, j);
    if (o->slot >= 0 && o->data == buf->data && o->layer == buf->layer &&
        o->layer_last == buf->layer_last) {
      n++;
      same += o->slot == buf->slot;
    }
  }
  if (!buf->persistent || buf->data == ST_DATA_NONE || buf->slot >= n || same != 1)
    return fail(error, "program '%s': buffer %u '%s' is slot %d of %d alternating buffers of "
                "its data: slots must be persistent, hold data, and number 0 .. n-1 once each",
                p->name, b, buf->name, buf->slot, n);
  return TRUE;
}

/* Each non-persistent buffer allocated once and freed once per step, by an
 * op that runs after the allocating one; persistent ones never listed. */
static gboolean
check_buffers(const StSchedule *s, int rank, int pi, GError **error)
{
  const StProgram *p = g_ptr_array_index(s->programs, pi);
  guint nb = p->buffers->len;
  g_autofree int64_t *alloc = g_new(int64_t, nb);
  g_autofree int64_t *freed = g_new(int64_t, nb);
  const StModel *model = st_program_model(s, p);
  for (guint b = 0; b < nb; b++) {
    alloc[b] = freed[b] = -1;
    const StBuffer *buf = &g_array_index(p->buffers, StBuffer, b);
    if (buf->data >= ST_DATA_N || buf->parts < 1 ||
        (buf->data != ST_DATA_NONE &&
         (buf->layer < 0 || buf->layer_last < buf->layer || buf->layer_last >= model->n_layers)))
      return fail(error, "program '%s': buffer %u '%s' holds %s of layers %d-%d in %d parts, "
                  "not a range of the model's %d layers",
                  p->name, b, buf->name, buf->data < ST_DATA_N ? st_data_name(buf->data) : "?",
                  buf->layer, buf->layer_last, buf->parts, model->n_layers);
    if (buf->slot >= 0 && !check_slots(p, b, error))
      return FALSE;
  }
  for (uint32_t i = 0; i < p->ops->len; i++) {
    const StOp *op = st_program_op(p, i);
    const uint32_t *mem = st_program_allocs(p, op);
    for (uint32_t j = 0; j < (uint32_t)op->n_alloc + op->n_free; j++) {
      uint32_t b = mem[j];
      gboolean is_alloc = j < op->n_alloc;
      int64_t *seen = is_alloc ? &alloc[b] : &freed[b];
      const char *verb = is_alloc ? "allocates" : "frees";
      g_autofree char *at = NULL;
      if (g_array_index(p->buffers, StBuffer, b).persistent) {
        at = where(s, rank, pi, i);
        return fail(error, "%s: %s persistent buffer %u '%s'", at, verb, b, buffer_name(p, b));
      }
      if (*seen >= 0) {
        at = where(s, rank, pi, i);
        return fail(error, "%s: %s buffer %u '%s' a second time in one step (first by op %"
                    G_GINT64_FORMAT ")", at, verb, b, buffer_name(p, b), *seen);
      }
      *seen = i;
    }
  }
  g_autoptr(GArray) spans = g_array_new(FALSE, FALSE, sizeof(Span));
  for (guint b = 0; b < nb; b++) {
    if (g_array_index(p->buffers, StBuffer, b).persistent)
      continue;
    g_autofree char *at = NULL;
    if (alloc[b] < 0 && freed[b] < 0) {
      at = rank < 0 ? g_strdup_printf("program '%s' (run by no rank)", p->name)
                    : g_strdup_printf("rank %d, program '%s'", rank, p->name);
      return fail(error, "%s: buffer %u '%s' is never allocated nor freed (and not "
                  "persistent)", at, b, buffer_name(p, b));
    }
    if (alloc[b] < 0) {
      at = where(s, rank, pi, (uint32_t)freed[b]);
      return fail(error, "%s: frees buffer %u '%s', which is never allocated", at, b,
                  buffer_name(p, b));
    }
    if (freed[b] < 0) {
      at = where(s, rank, pi, (uint32_t)alloc[b]);
      return fail(error, "%s: allocates buffer %u '%s', which is never freed (and not "
                  "persistent)", at, b, buffer_name(p, b));
    }
    if (freed[b] < alloc[b]) {
      at = where(s, rank, pi, (uint32_t)freed[b]);
      return fail(error, "%s: frees buffer %u '%s' before its allocation by op %"
                  G_GINT64_FORMAT, at, b, buffer_name(p, b), alloc[b]);
    }
    if (freed[b] > alloc[b]) {
      Span sp = {(uint32_t)alloc[b], (uint32_t)freed[b], b};
      g_array_append_val(spans, sp);
    }
  }
  int64_t bad = unreached(p, (Span *)(void *)spans->data, spans->len);
  if (bad >= 0) {
    g_autofree char *at = where(s, rank, pi, (uint32_t)freed[bad]);
    g_autofree char *by = describe(s, p, (uint32_t)alloc[bad]);
    return fail(error, "%s: frees buffer %" G_GINT64_FORMAT " '%s', but does not run after "
                "its allocation by op %" G_GINT64_FORMAT " (%s): no dependency or stream "
                "order leads there", at, bad, buffer_name(p, (uint32_t)bad), alloc[bad], by);
  }
  return TRUE;
}

/* Checks program `pi` alone and indexes its communication ops. */
static gboolean
check_program(Check *k, int pi, GError **error)
{
  const StSchedule *s = k->s;
  const StProgram *p = g_ptr_array_index(s->programs, pi);
  ProgramIndex *x = &k->prog[pi];
  int rank = x->first_rank;
  if (p->building)
    return fail(error, "program '%s': an op is still being built (no st_program_commit)",
                p->name);
  if (p->job < 0 || p->job >= st_schedule_n_jobs(s))
    return fail(error, "program '%s': job %d is out of range (the schedule has %d jobs)",
                p->name, p->job, st_schedule_n_jobs(s));
  for (uint32_t i = 0; i < p->ops->len; i++) {
    g_autofree char *problem = op_problem(s, p, i);
    if (problem != NULL) {
      g_autofree char *at = where(s, rank, pi, i);
      return fail(error, "%s: %s", at, problem);
    }
  }
  if (!check_buffers(s, rank, pi, error))
    return FALSE;

  guint nc = s->comms->len;
  x->uses = g_array_new(FALSE, FALSE, sizeof(Use));
  x->p2p = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  int32_t *off = x->coll_off = g_new0(int32_t, nc + 1);
  g_autofree int64_t *first_use = g_new(int64_t, nc);
  for (guint c = 0; c < nc; c++)
    first_use[c] = -1;
  for (uint32_t i = 0; i < p->ops->len; i++) {
    const StOp *op = st_program_op(p, i);
    if (!is_comm(op))
      continue;
    if (first_use[op->comm] < 0) {
      first_use[op->comm] = i;
      Use u = {op->comm, i};
      g_array_append_val(x->uses, u);
    }
    if (op->kind == ST_OP_COMM_COLL)
      off[op->comm + 1]++;
    else
      g_array_append_val(x->p2p, i);
  }
  for (guint c = 0; c < nc; c++)
    off[c + 1] += off[c];
  x->coll_ops = g_new(uint32_t, MAX(off[nc], 1));
  g_autofree int32_t *fill = g_new(int32_t, MAX(nc, 1));
  memcpy(fill, off, sizeof(int32_t) * nc);
  for (uint32_t i = 0; i < p->ops->len; i++) {
    const StOp *op = st_program_op(p, i);
    if (op->kind == ST_OP_COMM_COLL)
      x->coll_ops[fill[op->comm]++] = i;
  }
  return TRUE;
}

/* ---- across ranks ------------------------------------------------------------ */

/* Membership in every communicator the rank's program uses; p2p peers. */
static gboolean
check_rank(const Check *k, int r, GError **error)
{
  const StSchedule *s = k->s;
  int pi = s->ranks[r].program;
  const StProgram *p = g_ptr_array_index(s->programs, pi);
  const GArray *uses = k->prog[pi].uses;
  for (guint u = 0; u < uses->len; u++) {
    const Use *use = &g_array_index(uses, Use, u);
    const StComm *c = st_schedule_comm(s, use->comm);
    if (c->group_of[r] < 0) {
      g_autofree char *at = where(s, r, pi, use->op);
      return fail(error, "%s: rank %d is not a member of communicator '%s'", at, r, c->name);
    }
  }
  const GArray *p2p = k->prog[pi].p2p;
  for (guint j = 0; j < p2p->len; j++) {
    uint32_t i = g_array_index(p2p, uint32_t, j);
    const StOp *op = st_program_op(p, i);
    int peer = st_schedule_peer_rank(s, r, op->comm, op->peer);
    if (peer < 0 || peer == r) {
      const StComm *c = st_schedule_comm(s, op->comm);
      int g = c->group_of[r];
      g_autofree char *at = where(s, r, pi, i);
      if (peer < 0)
        return fail(error, "%s: peer %d is out of range: the group of rank %d in "
                    "communicator '%s' has %d members", at, op->peer, r, c->name,
                    c->offsets[g + 1] - c->offsets[g]);
      return fail(error, "%s: peer %d in communicator '%s' is rank %d itself", at, op->peer,
                  c->name, r);
    }
  }
  return TRUE;
}

typedef struct {
  int32_t sender, receiver, tag;
  GArray *sends, *recvs; /* uint32_t op indices, in issue order */
  guint next_send, next_recv;
} Channel;

static guint
channel_hash(gconstpointer key)
{
  const Channel *c = key;
  return (guint)c->sender * 2654435761u ^ (guint)c->receiver * 40503u ^ (guint)c->tag;
}

static gboolean
channel_equal(gconstpointer a, gconstpointer b)
{
  const Channel *x = a, *y = b;
  return x->sender == y->sender && x->receiver == y->receiver && x->tag == y->tag;
}

static void
channel_free(gpointer data)
{
  Channel *c = data;
  g_array_unref(c->sends);
  g_array_unref(c->recvs);
  g_free(c);
}

/* The channel of a SEND or RECV op of rank r (peers already checked). */
static Channel *
channel_of(GHashTable *channels, const StSchedule *s, int r, const StOp *op, gboolean create)
{
  int peer = st_schedule_peer_rank(s, r, op->comm, op->peer);
  gboolean send = op->kind == ST_OP_COMM_SEND;
  Channel key = {send ? r : peer, send ? peer : r, op->tag, NULL, NULL, 0, 0};
  Channel *c = g_hash_table_lookup(channels, &key);
  if (c == NULL && create) {
    c = g_new(Channel, 1);
    *c = key;
    c->sends = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    c->recvs = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    g_hash_table_add(channels, c);
  }
  return c;
}

/* The n-th send of a channel meets its n-th receive, with equal bytes. */
static gboolean
check_p2p(const Check *k, GError **error)
{
  const StSchedule *s = k->s;
  g_autoptr(GHashTable) channels = g_hash_table_new_full(channel_hash, channel_equal,
                                                         channel_free, NULL);
  for (int r = 0; r < s->n_ranks; r++) {
    const StProgram *p = st_schedule_program_of(s, r);
    const GArray *p2p = k->prog[s->ranks[r].program].p2p;
    for (guint j = 0; j < p2p->len; j++) {
      uint32_t i = g_array_index(p2p, uint32_t, j);
      const StOp *op = st_program_op(p, i);
      Channel *c = channel_of(channels, s, r, op, TRUE);
      g_array_append_val(op->kind == ST_OP_COMM_SEND ? c->sends : c->recvs, i);
    }
  }
  /* Second pass in rank and op order, so the first violation reported is
   * the first in that order. */
  for (int r = 0; r < s->n_ranks; r++) {
    int pi = s->ranks[r].program;
    const StProgram *p = g_ptr_array_index(s->programs, pi);
    const GArray *p2p = k->prog[pi].p2p;
    for (guint j = 0; j < p2p->len; j++) {
      uint32_t i = g_array_index(p2p, uint32_t, j);
      const StOp *op = st_program_op(p, i);
      Channel *c = channel_of(channels, s, r, op, FALSE);
      gboolean send = op->kind == ST_OP_COMM_SEND;
      guint n = send ? c->next_send++ : c->next_recv++;
      const GArray *other = send ? c->recvs : c->sends;
      int peer = send ? c->receiver : c->sender;
      if (n >= other->len) {
        g_autofree char *at = where(s, r, pi, i);
        return fail(error, "%s: %s #%u %s rank %d with tag %d has no matching %s "
                    "(rank %d posts %u)", at, send ? "send" : "receive", n + 1,
                    send ? "to" : "from", peer, c->tag, send ? "receive" : "send", peer,
                    other->len);
      }
      uint32_t pj = g_array_index(other, uint32_t, n);
      const StProgram *pp = st_schedule_program_of(s, peer);
      const StOp *match = st_program_op(pp, pj);
      if (match->bytes != op->bytes) {
        g_autofree char *at = where(s, r, pi, i);
        g_autofree char *them = where(s, peer, s->ranks[peer].program, pj);
        return fail(error, "%s: bytes mismatch: %s %" G_GINT64_FORMAT " bytes, but its "
                    "partner %s %s %" G_GINT64_FORMAT, at, send ? "sends" : "receives",
                    op->bytes, them, send ? "receives" : "sends", match->bytes);
      }
      /* Said samples (st_op_samples) are relative to each side's replica. */
      int64_t mine = (int64_t)s->ranks[r].replica + op->sample_first;
      int64_t theirs = (int64_t)s->ranks[peer].replica + match->sample_first;
      if (op->sample_stride != match->sample_stride ||
          (op->sample_stride > 0 && (mine != theirs || op->batch != match->batch))) {
        g_autofree char *at = where(s, r, pi, i);
        g_autofree char *them = where(s, peer, s->ranks[peer].program, pj);
        return fail(error, "%s: samples mismatch: %s %d samples from %" G_GINT64_FORMAT
                    " every %d, but its partner %s %s %d from %" G_GINT64_FORMAT " every %d",
                    at, send ? "sends" : "receives", op->batch, mine, op->sample_stride, them,
                    send ? "receives" : "sends", match->batch, theirs, match->sample_stride);
      }
    }
  }
  return TRUE;
}

/* Collectives of programs a and b on comm c, for ranks ra and rb. */
static gboolean
same_collectives(const Check *k, int c, int ra, int rb, GError **error)
{
  const StSchedule *s = k->s;
  int pa = s->ranks[ra].program, pb = s->ranks[rb].program;
  const StProgram *a = g_ptr_array_index(s->programs, pa);
  const StProgram *b = g_ptr_array_index(s->programs, pb);
  const ProgramIndex *ia = &k->prog[pa], *ib = &k->prog[pb];
  const uint32_t *xa = ia->coll_ops + ia->coll_off[c], *xb = ib->coll_ops + ib->coll_off[c];
  int na = ia->coll_off[c + 1] - ia->coll_off[c], nb = ib->coll_off[c + 1] - ib->coll_off[c];
  const char *name = st_schedule_comm(s, c)->name;
  for (int n = 0; n < MIN(na, nb); n++) {
    const StOp *oa = st_program_op(a, xa[n]), *ob = st_program_op(b, xb[n]);
    if (oa->sub != ob->sub || oa->bytes != ob->bytes) {
      g_autofree char *wa = where(s, ra, pa, xa[n]);
      g_autofree char *wb = where(s, rb, pb, xb[n]);
      return fail(error, "%s: collective #%d on communicator '%s' is %s of %" G_GINT64_FORMAT
                  " bytes, but on %s it is %s of %" G_GINT64_FORMAT " bytes (%s mismatch)",
                  wa, n + 1, name, st_coll_name(oa->sub), oa->bytes, wb,
                  st_coll_name(ob->sub), ob->bytes, oa->sub != ob->sub ? "kind" : "bytes");
    }
  }
  if (na != nb) {
    int more = na > nb ? ra : rb, fewer = na > nb ? rb : ra;
    int pm = s->ranks[more].program;
    g_autofree char *at = where(s, more, pm, na > nb ? xa[nb] : xb[na]);
    return fail(error, "%s: collective count mismatch on communicator '%s': rank %d issues %d "
                "collectives, rank %d issues %d; this one has no counterpart on rank %d", at,
                name, more, MAX(na, nb), fewer, MIN(na, nb), fewer);
  }
  return TRUE;
}

/* Every member of a group issues the same sequence of collectives on it.
 * Members are compared with the group's first; a pair of programs is
 * compared once per communicator. */
static gboolean
check_collectives(const Check *k, GError **error)
{
  const StSchedule *s = k->s;
  guint np = s->programs->len;
  g_autoptr(GHashTable) agreed = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
                                                       NULL);
  for (guint c = 0; c < s->comms->len; c++) {
    const StComm *comm = st_schedule_comm(s, (int)c);
    for (int g = 0; g < comm->n_groups; g++) {
      int ref = comm->members[comm->offsets[g]];
      int pref = s->ranks[ref].program;
      for (int m = comm->offsets[g] + 1; m < comm->offsets[g + 1]; m++) {
        int r = comm->members[m];
        int pr = s->ranks[r].program;
        if (pr == pref)
          continue;
        gint64 key = ((gint64)c * np + (guint)pref) * np + (guint)pr;
        if (g_hash_table_contains(agreed, &key))
          continue;
        if (!same_collectives(k, (int)c, ref, r, error))
          return FALSE;
        gint64 *stored = g_new(gint64, 1);
        *stored = key;
        g_hash_table_add(agreed, stored);
      }
    }
  }
  return TRUE;
}

gboolean
st_schedule_check(const StSchedule *s, GError **error)
{
  g_return_val_if_fail(s != NULL, FALSE);
  guint np = s->programs->len;
  if (s->steps < 0)
    return fail(error, "steps is %d, expected at least 1 (or 0: until steady)", s->steps);
  if (s->warmup_scale < 1)
    return fail(error, "warmup_scale is %d, expected at least 1", s->warmup_scale);
  Check k = {.s = s, .prog = g_new0(ProgramIndex, MAX(np, 1))};
  for (guint p = 0; p < np; p++)
    k.prog[p].first_rank = -1;
  gboolean ok = TRUE;
  for (int r = 0; ok && r < s->n_ranks; r++) {
    int pi = s->ranks[r].program, d = s->ranks[r].device;
    if (pi < 0 || pi >= (int)np)
      ok = fail(error, "rank %d: program %d does not exist (the schedule has %u programs)", r,
                pi, np);
    else if (d < 0 || d >= s->n_devices)
      ok = fail(error, "rank %d: device %d does not exist (the schedule has %d devices)", r, d,
                s->n_devices);
    else if (s->ranks[r].start_ns < 0)
      ok = fail(error, "rank %d: start %" G_GINT64_FORMAT " ns is negative", r,
                s->ranks[r].start_ns);
    else if (s->ranks[r].replica < 0 || s->ranks[r].replica >= s->n_ranks)
      ok = fail(error, "rank %d: replica %d is not a rank index", r, s->ranks[r].replica);
    else if (k.prog[pi].first_rank < 0)
      k.prog[pi].first_rank = r;
  }
  for (guint p = 0; ok && p < np; p++)
    ok = check_program(&k, (int)p, error);
  for (int r = 0; ok && r < s->n_ranks; r++)
    ok = check_rank(&k, r, error);
  ok = ok && check_p2p(&k, error) && check_collectives(&k, error);
  check_clear(&k);
  return ok;
}
