/* goodput.c: a simulated step into a training run (run.h).
 *
 * Defaults of the run (docs/GOODPUT.md lists each with its source):
 *   detect 120 s: from a failure until the job is torn down. ESTIMATE: PyTorch's
 *     NCCL process-group timeout is 10 min (torch.distributed default), the
 *     bound when nothing watches; Llama 3's team cut detection with NCCLX's
 *     flight recorder and fast failure detection (section 3.3.4).
 *   relaunch 300 s and init 60 s: scheduler, containers, processes, NCCL
 *     communicators. ESTIMATE (Llama 3 reports reducing job start-up and
 *     checkpointing time without figures).
 *   repair 4 h: a node out of the pool until repaired (ESTIMATE).
 *   sigma_gpu 1.1 %: Sinha et al. (SC 2022) measured 8 % average spread
 *     (max - min over median) across each cluster's GPUs; the range of
 *     thousands of normal draws is about 7 sigma, so sigma ~ 8 % / 7
 *     (DERIVED ESTIMATE).
 *   sigma_step 1 %: per-step jitter of a GPU's speed (ESTIMATE; Llama 3
 *     reports a 1-2 % diurnal throughput swing from temperature).
 *   seed 1, 400 trials.
 */
#include <math.h>
#include <string.h>

#include "run/run.h"

void
st_run_spec_init(StRunSpec *s)
{
  memset(s, 0, sizeof *s);
  st_failure_rates_default(&s->rates);
  s->detect_s = 120;
  s->relaunch_s = 300;
  s->init_s = 60;
  s->repair_s = 4 * 3600;
  s->spare_nodes = -1;
  s->sigma_gpu = 0.011;
  s->sigma_step = 0.01;
  s->seed = 1;
  s->trials = 400;
  st_storage_default(&s->storage);
}

void
st_run_spec_clear(StRunSpec *s)
{
  st_failure_rates_clear(&s->rates);
  st_storage_clear(&s->storage);
  st_power_clear(&s->power);
}

void
st_run_spec_copy(StRunSpec *dst, const StRunSpec *src)
{
  *dst = *src;
  st_failure_rates_copy(&dst->rates, &src->rates);
  st_storage_copy(&dst->storage, &src->storage);
  st_power_copy(&dst->power, &src->power);
}

static gboolean
bad(GError **error, const char *what)
{
  g_set_error(error, ST_RUN_ERROR, ST_ERROR_INVALID, "%s", what);
  return FALSE;
}

gboolean
st_run_spec_check(const StRunSpec *s, GError **error)
{
  if (!(s->train_tokens > 0) && !(s->train_samples > 0))
    return bad(error, "--train-tokens or --train-samples: give a positive amount to train "
                      "(\"15T\", \"300B\", \"1e6\")");
  if (s->train_tokens > 0 && s->train_samples > 0)
    return bad(error, "--train-tokens and --train-samples: give one of the two");
  const StFailureRates *r = &s->rates;
  if (r->gpu_per_h < 0 || r->node_per_h < 0 || r->link_per_h < 0 || r->software_per_h < 0 ||
      r->planned_per_h < 0)
    return bad(error, "--failure-rates: rates are interruptions per component-hour, >= 0");
  if (s->ckpt_interval_s < 0)
    return bad(error, "--checkpoint-interval: a duration > 0 (\"30min\"), or 'optimal'");
  if (s->detect_s < 0 || s->relaunch_s < 0 || s->init_s < 0 || s->repair_s < 0)
    return bad(error, "--restart: detect, relaunch, init and repair times are >= 0");
  if (s->sigma_gpu < 0 || s->sigma_step < 0 || s->sigma_gpu > 1 || s->sigma_step > 1)
    return bad(error, "--straggler-sigma: relative spreads in [0, 1] (\"0.011,0.01\")");
  if (s->trials < 1)
    return bad(error, "--run-trials: at least 1");
  if (s->price_gpu_hour < 0 || s->price_kwh < 0)
    return bad(error, "--price-gpu-hour, --price-kwh: prices are >= 0");
  if (s->spare_nodes < -1)
    return bad(error, "--spare-nodes: a count >= 0");
  if (s->storage.write_bw_node <= 0 || s->storage.read_bw_node <= 0)
    return bad(error, "storage: write and read bandwidths must be > 0");
  if (s->ramp_start < 0 || s->ramp_increment < 0 || s->ramp_samples < 0 ||
      (s->ramp_start > 0) != (s->ramp_increment > 0))
    return bad(error, "--rampup-batch-size: START,INCREMENT,SAMPLES, all > 0");
  return TRUE;
}

