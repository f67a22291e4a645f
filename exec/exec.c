/* exec.c: st_execute: choose the backends, set every rank up (streams,
 * persistent buffers, weights, states shared on a device), walk the schedule
 * (walker.c), and turn what was measured into a Timeline. What the executor
 * can run is exec_check.c's; the final weights, exec_weights.c's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/check.h"
#include "exec/dataset.h"
#include "exec/runtime.h"

G_DEFINE_QUARK(st-exec-error-quark, st_exec_error)

void
st_exec_options_init(StExecOptions *o)
{
  *o = (StExecOptions){
    .device = "auto",
    .comm = "auto",
    .seed = 1234,
    .lr = 0,
    .timeout_s = 600,
  };
}

void
st_exec_result_clear(StExecResult *result)
{
  g_clear_pointer(&result->device, g_free);
  g_clear_pointer(&result->loss, g_array_unref);
  g_clear_pointer(&result->weights, g_ptr_array_unref);
  g_clear_pointer(&result->background, g_ptr_array_unref);
  g_clear_pointer(&result->admissions, g_array_unref);
}

const char *
st_exec_status_text(const char *device, int status)
{
  if (status == ST_K_ENOMEM)
    return "out of memory";
  /* A status comes from a backend already loaded: this finds it. */
  const StDeviceBackend *b = st_device_backend_load(device, NULL);
  if (b != NULL && b->status_text != NULL)
    return b->status_text(status);
  return status == ST_K_EINVAL ? "invalid argument" : "error";
}

gboolean
st_exec_fail_status(GError **error, const char *file, int line, const char *call, int status,
                    const char *device)
{
  g_autofree char *base = g_path_get_basename(file);
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_FAILED, "%s:%d: %s: %s (status %d on %s)",
              base, line, call, st_exec_status_text(device, status), status, device);
  return FALSE;
}

void
exec_fail(Exec *x, GError *error)
{
  g_mutex_lock(&x->fail_lock);
  if (x->error == NULL)
    x->error = error;
  else
    g_error_free(error);
  g_atomic_int_set(&x->failed, 1);
  g_mutex_unlock(&x->fail_lock);
  for (int i = 0; i < x->s->n_ranks; i++) {
    Rank *r = &x->ranks[i];
    if (r->dev == NULL)
      continue;
    g_mutex_lock(&r->lock);
    g_cond_broadcast(&r->cond);
    g_mutex_unlock(&r->lock);
  }
  if (x->comm != NULL)
    x->comm_backend->abort(x->comm);
  mux_wake(x);
}

/* ---- backends ------------------------------------------------------------------ */

/* The comm backend: local unless this process was started as one of several
 * (torchrun's WORLD_SIZE or mpirun's OMPI_COMM_WORLD_SIZE / PMI_SIZE). */
static const StCommBackend *
pick_comm(const char *name, GError **error)
{
  if (g_strcmp0(name, "auto") == 0) {
    const char *world = g_getenv("WORLD_SIZE");
    if (world == NULL)
      world = g_getenv("OMPI_COMM_WORLD_SIZE");
    if (world == NULL)
      world = g_getenv("PMI_SIZE");
    name = world != NULL && atoi(world) > 1 ? "nccl" : "local";
  }
  return st_comm_backend_load(name, error);
}

/* The device of the ranks this process runs: with local comm every rank is
 * here, on one device (the host, or one GPU that all ranks share). */
static gboolean
open_devices(Exec *x, GError **error)
{
  StExecDevice *dev = st_device_open(x->o->device, 0, error);
  if (dev == NULL)
    return FALSE;
  const StDeviceBackend *b = dev->backend;
  x->device_backend = b;
  g_ptr_array_add(x->open_devices, dev);
  if (b != &st_device_host && x->s->n_devices > 1) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "this schedule spreads its ranks over %d GPUs, and one process runs ranks of "
                "one GPU: give --gpus 1 (the ranks then share it), or run one process per GPU "
                "with the nccl backend",
                x->s->n_devices);
    return FALSE;
  }
  for (int r = 0; r < x->s->n_ranks; r++)
    x->devices[r] = dev;
  return TRUE;
}

