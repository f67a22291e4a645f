/* test_megatron_split.c: megatron's model chunks against Megatron-Core's
 * uneven pipeline options and the one published uneven layout we know
 * (Llama 3 405B: 126 layers on 16 stages, "we reduce one Transformer layer
 * each from the first and the last stages", Llama 3 paper section 3.3.2),
 * and the reason Llama 3 gives for it: the first stage holds the most
 * micro-batches in flight under 1F1B. */
#include <string.h>

#include "strategy/megatron.h"
#include "strategy/stages.h"
#include "strategy/strategy.h"
#include "testutil.h"

static void
options(StOptions *o, int first, int last, gboolean embedding, gboolean loss)
{
  st_options_init(o);
  o->first_stage_layers = first;
  o->last_stage_layers = last;
  o->account_for_embedding = embedding;
  o->account_for_loss = loss;
}

/* "a,b,c" of the p stages' transformer layers, or the error's message. */
static char *
split(const char *model, int p, int v, const StOptions *o)
{
  g_autoptr(StModel) m = st_test_model_named(model);
  g_autofree int *stage = g_new(int, p);
  g_autoptr(GError) error = NULL;
  int units = 0;
  g_autofree int32_t *first = st_megatron_split(m, p, v, o, &units, stage, &error);
  if (first == NULL)
    return g_strdup(error->message);
  g_assert_cmpint(first[0], ==, 0);
  g_assert_cmpint(first[p * v], ==, m->n_layers);
  int total = 0;
  GString *text = g_string_new(NULL);
  for (int k = 0; k < p * v; k++)
    g_assert_cmpint(first[k], <, first[k + 1]);
  for (int s = 0; s < p; s++) {
    total += stage[s];
    g_string_append_printf(text, "%s%d", s ? "," : "", stage[s]);
  }
  g_assert_cmpint(total, ==, units);
  return g_string_free(text, FALSE);
}

/* The 405B layout both ways Megatron-LM can write it. */
static void
test_llama3_405b(void)
{
  const char *llama = "7,8,8,8,8,8,8,8,8,8,8,8,8,8,8,7";
  StOptions o;
  options(&o, 7, 7, FALSE, FALSE);
  g_autofree char *first_last = split("llama-3-405b", 16, 1, &o);
  g_assert_cmpstr(first_last, ==, llama);
  st_options_clear(&o);
  /* 126 + embedding + loss = 128 = 16 x 8. */
  options(&o, 0, 0, TRUE, TRUE);
  g_autofree char *accounted = split("llama-3-405b", 16, 1, &o);
  g_assert_cmpstr(accounted, ==, llama);
  st_options_clear(&o);
  /* The first stage alone: the other 119 do not split over 15. */
  options(&o, 7, 0, FALSE, FALSE);
  g_autofree char *refused = split("llama-3-405b", 16, 1, &o);
  g_assert_nonnull(strstr(refused, "the other 119 transformer layers do not split evenly"));
  st_options_clear(&o);
  options(&o, 0, 0, FALSE, FALSE);
  g_autofree char *even = split("llama-3-405b", 16, 1, &o);
  g_assert_nonnull(strstr(even, "do not divide the model's 126 transformer layers"));
  g_assert_nonnull(strstr(even, "--first-stage-layers"));
  st_options_clear(&o);
}

/* Megatron-Core's rules: with interleaving every stage's count is a
 * multiple of v; the two kinds of uneven options exclude each other. */
static void
test_rules(void)
{
  StOptions o;
  options(&o, 7, 7, FALSE, FALSE);
  g_autofree char *odd = split("llama-3-405b", 16, 2, &o);
  g_assert_nonnull(strstr(odd, "not a multiple of --virtual-stages 2"));
  st_options_clear(&o);
  /* 126 - 6 - 8 = 112 = 14 x 8, each a multiple of 2 */
  options(&o, 6, 8, FALSE, FALSE);
  g_autofree char *interleaved = split("llama-3-405b", 16, 2, &o);
  g_assert_cmpstr(interleaved, ==, "6,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8");
  st_options_clear(&o);
  options(&o, 6, 0, TRUE, FALSE);
  g_autofree char *both = split("llama-3-405b", 16, 1, &o);
  g_assert_nonnull(strstr(both, "exclude each other"));
  st_options_clear(&o);
  options(&o, 4, 0, FALSE, FALSE);
  g_autofree char *single = split("gpt2-124m", 1, 1, &o);
  g_assert_nonnull(strstr(single, "need --pipeline-stages > 1"));
  st_options_clear(&o);
}

