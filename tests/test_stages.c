/* test_stages.c: balanced contiguous stages (strategy/stages.h). */
#include "strategy/stages.h"
#include "testutil.h"

static void
test_uniform(void)
{
  /* 8 equal layers in 4 stages: 2 each. */
  double w[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  int32_t first[5];
  st_stages_split(w, 8, 4, first);
  int32_t want[5] = {0, 2, 4, 6, 8};
  g_assert_cmpmem(first, sizeof first, want, sizeof want);
}

static void
test_heavy_layer(void)
{
  /* Weights 1 1 1 6 1 1 1 in 3 stages: the heavy layer alone bounds the
   * heaviest stage at 6; the best split is [1 1 1][6][1 1 1], heaviest 6. */
  double w[7] = {1, 1, 1, 6, 1, 1, 1};
  int32_t first[4];
  st_stages_split(w, 7, 3, first);
  int32_t want[4] = {0, 3, 4, 7};
  g_assert_cmpmem(first, sizeof first, want, sizeof want);
}

static void
test_brute_force(void)
{
  /* Against every split of 9 random layers into 3 stages. */
  GRand *rand = g_rand_new_with_seed(3);
  for (int trial = 0; trial < 50; trial++) {
    double w[9];
    for (int i = 0; i < 9; i++)
      w[i] = g_rand_double_range(rand, 0.1, 10);
    double best = 1e300;
    for (int a = 1; a < 8; a++)
      for (int b = a + 1; b < 9; b++) {
        double s0 = 0, s1 = 0, s2 = 0;
        for (int i = 0; i < 9; i++)
          *(i < a ? &s0 : i < b ? &s1 : &s2) += w[i];
        best = MIN(best, MAX(s0, MAX(s1, s2)));
      }
    int32_t first[4];
    st_stages_split(w, 9, 3, first);
    double heaviest = 0;
    for (int s = 0; s < 3; s++) {
      double sum = 0;
      g_assert_cmpint(first[s], <, first[s + 1]);
      for (int i = first[s]; i < first[s + 1]; i++)
        sum += w[i];
      heaviest = MAX(heaviest, sum);
    }
    g_assert_cmpfloat_with_epsilon(heaviest, best, 1e-9);
  }
  g_rand_free(rand);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/stages/uniform", test_uniform);
  g_test_add_func("/stages/heavy-layer", test_heavy_layer);
  g_test_add_func("/stages/brute-force", test_brute_force);
  return g_test_run();
}
