/* test_goodput.c: a training run from a step (run/run.h, docs/GOODPUT.md):
 * the closed forms first, then the Monte Carlo against them, the checkpoint
 * arithmetic per layout, and Llama 3's 405B run. */
#include <math.h>

#include "run/run.h"
#include "testutil.h"

/* One GPU on one node, no NIC, no stragglers; a step of 1 min at batch 1; a
 * checkpoint of `bytes` written at 12.5 GB/s with no aggregate limit and an
 * instant host copy. */
static void
unit_step(StRunStep *step, double bytes)
{
  *step = (StRunStep){
    .step_s = 60, .global_batch = 1, .gpus = 1, .nodes = 1, .gpus_per_node = 1, .nics = 0,
    .busy_fraction = 0, .state_bytes_rank = bytes, .state_bytes_model = bytes,
    .host_bw = 1e18,
  };
  st_power_default(&step->power, NULL);
}

/* Failures at 1 per 10 h of the one GPU, nothing else. */
static void
unit_spec(StRunSpec *spec, double hours)
{
  st_run_spec_init(spec);
  spec->train_samples = hours * 60;
  spec->rates.gpu_per_h = 0.1;
  spec->rates.node_per_h = spec->rates.link_per_h = 0;
  spec->rates.software_per_h = spec->rates.planned_per_h = 0;
  spec->storage.aggregate_bw = 0;
  spec->storage.write_bw_node = spec->storage.read_bw_node = 12.5e9;
}

static void
test_closed_forms(void)
{
  /* delta 600 s, M 10 h = 36000 s: Young sqrt(2 delta M) = sqrt(43.2e6) =
   * 6572.67 s; Daly: x = delta / 2M = 1/120, sqrt(2 delta M) (1 + sqrt(x)/3
   * + x/9) - delta = 6572.67 x 1.031355 - 600 = 6178.76 s. */
  g_assert_cmpfloat_with_epsilon(st_young_interval(600, 36000), 6572.67, 0.01);
  g_assert_cmpfloat_with_epsilon(st_daly_interval(600, 36000), 6178.76, 0.05);
  /* Beyond 2M Daly checkpoints every M. */
  g_assert_cmpfloat(st_daly_interval(100, 40), ==, 40);
  /* Daly's expectation: one segment of t = 3600 s at M = 36000, R = 0:
   * M (e^{0.1} - 1) = 36000 x 0.1051709 = 3786.15 s. */
  g_assert_cmpfloat_with_epsilon(st_daly_wall(3600, 3600, 0, 0, 36000), 3786.15, 0.01);
  /* The optimum is one: the closed-form wall at Daly's interval is below
   * the one at half and twice it. */
  double tau = st_daly_interval(600, 36000);
  double at = st_daly_wall(500 * 3600.0, tau, 600, 1080, 36000);
  g_assert_cmpfloat(at, <, st_daly_wall(500 * 3600.0, tau / 2, 600, 1080, 36000));
  g_assert_cmpfloat(at, <, st_daly_wall(500 * 3600.0, tau * 2, 600, 1080, 36000));
}

/* The mean of the Monte Carlo's wall time within 3 standard errors of
 * Daly's closed form, and the parts adding up to the wall. */
static void
assert_within_ci(const StRunResult *r)
{
  double se = r->wall_sd_s / sqrt(r->trials);
  g_test_message("Monte Carlo %.1f h +- %.2f h (3 se), Daly %.1f h", r->wall_s / 3600,
                 3 * se / 3600, r->daly_wall_s / 3600);
  g_assert_cmpfloat(se, >, 0);
  g_assert_cmpfloat(fabs(r->wall_s - r->daly_wall_s), <, 3 * se);
  double sum = 0;
  for (int p = 0; p < ST_RUN_N; p++)
    sum += r->parts_s[p];
  g_assert_cmpfloat_with_epsilon(sum, r->wall_s, 1e-6 * r->wall_s);
}

