/* pipeline_uniform.h: what the pipeline strategy's tests share (test_pipeline.c,
 * test_pipeline_dualpipev.c): the uniform pipeline of custom layers on the
 * unit cluster, whose step, bubble and memory have closed forms.
 *
 * The unit cluster (tests/data/engine/cluster.json: 100 TFLOP/s fp32,
 * 1 TB/s; intra-node 100 GB/s with 1 us latency) and identical custom
 * layers. At micro-batch 10 each layer's forward takes f = 10 x 1e9 FLOP /
 * 1e14 FLOP/s = 100 us and its backward b = 200 us. A stage boundary
 * carries 1000 B per sample: 10 kB per micro-batch, c = 1 us + 10 kB / 100
 * GB/s = 1.1 us per transfer. The optimizer (fp32 Adam, 28 B per parameter,
 * 1e6 parameters per layer) takes o = 28 us.
 */
#pragma once

#include "base/json.h"
#include "engine/engine.h"
#include "output/output.h"
#include "strategy/strategy.h"
#include "strategy/strategy_pipeline.h"
#include "testutil.h"

static const char UNIFORM_MODEL[] =
  "{\"name\": \"uniform4\", \"input\": [250], \"layers\": [{\"repeat\": 4, \"layers\": ["
  "{\"name\": \"l{i}\", \"type\": \"custom\", \"params\": 1000000, \"fwd_flops\": 1000000000,"
  " \"bwd_flops\": 2000000000, \"activation_bytes\": 4000, \"output_bytes\": 1000}]}]}";

#define F_NS 100000.0 /* forward of one layer, one micro-batch */
#define B_NS 200000.0 /* backward */
#define C_NS 1100.0   /* one boundary transfer */
#define O_NS 28000.0  /* one stage's optimizer step */
#define ACT 40000     /* activation bytes one layer keeps per micro-batch */
#define BOUNDARY 10000 /* bytes crossing a stage boundary per micro-batch */

static inline StModel *
model_from_text(const char *text)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(cJSON) root = cJSON_Parse(text);
  g_assert_nonnull(root);
  StModel *m = st_model_from_json(root, "test", &error);
  g_assert_no_error(error);
  return m;
}

static inline StSchedule *
build(const StModel *m, const StCluster *c, const StOptions *o)
{
  return st_test_build("pipeline", m, c, o);
}

static inline StSummary *
simulate(const StSchedule *s, gboolean no_fold, StTimeline **timeline)
{
  return st_test_simulate(s, "auto", no_fold, timeline);
}

/* ---- the uniform pipeline ---- */

typedef struct {
  StModel *model;
  StCluster *cluster;
  StOptions options;
} Uniform;

/* 4 stages of one layer on 4 GPUs (one pipeline), M = 8 micro-batches of 10. */
static inline void
uniform_init(Uniform *u, StPipeOrder order, gboolean checkpoint)
{
  u->model = model_from_text(UNIFORM_MODEL);
  u->cluster = st_test_cluster("tests/data/engine/cluster.json", 1, 4);
  st_test_options_init(&u->options);
  u->options.micro_batch = 10;
  u->options.global_batch = 4 * 10 * 2; /* ranks x micro x accumulation 2: M = 4 x 2 */
  u->options.steps = 2;
  u->options.pipeline_stages = 4;
  u->options.pipeline_schedule = order;
  u->options.recompute = checkpoint ? ST_RECOMPUTE_FULL : ST_RECOMPUTE_NONE;
}

static inline void
uniform_clear(Uniform *u)
{
  st_model_free(u->model);
  st_cluster_free(u->cluster);
  st_options_clear(&u->options);
}

/* The uniform pipeline again, `layers` layers after a first one that has no
 * weights and costs nothing, so that every stage's layer computes an input
 * gradient: stage 0 holds it and l0. `bwd` is the backward's FLOPs per
 * sample. */
static inline StModel *
uniform_split_model(int layers, double bwd)
{
  g_autofree char *text = g_strdup_printf(
    "{\"name\": \"uniform4\", \"input\": [250], \"layers\": ["
    "{\"name\": \"in\", \"type\": \"custom\", \"params\": 0, \"fwd_flops\": 0,"
    " \"bwd_flops\": 0, \"activation_bytes\": 0, \"output_bytes\": 1000},"
    "{\"repeat\": %d, \"layers\": [{\"name\": \"l{i}\", \"type\": \"custom\","
    " \"params\": 1000000, \"fwd_flops\": 1000000000, \"bwd_flops\": %.0f,"
    " \"activation_bytes\": 4000, \"output_bytes\": 1000}]}]}",
    layers, bwd);
  return model_from_text(text);
}

/* Folded and unfolded simulations of `s` agree on every figure. */
static inline void
check_folding(const StSchedule *s)
{
  StTimeline *tf, *tu;
  g_autoptr(StSummary) folded = simulate(s, FALSE, &tf);
  g_autoptr(StSummary) unfolded = simulate(s, TRUE, &tu);
  g_assert_cmpint(folded->step_time_ns, >, 0);
  g_assert_cmpint(folded->step_time_ns, ==, unfolded->step_time_ns);
  for (int d = 0; d < s->n_devices; d++)
    g_assert_cmpint(st_summary_device(folded, d)->peak_bytes, ==,
                    st_summary_device(unfolded, d)->peak_bytes);
  g_assert_cmpfloat_with_epsilon(folded->comm_bytes_total, unfolded->comm_bytes_total,
                                 1e-6 * (1 + unfolded->comm_bytes_total));
  for (int k = 0; k < ST_MEM_N; k++)
    g_assert_cmpint(folded->total_peak_by_category[k], ==, unfolded->total_peak_by_category[k]);
  st_timeline_free(tf);
  st_timeline_free(tu);
}
