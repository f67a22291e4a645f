/* test_loss_autograd.c: the buffers autograd makes around PyTorch's
 * F.cross_entropy (StFramework.loss_autograd, strategy/tensors.c), as its
 * formulas in tools/autograd/derivatives.yaml run on 16-bit logits:
 *
 *   logits.float()       forward: an fp32 copy (_to_copy), gone once
 *                        log_softmax has made the log-probabilities it saves;
 *   nll_loss backward    a dense gradient of the logits' size;
 *   log_softmax backward its input's gradient, beside that one and the saved
 *                        log-probabilities; in fp32, cast after into the
 *                        logits' gradient (the schedule's own buffer).
 *
 * So under torchtitan (fp32 logits) the loss's backward holds two fp32
 * buffers of the logits' size more than a loss that writes its gradient over
 * what it saved (Megatron-LM's vocab_parallel_cross_entropy), its forward one;
 * under automodel (bf16 log-probabilities, loss_16bit) the backward one bf16
 * buffer, the forward none. The peak rises by as much where the loss's
 * backward decides it.
 */
#include <string.h>

#include "strategy/strategy.h"
#include "testutil.h"

/* A small LLaMA whose vocabulary dwarfs its blocks: the loss decides the
 * peak. */
#define MODEL                                                                               \
  "{\"name\": \"big-vocab\", \"input\": [512], \"dtype\": \"bf16\", \"layers\": ["          \
  "{\"name\": \"embed\", \"type\": \"embedding\", \"vocab\": 32768, \"dim\": 256},"         \
  "{\"repeat\": 2, \"layers\": [{\"name\": \"b{i}\", \"type\": \"llama_block\", "           \
  "\"heads\": 4, \"ffn\": 512}]},"                                                           \
  "{\"name\": \"norm\", \"type\": \"rmsnorm\"},"                                             \
  "{\"name\": \"head\", \"type\": \"lm_head\", \"vocab\": 32768},"                           \
  "{\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}"

static StSchedule *
build(const char *framework)
{
  StOptions o;
  st_options_init(&o);
  o.framework = g_strdup(framework);
  o.micro_batch = 2;
  o.global_batch = 4;
  o.precision = ST_PRECISION_MIXED;
  g_autoptr(StModel) m = st_test_model_parse(MODEL);
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 2);
  StSchedule *s = st_test_build("dp", m, c, &o);
  st_options_clear(&o);
  return s;
}

/* Bytes of program 0's buffer named `name`, 0 when it has none. */
static int64_t
buffer(const StSchedule *s, const char *name)
{
  const StProgram *p = g_ptr_array_index(s->programs, 0);
  for (guint i = 0; i < p->buffers->len; i++) {
    const StBuffer *b = &g_array_index(p->buffers, StBuffer, i);
    if (strcmp(b->name, name) == 0)
      return b->bytes;
  }
  return 0;
}

/* Device 0's activations at its peak. */
static int64_t
activations_at_peak(const StSchedule *s)
{
  StTimeline *t = NULL;
  StSummary *sum = st_test_simulate(s, "auto", FALSE, &t);
  int64_t bytes = st_summary_device(sum, 0)->at_peak_by_category[ST_MEM_ACTIVATIONS];
  st_summary_free(sum);
  st_timeline_free(t);
  return bytes;
}

static void
test_buffers(void)
{
  const int64_t logits = 2 * 512 * 32768; /* micro-batch x tokens x vocabulary */
  g_autoptr(StSchedule) titan = build("torchtitan");
  g_autoptr(StSchedule) automodel = build("automodel");
  g_autoptr(StSchedule) megatron = build("megatron");
  g_assert_cmpint(buffer(titan, "loss autograd fwd loss m0"), ==, logits * 4);
  g_assert_cmpint(buffer(titan, "loss autograd bwd loss m0"), ==, 2 * logits * 4);
  g_assert_cmpint(buffer(automodel, "loss autograd fwd loss m0"), ==, 0);
  g_assert_cmpint(buffer(automodel, "loss autograd bwd loss m0"), ==, logits * 2);
  g_assert_cmpint(buffer(megatron, "loss autograd fwd loss m0"), ==, 0);
  g_assert_cmpint(buffer(megatron, "loss autograd bwd loss m0"), ==, 0);
}

static void
test_peak(void)
{
  /* The peak is the loss's backward (the vocabulary dwarfs the blocks):
   * under torchtitan it holds the saved fp32 log-probabilities and the two
   * fp32 buffers; Megatron-LM's loss keeps the same log-probabilities and
   * none of the buffers, its peak (the loss's forward, the bf16 logits
   * beside the log-probabilities) lower by between one and two of them. */
  const int64_t fp32_logits = 2 * 512 * 32768 * 4;
  g_autoptr(StSchedule) titan = build("torchtitan");
  g_autoptr(StSchedule) megatron = build("megatron");
  int64_t t = activations_at_peak(titan), m = activations_at_peak(megatron);
  g_test_message("activations at the peak: torchtitan %" G_GINT64_FORMAT ", megatron %" G_GINT64_FORMAT
                 ", fp32 logits %" G_GINT64_FORMAT, t, m, fp32_logits);
  g_assert_cmpint(t, >=, 3 * fp32_logits);
  g_assert_cmpint(t - m, >=, fp32_logits);
  g_assert_cmpint(t - m, <=, 2 * fp32_logits);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/loss-autograd/buffers", test_buffers);
  g_test_add_func("/loss-autograd/peak", test_peak);
  return g_test_run();
}