static void
test_monte_carlo_vs_daly(void)
{
  /* 500 h of work, M = 10 h, a 7.5 TB checkpoint at 12.5 GB/s: delta =
   * 600 s (sync: copy ~0 + write), R = detect 120 + relaunch 300 + init 60
   * + load 600 = 1080 s. */
  StRunStep step;
  unit_step(&step, 7.5e12);
  StRunSpec spec;
  unit_spec(&spec, 500);
  spec.trials = 3000;
  StRunResult r = {0};
  g_assert_true(st_run_estimate(&step, &spec, &r, NULL));
  g_assert_cmpfloat_with_epsilon(r.ckpt.stall_s, 600, 0.01);
  g_assert_cmpfloat_with_epsilon(r.restart_s, 1080, 0.01);
  g_assert_cmpfloat_with_epsilon(r.mtbf_s, 36000, 1e-6);
  g_assert_cmpfloat_with_epsilon(r.interval_s, 6178.76, 0.05);
  assert_within_ci(&r);
  /* The first-order waste (Young): delta / tau + tau / 2M + R / M =
   * 0.097 + 0.086 + 0.030 = 0.21 of the work; the exact is close. */
  double first = 600 / r.interval_s + r.interval_s / 72000 + 1080.0 / 36000;
  g_assert_cmpfloat(fabs(r.wall_s / r.work_s - 1 - first), <, 0.05);
  /* A given interval: 30 min. */
  spec.ckpt_interval_s = 1800;
  st_run_result_clear(&r);
  g_assert_true(st_run_estimate(&step, &spec, &r, NULL));
  g_assert_cmpfloat(r.interval_s, ==, 1800);
  assert_within_ci(&r);
  st_run_result_clear(&r);
  st_run_spec_clear(&spec);
  st_run_step_clear(&step);
}

static void
test_seeded(void)
{
  /* The same seed gives the same run, bit for bit; another seed another. */
  StRunStep step;
  unit_step(&step, 7.5e12);
  StRunSpec spec;
  unit_spec(&spec, 200);
  spec.trials = 50;
  StRunResult a = {0}, b = {0}, c = {0};
  g_assert_true(st_run_estimate(&step, &spec, &a, NULL));
  g_assert_true(st_run_estimate(&step, &spec, &b, NULL));
  spec.seed = 2;
  g_assert_true(st_run_estimate(&step, &spec, &c, NULL));
  g_assert_cmpfloat(a.wall_s, ==, b.wall_s);
  g_assert_cmpuint(a.timeline->len, ==, b.timeline->len);
  /* Field by field: the records' padding is not theirs to compare. */
  for (guint i = 0; i < a.timeline->len; i++) {
    const StRunEvent *x = &g_array_index(a.timeline, StRunEvent, i);
    const StRunEvent *y = &g_array_index(b.timeline, StRunEvent, i);
    g_assert_cmpfloat(x->t_s, ==, y->t_s);
    g_assert_cmpint(x->kind, ==, y->kind);
    g_assert_cmpfloat(x->work_s, ==, y->work_s);
  }
  g_assert_cmpfloat(a.wall_s, !=, c.wall_s);
  st_run_result_clear(&a);
  st_run_result_clear(&b);
  st_run_result_clear(&c);
  st_run_spec_clear(&spec);
  st_run_step_clear(&step);
}

