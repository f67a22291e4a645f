/* energy.c: power, energy and cost of a run (run.h, docs/GOODPUT.md
 * "Energy and cost").
 *
 * A GPU draws by what it does: computing (its rated power: large-model
 * training runs GPUs at their power cap), communicating while not computing,
 * idle (waiting for a restart, a checkpoint, the slowest GPU). The rest of
 * a node (CPUs, memory, NICs, fans) draws node_w whenever the job holds it;
 * the facility multiplies all of it by its PUE.
 *
 * Figures (ESTIMATES unless a cluster file's "power" entry gives them):
 *   rated power (TDP): V100 SXM2 300 W, A100 SXM4 400 W, H100 SXM 700 W,
 *     H200 SXM 700 W (NVIDIA datasheets; Llama 3 paper section 3.3.1: H100s
 *     "at 700W TDP"); another GPU: 400 W. A cluster's power_limit_w caps it.
 *   computing: 1.0 x TDP; communicating only: 0.45 x TDP; idle: 0.10 x TDP
 *     (ESTIMATE: an idle H100 SXM shows 60-80 W in nvidia-smi).
 *   node overhead: 0.4 x the node's GPU TDP (ESTIMATE: the DGX H100 datasheet
 *     gives 10.2 kW maximum for 8 x 700 W GPUs, 4.6 kW for the rest at
 *     maximum; about half of it in steady training).
 *   PUE 1.10 (Google, fleet-wide trailing-twelve-month PUE 1.10 in 2023,
 *     google.com/about/datacenters/efficiency; the Uptime Institute's 2023
 *     survey gives 1.58 as the industry's average: set it for such a site).
 */
#include <string.h>

#include "run/run.h"

static double
rated_power_w(const StCluster *c)
{
  static const struct {
    const char *prefix;
    double w;
  } TDP[] = {{"V100", 300}, {"A100", 400}, {"H100", 700}, {"H200", 700}};
  double w = 400;
  for (gsize i = 0; c != NULL && c->gpu.name != NULL && i < G_N_ELEMENTS(TDP); i++)
    if (g_str_has_prefix(c->gpu.name, TDP[i].prefix))
      w = TDP[i].w;
  if (c != NULL && c->gpu.perf != NULL && c->gpu.perf->power.tdp_w > 0)
    w = c->gpu.perf->power.tdp_w;
  if (c != NULL && c->gpu.power_limit_w > 0)
    w = MIN(w, c->gpu.power_limit_w);
  return w;
}

void
st_power_default(StPower *p, const StCluster *cluster)
{
  double tdp = rated_power_w(cluster);
  int per_node = cluster != NULL ? cluster->gpus_per_node : 8;
  *p = (StPower){
    .gpu_busy_w = tdp,
    .gpu_comm_w = 0.45 * tdp,
    .gpu_idle_w = 0.10 * tdp,
    .node_w = 0.4 * tdp * per_node,
    .pue = 1.10,
    .source = g_strdup("estimates from the GPU's rated power (energy.c); PUE 1.10 (Google "
                       "fleet 2023)"),
  };
}

void
st_power_clear(StPower *p)
{
  g_clear_pointer(&p->source, g_free);
}

void
st_power_copy(StPower *dst, const StPower *src)
{
  *dst = *src;
  dst->source = g_strdup(src->source);
}

void
st_run_energy(const StRunStep *step, const StRunSpec *spec, StRunResult *r)
{
  const StPower *p = spec->power_given ? &spec->power : &step->power;
  double busy = CLAMP(step->busy_fraction, 0, 1);
  double comm = CLAMP(step->comm_fraction, 0, 1 - busy);
  r->gpu_power_w =
    busy * p->gpu_busy_w + comm * p->gpu_comm_w + (1 - busy - comm) * p->gpu_idle_w;
  double stepping = r->parts_s[ST_RUN_PRODUCTIVE] + r->parts_s[ST_RUN_LOST];
  double waiting = r->wall_s - stepping;
  int spares = MAX(spec->spare_nodes, 0);
  double spare_gpus = (double)spares * step->gpus_per_node;
  double gpu_j = step->gpus * (r->gpu_power_w * stepping + p->gpu_idle_w * waiting) +
                 spare_gpus * p->gpu_idle_w * r->wall_s;
  double node_j = (step->nodes + spares) * p->node_w * r->wall_s;
  r->energy_kwh = (gpu_j + node_j) * p->pue / 3.6e6;
  r->gpu_hours = (step->gpus + spare_gpus) * r->wall_s / 3600.0;
  r->cost_gpu = r->gpu_hours * spec->price_gpu_hour;
  r->cost_energy = r->energy_kwh * spec->price_kwh;
  r->cost = r->cost_gpu + r->cost_energy;
}
