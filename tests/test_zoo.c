/* test_zoo.c: the shipped LLMs (models/NAME.json) against their published
 * figures: parameter counts (total and, for Mixtral, active per token),
 * sequence length and vocabulary, each with its source; the FLOPs of one
 * against the closed form; and Llama-3 8B under ZeRO-3 at 8192 tokens with
 * selective recomputation on 8 H100s, its memory worked out by hand.
 *
 * The counts: a model card or paper states a size class ("7B", "70B") or a
 * rounded figure; the exact count is the sum over the released checkpoint's
 * tensors, which the Hugging Face hub shows rounded to three digits on each
 * model's page ("6.74B params") and which the published shapes give to the
 * unit. Each model is checked both ways: the exact count, and the figure a
 * source prints at the precision it prints it.
 */
#include <math.h>
#include <string.h>

#include "model/layer_type.h"
#include "testutil.h"

typedef struct {
  const char *name;
  int64_t params, active; /* exact: the released checkpoint's tensors */
  double printed;         /* a source's figure, in billions ... */
  double precision;       /* ... rounded to this (half a unit of its last digit) */
  const char *source;
  int64_t seq, vocab;
} Zoo;

static const Zoo ZOO[] = {
  {"llama-2-7b", 6738415616, 6738415616, 6.7, 0.05,
   "LLaMA 7B's shape (Touvron et al. 2023, arXiv 2302.13971, table 2: 6.7B); hub 6.74B", 4096,
   32000},
  {"llama-2-70b", 68976648192, 68976648192, 69.0, 0.05,
   "meta-llama/Llama-2-70b-hf on the hub: 69B (the paper's size class: 70B)", 4096, 32000},
  {"llama-3-8b", 8030261248, 8030261248, 8.03, 0.005, "meta-llama/Meta-Llama-3-8B: 8.03B",
   8192, 128256},
  {"llama-3-70b", 70553706496, 70553706496, 70.6, 0.05, "meta-llama/Meta-Llama-3-70B: 70.6B",
   8192, 128256},
  {"llama-3-405b", 405853388800, 405853388800, 405.0, 1.0,
   "Dubey et al. 2024 (arXiv 2407.21783): 405B; hub 406B", 131072, 128256},
  {"mistral-7b", 7241732096, 7241732096, 7.24, 0.005, "mistralai/Mistral-7B-v0.1: 7.24B", 8192,
   32000},
  {"mixtral-8x7b", 46702792704, 12879925248, 46.7, 0.05,
   "Mistral AI, Mixtral of experts (2023): 46.7B total, 12.9B per token", 32768, 32000},
  {"qwen2-7b", 7615616512, 7615616512, 7.62, 0.005, "Qwen/Qwen2-7B: 7.62B", 32768, 152064},
  {"gpt3-175b", 174604259328, 174604259328, 175.0, 0.5,
   "Brown et al. 2020, table 2.1: 175.0B (the shape it gives counts 174.6B)", 2048, 50257},
};

static void
test_counts(gconstpointer data)
{
  const Zoo *z = data;
  g_autoptr(StModel) m = st_test_model_named(z->name);
  g_test_message("%s: %" G_GINT64_FORMAT " parameters, %" G_GINT64_FORMAT " active; %s",
                 z->name, m->params, m->active_params, z->source);
  g_assert_cmpint(m->params, ==, z->params);
  g_assert_cmpint(m->active_params, ==, z->active);
  g_assert_cmpfloat(fabs((double)z->params / 1e9 - z->printed), <=, z->precision);
  g_assert_cmpint(m->input.n_dims, ==, 1);
  g_assert_cmpint(m->input.dims[0], ==, z->seq);
  /* the vocabulary: the embedding's rows and the head's logits */
  g_assert_cmpint(st_layer_attr(&m->layers[0], "vocab", 0), ==, z->vocab);
  const StLayer *head = &m->layers[m->n_layers - 2];
  g_assert_cmpstr(head->type->name, ==, "lm_head");
  g_assert_cmpint(head->out_shape.dims[1], ==, z->vocab);
}

static void
test_mixtral_active(void)
{
  /* Active per token: everything but 6 of each layer's 8 experts (top 2):
   * 46,702,792,704 - 32 x 6 x 3 x 4096 x 14336. */
  g_autoptr(StModel) m = st_test_model_named("mixtral-8x7b");
  g_assert_cmpint(m->params - m->active_params, ==, INT64_C(32) * 6 * 3 * 4096 * 14336);
  /* Capacity factor 1: 2 x 32768 / 8 = 8192 tokens an expert. */
  g_assert_cmpint(st_layer_attr(&m->layers[3], "capacity", 0), ==, 8192);
}

static void
test_llama3_flops(void)
{
  /* Llama-3 8B forward per sequence of s = 8192: the weights' products
   * 2 s (L (d (d + 2 kv hd) + d d + 3 d f) + d V) with L = 32, d = 4096,
   * kv hd = 1024, f = 14336, V = 128256, plus causal flash attention's
   * 4 k H L s (s + 1) / 2 with k = 128, H = 32. */
  g_autoptr(StModel) m = st_test_model_named("llama-3-8b");
  const double s = 8192, L = 32, d = 4096, f = 14336, V = 128256;
  double weights = L * (d * (d + 2048) + d * d + 3 * d * f) + d * V;
  double want = 2 * s * weights + 4.0 * 128 * 32 * L * s * (s + 1) / 2;
  double got = 0;
  for (int i = 0; i < m->n_layers; i++)
    if (strcmp(m->layers[i].type->name, "llama_block") == 0 ||
        strcmp(m->layers[i].type->name, "lm_head") == 0)
      got += m->layers[i].fwd_flops;
  g_assert_cmpfloat_with_epsilon(got, want, 1e-12 * want);
}

