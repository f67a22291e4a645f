/* mfu.c: model FLOPs utilization (see mfu.h). */
#include "output/mfu.h"

#include "sched/work.h"

/* Forward + backward FLOPs of one sample of `m` as a whole model. */
static double
whole_model_flops(const StModel *m)
{
  gboolean split = FALSE;
  for (int i = 0; i < m->n_layers && !split; i++)
    split = m->layers[i].tp > 1;
  int cp = st_model_context_parallel(m);
  if (!split && cp == 1)
    return m->fwd_flops + m->bwd_flops;
  /* a context-parallel rank's model holds s / cp tokens of each sample */
  StShape input = m->input;
  input.dims[0] *= cp;
  g_autoptr(StModel) whole = st_model_derive_as(m, &input, 1, FALSE, NULL);
  if (whole == NULL) /* cannot happen for a model that split; the share is a floor */
    return m->fwd_flops + m->bwd_flops;
  return whole->fwd_flops + whole->bwd_flops;
}

void
st_mfu_of(const StSchedule *s, int64_t step_ns, int gpus, StMfu *out)
{
  *out = (StMfu){0};
  out->flops_per_sample = whole_model_flops(s->model);
  out->flops_per_step = out->flops_per_sample * (double)s->settings.global_batch;
  out->dtype = st_schedule_compute_dtype(s);
  out->peak_flops = st_cluster_peak_flops(s->cluster, out->dtype);
  if (out->dtype == ST_DTYPE_FP32 && s->cluster->gpu.tf32_flops > out->peak_flops) {
    out->peak_flops = s->cluster->gpu.tf32_flops;
    out->tf32 = TRUE;
  }
  if (step_ns > 0 && gpus > 0 && out->peak_flops > 0)
    out->mfu = out->flops_per_step / (step_ns * 1e-9 * gpus * out->peak_flops);
}

/* 12.29 PFLOP, 989 TFLOP */
static char *
flops_text(double flops)
{
  static const char *const PREFIX[] = {"", "K", "M", "G", "T", "P", "E"};
  int k = 0;
  while (flops >= 1000.0 && k < (int)G_N_ELEMENTS(PREFIX) - 1) {
    flops /= 1000.0;
    k++;
  }
  return g_strdup_printf(flops >= 100 ? "%.0f %sFLOP" : "%.3g %sFLOP", flops, PREFIX[k]);
}

char *
st_mfu_describe(const StMfu *m, int gpus)
{
  g_autofree char *work = flops_text(m->flops_per_step);
  if (m->peak_flops <= 0 || m->mfu <= 0)
    return g_strdup_printf("- (no peak FLOP/s known for this device); %s model FLOPs per step%s",
                           work, ST_MFU_CONVENTION);
  g_autofree char *peak = flops_text(m->peak_flops);
  return g_strdup_printf("%.1f %% of %d x %s/s (%s dense peak); %s model FLOPs per step%s",
                         100.0 * m->mfu, gpus, peak, m->tf32 ? "tf32" : st_dtype_name(m->dtype),
                         work, ST_MFU_CONVENTION);
}