void
st_run_step_clear(StRunStep *step)
{
  st_power_clear(&step->power);
}

void
st_run_result_clear(StRunResult *r)
{
  if (r->timeline != NULL)
    g_array_unref(r->timeline);
  memset(r, 0, sizeof *r);
}

/* The whole model's parameters (a tensor- or context-parallel rank's model
 * derived back as a whole, as mfu.c does). */
static int64_t
whole_params(const StModel *m)
{
  gboolean split = FALSE;
  for (int i = 0; i < m->n_layers && !split; i++)
    split = m->layers[i].tp > 1;
  int cp = st_model_context_parallel(m);
  if (!split && cp == 1)
    return m->params;
  StShape input = m->input;
  input.dims[0] *= cp;
  g_autoptr(StModel) whole = st_model_derive_as(m, &input, 1, FALSE, NULL);
  return whole != NULL ? whole->params : m->params;
}

static const char *
note_text(const StSchedule *s, const char *key)
{
  for (guint i = 0; s->notes != NULL && i < s->notes->len; i++) {
    const StNote *n = &g_array_index(s->notes, StNote, i);
    if (strcmp(n->key, key) == 0)
      return n->text;
  }
  return NULL;
}

gboolean
st_run_step_from_summary(const StSummary *sum, StRunStep *out, GError **error)
{
  memset(out, 0, sizeof *out);
  const StSchedule *s = sum->timeline->schedule;
  if (sum->step_time_ns <= 0 || sum->gpus_used <= 0) {
    g_set_error(error, ST_RUN_ERROR, ST_ERROR_INVALID,
                "the simulation has no step to build a training run on");
    return FALSE;
  }
  const StCluster *c = s->cluster;
  out->step_s = sum->step_time_ns * 1e-9;
  out->global_batch = s->settings.global_batch;
  if (st_model_is_token(s->model))
    out->tokens_per_sample = (double)s->model->input.dims[0] * st_model_context_parallel(s->model);
  out->gpus = sum->gpus_used;
  out->gpus_per_node = MAX(c->gpus_per_node, 1);
  out->nodes = (out->gpus + out->gpus_per_node - 1) / out->gpus_per_node;
  int nics = c->fabric.nics > 0 ? c->fabric.nics : out->gpus_per_node;
  out->nics = out->nodes * nics;
  out->busy_fraction = st_summary_device(sum, 0)->busy_fraction;
  /* comm_exposed_ns adds up the steady steps. */
  out->comm_fraction = (double)sum->comm_exposed_ns / MAX(1, sum->steady_steps) /
                       (double)sum->step_time_ns;
  out->state_bytes_rank = st_checkpoint_rank_bytes(s);
  for (int d = 0; out->state_bytes_rank <= 0 && d < s->n_devices; d++) {
    /* A schedule without persistent buffers (an imported trace): the
     * categories' peaks, an upper bound. */
    const StDeviceSummary *dev = st_summary_device(sum, d);
    double states = (double)dev->peak_by_category[ST_MEM_PARAMS] +
                    (double)dev->peak_by_category[ST_MEM_OPTIMIZER];
    out->state_bytes_rank = MAX(out->state_bytes_rank, states);
  }
  out->state_bytes_model = st_checkpoint_model_bytes(whole_params(s->model), s->settings.precision,
                                                     s->settings.optimizer);
  out->host_bw = c->links[ST_LINK_PCIE].present ? c->links[ST_LINK_PCIE].bandwidth : 0;
  const char *rule = note_text(s, "update_rule");
  out->stale_slack =
    s->settings.strategy != NULL && strcmp(s->settings.strategy, "cdp") == 0 && rule != NULL &&
        strcmp(rule, "dp") != 0
      ? 1
      : 0;
  st_power_default(&out->power, c);
  return TRUE;
}