/* GPU 0's highest activation bytes, its events taken in the order the
 * simulator recorded them (time order). */
static int64_t
activation_peak(const StTimeline *t)
{
  int64_t now = 0, best = 0;
  for (guint k = 0; k < t->mem->len; k++) {
    const StMemEvent *e = &g_array_index(t->mem, StMemEvent, k);
    if (e->device != 0 || e->category != ST_MEM_ACTIVATIONS)
      continue;
    now += e->delta;
    best = MAX(best, now);
  }
  return best;
}

static void
test_llama3_zero3(void)
{
  /* stagger sim --model models/llama-3-8b.json --cluster dgx-h100 --strategy
   * zero --zero-stage 3 --seq-len 8192 --recompute selective --micro-batch 1
   * --precision mixed, worked by hand (P = 8,030,261,248, 8 GPUs, GiB):
   * - model states: 16-bit weights P x 2 / 8 = 1.87, their fp32 master
   *   copies and Adam's two states P x 12 / 8 = 11.22, 16-bit gradients
   *   P x 2 / 8 = 1.87 (ZeRO-3 shards all three; each shard rounds up per
   *   bucket: a few bytes);
   * - gathered weights, at most: the head's H = 525,336,576 twice (its
   *   forward's copy, and its backward's, prefetched while the loss runs):
   *   2 H x 2 = 1.96, so 3.83 in all;
   * - gradients in flight, at most: the head's bucket and the last block's
   *   (218,112,000: its weights and norms) before their reduce-scatters
   *   finish: 1.38 more, 3.25;
   * - activations at the end of the forward: flash attention keeps no s x s
   *   scores (so selective recomputation, which would drop nothing, is
   *   refused: no recomputation here) and each of the 32
   *   blocks keeps its input, norm1's output, Q K V (s x 6144), the
   *   attention output, x1, norm2's output (s x 4096 each), gate and up
   *   (s x 2 x 14336) and their product (s x 14336) in bf16, and fp32 the
   *   log-sum-exp (32 heads x s) and two RMSNorm statistics (s each):
   *   1,088 MiB + 1 MiB + 64 KiB a block, 34.03 in all; the final norm's
   *   input and output (the head's input), 128 MiB, its fp32 statistic and
   *   the int32 token ids, 64 KiB; the head's logits (s x 128256, bf16)
   *   1.96 and the loss's fp32 probabilities 3.91: 40.03. */
  g_autoptr(StModel) m = st_test_model_named("llama-3-8b");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 8);
  StOptions o;
  st_options_init(&o);
  o.framework = g_strdup("ideal"); /* 16-bit gradients, 25 MiB buckets */
  o.micro_batch = 1;
  o.zero_stage = 3;
  o.seq_len = 8192;
  o.precision = ST_PRECISION_MIXED;
  g_autoptr(StSchedule) s = st_test_build("zero", m, c, &o);
  st_options_clear(&o);
  g_autoptr(StTimeline) t = NULL;
  g_autoptr(StSummary) sum = st_test_simulate(s, "auto", FALSE, &t);
  const int64_t *peak = st_summary_device(sum, 0)->peak_by_category;
  const double GiB = 1024.0 * 1024 * 1024, P = 8030261248.0, s_ = 8192;
  double kept = s_ * 2 * (5 * 4096 + 6144 + 3 * 14336) + 4 * 32 * s_ + 2 * 4 * s_;
  double acts = 32 * kept + 2 * s_ * 4096 * 2 + 4 * s_ + 4 * s_ + 2 * s_ * 128256 +
                4 * s_ * 128256;
  g_test_message("peak: params %.3f, grads %.3f, optimizer %.3f, activations %.3f GiB",
                 peak[ST_MEM_PARAMS] / GiB, peak[ST_MEM_GRADS] / GiB,
                 peak[ST_MEM_OPTIMIZER] / GiB, peak[ST_MEM_ACTIVATIONS] / GiB);
  /* shards round up per layer and bucket: well under 16 KiB over 36 layers */
  const double H = 525336576.0, block = 218112000.0, rounding = 16384;
  g_assert_cmpfloat_with_epsilon(peak[ST_MEM_OPTIMIZER], P * 12 / 8, 12 * rounding);
  g_assert_cmpfloat_with_epsilon(peak[ST_MEM_PARAMS], P * 2 / 8 + 2 * H * 2, rounding);
  g_assert_cmpfloat_with_epsilon(peak[ST_MEM_GRADS], P * 2 / 8 + (H + block) * 2, rounding);
  /* Every tensor is a multiple of 256 bytes: exact, but for the loss's
   * 2-byte output, alive while its forward runs (the peak's moment). The
   * executor's side of every tensor: test_memory_conformance.c. */
  g_assert_cmpint(activation_peak(t), ==, (int64_t)acts + 2);
  g_assert_cmpint(peak[ST_MEM_ACTIVATIONS], ==, (int64_t)acts + 2);
  g_assert_null(sum->oom);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (gsize k = 0; k < G_N_ELEMENTS(ZOO); k++) {
    g_autofree char *path = g_strdup_printf("/zoo/counts/%s", ZOO[k].name);
    g_test_add_data_func(path, &ZOO[k], test_counts);
  }
  g_test_add_func("/zoo/mixtral-active", test_mixtral_active);
  g_test_add_func("/zoo/llama-3-8b/flops", test_llama3_flops);
  g_test_add_func("/zoo/llama-3-8b/zero3", test_llama3_zero3);
  return g_test_run();
}
