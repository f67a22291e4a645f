/* test_context_parallel.c: megatron's --context-parallel (context_parallel.h,
 * layer_context.c) against its closed forms: Megatron-LM's rank order with
 * a cp group, the bytes ring attention and Ulysses' all-to-alls move per
 * layer, the FLOPs and activations a rank keeps, and the refusals. */
#include <math.h>
#include <string.h>

#include "output/output.h"
#include "strategy/context_parallel.h"
#include "strategy/strategy.h"
#include "testutil.h"

static void
options(StOptions *o, int t, int c, int p, int seq, int64_t global)
{
  st_options_init(o);
  o->framework = g_strdup("ideal");
  o->tensor_parallel = t;
  o->sequence_parallel = t > 1;
  o->context_parallel = c;
  o->pipeline_stages = p;
  o->seq_len = seq;
  o->micro_batch = 1;
  o->global_batch = global;
  o->precision = ST_PRECISION_MIXED;
}

static StSchedule *
build(const char *model, int gpus, const StOptions *o)
{
  g_autoptr(StModel) m = st_test_model_named(model);
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", (gpus + 7) / 8, gpus);
  return st_test_build("megatron", m, c, o);
}

/* Megatron-Core's RankGenerator order "tp-cp-ep-dp-pp": on 16 GPUs with
 * t = 2, c = 2, d = 2, p = 2, rank r = tp + 2 cp + 4 dp + 8 stage. The cp
 * groups are ranks t apart ([0, 2], [1, 3], [4, 6], ...), the gradients
 * are reduced over the dp-cp group of a tensor index and stage ([0, 2, 4,
 * 6]), the pipelines are t c d = 8 apart; a cp group computes the same
 * samples: replica (r / 4) mod 2. */
