/* admit.c: see admit.h. The bookkeeping mirrors the engine's
 * (sim/engine/engine_admission.c): per device, the foreground collectives
 * and receives in flight (and since when one is pending), the slowdown
 * average and the background pieces in flight; over all devices, the
 * foreground steps every stream has finished. */
#include "exec/admit.h"
#include "exec/exec.h"

typedef struct {
  const StAdmissionPolicy *policy; /* NULL: no background on the device */
  gboolean has_fg;
  int32_t bg_in_flight;
  int32_t fg_collectives;
  int32_t fg_recvs;
  int64_t fg_recv_since;
  double fg_slowdown;
  double fg_budget_ns;      /* the step budget, then this step's kernels */
  double fg_step_budget_ns; /* over the foreground steps */
} Device;

struct StAdmitCtl {
  int n_devices;
  Device *devices;
  int fg_streams, steps;
  int32_t *finished; /* [steps]: foreground streams that finished each step */
  int64_t *end_ns;   /* [steps]: when the last of them did */
  int32_t steps_done;
  GArray *records;   /* StAdmitRecord */
};

StAdmitCtl *
st_admit_ctl_new(int n_devices, int fg_streams, int steps)
{
  g_return_val_if_fail(n_devices >= 0 && fg_streams >= 0 && steps >= 0, NULL);
  StAdmitCtl *c = g_new0(StAdmitCtl, 1);
  c->n_devices = n_devices;
  c->devices = g_new0(Device, MAX(n_devices, 1));
  for (int d = 0; d < n_devices; d++)
    c->devices[d].fg_slowdown = 1.0;
  c->fg_streams = fg_streams;
  c->steps = steps;
  c->finished = g_new0(int32_t, MAX(steps, 1));
  c->end_ns = g_new0(int64_t, MAX(steps, 1));
  c->records = g_array_new(FALSE, FALSE, sizeof(StAdmitRecord));
  return c;
}

void
st_admit_ctl_free(StAdmitCtl *c)
{
  if (c == NULL)
    return;
  g_free(c->devices);
  g_free(c->finished);
  g_free(c->end_ns);
  if (c->records != NULL)
    g_array_unref(c->records);
  g_free(c);
}

static Device *
device(const StAdmitCtl *c, int d)
{
  g_return_val_if_fail(d >= 0 && d < c->n_devices, &c->devices[0]);
  return &c->devices[d];
}

void
st_admit_ctl_device(StAdmitCtl *c, int d, const StAdmissionPolicy *policy,
                    gboolean has_foreground)
{
  Device *dev = device(c, d);
  if (dev->policy == NULL)
    dev->policy = policy;
  dev->has_fg = dev->has_fg || has_foreground;
}

void
st_admit_fg_begin(StAdmitCtl *c, int d, StOpKind kind, int64_t now_ns)
{
  Device *dev = device(c, d);
  if (kind == ST_OP_COMM_COLL)
    dev->fg_collectives++;
  else if (kind == ST_OP_COMM_RECV && dev->fg_recvs++ == 0)
    dev->fg_recv_since = now_ns;
}

void
st_admit_fg_end(StAdmitCtl *c, int d, StOpKind kind, int64_t now_ns, int64_t took_ns,
                int64_t alone_ns)
{
  Device *dev = device(c, d);
  if (kind == ST_OP_COMM_COLL && dev->fg_collectives > 0)
    dev->fg_collectives--;
  else if (kind == ST_OP_COMM_RECV && dev->fg_recvs > 0)
    dev->fg_recvs--;
  else if (kind == ST_OP_COMP && dev->policy != NULL && alone_ns > 0 && took_ns >= 0) {
    dev->fg_slowdown = st_admission_slowdown(dev->policy, dev->fg_slowdown,
                                             (double)took_ns / (double)alone_ns);
    if (c->steps_done >= dev->policy->from_step)
      dev->fg_budget_ns = st_admission_budget(dev->policy, dev->fg_budget_ns, (double)took_ns,
                                              (double)alone_ns);
  }
}

/* Step k ended: every device's budget becomes its step budget (the
 * engine's step_budget). */
static void
step_budget(StAdmitCtl *c, int k)
{
  for (int d = 0; d < c->n_devices; d++) {
    Device *dev = &c->devices[d];
    const StAdmissionPolicy *p = dev->policy;
    if (p == NULL || p->from_step < 2 || k < p->from_step)
      continue;
    double alone = (double)(c->end_ns[p->from_step - 1] - c->end_ns[p->from_step - 2]);
    dev->fg_step_budget_ns = st_admission_step_budget(
      p, dev->fg_step_budget_ns, (double)(c->end_ns[k] - c->end_ns[k - 1]), alone);
    dev->fg_budget_ns = dev->fg_step_budget_ns;
  }
}

gboolean
st_admit_fg_step_done(StAdmitCtl *c, int step, int64_t end_ns)
{
  if (step < 0 || step >= c->steps)
    return FALSE;
  c->finished[step]++;
  c->end_ns[step] = MAX(c->end_ns[step], end_ns);
  int32_t before = c->steps_done;
  while (c->steps_done < c->steps && c->finished[c->steps_done] >= c->fg_streams)
    step_budget(c, c->steps_done++);
  return c->steps_done != before;
}

