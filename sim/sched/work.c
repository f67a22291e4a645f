/* work.c: see work.h. */
#include "sched/work.h"

#include <math.h>

#include "cost/framework.h"
#include "model/layer_type.h"

StDtype
st_schedule_compute_dtype(const StSchedule *s)
{
  if (!st_precision_16bit(s->settings.precision))
    return ST_DTYPE_FP32;
  return s->cluster->gpu.flops[ST_DTYPE_BF16] > 0 ? ST_DTYPE_BF16 : ST_DTYPE_FP16;
}

StComputeCtx
st_program_compute_ctx(const StSchedule *s, const StProgram *p, const StProfile *profile)
{
  return (StComputeCtx){s->cluster, profile, st_program_model(s, p),
                        st_schedule_compute_dtype(s), s->settings.compute_model,
                        st_framework_find(s->settings.framework), s->settings.nchw,
                        st_schedule_job_settings(s, p->job)->precision == ST_PRECISION_FP8};
}

/* A selective recompute's ops (StWork.again_ops). */
static unsigned
again_ops(const StSettings *settings, StPass pass)
{
  if (pass != ST_PASS_RECOMPUTE || settings->recompute != ST_RECOMPUTE_SELECTIVE)
    return 0;
  return settings->recompute_ops != 0 ? settings->recompute_ops : ST_RC_DEFAULT;
}

/* The parameter tensors an optimizer step over `elems` parameters touches
 * (StWork.tensors): the model's, in the share of its parameters the step
 * holds (a pipeline stage's, a ZeRO shard's), at least one. Under SAMO
 * (--sparsity) `elems` counts non-zeros and the share is of the model's
 * non-zeros: SAMO keeps each layer's non-zeros with their own index list
 * (the paper, as docs/PAPERS.md section 3 gives it; in its prototype each
 * parameter carries its own mask, axonn-ai/axonn branch grad-norm,
 * axonn/optim.py:41 `param.mask`) and compresses each layer's gradient as
 * backward makes it, so its optimizer steps one compressed tensor per
 * parameter tensor, and so does
 * its expansion (docs/SAMO.md, "SAMO's step, tensor by tensor"). */
static int64_t
step_tensors(const StSchedule *s, const StModel *model, int64_t elems)
{
  double held = (1.0 - s->settings.sparsity) * (double)model->params;
  if (model->params <= 0 || elems <= 0 || held <= 0)
    return 1;
  double share = MIN(1.0, (double)elems / held);
  return MAX(INT64_C(1), (int64_t)ceil(share * (double)model->param_tensors));
}

/* StWork.tensors of an op: the step's tensors for the optimizer and SAMO's
 * expansion, the layer's for SAMO's compression of its gradient; 0 else. */
static int64_t
op_tensors(const StSchedule *s, const StModel *model, const StOp *op, StPass pass)
{
  if (pass == ST_PASS_OPTIM || pass == ST_PASS_EXPAND)
    return step_tensors(s, model, op->elems);
  if (pass == ST_PASS_COMPRESS && op->layer >= 0)
    return MAX(1, model->layers[op->layer].param_tensors);
  return 0;
}

StWork
st_op_work(const StSchedule *s, const StProgram *p, const StOp *op)
{
  const StModel *model = st_program_model(s, p);
  StPass pass = (StPass)op->sub;
  double share = 0;
  if (op->part > 0 && op->layer >= 0) {
    double shares[ST_TP_PARTS_MAX];
    int n = st_layer_tp_parts(&model->layers[op->layer], pass, shares);
    share = op->part <= n ? shares[op->part - 1] : 0;
  }
  if (st_op_cp_steps(op) > 0 && op->layer >= 0) /* a step of the part (context parallelism) */
    share = MAX((share > 0 ? share : 1.0) * st_layer_cp_share(&model->layers[op->layer], pass,
                                                              st_op_cp_step(op),
                                                              st_op_cp_steps(op)),
                1e-12);
  /* Dropless routing's imbalance (--moe-imbalance): an MoE expert's pass
   * (the only layer type that continues a chain) is the busiest rank's,
   * F times the balanced rows, at the same efficiency. */
  double imbalance = st_schedule_job_settings(s, p->job)->moe_imbalance;
  if (imbalance > 1 && op->layer >= 0 && model->layers[op->layer].type->link != NULL &&
      pass != ST_PASS_OPTIM)
    share = (share > 0 ? share : 1.0) * imbalance;
  return (StWork){
    .pass = pass,
    .layer = op->layer >= 0 ? &model->layers[op->layer] : NULL,
    .batch = op->batch,
    .elems = op->elems,
    .bytes = op->bytes,
    .kernel = pass == ST_PASS_OPTIM ? st_optimizer_name(s->settings.optimizer)
                                    : st_pass_name(pass),
    .share = share,
    .again_ops = again_ops(st_schedule_job_settings(s, p->job), pass),
    .tensors = op_tensors(s, model, op, pass),
  };
}
