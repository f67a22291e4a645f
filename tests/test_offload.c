/* test_offload.c: --offload optimizer, ZeRO-Offload (Ren et al., USENIX ATC
 * 2021; zero.h, docs/LLM.md "ZeRO-Offload") under the zero strategy: what
 * crosses PCIe per step, what leaves the GPU's memory, that the CPU step
 * sits on the step's critical path, that the host stream survives the
 * schedule's JSON, and the refusals (ZeRO-3, other strategies, the
 * executor). */
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "exec/exec.h"
#include "output/output.h"
#include "sched/sched.h"
#include "strategy/strategy.h"
#include "strategy/strategy_common.h"
#include "testutil.h"

/* zero stage `stage`, mixed precision (DeepSpeed's preset: 16-bit
 * gradients), one sequence per rank per step, 3 steps. */
static void
zero_options(StOptions *o, int stage, gboolean offload)
{
  st_options_init(o);
  o->zero_stage = stage;
  o->precision = ST_PRECISION_MIXED;
  o->micro_batch = 1;
  o->steps = 3;
  o->offload = offload ? ST_OFFLOAD_OPTIMIZER : ST_OFFLOAD_NONE;
}

/* Σ_i ceil(p_i / d) over the layers: a rank's shard (each layer cut on its
 * own, zero_shard.c). */
static int64_t
shard_of(const StModel *m, int d)
{
  int64_t shard = 0;
  for (int i = 0; i < m->n_layers; i++)
    shard += st_shard(m->layers[i].params, d);
  return shard;
}

static void
persistent_by_category(const StSchedule *s, int64_t by[ST_MEM_N])
{
  memset(by, 0, sizeof(int64_t) * ST_MEM_N);
  const StProgram *p = st_schedule_program_of(s, 0);
  for (guint b = 0; b < p->buffers->len; b++) {
    const StBuffer *buf = &g_array_index(p->buffers, StBuffer, b);
    if (buf->persistent)
      by[buf->category] += buf->bytes;
  }
}

/* GPT-2 124M, ZeRO-2 over d = 4 GPUs of a DGX H100, 16-bit gradients and
 * weights. Each rank moves its gradient shard down (2P/d bytes) and its
 * updated parameter shard up (2P/d) every step:
 *
 *   PCIe bytes per step per rank = 4 P / d   (the paper's 4M, over d ranks)
 *
 * exactly 4 Σ ceil(p_i / d) in the schedule's copies, and within a byte per
 * layer of 4P/d; the simulated PCIe traffic of the steady steps, over the
 * ranks and steps, is the same (within 1 %: the window cuts copies). */
static void
test_pcie_bytes(void)
{
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 4);
  const int d = 4;
  StOptions o;
  zero_options(&o, 2, TRUE);
  g_autoptr(StSchedule) s = st_test_build("zero", m, c, &o);
  st_options_clear(&o);
  const StProgram *p = st_schedule_program_of(s, 0);
  int64_t down = 0, up = 0;
  for (guint i = 0; i < p->ops->len; i++) {
    const StOp *op = st_program_op(p, i);
    if (op->kind == ST_OP_COPY && op->sub == ST_COPY_D2H)
      down += op->bytes;
    else if (op->kind == ST_OP_COPY && op->sub == ST_COPY_H2D)
      up += op->bytes;
  }
  int64_t shard = shard_of(m, d);
  g_assert_cmpint(down, ==, 2 * shard);
  g_assert_cmpint(up, ==, 2 * shard);
  g_assert_cmpint(down + up, >=, 4 * m->params / d);
  g_assert_cmpint(down + up, <=, 4 * (m->params / d + m->n_layers));

  StTimeline *t = NULL;
  g_autoptr(StSummary) sum = st_test_simulate(s, NULL, FALSE, &t);
  g_assert_null(sum->oom);
  g_assert_cmpint(sum->steady_steps, >=, 1);
  double per_rank_step = sum->comm_bytes_by_link[ST_LINK_PCIE] / (sum->steady_steps * d);
  g_test_message("PCIe per rank and step: %.0f simulated, %" G_GINT64_FORMAT " closed form",
                 per_rank_step, 4 * shard);
  g_assert_cmpfloat(fabs(per_rank_step / (4.0 * shard) - 1), <, 0.01);
  st_timeline_free(t);
}