/* Work time of the batch ramp, Megatron-LM's --rampup-batch-size START INCR
 * SAMPLES: the batch grows from START by INCR in equal shares of SAMPLES. A
 * step of batch b takes T (a + (1 - a) b / B): the share a that does not
 * scale with the batch is what the GPUs do not compute (1 - busy), a first
 * order ESTIMATE. Sets `steps` and returns the time and the samples it
 * trained in `*samples`. */
static double
ramp_work(const StRunStep *step, const StRunSpec *spec, double *samples, double *steps)
{
  *samples = *steps = 0;
  double big = (double)step->global_batch;
  if (spec->ramp_start <= 0 || spec->ramp_samples <= 0 || spec->ramp_start >= big)
    return 0;
  int levels = (int)ceil((big - spec->ramp_start) / spec->ramp_increment);
  double per_level = spec->ramp_samples / levels, t = 0;
  double a = 1 - CLAMP(step->busy_fraction, 0, 1);
  for (int k = 0; k < levels; k++) {
    double b = MIN(big, spec->ramp_start + (double)k * spec->ramp_increment);
    double n = per_level / b;
    *steps += n;
    t += n * step->step_s * (a + (1 - a) * b / big);
  }
  *samples = spec->ramp_samples;
  return t;
}

gboolean
st_run_estimate(const StRunStep *step, const StRunSpec *spec, StRunResult *r, GError **error)
{
  memset(r, 0, sizeof *r);
  if (!st_run_spec_check(spec, error))
    return FALSE;
  double samples = spec->train_samples;
  if (spec->train_tokens > 0) {
    if (step->tokens_per_sample <= 0)
      return bad(error, "--train-tokens: the model reads no tokens; give --train-samples");
    samples = spec->train_tokens / step->tokens_per_sample;
  }
  if (spec->ramp_start > 0 && spec->ramp_start >= step->global_batch)
    return bad(error, "--rampup-batch-size: START must be below the global batch");
  double ramp_samples = 0, ramp_steps = 0;
  double ramp_s = ramp_work(step, spec, &ramp_samples, &ramp_steps);
  ramp_samples = MIN(ramp_samples, samples);
  double full_steps = MAX(0, samples - ramp_samples) / (double)MAX(step->global_batch, 1);
  r->ramp_steps = ramp_steps;
  r->steps = ramp_steps + full_steps;
  r->work_s = ramp_s + full_steps * step->step_s;
  r->straggler_factor = st_straggler_factor(step, spec);
  r->straggler_slack = step->stale_slack;
  double rate_h = st_failure_job_rates(&spec->rates, step->gpus, step->nodes, step->nics,
                                       r->rate_by_cause);
  r->mtbf_s = rate_h > 0 ? 3600.0 / rate_h : INFINITY;
  st_checkpoint_cost(step, spec, &r->ckpt);
  r->restart_s = spec->detect_s + spec->relaunch_s + spec->init_s + r->ckpt.load_s;
  r->young_s = st_young_interval(r->ckpt.stall_s, r->mtbf_s);
  r->daly_s = st_daly_interval(r->ckpt.stall_s, r->mtbf_s);
  if (spec->ckpt_interval_s > 0) {
    r->interval_s = spec->ckpt_interval_s;
  } else {
    /* Asynchronous: no sooner than the previous write ends (else the
     * checkpoints queue behind the writes). */
    r->interval_s = spec->ckpt_async ? MAX(r->daly_s, r->ckpt.write_s) : r->daly_s;
  }
  /* A checkpoint falls between steps; an interval beyond the run is one
   * segment. */
  double work = r->work_s * r->straggler_factor;
  r->interval_s = CLAMP(r->interval_s, step->step_s, MAX(work, step->step_s));
  r->daly_wall_s = isfinite(r->mtbf_s) ? st_daly_wall(work, r->interval_s, r->ckpt.stall_s,
                                                      r->restart_s, r->mtbf_s)
                                       : work + (ceil(work / r->interval_s) - 1) * r->ckpt.stall_s;
  st_run_simulate(step, spec, r);
  st_run_energy(step, spec, r);
  return TRUE;
}
