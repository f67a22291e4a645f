/* strategy_cdp_slack.c: cyclic DP with model parallelism, absorbing the
 * transfers between stages in the stagger instead of adding devices.
 *
 * With free transfers, worker k's passes are contiguous spans of its cycle
 * T0 (the passes alone), started k T0 / N after worker 0's, and stage l fits
 * on the devices cdp_mp_place gives it when the spans of the workers of one
 * device never meet (for the paper's equal stages, max(N, S) devices in
 * all). Any transfer shifts the later spans, and the workers of one device
 * meet: today's placement (cdp_mp_place with the transfers) then adds
 * devices, up to twice as many, even for microseconds of transfers.
 *
 * Stretching the cycle instead: map every instant t of the free timeline to
 * t (1 + e). Two spans that do not meet on the circle of length T0 do not
 * meet once both are stretched (the map is one-to-one on the circle of
 * length T0 (1 + e), and the stagger T0 (1 + e) / N stretches with it), and
 * a span keeps its length, so after a span of length p comes a gap of e p
 * before the next one starts. A transfer h after a pass of length p fits
 * when h <= e p: e = max h / p over the boundaries a worker crosses (after
 * a forward of stage l, before stage l+1's; after a backward of stage l+1,
 * before stage l's). A device also runs its stage's optimizer step once per
 * cycle (where depends on the reduction): the cycle must be at least its
 * busiest device's passes plus that step, as cdp_mp_place requires.
 *
 * The step is then T0 (1 + e), a bounded cost: the plan takes it when e is
 * within --cdp-slack and the transfers would otherwise need more devices
 * (strategy_cdp.c, which reports the choice either way).
 */
#include <math.h>

#include "strategy/cdp.h"

/* The stretch that fits a transfer of h ns after a pass of p ns. */
static double
fit(double h, double p)
{
  if (h <= 0)
    return 0;
  return p > 0 ? h / p : INFINITY;
}

double
cdp_mp_stretch(const CdpPlan *c)
{
  g_return_val_if_fail(c->hosts != NULL && c->hop_ns != NULL, INFINITY);
  double e = 0, t0 = c->step_free_ns;
  for (int k = 0; k < c->n; k++)
    for (int l = 0; l + 1 < c->s; l++) {
      double h = c->hop_ns[(gsize)k * c->s + l];
      e = MAX(e, fit(h, c->fwd_ns[l]));
      e = MAX(e, fit(h, c->bwd_ns[l + 1]));
    }
  for (int l = 0; l < c->s && t0 > 0; l++) {
    int m = c->hosts[l], most = (c->n + m - 1) / m;
    if (most < 2)
      continue;
    double busy = most * c->a * (c->fwd_ns[l] + c->bwd_ns[l]) + c->update_ns[l];
    e = MAX(e, busy / t0 - 1);
  }
  return e;
}

double
cdp_mp_hop_max(const CdpPlan *c)
{
  double most = 0;
  for (gsize i = 0; c->hop_ns != NULL && i < (gsize)c->n * c->s; i++)
    most = MAX(most, c->hop_ns[i]);
  return most;
}

/* ---- turns on a shared device ------------------------------------------------------ */

/* Worker k's pass i (2 micro + 1 for a backward) of stage l starts this
 * long after time 0 in step 0 of the stretched timeline. */
static double
stretched_start(const CdpPlan *c, int k, int l, int i)
{
  int micro = i / 2;
  gboolean backward = i % 2;
  double t = 0;
  for (int m = 0; m < micro; m++)
    for (int j = 0; j < c->s; j++)
      t += c->fwd_ns[j] + c->bwd_ns[j];
  for (int j = 0; j < c->s && (backward || j < l); j++)
    t += c->fwd_ns[j];
  for (int j = c->s - 1; backward && j > l; j--)
    t += c->bwd_ns[j];
  return (double)k * c->delay_ns + t * (1 + c->stretch);
}

typedef struct {
  double phase; /* within the cycle */
  int window;   /* the cycle of step 0 it falls in */
  int k, i;
} Turn;

static int
by_phase(const void *a, const void *b)
{
  const Turn *x = a, *y = b;
  return (x->phase > y->phase) - (x->phase < y->phase);
}

CdpTurn *
cdp_mp_turns(const CdpPlan *c)
{
  g_return_val_if_fail(c->absorbed && c->hosts != NULL, NULL);
  int per = 2 * c->a;
  CdpTurn *turns = g_new(CdpTurn, (gsize)c->n * c->s * per);
  for (gsize x = 0; x < (gsize)c->n * c->s * per; x++)
    turns[x] = (CdpTurn){-1, -1, 0, -1, -1};
  double T = (double)c->delay_ns * c->n;
  for (int l = 0; l < c->s; l++)
    for (int j = 0; j < c->hosts[l] && c->hosts[l] < c->n; j++) {
      g_autoptr(GArray) ring = g_array_new(FALSE, FALSE, sizeof(Turn));
      for (int k = j; k < c->n; k += c->hosts[l])
        for (int i = 0; i < per; i++) {
          double at = stretched_start(c, k, l, i);
          Turn t = {fmod(at, T), (int)floor(at / T), k, i};
          g_array_append_val(ring, t);
        }
      g_array_sort(ring, by_phase);
      for (guint b = 0; b < ring->len; b++) {
        gboolean wraps = b == 0;
        const Turn *A = &g_array_index(ring, Turn, wraps ? ring->len - 1 : b - 1);
        const Turn *B = &g_array_index(ring, Turn, b);
        /* B of step t follows A of step t - lag; a program reaches one step back. */
        int lag = A->window - B->window + wraps;
        if (A->k == B->k || lag < 0 || lag > 1)
          continue;
        CdpTurn *in = &turns[((gsize)B->k * c->s + l) * per + B->i];
        in->from = A->k;
        in->from_pass = A->i;
        in->prev = lag == 1;
        CdpTurn *out = &turns[((gsize)A->k * c->s + l) * per + A->i];
        out->to = B->k;
        out->to_pass = B->i;
      }
    }
  return turns;
}