static void
test_async_and_spares(void)
{
  StRunStep step;
  unit_step(&step, 7.5e12);
  StRunSpec spec;
  unit_spec(&spec, 300);
  spec.trials = 200;
  StRunResult sync = {0}, async = {0}, none = {0}, two = {0};
  g_assert_true(st_run_estimate(&step, &spec, &sync, NULL));
  /* Asynchronous: the steps wait only for the host copy (~0 here), so the
   * stalls vanish and the run is shorter. */
  spec.ckpt_async = TRUE;
  g_assert_true(st_run_estimate(&step, &spec, &async, NULL));
  g_assert_cmpfloat(async.ckpt.stall_s, <, 1);
  g_assert_cmpfloat(async.parts_s[ST_RUN_CHECKPOINT], <, sync.parts_s[ST_RUN_CHECKPOINT]);
  g_assert_cmpfloat(async.wall_s, <, sync.wall_s);
  /* No spare node: every GPU failure waits for its repair (4 h, about 30
   * failures); with two spares, most do not. */
  spec.ckpt_async = FALSE;
  spec.spare_nodes = 0;
  g_assert_true(st_run_estimate(&step, &spec, &none, NULL));
  spec.spare_nodes = 2;
  g_assert_true(st_run_estimate(&step, &spec, &two, NULL));
  g_assert_cmpfloat(sync.parts_s[ST_RUN_REPAIR], ==, 0);
  g_assert_cmpfloat(none.parts_s[ST_RUN_REPAIR], >, 0.9 * none.interruptions * 4 * 3600);
  g_assert_cmpfloat(two.parts_s[ST_RUN_REPAIR], <, 0.2 * none.parts_s[ST_RUN_REPAIR]);
  /* Spares are paid for. */
  g_assert_cmpfloat(two.gpu_hours, >, 2.5 * two.wall_s / 3600);
  st_run_result_clear(&sync);
  st_run_result_clear(&async);
  st_run_result_clear(&none);
  st_run_result_clear(&two);
  st_run_spec_clear(&spec);
  st_run_step_clear(&step);
}

/* Box-Muller from a seeded GRand. */
static double
normal(GRand *rand)
{
  double u = g_rand_double(rand), v = g_rand_double(rand);
  return sqrt(-2 * log1p(-u)) * cos(2 * G_PI * v);
}

static void
test_expected_max(void)
{
  /* Order statistics of the standard normal: E[max of 2] = 1/sqrt(pi),
   * E[max of 3] = 3 / (2 sqrt(pi)); of 1000 = 3.2414 (tables: Harter 1961). */
  g_assert_cmpfloat(st_expected_max_normal(1), ==, 0);
  g_assert_cmpfloat_with_epsilon(st_expected_max_normal(2), 1 / sqrt(G_PI), 1e-7);
  g_assert_cmpfloat_with_epsilon(st_expected_max_normal(3), 1.5 / sqrt(G_PI), 1e-7);
  g_assert_cmpfloat_with_epsilon(st_expected_max_normal(1000), 3.2414, 1e-3);
  /* Blom's approximation agrees to 0.02 at cluster sizes (it runs low by ~0.01). */
  for (int n = 100; n <= 16384; n *= 4)
    g_assert_cmpfloat_with_epsilon(st_expected_max_normal_blom(n), st_expected_max_normal(n),
                                   0.02);
  /* Draws: the mean of the max of n draws within 3 standard errors. */
  GRand *rand = g_rand_new_with_seed(7);
  const int ns[] = {16, 1000};
  for (gsize k = 0; k < G_N_ELEMENTS(ns); k++) {
    const int trials = 4000;
    double sum = 0, sum2 = 0;
    for (int t = 0; t < trials; t++) {
      double m = -INFINITY;
      for (int i = 0; i < ns[k]; i++) {
        double z = normal(rand); /* once: MAX evaluates its arguments twice */
        m = MAX(m, z);
      }
      sum += m;
      sum2 += m * m;
    }
    double mean = sum / trials, sd = sqrt((sum2 - sum * sum / trials) / (trials - 1));
    g_assert_cmpfloat(fabs(mean - st_expected_max_normal(ns[k])), <, 3 * sd / sqrt(trials));
  }
  g_rand_free(rand);
  /* A step on 1024 GPUs, busy 90 %, sigma_gpu 1 %, sigma_step 2 %: sync
   * pays 0.9 sqrt(1e-4 + 4e-4) E[M_1024]; one step of slack (cyclic DP's
   * stale rules) averages the jitter: sqrt(1e-4 + 4e-4 / 2). */
  StRunStep step = {.gpus = 1024, .busy_fraction = 0.9};
  StRunSpec spec;
  st_run_spec_init(&spec);
  spec.sigma_gpu = 0.01;
  spec.sigma_step = 0.02;
  double m = st_expected_max_normal(1024);
  g_assert_cmpfloat_with_epsilon(st_straggler_factor(&step, &spec), 1 + 0.9 * sqrt(5e-4) * m,
                                 1e-12);
  step.stale_slack = 1;
  g_assert_cmpfloat_with_epsilon(st_straggler_factor(&step, &spec), 1 + 0.9 * sqrt(3e-4) * m,
                                 1e-12);
  st_run_spec_clear(&spec);
}