static void
test_layout(void)
{
  StOptions o;
  options(&o, 2, 2, 2, 4096, 4);
  g_autoptr(StSchedule) s = build("llama-3-8b", 16, &o);
  static const struct { const char *comm; int rank; const char *members; } expect[] = {
    {"tp", 0, "0,1"},      {"tp", 5, "4,5"},        {"cp", 0, "0,2"},   {"cp", 5, "5,7"},
    {"cp", 13, "13,15"},   {"data", 0, "0,2,4,6"},  {"data", 9, "9,11,13,15"},
    {"pipe", 0, "0,8"},    {"pipe", 7, "7,15"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(expect); i++) {
    g_autofree char *members = st_test_group_of(s, expect[i].comm, expect[i].rank);
    g_assert_cmpstr(members, ==, expect[i].members);
  }
  for (int r = 0; r < 16; r++) {
    g_assert_cmpint(s->ranks[r].replica, ==, (r / 4) % 2);
    g_assert_cmpint(s->ranks[r].program, ==, r / 8);
  }
  st_options_clear(&o);
}

/* Bytes and count of the collectives of `kind` on "cp" in program 0. */
static void
cp_collectives(const StSchedule *s, StCollKind kind, int64_t *bytes, int *count)
{
  int comm = st_schedule_find_comm(s, "cp");
  const StProgram *p = g_ptr_array_index(s->programs, 0);
  *bytes = 0;
  *count = 0;
  for (guint i = 0; i < p->ops->len; i++) {
    const StOp *op = st_program_op(p, i);
    if (op->kind != ST_OP_COMM_COLL || op->comm != comm)
      continue;
    g_assert_cmpint(op->sub, ==, kind);
    g_assert_cmpint(op->data, ==, ST_DATA_CP);
    *bytes += op->bytes;
    (*count)++;
  }
}

/* Llama-3 8B (32 layers, 32 heads, 8 kv heads of 128), s = 8192, t = 2 +
 * SP, c = 4, M = 2 micro-batches of 1. A rank holds s / c = 2048 tokens
 * and kv / t = 4 kv heads: its key/value chunk K = 2 x 4 x 128 x 2048 x 2
 * bytes = 4 MiB. Ring attention (Transformer Engine's p2p) sends and
 * receives c - 1 chunks per attention forward, twice that backward (the
 * keys and values, and their gradient one exchange behind: c + 1
 * exchanges, the first two the chunk alone, the last two the gradient
 * alone, the last one home): per step 32 M (c - 1) exchanges of K forward
 * and 32 M (c + 1) backward, 3 x 32 M (c - 1) K bytes. */
static void
test_ring_volume(void)
{
  const int64_t L = 32, M = 2, c = 4, K = 2 * 4 * 128 * 2048 * 2;
  StOptions o;
  options(&o, 2, (int)c, 1, 8192, M);
  g_autoptr(StSchedule) s = build("llama-3-8b", 8, &o);
  int64_t bytes;
  int count;
  cp_collectives(s, ST_COLL_RING_SHIFT, &bytes, &count);
  g_assert_cmpint(count, ==, L * M * (c - 1) + L * M * (c + 1));
  g_assert_cmpint(bytes, ==, 3 * L * M * (c - 1) * K);
  /* the note: what a rank sends per step */
  g_assert_cmpfloat(st_test_note_number(s, "cp_bytes_per_gpu_stage0"), ==,
                    (double)(3 * L * M * (c - 1) * K));
  /* The exchanges run beside the attention: a step of the ring is shorter
   * than its compute plus all its exchanges one after the other. */
  StTimeline *timeline = NULL;
  StSummary *sum = st_test_simulate(s, "auto", FALSE, &timeline);
  g_assert_cmpint(sum->step_time_ns, >, 0);
  st_summary_free(sum);
  st_timeline_free(timeline);
  st_options_clear(&o);
}

/* The same with --cp-comm all-to-all (DeepSpeed Ulysses): per layer and
 * micro-batch, forward an all-to-all of the rank's Q, K, V, (q + 2 k) s/c e
 * with q = 32/t x 128 and k = 8/t x 128, = (2048 + 1024) x 2048 x 2 = 12
 * MiB, and of its output, q s/c e = 8 MiB; backward the same two (the
 * output's gradient in, those of Q, K, V back): 4 all-to-alls, 2 (Q + O)
 * bytes of buffers, of which a rank sends (c - 1) / c. */
static void
test_all_to_all_volume(void)
{
  const int64_t L = 32, M = 2, c = 4, Q = 3072 * 2048 * 2, O = 2048 * 2048 * 2;
  StOptions o;
  options(&o, 2, (int)c, 1, 8192, M);
  o.cp_comm = ST_CP_ALL_TO_ALL;
  g_autoptr(StSchedule) s = build("llama-3-8b", 8, &o);
  int64_t bytes;
  int count;
  cp_collectives(s, ST_COLL_ALL_TO_ALL, &bytes, &count);
  g_assert_cmpint(count, ==, 4 * L * M);
  g_assert_cmpint(bytes, ==, 2 * L * M * (Q + O));
  g_assert_cmpfloat(st_test_note_number(s, "cp_bytes_per_gpu_stage0"), ==,
                    (double)(2 * L * M * (Q + O) * (c - 1) / c));
  st_options_clear(&o);
}

/* A rank's model at s / c: its projections and MLPs on s / c tokens, its
 * attention 1 / c of the causal pairs of all s (the two-chunk split):
 * c times its FLOPs are the whole model's, forward and backward. */
static void
test_flops(void)
{
  g_autoptr(StModel) m = st_test_model_named("llama-3-8b");
  for (int c = 2; c <= 16; c *= 2) {
    g_autoptr(GError) error = NULL;
    g_autoptr(StModel) r = st_model_derive_cp(m, NULL, 1, FALSE, c, &error);
    g_assert_no_error(error);
    g_assert_cmpint(r->input.dims[0], ==, m->input.dims[0] / c);
    g_assert_cmpint(st_model_context_parallel(r), ==, c);
    g_assert_cmpfloat(fabs(c * r->fwd_flops / m->fwd_flops - 1), <, 1e-9);
    g_assert_cmpfloat(fabs(c * r->bwd_flops / m->bwd_flops - 1), <, 1e-9);
    /* the attention's steps share the pass: pre, c cores, post sum to 1 */
    const StLayer *l = &r->layers[1];
    g_assert_cmpint(st_layer_cp_part(l), ==, 0);
    double sum = 0;
    for (int k = 0; k < c + 2; k++)
      sum += st_layer_cp_share(l, ST_PASS_BWD, k, c + 2);
    g_assert_cmpfloat(fabs(sum - 1), <, 1e-12);
    g_assert_cmpfloat(st_layer_cp_share(l, ST_PASS_FWD, 1, c + 2), ==,
                      st_layer_cp_share(l, ST_PASS_FWD, c, c + 2));
  }
}

/* Activation memory per GPU divided by c (Megatron-LM / TE: each rank
 * keeps its s / c tokens' activations; flash keeps nothing of s^2): the
 * first GPU's simulated peak of activations at c = 2 is half of c = 1's,
 * same t and sequence (Llama-3 8B, t = 2 + SP, s = 8192). */
static void
test_activations(void)
{
  int64_t acts[2];
  for (int k = 0; k < 2; k++) {
    StOptions o;
    options(&o, 2, 1 << k, 1, 8192, 1);
    g_autoptr(StSchedule) s = build("llama-3-8b", 2 << k, &o);
    StTimeline *timeline = NULL;
    StSummary *sum = st_test_simulate(s, "auto", FALSE, &timeline);
    acts[k] = st_summary_device(sum, 0)->peak_by_category[ST_MEM_ACTIVATIONS];
    st_summary_free(sum);
    st_timeline_free(timeline);
    st_options_clear(&o);
  }
  g_test_message("activations: c = 1 %" G_GINT64_FORMAT ", c = 2 %" G_GINT64_FORMAT, acts[0],
                 acts[1]);
  g_assert_cmpfloat(fabs(2.0 * (double)acts[1] / (double)acts[0] - 1), <, 0.01);
}

static void
refused(const char *strategy, const char *model, int gpus, const StOptions *o, const char *why)
{
  g_autoptr(StModel) m = st_test_model_named(model);
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", (gpus + 7) / 8, gpus);
  g_autoptr(GError) error = st_test_build_refused(strategy, m, c, o);
  g_assert_nonnull(strstr(error->message, why));
}

static void
test_refusals(void)
{
  StOptions o;
  options(&o, 2, 2, 1, 4100, 2); /* 4100 is not a multiple of 2 c t = 8 */
  refused("megatron", "llama-3-8b", 4, &o, "not a multiple of 2 x 2 x t = 8");
  o.seq_len = 4096;
  refused("dp", "llama-3-8b", 4, &o, "--context-parallel: the dp strategy does not model it");
  o.cp_comm = ST_CP_ALL_TO_ALL; /* 8 kv heads over t c = 16 */
  o.tensor_parallel = 8;
  refused("megatron", "llama-3-8b", 16, &o, "kv_heads are not a multiple of t x c = 8 x 2");
  o.cp_comm = ST_CP_RING;
  o.tensor_parallel = 2;
  o.context_parallel = 3; /* 3 does not divide the 4 / t = 2 data-parallel ranks */
  refused("megatron", "llama-3-8b", 4, &o, "groups of 6 that compute the same samples");
  o.context_parallel = 2;
  o.seq_len = 2048;
  refused("megatron", "gpt3-1.3b", 4, &o, "dense attention");
  st_options_clear(&o);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/megatron/cp/layout", test_layout);
  g_test_add_func("/megatron/cp/ring-volume", test_ring_volume);
  g_test_add_func("/megatron/cp/all-to-all-volume", test_all_to_all_volume);
  g_test_add_func("/megatron/cp/flops", test_flops);
  g_test_add_func("/megatron/cp/activations", test_activations);
  g_test_add_func("/megatron/cp/refusals", test_refusals);
  return g_test_run();
}
