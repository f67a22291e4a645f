/* profile_sharing.c: a layer pass run together with copies of itself, to
 * calibrate the simulator's GPU sharing models (sim/cost/share_*.c): the
 * fill inferred from it, and the priority leak.
 *
 * Measured per layer pass and batch, each kernel on its own stream and
 * buffers, all started together (the backend's replay, device.h):
 *   - k = 2 and 4 copies at equal priority: how the pass slows when others
 *     run. In the model, k kernels of fill f share the device at rate
 *     min(1, 1 / (k f)) each: st_profiler_fill inverts that.
 *   - a pair, one stream of higher priority: a GPU's priorities only order
 *     the block scheduler's queue (kernels already resident are not
 *     preempted), so the high one is slowed too; against the equal pair
 *     this gives the pass's priority leak, (s_hi - 1) / (s_eq - 1), the
 *     "interference" share model's parameter (st_profile_layer_leak). Not
 *     used for the fill.
 * Every measurement goes into the profile's "sharing" section, the fill
 * onto the layer entries.
 */
#include "exec/profile_private.h"


double
st_profiler_fill(double alone_ns, const int *streams, const double *span_ns, int n,
                 double tolerance, gboolean *bound)
{
  g_return_val_if_fail(alone_ns > 0 && n > 0, 1.0);
  double best = 1.0;
  gboolean best_bound = FALSE;
  for (int i = 0; i < n; i++) {
    double slowdown = span_ns[i] / alone_ns;
    double f = MAX(slowdown, 1.0) / (double)streams[i];
    gboolean is_bound = slowdown < 1.0 + tolerance;
    /* On a tie, a measured slowdown beats a bound: f = 1/2 shows no slowdown
     * with 2 copies, and shows itself with 4. */
    if (f < best - 1e-12 || (f < best + 1e-12 && best_bound && !is_bound)) {
      best = f;
      best_bound = is_bound;
    }
  }
  if (bound != NULL)
    *bound = best_bound;
  return CLAMP(best, 1e-3, 1.0);
}

gboolean
prof_sharing(ProfDev *d, ProfLayer *const *benches, const StLayer *layer, const GPtrArray *names,
             StPass pass, int batch, double alone_ns, StProfile *profile, GError **error)
{
  StReplayBody body = pass == ST_PASS_FWD ? prof_layer_fwd : prof_layer_bwd;
  static const int counts[] = {2, 4};
  double span[G_N_ELEMENTS(counts)];
  for (gsize c = 0; c < G_N_ELEMENTS(counts); c++) {
    int k = counts[c];
    StReplayPart parts[PROF_STREAMS];
    for (int p = 0; p < k; p++)
      parts[p] = (StReplayPart){d->streams[p], body, benches[p]};
    ProfTiming t;
    if (!prof_measure(d, parts, k, TRUE, &t, error))
      return FALSE;
    span[c] = t.span_ns;
    StProfileSharing m = {layer->name, layer->signature, pass, batch, k, FALSE, alone_ns,
                          t.end_ns};
    st_profile_add_sharing(profile, d->device_name, &m);
    g_autofree char *what = g_strdup_printf("%s %s batch %d x%d together", layer->name,
                                            st_pass_name(pass), batch, k);
    prof_step(d, what);
  }
  /* The pair with priorities: stream 0 high. */
  StReplayPart pair[2] = {{d->streams[PROF_STREAM_HIGH], body, benches[0]},
                          {d->streams[1], body, benches[1]}};
  ProfTiming t;
  if (!prof_measure(d, pair, 2, TRUE, &t, error))
    return FALSE;
  StProfileSharing m = {layer->name, layer->signature, pass, batch, 2, TRUE, alone_ns, t.end_ns};
  st_profile_add_sharing(profile, d->device_name, &m);
  g_autofree char *what = g_strdup_printf("%s %s batch %d, high and low priority", layer->name,
                                          st_pass_name(pass), batch);
  prof_step(d, what);

  gboolean bound = FALSE;
  double fill =
    st_profiler_fill(alone_ns, counts, span, (int)G_N_ELEMENTS(counts), PROF_NO_SLOWDOWN, &bound);
  for (guint i = 0; i < names->len; i++)
    st_profile_set_layer_fill(profile, d->device_name, g_ptr_array_index(names, i),
                              layer->signature, pass, batch, fill, bound);
  return TRUE;
}