/* The checkpoint of a layout, against the sharding arithmetic on GPT-2
 * 124M (Psi parameters) in mixed precision with Adam on 8 GPUs: U = 14 Psi
 * (2 bytes of weights, K = 12 of fp32 master weights and moments). */
static double
rank_bytes(const char *strategy, const StModel *model, const StCluster *cluster,
           const char *option, const char *value)
{
  StOptions o;
  st_test_options_init(&o);
  o.micro_batch = 1;
  g_assert_true(st_options_set(&o, "precision", "mixed", NULL));
  if (option != NULL)
    g_assert_true(st_options_set(&o, option, value, NULL));
  g_autoptr(StSchedule) s = st_test_build(strategy, model, cluster, &o);
  st_options_clear(&o);
  return st_checkpoint_rank_bytes(s);
}

static void
test_checkpoint_sharding(void)
{
  g_autoptr(StModel) model = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) cluster = st_test_cluster_named("dgx-h100", 1, 8);
  double psi = (double)model->params;
  double u = st_checkpoint_model_bytes(model->params, ST_PRECISION_MIXED, ST_OPTIMIZER_ADAM);
  g_assert_cmpfloat_with_epsilon(u, 14 * psi, 1);
  struct {
    const char *strategy, *option, *value;
    double share;   /* S / U */
    int writers;    /* U / S under "first" */
  } cases[] = {
    {"dp", NULL, NULL, 1.0, 1},                       /* every rank holds it all */
    {"zero", "zero-stage", "3", 1.0 / 8, 8},          /* one shard each */
    {"zero", "zero-stage", "1", (2 + 12.0 / 8) / 14, 4}, /* weights whole, states / 8 */
    {"megatron", "tensor-parallel", "2", 0.5, 2},     /* half the model per rank */
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    double s = rank_bytes(cases[i].strategy, model, cluster, cases[i].option, cases[i].value);
    g_test_message("%s %s=%s: S = %.4g GB, U = %.4g GB", cases[i].strategy,
                   cases[i].option ? cases[i].option : "", cases[i].value ? cases[i].value : "",
                   s / 1e9, u / 1e9);
    /* 1 %: Megatron pads the vocabulary (50257 -> 50432) */
    g_assert_cmpfloat(fabs(s / u - cases[i].share), <, 0.01 * cases[i].share);
    StRunStep step = {.gpus = 8, .nodes = 1, .gpus_per_node = 8, .state_bytes_rank = s,
                      .state_bytes_model = u, .host_bw = 64e9};
    StRunSpec spec;
    st_run_spec_init(&spec);
    StCheckpointCost c;
    st_checkpoint_cost(&step, &spec, &c);
    g_assert_cmpint(c.writers, ==, cases[i].writers);
    g_assert_cmpfloat_with_epsilon(c.copies, 8 * cases[i].share, 0.1);
    /* Spread over the replicas: every rank writes U / 8. */
    spec.writers = ST_CKPT_WRITERS_SPREAD;
    st_checkpoint_cost(&step, &spec, &c);
    g_assert_cmpint(c.writers, ==, 8);
    g_assert_cmpfloat_with_epsilon(c.bytes_writer, u / 8, 1);
    st_run_spec_clear(&spec);
  }
}