/* GPU memory by category, ZeRO-2 over d = 4, Adam in mixed precision:
 *   without offload: params 2P, grads 2P/d, optimizer 12P/d (fp32 master +
 *                    m + v, each layer's shard rounded up);
 *   with:            params 2P, grads 2P/d, optimizer 0 (all in host memory),
 * the persistent buffers to the byte and the simulated peak of the
 * optimizer category; the schedule's notes say what the host holds. */
static void
test_memory(void)
{
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 4);
  int64_t shard = shard_of(m, 4);
  int64_t by[2][ST_MEM_N];
  for (int k = 0; k < 2; k++) {
    StOptions o;
    zero_options(&o, 2, k == 1);
    g_autoptr(StSchedule) s = st_test_build("zero", m, c, &o);
    st_options_clear(&o);
    persistent_by_category(s, by[k]);
    StTimeline *t = NULL;
    g_autoptr(StSummary) sum = st_test_simulate(s, NULL, FALSE, &t);
    g_assert_cmpint(st_summary_device(sum, 0)->peak_by_category[ST_MEM_OPTIMIZER], ==,
                    k == 1 ? 0 : 12 * shard);
    st_timeline_free(t);
    if (k == 1) {
      gboolean host = FALSE;
      for (guint i = 0; i < s->notes->len; i++) {
        const StNote *n = &g_array_index(s->notes, StNote, i);
        if (strcmp(n->key, "host_optimizer_bytes") == 0) {
          g_assert_cmpfloat(n->number, ==, 12.0 * shard);
          host = TRUE;
        }
      }
      g_assert_true(host);
    }
  }
  for (int k = 0; k < 2; k++) {
    g_assert_cmpint(by[k][ST_MEM_PARAMS], ==, 2 * m->params);
    g_assert_cmpint(by[k][ST_MEM_GRADS], ==, 2 * shard);
  }
  g_assert_cmpint(by[0][ST_MEM_OPTIMIZER], ==, 12 * shard);
  g_assert_cmpint(by[0][ST_MEM_OPTIMIZER], >=, 12 * m->params / 4);
  g_assert_cmpint(by[1][ST_MEM_OPTIMIZER], ==, 0);
}

/* One rank (d = 1: no collective to hide anything behind), ZeRO-2, the
 * step's tail with offload is serial: backward, gradients down (2P /
 * B_pcie), CPU Adam (P x 28 bytes at the host's bandwidth), parameters up
 * (2P / B_pcie), then the next forward. Without, the GPU's Adam alone. So
 *
 *   T_offload - T_gpu >= 4P / B_pcie        (the CPU step outlasts the GPU's)
 *   T_offload - T_gpu <= 4P / B_pcie + T_cpu + 2 latencies
 */
static void
test_step_time(void)
{
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 1);
  int64_t step[2];
  StStateBytes bytes;
  for (int k = 0; k < 2; k++) {
    StOptions o;
    zero_options(&o, 2, k == 1);
    g_autoptr(StSchedule) s = st_test_build("zero", m, c, &o);
    if (k == 1)
      st_state_bytes(&o, &bytes);
    st_options_clear(&o);
    StTimeline *t = NULL;
    g_autoptr(StSummary) sum = st_test_simulate(s, NULL, FALSE, &t);
    step[k] = sum->step_time_ns;
    st_timeline_free(t);
  }
  const StLink *pcie = &c->links[ST_LINK_PCIE];
  double pcie_ns = 4.0 * m->params / pcie->bandwidth * 1e9;
  double cpu_ns = (double)m->params * bytes.optim_traffic / st_cluster_host_memory_bandwidth(c) * 1e9;
  double grew = (double)(step[1] - step[0]);
  g_test_message("step %.3f ms -> %.3f ms; PCIe %.3f ms, CPU Adam %.3f ms", step[0] / 1e6,
                 step[1] / 1e6, pcie_ns / 1e6, cpu_ns / 1e6);
  g_assert_cmpfloat(grew, >=, pcie_ns);
  g_assert_cmpfloat(grew, <=, pcie_ns + cpu_ns + 2 * pcie->latency_ns + 1e3);
}