/* ---- ranks ---------------------------------------------------------------------- */

/* Each layer's slice: this rank's index in the group of the first collective
 * that moves the layer's weights or gradients. */
static void
find_slices(Rank *r)
{
  g_autofree gboolean *set = g_new0(gboolean, r->model->n_layers);
  for (guint o = 0; o < r->p->ops->len; o++) {
    const StOp *op = st_program_op(r->p, o);
    if (op->kind != ST_OP_COMM_COLL ||
        (op->data != ST_DATA_PARAMS && op->data != ST_DATA_GRADS &&
         op->data != ST_DATA_PARAMS_PACKED && op->data != ST_DATA_GRADS_PACKED))
      continue;
    const StComm *c = st_schedule_comm(r->x->s, op->comm);
    int g = c->group_of[r->rank];
    for (int i = op->layer; i <= op->layer_last; i++) {
      if (set[i])
        continue;
      set[i] = TRUE;
      r->layers[i].slice = c->index_of[r->rank];
      r->layers[i].parts = c->offsets[g + 1] - c->offsets[g];
    }
  }
}

static gboolean
rank_setup(Exec *x, int rank, GError **error)
{
  const StSchedule *s = x->s;
  Rank *r = &x->ranks[rank];
  r->x = x;
  r->rank = rank;
  r->device = s->ranks[rank].device;
  r->p = st_schedule_program_of(s, rank);
  r->model = st_program_model(s, r->p);
  r->settings = st_schedule_job_settings(s, r->p->job);
  r->dev = x->devices[rank];
  r->k = r->dev->backend->kernels(r->dev);
  g_mutex_init(&r->lock);
  g_mutex_init(&r->share_lock);
  g_cond_init(&r->cond);
  r->pool = st_pool_new(r->dev, rank, x->o->memory_limit);
  guint n_ops = r->p->ops->len;
  int L = r->model->n_layers;
  r->streams = g_new0(void *, r->p->streams->len);
  for (guint i = 0; i < r->p->streams->len; i++) {
    const StStream *st = &g_array_index(r->p->streams, StStream, i);
    if ((r->streams[i] = r->dev->backend->stream_new(r->dev, st->priority, error)) == NULL)
      return FALSE;
  }
  r->buffers = g_new0(void *, r->p->buffers->len);
  r->layers = g_new0(LayerState, L);
  for (guint o = 0; o < n_ops; o++)
    r->n_micro = MAX(r->n_micro, st_program_op(r->p, o)->micro + 1);
  r->n_micro = MAX(r->n_micro, 1);
  acts_setup(r);
  r->saved = g_new0(void *, (size_t)r->n_micro * L);
  r->targets = g_new0(int32_t *, r->n_micro);
  r->tied_grads = g_new0(void *, r->n_micro);
  r->done = g_new0(int32_t, n_ops);
  steps_init(r);
  if (!steps_reserve(r, 0, r->streams[0], error)) /* the first steps' storage, before time 0 */
    return FALSE;
  r->nnz = g_new0(int64_t, L);
  r->runs_bwd = g_new0(gboolean, L);
  r->fwd_version = g_new(int32_t, L);
  for (int i = 0; i < L; i++)
    r->fwd_version[i] = -1;
  r->recomputed = g_new0(gboolean, (size_t)r->n_micro * L);
  r->recomputed_out = g_new0(void *, (size_t)r->n_micro * L);
  r->remade = g_new0(void *, (size_t)r->n_micro * L);
  for (int i = 0; i < L; i++) {
    int64_t p = r->model->layers[i].params;
    /* SAMO's count (sparse.h), which the schedule's buffers are sized by. */
    r->nnz[i] = p - (int64_t)floor(r->settings->sparsity * (double)p);
  }
  for (guint o = 0; o < n_ops; o++) {
    const StOp *op = st_program_op(r->p, o);
    if (op->kind == ST_OP_COMP &&
        (op->sub == ST_PASS_BWD || op->sub == ST_PASS_BWD_WEIGHT) && op->layer >= 0)
      r->runs_bwd[op->layer] = TRUE; /* computes the layer's weight gradient */
    if (op->kind == ST_OP_COMP && op->sub == ST_PASS_FWD && op->layer >= 0 &&
        r->fwd_version[op->layer] < 0)
      r->fwd_version[op->layer] = op->version;
    if (op->kind == ST_OP_COMP && op->sub == ST_PASS_RECOMPUTE && op->layer >= 0 &&
        op->micro >= 0)
      r->recomputed[(size_t)op->micro * L + op->layer] = TRUE;
  }
  if (!tp_setup(r, error) || !ep_setup(r, error) || !cp_setup(r, error))
    return FALSE;
  state_index_buffers(r);
  acts_count_users(r);
  find_slices(r);
  for (guint b = 0; b < r->p->buffers->len; b++)
    if (g_array_index(r->p->buffers, StBuffer, b).persistent &&
        !state_alloc_buffer(r, b, -1, UINT32_MAX, r->streams[0], error))
      return FALSE;
  return state_init_weights(r, error);
}

