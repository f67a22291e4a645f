/* test_axonn.c: the `axonn` framework preset (cost/framework_axonn.c), each
 * mechanism against its source: the parameter tensors a model's layers
 * store (torchvision's module.parameters()), the optimizer step that
 * torch.optim of PyTorch 1.x runs one tensor at a time (compute_estimate.c),
 * SAMO's step tensor by tensor (its optimizer over each layer's compressed
 * tensor, its compression and expansion), and AxoNN's one gradient
 * all-reduce after the batch. */
#include <math.h>
#include <string.h>

#include "cost/framework.h"
#include "model/layer_type.h"
#include "sched/work.h"
#include "strategy/strategy.h"
#include "testutil.h"

/* Parameter tensors as torchvision lists them (len(list(m.parameters()))):
 *   vgg19: 16 convolutions and 3 linears, a weight and a bias each = 38;
 *   wide_resnet101_2: conv1 (1) + bn1 (2) + 33 bottlenecks x (3 convs +
 *     3 norms x 2) + 4 downsamples x (conv + norm's 2) + fc (2)
 *     = 1 + 2 + 297 + 12 + 2 = 314;
 *   resnet50: 1 + 2 + 16 x 9 + 4 x 3 + 2 = 161;
 *   GPT-3 XL: 24 blocks x 12 (two norms, QKV, out, fc1, fc2: weight and
 *     bias) + the token and position embeddings + the final norm's 2 = 292
 *     (its head is tied: no tensor of its own). */
static void
test_param_tensors(void)
{
  struct {
    const char *model;
    int64_t tensors;
  } cases[] = {{"vgg19", 38}, {"wide_resnet101_2", 314}, {"resnet50", 161}};
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(StModel) m = st_test_model_named(cases[i].model);
    g_assert_cmpint(m->param_tensors, ==, cases[i].tensors);
  }
  g_autoptr(StModel) gpt = st_test_model_named("gpt3-1.3b");
  int blocks = 0;
  for (int i = 0; i < gpt->n_layers; i++)
    if (strcmp(gpt->layers[i].type->name, "transformer_block") == 0) {
      g_assert_cmpint(gpt->layers[i].param_tensors, ==, 12);
      blocks++;
    }
  g_assert_cmpint(blocks, ==, 24);
  g_assert_cmpint(gpt->param_tensors, >=, 24 * 12 + 2);
}

/* The optimizer step of WideResNet-101 (P = 126,886,696 parameters in 314
 * tensors), fp32 momentum SGD on one V100 of Summit: 24 bytes a parameter
 * (read p, g, buf; write p, buf; the gradients zeroed), at 900 GB/s x 0.84
 * achievable:
 *   fused (one kernel of its bytes):  24 P / 756e9 = 4.03 ms;
 *   torch.optim of PyTorch 1.x, one tensor at a time, 3 kernels each
 *   (buf.mul_, buf.add_, param.add_) and zero_grad's p.grad.zero_(), each
 *   at least the V100's 20 us launch: max(4.03 ms, 314 x 4 x 20 us) =
 *   25.12 ms; AdamW's 9 + 1 kernels a tensor: 62.8 ms.
 * The loop costs what its kernel count does where tensors are many and
 * small: VGG-19's 38 tensors (3.04 ms of launches) stay under its bytes
 * (24 x 143,667,240 / 756e9 = 4.56 ms), so its step does not move. */
