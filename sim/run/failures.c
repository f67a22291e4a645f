/* failures.c: interruption rates and the closed forms of checkpointing
 * under failures (run.h).
 *
 * Default rates: Llama 3's 54-day snapshot of the 405B pre-training on
 * 16,384 H100 GPUs in 2,048 Grand Teton nodes (8 GPUs, one 400 Gb/s RoCE NIC
 * per GPU): 466 job interruptions, 47 planned and 419 unexpected (Dubey et
 * al., "The Llama 3 Herd of Models", 2024, section 3.3.4 and Table 5). Table 5
 * splits the 419 by root cause; we group its rows by the component whose
 * count the rate scales with:
 *
 *   GPU       268  faulty GPU 148, GPU HBM3 72, GPU SRAM 19, GPU system
 *                  processor 17, thermal interface + sensor 6, silent data
 *                  corruption 6
 *   link       42  network switch / cable 35, NIC 7
 *   node       46  host maintenance (unplanned) 32, SSD 3, power supply 3,
 *                  server chassis 2, IO expansion board 2, CPU 2, system memory 2
 *   software   63  software bug 54, NCCL watchdog timeouts 7, dependency 2
 *   planned    47  (section 3.3.4: automated maintenance, firmware upgrades,
 *                  operator-initiated configuration or data set updates)
 *
 * Exposure: 16,384 GPUs (and NICs) and 2,048 nodes for 54 x 24 = 1,296 h,
 * assuming the job held all of them the whole snapshot (the paper does not
 * say otherwise). Software and planned interruptions are taken per node: an
 * ASSUMPTION (they grow with the processes and hosts a job spans).
 */
#include <math.h>

#include "run/run.h"

G_DEFINE_QUARK(st-run-error-quark, st_run_error)

const char *const st_failure_cause_names[ST_FAIL_N] = {"gpu", "node", "link", "software",
                                                       "planned"};

#define LLAMA3_GPU_HOURS (16384.0 * 1296.0)
#define LLAMA3_NODE_HOURS (2048.0 * 1296.0)

void
st_failure_rates_default(StFailureRates *r)
{
  *r = (StFailureRates){
    .gpu_per_h = 268.0 / LLAMA3_GPU_HOURS,
    .node_per_h = 46.0 / LLAMA3_NODE_HOURS,
    .link_per_h = 42.0 / LLAMA3_GPU_HOURS,
    .software_per_h = 63.0 / LLAMA3_NODE_HOURS,
    .planned_per_h = 47.0 / LLAMA3_NODE_HOURS,
    .source = g_strdup("Llama 3 paper (Dubey et al. 2024), Table 5 and section 3.3.4: 419 "
                       "unexpected + 47 planned interruptions in 54 days on 16,384 H100s"),
  };
}

void
st_failure_rates_clear(StFailureRates *r)
{
  g_clear_pointer(&r->source, g_free);
}

void
st_failure_rates_copy(StFailureRates *dst, const StFailureRates *src)
{
  *dst = *src;
  dst->source = g_strdup(src->source);
}

double
st_failure_job_rates(const StFailureRates *r, int gpus, int nodes, int nics,
                     double out[ST_FAIL_N])
{
  out[ST_FAIL_GPU] = r->gpu_per_h * gpus;
  out[ST_FAIL_NODE] = r->node_per_h * nodes;
  out[ST_FAIL_LINK] = r->link_per_h * nics;
  out[ST_FAIL_SOFTWARE] = r->software_per_h * nodes;
  out[ST_FAIL_PLANNED] = r->planned_per_h * nodes;
  double sum = 0;
  for (int c = 0; c < ST_FAIL_N; c++)
    sum += out[c];
  return sum;
}

gboolean
st_failure_needs_node(StFailureCause cause)
{
  return cause == ST_FAIL_GPU || cause == ST_FAIL_NODE || cause == ST_FAIL_LINK;
}

/* J. W. Young, "A first order approximation to the optimum checkpoint
 * interval", CACM 17(9), 1974. */
double
st_young_interval(double delta_s, double mtbf_s)
{
  return sqrt(2.0 * delta_s * mtbf_s);
}

/* J. T. Daly, "A higher order estimate of the optimum checkpoint interval
 * for restart dumps", Future Generation Computer Systems 22(3), 2006, eq. 37. */
double
st_daly_interval(double delta_s, double mtbf_s)
{
  if (delta_s >= 2.0 * mtbf_s)
    return mtbf_s;
  double x = delta_s / (2.0 * mtbf_s);
  return sqrt(2.0 * delta_s * mtbf_s) * (1.0 + sqrt(x) / 3.0 + x / 9.0) - delta_s;
}

/* Daly (2006), eq. 13, for exponentially distributed failures: a segment of
 * length t takes M e^{R/M} (e^{t/M} - 1) in expectation when every failure
 * (in the segment or in a restart) costs a restart R and the segment starts
 * again. Counted segment by segment, as the Monte Carlo runs: work = k tau
 * + r (0 < r <= tau), k segments of tau + delta and a last one of r with no
 * checkpoint after it (the run ends). */
double
st_daly_wall(double work_s, double tau_s, double delta_s, double restart_s, double mtbf_s)
{
  g_return_val_if_fail(tau_s > 0 && mtbf_s > 0, 0);
  if (work_s <= 0)
    return 0;
  double k = ceil(work_s / tau_s) - 1;
  double last = work_s - k * tau_s;
  return mtbf_s * exp(restart_s / mtbf_s) *
         (k * expm1((tau_s + delta_s) / mtbf_s) + expm1(last / mtbf_s));
}