static void
test_llama3_405b(void)
{
  /* Llama 3 405B on 16,384 H100s (Dubey et al. 2024, "The Llama 3 Herd of
   * Models"): 2,048 nodes of 8, one NIC per GPU, TP 8 x PP 16 x DP 128
   * (Table 4), sequences of 8,192 tokens, 16M tokens per step (2,048
   * sequences). Step: 6 x 405e9 FLOPs per token x 16.8M tokens / (16,384 x
   * 400 TFLOP/s, Table 4's ~400 per GPU) = 6.2 s. States: U = 405e9 x 14 B;
   * a rank holds its TP x PP shard of the bf16 weights (405e9 x 2 / 128 =
   * 6.3 GB) and 1/16,384 of the optimizer states (FSDP-style sharding over
   * the data-parallel ranks: 0.3 GB); each rank saves 1/16,384 of the
   * checkpoint (spread: the paper's "each GPU's model state, 1 MB to 4 GB").
   * Run long enough for about 50 days of wall time and compare with the
   * 54-day snapshot of section 3.3.4 and Table 5: 466 interruptions (419
   * unexpected, 47 planned) and "higher than 90 % effective training time". */
  g_autoptr(StCluster) cluster = st_test_cluster_named("dgx-h100", 2048, 0);
  StRunStep step = {.step_s = 6.2, .global_batch = 2048, .tokens_per_sample = 8192,
                    .gpus = 16384, .nodes = 2048, .gpus_per_node = 8, .nics = 16384,
                    .busy_fraction = 0.9, .comm_fraction = 0.05,
                    .state_bytes_model = 405e9 * 14,
                    .state_bytes_rank = 405e9 * 2 / 128 + 405e9 * 12 / 16384,
                    .host_bw = 64e9};
  st_power_default(&step.power, cluster);
  StRunSpec spec;
  st_run_spec_init(&spec);
  spec.train_tokens = 50 * 86400 / 6.2 * 2048 * 8192.0;
  spec.writers = ST_CKPT_WRITERS_SPREAD;
  spec.trials = 100;
  StRunResult r = {0};
  g_assert_true(st_run_estimate(&step, &spec, &r, NULL));
  double per_54_days = r.interruptions * 54 * 86400 / r.wall_s;
  double unexpected = (r.interruptions - r.interruptions_by_cause[ST_FAIL_PLANNED]) * 54 *
                      86400 / r.wall_s;
  g_test_message("%.1f days, %.0f interruptions per 54 days (%.0f unexpected), goodput %.3f, "
                 "effective %.3f, %.3g MWh",
                 r.wall_s / 86400, per_54_days, unexpected, r.goodput, r.effective,
                 r.energy_kwh / 1000);
  /* The rates are Table 5's: the count per 54 days is 466 within Poisson's
   * 3 sigma (3 sqrt(466) = 65). */
  g_assert_cmpfloat(fabs(per_54_days - 466), <, 65);
  g_assert_cmpfloat(fabs(unexpected - 419), <, 3 * sqrt(419));
  /* The job's MTBF about 2.8 h (54 x 24 / 466). */
  g_assert_cmpfloat_with_epsilon(r.mtbf_s / 3600, 54 * 24 / 466.0, 0.01);
  /* Effective training time above 90 % as the paper reports, not above
   * 99 % (466 restarts of minutes each cost a few per cent). */
  g_assert_cmpfloat(r.effective, >, 0.90);
  g_assert_cmpfloat(r.effective, <, 0.99);
  g_assert_cmpfloat(r.goodput, <, r.effective);
  st_run_result_clear(&r);
  st_run_spec_clear(&spec);
  st_run_step_clear(&step);
}