/* The host stream is part of the schedule: to JSON and back it stays a
 * host stream, and the executor refuses it up front by name. */
static void
test_json_and_executor(void)
{
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 2);
  StOptions o;
  zero_options(&o, 1, TRUE);
  g_autoptr(StSchedule) s = st_test_build("zero", m, c, &o);
  st_options_clear(&o);
  cJSON *json = st_schedule_to_json(s);
  g_autoptr(GError) error = NULL;
  g_autoptr(StSchedule) back = st_schedule_from_json(json, "<test>", &error);
  cJSON_Delete(json);
  g_assert_no_error(error);
  const StProgram *p = st_schedule_program_of(back, 0);
  int hosts = 0;
  for (guint k = 0; k < p->streams->len; k++)
    hosts += g_array_index(p->streams, StStream, k).host ? 1 : 0;
  g_assert_cmpint(hosts, ==, 1);
  g_assert_false(st_exec_check(s, &error));
  g_assert_nonnull(strstr(error->message, "host CPU"));
}

/* Megatron's distributed optimizer (ZeRO-1 over DP) offloaded, as
 * Megatron-LM's --optimizer-cpu-offload: GPT-2 124M, t = 2 on 4 GPUs (d =
 * 2), fp32 gradients (the megatron preset's main_grad). Per rank, with S
 * the elements of its optimizer shard: without offload 12 S bytes of
 * optimizer states; with, none on the GPU, 4 S bytes of fp32 gradient down
 * and 2 S of bf16 parameters up a step: D2H = 2 x H2D, 12 S = 6 x H2D. */
static void
test_megatron(void)
{
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 4);
  int64_t by[2][ST_MEM_N], down = 0, up = 0;
  for (int k = 0; k < 2; k++) {
    StOptions o;
    zero_options(&o, 1, k == 1);
    o.framework = g_strdup("megatron");
    o.tensor_parallel = 2;
    o.global_batch = 4;
    g_autoptr(StSchedule) s = st_test_build("megatron", m, c, &o);
    st_options_clear(&o);
    persistent_by_category(s, by[k]);
    const StProgram *p = st_schedule_program_of(s, 0);
    for (guint i = 0; k == 1 && i < p->ops->len; i++) {
      const StOp *op = st_program_op(p, i);
      if (op->kind == ST_OP_COPY)
        *(op->sub == ST_COPY_D2H ? &down : &up) += op->bytes;
    }
    StTimeline *t = NULL;
    g_autoptr(StSummary) sum = st_test_simulate(s, NULL, FALSE, &t);
    g_assert_null(sum->oom);
    st_timeline_free(t);
  }
  g_assert_cmpint(up, >, 0);
  g_assert_cmpint(down, ==, 2 * up);
  g_assert_cmpint(by[1][ST_MEM_OPTIMIZER], ==, 0);
  g_assert_cmpint(by[0][ST_MEM_OPTIMIZER], ==, 6 * up);
  g_assert_cmpint(by[1][ST_MEM_PARAMS], ==, by[0][ST_MEM_PARAMS]);
  g_assert_cmpint(by[1][ST_MEM_GRADS], ==, by[0][ST_MEM_GRADS]);
}

/* Refused: ZeRO-3 (ZeRO-Infinity's offload is another design) and any
 * strategy but zero. */
static void
test_refusals(void)
{
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 2);
  const char *strategies[] = {"zero", "dp"};
  for (int k = 0; k < 2; k++) {
    StOptions o;
    zero_options(&o, k == 0 ? 3 : 0, TRUE);
    g_autoptr(GError) error = st_test_build_refused(strategies[k], m, c, &o);
    st_options_clear(&o);
    g_assert_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID);
    g_assert_nonnull(strstr(error->message, "--offload"));
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/offload/pcie-bytes", test_pcie_bytes);
  g_test_add_func("/offload/memory", test_memory);
  g_test_add_func("/offload/step-time", test_step_time);
  g_test_add_func("/offload/json-and-executor", test_json_and_executor);
  g_test_add_func("/offload/megatron", test_megatron);
  g_test_add_func("/offload/refusals", test_refusals);
  return g_test_run();
}