static void
rank_clear(Rank *r)
{
  if (r->x == NULL)
    return;
  const StDeviceBackend *b = r->dev->backend;
  steps_clear(r);
  for (guint i = 0; r->streams != NULL && i < r->p->streams->len; i++)
    if (r->streams[i] != NULL)
      b->stream_free(r->dev, r->streams[i]);
  st_pool_free(r->pool);
  g_free(r->streams);
  g_free(r->buffers);
  g_free(r->layers);
  acts_clear(r);
  g_free(r->saved);
  g_free(r->targets);
  g_free(r->tied_grads);
  g_free(r->done);
  g_free(r->nnz);
  g_free(r->runs_bwd);
  g_free(r->fwd_version);
  g_free(r->recomputed);
  g_free(r->recomputed_out);
  g_free(r->remade);
  state_index_clear(r);
  tp_clear(r);
  cp_clear(r);
  g_free(r->hazard_first);
  g_free(r->hazards);
  if (r->share_event != NULL)
    b->event_free(r->dev, r->share_event);
  g_mutex_clear(&r->share_lock);
  g_mutex_clear(&r->lock);
  g_cond_clear(&r->cond);
}

/* ---- the run -------------------------------------------------------------------- */

static void
exec_clear(Exec *x)
{
  if (x->comm != NULL)
    x->comm_backend->close(x->comm);
  mux_free(x);
  for (int r = 0; x->ranks != NULL && r < x->s->n_ranks; r++)
    rank_clear(&x->ranks[r]);
  for (guint i = 0; x->origins != NULL && i < x->open_devices->len; i++) {
    StExecDevice *dev = g_ptr_array_index(x->open_devices, i);
    if (x->origins[i] != NULL)
      dev->backend->event_free(dev, x->origins[i]);
  }
  for (guint i = 0; x->open_devices != NULL && i < x->open_devices->len; i++) {
    StExecDevice *dev = g_ptr_array_index(x->open_devices, i);
    dev->backend->close(dev);
  }
  g_clear_pointer(&x->open_devices, g_ptr_array_unref);
  g_free(x->origins);
  g_free(x->ranks);
  g_free(x->devices);
  g_clear_error(&x->error);
  g_mutex_clear(&x->fail_lock);
}

