/* moe_routing.c: the ranks a routed token reaches (moe_routing.h). */
#include "strategy/moe_routing.h"

#include <glib.h>

/* P(none of a token's k experts is on a given rank) = C(X - X/R, k) / C(X, k). */
static double
ranks_random(int X, int R, int k)
{
  double miss = 1.0;
  for (int i = 0; i < k; i++)
    miss *= X - X / R - i <= 0 ? 0.0 : (double)(X - X / R - i) / (X - i);
  return R * (1.0 - miss);
}

/* The starts t k mod X repeat after X / gcd(X, k) tokens. */
static double
ranks_contiguous(int X, int R, int k)
{
  int g = X;
  for (int b = k; b != 0;) {
    int r = g % b;
    g = b;
    b = r;
  }
  int cycle = X / g;
  g_autofree int *seen = g_new0(int, R); /* the last token that reached each rank, + 1 */
  double sum = 0;
  for (int t = 0; t < cycle; t++)
    for (int j = 0; j < k; j++) {
      int rank = (int)(((long long)t * k + j) % X / (X / R));
      if (seen[rank] != t + 1) {
        seen[rank] = t + 1;
        sum += 1;
      }
    }
  return sum / cycle;
}

double
st_moe_ranks_per_token(int experts, int ranks, int top_k, StMoeRouting routing)
{
  g_return_val_if_fail(experts > 0 && ranks > 0 && top_k > 0 && experts % ranks == 0, 1.0);
  int k = MIN(top_k, experts);
  if (ranks == 1)
    return 1.0;
  return routing == ST_MOE_ROUTING_CONTIGUOUS ? ranks_contiguous(experts, ranks, k)
                                              : ranks_random(experts, ranks, k);
}
