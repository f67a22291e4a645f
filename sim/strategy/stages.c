/* stages.c: see stages.h. */
#include "strategy/stages.h"

#include <math.h>

void
st_layer_weights(const StModel *m, StSplitBy by, double *w)
{
  for (int i = 0; i < m->n_layers; i++)
    w[i] = by == ST_SPLIT_PARAMS ? (double)m->layers[i].params
                                 : m->layers[i].fwd_flops + m->layers[i].bwd_flops;
}

void
st_stages_split(const double *w, int n, int n_stages, int32_t *first)
{
  g_return_if_fail(n_stages >= 1 && n_stages <= n);
  /* prefix[i]: sum of w[0..i). best[s][i]: least possible heaviest stage when
   * the first i layers form s stages; cut[s][i]: where the last of them starts. */
  g_autofree double *prefix = g_new0(double, n + 1);
  for (int i = 0; i < n; i++)
    prefix[i + 1] = prefix[i] + w[i];
  g_autofree double *best = g_new(double, (size_t)(n_stages + 1) * (n + 1));
  g_autofree int32_t *cut = g_new0(int32_t, (size_t)(n_stages + 1) * (n + 1));
#define BEST(s, i) best[(size_t)(s) * (n + 1) + (i)]
#define CUT(s, i) cut[(size_t)(s) * (n + 1) + (i)]
  for (int i = 0; i <= n; i++)
    BEST(1, i) = prefix[i];
  for (int s = 2; s <= n_stages; s++) {
    for (int i = s; i <= n; i++) {
      BEST(s, i) = INFINITY;
      for (int j = s - 1; j < i; j++) { /* the last stage is layers [j, i) */
        double heaviest = fmax(BEST(s - 1, j), prefix[i] - prefix[j]);
        if (heaviest < BEST(s, i)) {
          BEST(s, i) = heaviest;
          CUT(s, i) = j;
        }
      }
    }
  }
  first[n_stages] = n;
  for (int s = n_stages, i = n; s >= 1; s--) {
    first[s - 1] = s == 1 ? 0 : CUT(s, i);
    i = first[s - 1];
  }
#undef BEST
#undef CUT
}