static gboolean
setup(Exec *x, GError **error)
{
  const StSchedule *s = x->s;
  if (!st_exec_check(s, error) ||
      (x->o->data != NULL && !st_dataset_fits(x->o->data, s->model, error)))
    return FALSE;
  if ((x->comm_backend = pick_comm(x->o->comm, error)) == NULL || !open_devices(x, error))
    return FALSE;
  x->dt = s->settings.precision == ST_PRECISION_MIXED ? ST_KDT_BF16 : ST_KDT_F32;
  for (int r = 0; r < s->n_ranks; r++)
    if (x->devices[r] != NULL && !rank_setup(x, r, error)) {
      g_prefix_error(error, "setting up rank %d: ", r);
      return FALSE;
    }
  if (!state_share(x, error))
    return FALSE;
  for (int r = 0; r < s->n_ranks; r++)
    if (x->devices[r] != NULL)
      hazards_find(x, &x->ranks[r]);
  mux_setup(x);
  if (
      (x->comm = x->comm_backend->open(s, x->devices, x->o->timeout_s, error)) == NULL)
    return FALSE;
  /* Time zero: after every setup copy, on each device. */
  x->origins = g_new0(void *, x->open_devices->len);
  for (int r = 0; r < s->n_ranks; r++) {
    Rank *rk = &x->ranks[r];
    for (guint i = 0; rk->dev != NULL && i < rk->p->streams->len; i++)
      if (!rk->dev->backend->stream_sync(rk->dev, rk->streams[i], error))
        return FALSE;
  }
  for (guint i = 0; i < x->open_devices->len; i++) {
    StExecDevice *dev = g_ptr_array_index(x->open_devices, i);
    for (int r = 0; r < s->n_ranks && x->origins[i] == NULL; r++)
      if (x->devices[r] == dev &&
          (x->origins[i] = dev->backend->event_record(dev, x->ranks[r].streams[0], error)) ==
            NULL)
        return FALSE;
  }
  x->origin_us = g_get_monotonic_time();
  return TRUE;
}

StTimeline *
st_execute(const StSchedule *s, const StExecOptions *o, StExecResult *result, GError **error)
{
  g_return_val_if_fail(s != NULL && o != NULL && result != NULL, NULL);
  *result = (StExecResult){0};
  Exec x = {.s = s, .o = o};
  g_mutex_init(&x.fail_lock);
  x.devices = g_new0(StExecDevice *, s->n_ranks);
  x.ranks = g_new0(Rank, s->n_ranks);
  x.open_devices = g_ptr_array_new();
  if (!setup(&x, error)) {
    exec_clear(&x);
    return NULL;
  }
  StExecDevice *dev0 = g_ptr_array_index(x.open_devices, 0);
  result->device = dev0->backend->describe(dev0);
  walker_run(&x);
  /* Wait for the device to finish what was issued, then measure. */
  for (int r = 0; r < s->n_ranks; r++) {
    Rank *rk = &x.ranks[r];
    for (guint i = 0; rk->dev != NULL && i < rk->p->streams->len; i++)
      rk->dev->backend->stream_sync(rk->dev, rk->streams[i], NULL);
  }
  gboolean interrupted = x.error != NULL && g_error_matches(x.error, ST_EXEC_ERROR,
                                                            ST_EXEC_ERROR_INTERRUPTED);
  if (x.error != NULL && !interrupted) {
    g_propagate_error(error, g_steal_pointer(&x.error));
    st_exec_result_clear(result);
    exec_clear(&x);
    return NULL;
  }
  int32_t steps = exec_completed_steps(&x);
  g_autofree char *origin = g_strdup_printf("measured: %s", result->device);
  StTimeline *t = st_timeline_new(s, TRUE, origin);
  t->on_host = dev0->backend == &st_device_host;
  result->loss = g_array_new(FALSE, FALSE, sizeof(double));
  result->interrupted = interrupted;
  for (int r = 0; r < s->n_ranks; r++)
    if (x.ranks[r].pool != NULL)
      result->device_peak_bytes += st_pool_footprint(x.ranks[r].pool);
  if (dev0->backend->used_bytes(dev0) >= 0)
    result->device_peak_bytes = dev0->backend->used_bytes(dev0);
  if (o->keep_weights)
    result->weights = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
  if (x.mux != NULL) {
    result->admissions = mux_steal_records(&x);
    result->priorities = dev0->backend->priorities;
  }
  if (!exec_harvest(&x, t, steps, error) || !exec_losses(&x, steps, result->loss, error) ||
      (o->keep_weights && !exec_gather_weights(&x, result->weights, error)) ||
      (x.mux != NULL &&
       !exec_backgrounds(&x, steps, o->keep_weights, &result->background, error))) {
    st_timeline_free(t);
    exec_clear(&x);
    return NULL;
  }
  if (interrupted)
    t->note = g_strdup_printf("interrupted after %d of %d steps", steps, s->steps);
  exec_clear(&x);
  return t;
}