static void
test_unfused_optimizer(void)
{
  g_autoptr(StCluster) c = st_test_cluster_named("summit", 1, 1);
  struct {
    const char *model;
    const char *optimizer;
    double fused_ms, axonn_ms;
  } cases[] = {
    {"wide_resnet101_2", "sgd", 24 * 126886696.0 / 756e9 * 1e3, 314 * 4 * 20e-3},
    {"wide_resnet101_2", "adam", 24 * 126886696.0 / 756e9 * 1e3, 314 * 10 * 20e-3},
    {"vgg19", "sgd", 24 * 143667240.0 / 756e9 * 1e3, 24 * 143667240.0 / 756e9 * 1e3},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(StModel) m = st_test_model_named(cases[i].model);
    StWork w = {.pass = ST_PASS_OPTIM, .elems = m->params, .bytes = 24 * m->params,
                .kernel = cases[i].optimizer, .tensors = m->param_tensors};
    StComputeCtx ideal = {c, NULL, m, ST_DTYPE_FP32, "estimate", st_framework_find("ideal"),
                          FALSE, FALSE};
    StComputeCtx axonn = ideal, pytorch = ideal;
    axonn.framework = st_framework_find("axonn");
    pytorch.framework = st_framework_find("pytorch");
    StCostSource source;
    double fused = st_compute_time(&ideal, &w, &source) * 1e-6;
    double loop = st_compute_time(&axonn, &w, &source) * 1e-6;
    g_test_message("%s %s: fused %.2f ms, axonn %.2f ms", cases[i].model, cases[i].optimizer,
                   fused, loop);
    g_assert_cmpfloat(fabs(fused - cases[i].fused_ms), <, 1e-3);
    g_assert_cmpfloat(fabs(loop - cases[i].axonn_ms), <, 1e-3);
    /* a framework whose optimizer is fused (DDP with fused AdamW) does not loop */
    g_assert_cmpfloat(fabs(st_compute_time(&pytorch, &w, &source) * 1e-6 - fused), <, 1e-3);
    /* one flat vector (SAMO's pruning-aware optimizer) is one kernel's worth */
    StWork flat = w;
    flat.tensors = 1;
    g_assert_cmpfloat(fabs(st_compute_time(&axonn, &flat, &source) * 1e-6 - fused), <, 1e-3);
  }
}

/* The optimizer op of a schedule carries the tensors its step touches: a
 * dp rank's whole model (314 for WRN-101), a pipeline stage's share of them,
 * and under SAMO as many, one compressed tensor per parameter tensor (each
 * parameter its own mask and index list: axonn-ai/axonn, branch grad-norm,
 * axonn/optim.py:41; the paper's per-layer compression). Under `axonn` the
 * gradients are one bucket, all-reduced after backward, in fp32 here (16
 * bits under mixed). */
static const StOp *
optim_op(const StSchedule *s, const StProgram **program)
{
  *program = st_schedule_program_of(s, 0);
  for (guint i = 0; i < (*program)->ops->len; i++) {
    const StOp *op = st_program_op(*program, i);
    if (op->kind == ST_OP_COMP && op->sub == ST_PASS_OPTIM)
      return op;
  }
  g_assert_not_reached();
}

static void
test_schedule_tensors(void)
{
  g_autoptr(StModel) m = st_test_model_named("wide_resnet101_2");
  g_autoptr(StCluster) c = st_test_cluster_named("summit", 2, 0);
  for (int sparse = 0; sparse <= 1; sparse++) {
    StOptions o;
    st_test_options_init(&o);
    g_free(o.framework);
    o.framework = g_strdup("axonn");
    o.precision = ST_PRECISION_FP32;
    o.optimizer = ST_OPTIMIZER_SGD;
    o.micro_batch = 1;
    o.global_batch = 12;
    o.sparsity = sparse ? 0.9 : 0;
    g_autoptr(StSchedule) s = st_test_build("dp", m, c, &o);
    const StProgram *p;
    const StOp *op = optim_op(s, &p);
    StWork w = st_op_work(s, p, op);
    g_assert_cmpint(w.tensors, ==, 314);
    g_assert_cmpfloat(st_test_note_number(s, "gradient_buckets"), ==, 1);
    st_options_clear(&o);
  }
  /* GPT-3 XL on 2 pipeline stages: a stage's tensors, about half */
  g_autoptr(StModel) gpt = st_test_model_named("gpt3-1.3b");
  StOptions o;
  st_test_options_init(&o);
  g_free(o.framework);
  o.framework = g_strdup("axonn");
  o.precision = ST_PRECISION_MIXED;
  o.micro_batch = 1;
  o.global_batch = 12;
  o.pipeline_stages = 2;
  g_autoptr(StSchedule) s = st_test_build("pipeline", gpt, c, &o);
  const StProgram *p;
  const StOp *op = optim_op(s, &p);
  StWork w = st_op_work(s, p, op);
  g_assert_cmpint(w.tensors, >, gpt->param_tensors / 4);
  g_assert_cmpint(w.tensors, <, gpt->param_tensors);
  st_options_clear(&o);
}