int
st_admit_fg_steps_done(const StAdmitCtl *c)
{
  return c->fg_streams > 0 ? c->steps_done : G_MAXINT32;
}

gboolean
st_admit_fg_finished(const StAdmitCtl *c)
{
  return c->fg_streams > 0 && c->steps_done >= c->steps;
}

StAdmitDecision
st_admit_ask(StAdmitCtl *c, int d, int rank, uint32_t op, int iteration, int64_t now_ns,
             StAdmitDecision *last, int64_t *piece_ns)
{
  Device *dev = device(c, d);
  StAdmissionPolicy defaults;
  const StAdmissionPolicy *policy = dev->policy;
  if (policy == NULL) {
    st_admission_policy_init(&defaults);
    policy = &defaults;
  }
  StAdmissionState state = {
    .has_foreground = dev->has_fg && !st_admit_fg_finished(c),
    .fg_steps_done = st_admit_fg_steps_done(c),
    .bg_in_flight = dev->bg_in_flight,
    .fg_collective = dev->fg_collectives > 0,
    .fg_recv_wait_ns = dev->fg_recvs > 0 ? MAX(now_ns - dev->fg_recv_since, 0) : 0,
    .fg_slowdown = dev->fg_slowdown,
    .fg_budget_ns = dev->fg_budget_ns,
  };
  StAdmitDecision decision = st_admission_decide(policy, &state);
  int64_t piece = st_admission_piece_ns(policy, &state, decision);
  if (st_admit_ok(decision))
    dev->bg_in_flight++;
  if (last == NULL || *last != decision) {
    StAdmitRecord rec = {now_ns, d, rank, op, iteration, (uint8_t)decision, piece, state};
    g_array_append_val(c->records, rec);
  }
  if (piece_ns != NULL)
    *piece_ns = piece;
  if (last != NULL)
    *last = decision;
  return decision;
}

void
st_admit_piece_end(StAdmitCtl *c, int d)
{
  Device *dev = device(c, d);
  if (dev->bg_in_flight > 0)
    dev->bg_in_flight--;
}

int64_t
st_admit_recheck_ns(const StAdmitCtl *c, int d)
{
  const Device *dev = device(c, d);
  if (dev->fg_recvs == 0 || dev->policy == NULL)
    return -1;
  return dev->fg_recv_since + dev->policy->long_recv_ns + 1;
}

double
st_admit_slowdown(const StAdmitCtl *c, int d)
{
  return device(c, d)->fg_slowdown;
}

double
st_admit_budget_ns(const StAdmitCtl *c, int d)
{
  return device(c, d)->fg_budget_ns;
}

const StAdmissionPolicy *
st_admit_policy(const StAdmitCtl *c, int d)
{
  return device(c, d)->policy;
}

const GArray *
st_admit_records(const StAdmitCtl *c)
{
  return c->records;
}

GArray *
st_admit_steal_records(StAdmitCtl *c)
{
  GArray *r = c->records;
  c->records = g_array_new(FALSE, FALSE, sizeof(StAdmitRecord));
  return r;
}

char *
st_exec_admissions_csv(const GArray *records)
{
  GString *out = g_string_new("time_us,device,rank,op,iteration,decision,admitted,piece_us,"
                              "has_foreground,fg_steps_done,bg_in_flight,fg_collective,"
                              "fg_recv_wait_us,fg_slowdown,fg_budget_us\n");
  for (guint i = 0; records != NULL && i < records->len; i++) {
    const StAdmitRecord *r = &g_array_index(records, StAdmitRecord, i);
    const StAdmissionState *s = &r->state;
    char slowdown[G_ASCII_DTOSTR_BUF_SIZE], budget[G_ASCII_DTOSTR_BUF_SIZE];
    g_ascii_formatd(slowdown, sizeof slowdown, "%.4f", s->fg_slowdown);
    g_ascii_formatd(budget, sizeof budget, "%.3f", s->fg_budget_ns / 1e3);
    g_string_append_printf(out,
                           "%" G_GINT64_FORMAT ".%03d,%d,%d,%u,%d,%s,%d,%" G_GINT64_FORMAT
                           ".%03d,%d,%d,%d,%d,%" G_GINT64_FORMAT ".%03d,%s,%s\n",
                           r->t_ns / 1000, (int)(r->t_ns % 1000), r->device, r->rank, r->op,
                           r->iteration, st_admit_decision_name(r->decision),
                           st_admit_ok(r->decision), r->piece_ns / 1000,
                           (int)(r->piece_ns % 1000), s->has_foreground,
                           s->fg_steps_done == G_MAXINT32 ? -1 : s->fg_steps_done,
                           s->bg_in_flight, s->fg_collective, s->fg_recv_wait_ns / 1000,
                           (int)(s->fg_recv_wait_ns % 1000), slowdown, budget);
  }
  return g_string_free(out, FALSE);
}
