/* test_linkmap.c: the engine's small map from link ids (engine/linkmap.h). */
#include "engine/linkmap.h"
#include "testutil.h"

static void
test_order_and_growth(void)
{
  /* 1000 keys spread over 7 million ids (a million-GPU cluster's links):
   * found again after the table grew, listed in insertion order, and the
   * values accumulate. */
  LinkMap m;
  link_map_init(&m);
  g_assert_null(link_map_find(&m, 5));
  for (int i = 0; i < 1000; i++) {
    int32_t key = (int32_t)((i * 7919L) % 7000000);
    link_map_get(&m, key)->d += 1.5;
    link_map_get(&m, key)->i = i;
  }
  g_assert_cmpuint(link_map_len(&m), ==, 1000);
  for (int i = 0; i < 1000; i++) {
    int32_t key = (int32_t)((i * 7919L) % 7000000);
    g_assert_cmpint(link_map_key(&m, i), ==, key);
    const LinkMapEntry *e = link_map_find(&m, key);
    g_assert_nonnull(e);
    g_assert_cmpfloat(e->d, ==, 1.5);
    g_assert_cmpint(e->i, ==, i);
  }
  g_assert_null(link_map_find(&m, 1));
  link_map_clear(&m);
}

static void
test_reset(void)
{
  /* Reset empties the map (every key gone, even those whose probe runs
   * crossed each other) and keeps it usable. */
  LinkMap m;
  link_map_init(&m);
  for (int round = 0; round < 3; round++) {
    for (int k = 0; k < 40 + round; k++)
      link_map_get(&m, k * 64 + round)->d = k; /* keys alike in their low bits */
    g_assert_cmpuint(link_map_len(&m), ==, 40 + round);
    link_map_reset(&m);
    g_assert_cmpuint(link_map_len(&m), ==, 0);
    for (int k = 0; k < 50; k++)
      g_assert_null(link_map_find(&m, k * 64 + round));
  }
  LinkMapEntry *e = link_map_get(&m, 3);
  g_assert_cmpfloat(e->d, ==, 0);
  g_assert_cmpint(e->i, ==, 0);
  link_map_clear(&m);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/linkmap/order-and-growth", test_order_and_growth);
  g_test_add_func("/linkmap/reset", test_reset);
  return g_test_run();
}