static void
test_ramp_and_energy(void)
{
  /* No failures, no stragglers, one checkpoint-free segment: the run is its
   * work. 8 GPUs on 1 node, step 1 s at batch 64, busy 50 %, exposed
   * communication 20 %. */
  StRunStep step = {.step_s = 1, .global_batch = 64, .gpus = 8, .nodes = 1, .gpus_per_node = 8,
                    .nics = 8, .busy_fraction = 0.5, .comm_fraction = 0.2,
                    .state_bytes_rank = 1e9, .state_bytes_model = 1e9, .host_bw = 1e12};
  StRunSpec spec;
  st_run_spec_init(&spec);
  spec.rates.gpu_per_h = spec.rates.node_per_h = spec.rates.link_per_h = 0;
  spec.rates.software_per_h = spec.rates.planned_per_h = 0;
  spec.sigma_gpu = spec.sigma_step = 0;
  spec.ckpt_interval_s = 1e9;
  spec.train_samples = 64 * 3600;
  spec.trials = 3;
  spec.power_given = TRUE;
  spec.power = (StPower){.gpu_busy_w = 700, .gpu_comm_w = 300, .gpu_idle_w = 100,
                         .node_w = 2000, .pue = 1.2};
  spec.price_gpu_hour = 2;
  spec.price_kwh = 0.1;
  StRunResult r = {0};
  g_assert_true(st_run_estimate(&step, &spec, &r, NULL));
  /* 3600 steps of 1 s. A GPU stepping draws 0.5 x 700 + 0.2 x 300 + 0.3 x
   * 100 = 440 W; energy = 1.2 x (8 x 440 + 2000) W x 1 h = 6.624 kWh; 8
   * GPU-hours; cost 8 x 2 + 6.624 x 0.1. */
  g_assert_cmpfloat_with_epsilon(r.wall_s, 3600, 1e-6);
  g_assert_cmpfloat_with_epsilon(r.goodput, 1, 1e-12);
  g_assert_cmpfloat_with_epsilon(r.gpu_power_w, 440, 1e-9);
  g_assert_cmpfloat_with_epsilon(r.energy_kwh, 6.624, 1e-9);
  g_assert_cmpfloat_with_epsilon(r.gpu_hours, 8, 1e-9);
  g_assert_cmpfloat_with_epsilon(r.cost, 16.6624, 1e-9);
  /* Megatron-LM's ramp 16,16,S over a batch of 64: batches 16, 32, 48, each
   * over S/3 samples; a step of batch b takes T (a + (1 - a) b / 64) with
   * a = 1 - busy = 0.5. With S = 64 x 300: steps 6400 (1/16 + 1/32 + 1/48)
   * = 733.3, time 6400 (0.5/16 + 0.5/32 + 0.5/48 + 0.5 x 3 / 64) = 366.67
   * + 150 = 516.67 s, then (64 x 3600 - 64 x 300) / 64 = 3300 full steps. */
  spec.ramp_start = 16;
  spec.ramp_increment = 16;
  spec.ramp_samples = 64 * 300;
  st_run_result_clear(&r);
  g_assert_true(st_run_estimate(&step, &spec, &r, NULL));
  g_assert_cmpfloat_with_epsilon(r.ramp_steps, 6400 * (1 / 16.0 + 1 / 32.0 + 1 / 48.0), 1e-6);
  g_assert_cmpfloat_with_epsilon(r.work_s, 6400 * 0.5 * (1 / 16.0 + 1 / 32.0 + 1 / 48.0) + 150 + 3300,
                                 1e-6);
  /* A ramp start of the batch itself is refused, naming the option. */
  GError *error = NULL;
  spec.ramp_start = 64;
  st_run_result_clear(&r);
  g_assert_false(st_run_estimate(&step, &spec, &r, &error));
  g_assert_nonnull(strstr(error->message, "--rampup-batch-size"));
  g_clear_error(&error);
  st_run_result_clear(&r);
  st_run_spec_clear(&spec);
}

static void
test_refuses(void)
{
  StRunSpec spec;
  st_run_spec_init(&spec);
  GError *error = NULL;
  /* Nothing to train. */
  g_assert_false(st_run_spec_check(&spec, &error));
  g_assert_nonnull(strstr(error->message, "--train-tokens"));
  g_clear_error(&error);
  spec.train_tokens = 1e12;
  g_assert_true(st_run_spec_check(&spec, NULL));
  spec.rates.gpu_per_h = -1;
  g_assert_false(st_run_spec_check(&spec, &error));
  g_assert_nonnull(strstr(error->message, "--failure-rates"));
  g_clear_error(&error);
  st_run_spec_clear(&spec);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/goodput/closed-forms", test_closed_forms);
  g_test_add_func("/goodput/monte-carlo-vs-daly", test_monte_carlo_vs_daly);
  g_test_add_func("/goodput/seeded", test_seeded);
  g_test_add_func("/goodput/async-and-spares", test_async_and_spares);
  g_test_add_func("/goodput/expected-max", test_expected_max);
  g_test_add_func("/goodput/checkpoint-sharding", test_checkpoint_sharding);
  g_test_add_func("/goodput/llama3-405b", test_llama3_405b);
  g_test_add_func("/goodput/ramp-and-energy", test_ramp_and_energy);
  g_test_add_func("/goodput/refuses", test_refuses);
  return g_test_run();
}
