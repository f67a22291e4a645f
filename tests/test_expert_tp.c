/* test_expert_tp.c: --expert-tensor-parallel k below --tensor-parallel t
 * (Megatron-LM's --expert-tensor-parallel-size; its expert RankGenerator
 * orders a stage's ranks etp-ep-dp): the experts split k ways instead of
 * t, the expert-parallel groups span the tensor ranks.
 *
 * tiny-moe (2 MoE layers of X = 4 SwiGLU experts of f = 32, d = 32, top 2,
 * capacity factor 1.5, s = 16) on 4 GPUs, t = 2 with SP, k = 1, E = 4, b = 2,
 * M = 2 micro-batches: a stage's t x d / k = 4 expert slots make one EP
 * group of all 4 ranks (k = t would allow E up to d = 2), each rank owning
 * one expert of each layer whole (3 d f = 3,072 parameters, not 1,536),
 * one program per rank. Each rank routes its own s / t = 8 tokens, C =
 * ceil(1.5 x 2 x 8 / 4) = 6 rows per sample and expert; its 4 all-to-alls
 * per MoE layer and micro-batch move b X C d 2 = 3,072 bytes, and nothing
 * is gathered over a tensor group for the experts (k = 1): the expert pass
 * computes E b C = 48 rows, forward 6 x 48 x d f FLOPs. Expert gradients
 * are reduced over "expert data": groups of one rank here. */
#include <math.h>
#include <string.h>

#include "base/json.h"
#include "model/layer_type.h"
#include "strategy/strategy.h"
#include "testutil.h"

static void
options(StOptions *o, int k, gboolean sp, int E)
{
  st_options_init(o);
  o->framework = g_strdup("ideal");
  o->tensor_parallel = 2;
  o->sequence_parallel = sp;
  o->expert_tensor_parallel = k;
  o->expert_parallel = E;
  o->micro_batch = 2;
  o->global_batch = 2 * 2 * 2;
  o->precision = ST_PRECISION_MIXED;
}

static void
test_layout(void)
{
  const int X = 4, b = 2, M = 2, d = 32, f = 32, E = 4;
  const int64_t C = 6;
  StOptions o;
  options(&o, 1, TRUE, E);
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-moe.json");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 4);
  g_autoptr(StSchedule) s = st_test_build("megatron", m, c, &o);
  g_assert_cmpint(s->programs->len, ==, 4);
  for (int r = 0; r < 4; r++)
    g_assert_cmpint(s->ranks[r].program, ==, r);
  g_autofree char *ep = st_test_group_of(s, "ep", 2);
  g_assert_cmpstr(ep, ==, "0,1,2,3");
  g_autofree char *ed = st_test_group_of(s, "expert data", 3);
  g_assert_cmpstr(ed, ==, "3");
  g_autofree char *tp = st_test_group_of(s, "tp", 3);
  g_assert_cmpstr(tp, ==, "2,3");
  g_assert_cmpint(st_schedule_find_comm(s, "expert tp"), <, 0);
  g_assert_cmpfloat(st_test_note_number(s, "expert_tensor_parallel"), ==, 1);

  const StModel *rm = s->model;
  g_assert_cmpint(st_model_expert_tp(rm), ==, 1);
  int ep_comm = st_schedule_find_comm(s, "ep"), tp_comm = st_schedule_find_comm(s, "tp");
  for (int j = 0; j < 4; j++) {
    const StProgram *p = g_ptr_array_index(s->programs, j);
    int n_ep = 0, expert_gathers = 0;
    for (guint k = 0; k < p->ops->len; k++) {
      const StOp *op = st_program_op(p, k);
      gboolean on_expert = op->layer >= 0 && rm->layers[op->layer].type->link != NULL;
      if (op->kind == ST_OP_COMM_COLL && op->comm == ep_comm) {
        n_ep++;
        g_assert_cmpint(op->bytes, ==, (int64_t)b * X * C * d * 2);
      }
      if (op->kind == ST_OP_COMM_COLL && op->comm == tp_comm && on_expert)
        expert_gathers++;
      if (op->kind == ST_OP_COMP && op->sub == ST_PASS_FWD && on_expert) {
        const StLayer *x = &rm->layers[op->layer];
        g_assert_cmpint(x->tp, ==, 1);
        g_assert_cmpint(x->params, ==, 3 * d * f);
        g_assert_cmpint(st_layer_attr(x, "capacity", 0), ==, C);
        g_assert_cmpint(op->batch, ==, E * b);
        g_assert_cmpfloat(x->fwd_flops, ==, 6.0 * C * d * f);
        /* expert j of each layer: layers 3 + j and 3 + 6 + j */
        g_assert_cmpint(st_layer_attr(x, "expert", -1), ==, j);
      }
    }
    g_assert_cmpint(n_ep, ==, 2 * 4 * M);
    g_assert_cmpint(expert_gathers, ==, 0);
  }
  StTimeline *timeline = NULL;
  StSummary *sum = st_test_simulate(s, "auto", FALSE, &timeline);
  g_assert_cmpint(sum->step_time_ns, >, 0);
  st_summary_free(sum);
  st_timeline_free(timeline);

  /* The rank's model, written (as a schedule carries it) and read back. */
  g_autoptr(cJSON) json = st_model_to_json(rm);
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) back = st_model_from_json(json, "inline", &error);
  g_assert_no_error(error);
  g_assert_cmpint(back->params, ==, rm->params);
  g_assert_cmpint(st_model_expert_tp(back), ==, 1);
  st_options_clear(&o);
}

static void
test_refused(void)
{
  static const struct { int k; gboolean sp; int E; const char *what; } cases[] = {
    {1, FALSE, 2, "needs --sequence-parallel"},
    {3, TRUE, 2, "--expert-tensor-parallel 3 does not divide --tensor-parallel 2"},
    {1, TRUE, 3, "--expert-parallel 3 does not divide the 4 expert slots"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    StOptions o;
    options(&o, cases[i].k, cases[i].sp, cases[i].E);
    g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-moe.json");
    g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 4);
    g_autoptr(GError) error = st_test_build_refused("megatron", m, c, &o);
    if (strstr(error->message, cases[i].what) == NULL)
      g_error("'%s' lacks '%s'", error->message, cases[i].what);
    st_options_clear(&o);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/expert-tp/layout", test_layout);
  g_test_add_func("/expert-tp/refused", test_refused);
  return g_test_run();
}