/* SAMO's step, tensor by tensor (compute_estimate.c, strategy/sparse.c), on
 * WideResNet-101 90 % sparse, fp32 AdamW under `axonn`, one V100 of Summit
 * (20 us launch floor, above the runtime's 7 us issue; 756 GB/s achieved),
 * one image a GPU. Each of the 314 parameter tensors is its own compressed
 * tensor, so a step launches:
 *   optimizer: torch.optim.AdamW over 314 tensors, 9 + 1 kernels each:
 *     314 x 10 x 20 us = 62.8 ms (its bytes, N x 32 with N = 12.7 M
 *     non-zeros, take 0.54 ms: the flat vector the prototype's one group
 *     would give);
 *   compression: per micro-batch, a gather and an add for every tensor,
 *     2 x 314 x 20 us = 12.56 ms (no layer's bytes bind: the largest,
 *     a layer4 bottleneck of 14.9 M parameters, moves 78 MB, 0.10 ms,
 *     against its 9 tensors' 0.36 ms);
 *   expansion: a scatter per tensor, 314 x 20 us = 6.28 ms, above its
 *     bytes (P x 4 + N x 8 = 609 MB, 0.81 ms).
 * Together 81.6 ms where the flat reading costs 0.54 + 0.81 + the
 * compressions' bytes (under 1.5 ms): the mechanism adds about 80 ms to the
 * sparse step, the same loop the dense step pays (62.8 ms) and its
 * compression's and expansion's launches. */
static void
test_samo_per_tensor(void)
{
  g_autoptr(StModel) m = st_test_model_named("wide_resnet101_2");
  g_autoptr(StCluster) c = st_test_cluster_named("summit", 2, 0);
  StOptions o;
  st_test_options_init(&o);
  g_free(o.framework);
  o.framework = g_strdup("axonn");
  o.precision = ST_PRECISION_FP32;
  o.optimizer = ST_OPTIMIZER_ADAM;
  o.micro_batch = 1;
  o.global_batch = 12;
  o.sparsity = 0.9;
  g_autoptr(StSchedule) s = st_test_build("dp", m, c, &o);
  StComputeCtx axonn = {c, NULL, m, ST_DTYPE_FP32, "estimate", st_framework_find("axonn"),
                        FALSE, FALSE};
  const StProgram *p = st_schedule_program_of(s, 0);
  double optim_ms = 0, expand_ms = 0, compress_ms = 0, flat_ms = 0;
  int64_t compress_tensors = 0;
  int optims = 0, expands = 0;
  for (guint i = 0; i < p->ops->len; i++) {
    const StOp *op = st_program_op(p, i);
    if (op->kind != ST_OP_COMP ||
        (op->sub != ST_PASS_OPTIM && op->sub != ST_PASS_COMPRESS && op->sub != ST_PASS_EXPAND))
      continue;
    StWork w = st_op_work(s, p, op);
    StCostSource source;
    double ms = st_compute_time(&axonn, &w, &source) * 1e-6;
    StWork flat = w;
    flat.tensors = 0;
    flat_ms += st_compute_time(&axonn, &flat, &source) * 1e-6;
    if (op->sub == ST_PASS_OPTIM) {
      g_assert_cmpint(w.tensors, ==, 314);
      optim_ms += ms;
      optims++;
    } else if (op->sub == ST_PASS_EXPAND) {
      g_assert_cmpint(w.tensors, ==, 314);
      expand_ms += ms;
      expands++;
    } else {
      g_assert_cmpint(w.tensors, ==, MAX(1, w.layer->param_tensors));
      compress_tensors += w.tensors;
      compress_ms += ms;
    }
  }
  g_test_message("optimizer %.2f ms, expand %.2f ms, compress %.2f ms; flat %.2f ms", optim_ms,
                 expand_ms, compress_ms, flat_ms);
  g_assert_cmpint(optims, ==, 1);
  g_assert_cmpint(expands, ==, 1);
  g_assert_cmpint(compress_tensors, ==, 314); /* one micro-batch: each tensor once */
  g_assert_cmpfloat(fabs(optim_ms - 314 * 10 * 20e-3), <, 1e-3);
  g_assert_cmpfloat(fabs(expand_ms - 314 * 20e-3), <, 1e-3);
  g_assert_cmpfloat(fabs(compress_ms - 2 * 314 * 20e-3), <, 1e-3);
  g_assert_cmpfloat(flat_ms, <, 3.0);
  g_assert_cmpfloat(optim_ms + expand_ms + compress_ms - flat_ms, >, 78.0);
  st_options_clear(&o);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/axonn/param-tensors", test_param_tensors);
  g_test_add_func("/axonn/unfused-optimizer", test_unfused_optimizer);
  g_test_add_func("/axonn/schedule-tensors", test_schedule_tensors);
  g_test_add_func("/axonn/samo-per-tensor", test_samo_per_tensor);
  return g_test_run();
}