/* Sum of the FLOPs weights of layers [a, b). */
static double
weight(const double *w, int a, int b)
{
  double sum = 0;
  for (int i = a; i < b; i++)
    sum += w[i];
  return sum;
}

/* GPT-2's head (50257 x 768) weighs about five of its layers: a balanced
 * split gives the last chunk fewer layers, and its heaviest chunk is never
 * heavier than the even split's. */
static void
test_balanced(void)
{
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autofree double *w = g_new(double, m->n_layers);
  st_layer_weights(m, ST_SPLIT_FLOPS, w);
  StOptions o;
  options(&o, 0, 0, FALSE, FALSE);
  int units, stage[4];
  g_autofree int32_t *even = st_megatron_split(m, 4, 1, &o, &units, stage, NULL);
  g_assert_nonnull(even);
  o.layer_split = ST_LAYER_SPLIT_BALANCED;
  g_autofree int32_t *balanced = st_megatron_split(m, 4, 1, &o, &units, stage, NULL);
  g_assert_nonnull(balanced);
  g_assert_cmpint(stage[3], <, 3);
  g_assert_cmpint(stage[0] + stage[1] + stage[2] + stage[3], ==, 12);
  double heaviest_even = 0, heaviest_balanced = 0;
  for (int k = 0; k < 4; k++) {
    heaviest_even = MAX(heaviest_even, weight(w, even[k], even[k + 1]));
    heaviest_balanced = MAX(heaviest_balanced, weight(w, balanced[k], balanced[k + 1]));
  }
  g_test_message("heaviest chunk: even %.3g, balanced %.3g FLOPs", heaviest_even,
                 heaviest_balanced);
  g_assert_cmpfloat(heaviest_balanced, <, heaviest_even);
  g_autoptr(GError) error = NULL;
  o.first_stage_layers = 2;
  g_assert_null(st_megatron_split(m, 4, 1, &o, &units, stage, &error));
  g_assert_nonnull(strstr(error->message, "--layer-split balanced"));
  st_options_clear(&o);
}

/* Device 0's (stage 0's) activation peak under 1F1B. */
static int64_t
stage0_activations(int first, int last)
{
  StOptions o;
  options(&o, first, last, FALSE, FALSE);
  o.framework = g_strdup("ideal");
  o.pipeline_stages = 4;
  o.micro_batch = 1;
  o.global_batch = 8;
  o.precision = ST_PRECISION_MIXED;
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 4);
  g_autoptr(StSchedule) s = st_test_build("megatron", m, c, &o);
  StTimeline *timeline = NULL;
  StSummary *sum = st_test_simulate(s, "auto", FALSE, &timeline);
  int64_t peak = st_summary_device(sum, 0)->peak_by_category[ST_MEM_ACTIVATIONS];
  st_summary_free(sum);
  st_timeline_free(timeline);
  st_options_clear(&o);
  return peak;
}

/* Llama 3's reason for a lighter first stage: under 1F1B stage 0 keeps p
 * micro-batches' activations, the last one; two layers of 12 in place of
 * three keep about two thirds of the activations of the layers. */
static void
test_first_stage_memory(void)
{
  int64_t even = stage0_activations(0, 0), light = stage0_activations(2, 4);
  g_test_message("stage 0 activations: even split %" G_GINT64_FORMAT ", 2 layers %" G_GINT64_FORMAT,
                 even, light);
  g_assert_cmpint(light, <, even);
  g_assert_cmpfloat((double)light / (double)even, >, 0.55);
  g_assert_cmpfloat((double)light / (double)even, <, 0.85);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/megatron-split/llama3-405b", test_llama3_405b);
  g_test_add_func("/megatron-split/rules", test_rules);
  g_test_add_func("/megatron-split/balanced", test_balanced);
  g_test_add_func("/megatron-split/first-stage-memory", test_first_stage_memory);
  return g_test_run();
}
