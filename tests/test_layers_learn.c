/* test_layers_learn.c: whole models built of the layer implementations
 * (exec/layers/) learn on the host kernels: a tiny MLP and a tiny
 * transformer (layer_net.h) lower the loss on a fixed batch with a few SGD
 * steps by hand. (Each layer alone: test_layers.c.) */
#include "layer_net.h"

/* 784-style MLP in small: 8 samples of 16 features into 4 classes, fixed;
 * 30 steps of SGD must at least halve the loss (it starts near log 4). */
static void
test_learn_mlp(void)
{
  Net n;
  net_init(&n,
           "{\"name\": \"mlp\", \"input\": [16], \"layers\": ["
           " {\"name\": \"fc1\", \"type\": \"linear\", \"out_features\": 32},"
           " {\"name\": \"relu\", \"type\": \"relu\"},"
           " {\"name\": \"fc2\", \"type\": \"linear\", \"out_features\": 4},"
           " {\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}",
           8);
  g_autoptr(GRand) r = g_rand_new_with_seed(80);
  float *x = g_new(float, 8 * 16);
  for (int k = 0; k < 8 * 16; k++)
    x[k] = (float)g_rand_double_range(r, -1, 1);
  n.input = x;
  n.targets = g_new(int32_t, 8);
  for (int k = 0; k < 8; k++)
    n.targets[k] = k % 4;
  double first = net_step(&n, 0.5f), last = first;
  for (int s = 0; s < 30; s++)
    last = net_step(&n, 0.5f);
  g_test_message("mlp: loss %.4f -> %.4f", first, last);
  g_assert_cmpfloat(first, >, 1.0);
  g_assert_cmpfloat(last, <, 0.5 * first);
  net_clear(&n);
}

/* A one-block causal transformer learns "the next token is this one + 2
 * (mod 11)" on 4 fixed sequences of 8 tokens; tied head. The loss starts
 * near log 11 = 2.4; 40 steps of SGD must take it below 60% of that. */
static void
test_learn_transformer(void)
{
  Net n;
  net_init(&n,
           "{\"name\": \"gpt\", \"input\": [8], \"layers\": ["
           " {\"name\": \"wte\", \"type\": \"embedding\", \"vocab\": 11, \"dim\": 16},"
           " {\"name\": \"wpe\", \"type\": \"position_embedding\"},"
           " {\"name\": \"h0\", \"type\": \"transformer_block\", \"heads\": 2, \"causal\": true},"
           " {\"name\": \"ln_f\", \"type\": \"layernorm\"},"
           " {\"name\": \"head\", \"type\": \"lm_head\", \"vocab\": 11, \"tied\": true},"
           " {\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}",
           4);
  int32_t *ids = g_new(int32_t, 32);
  n.targets = g_new(int32_t, 32);
  for (int b = 0; b < 4; b++)
    for (int t = 0; t < 8; t++) {
      ids[b * 8 + t] = (3 * b + 2 * t) % 11;
      n.targets[b * 8 + t] = (ids[b * 8 + t] + 2) % 11;
    }
  n.input = ids;
  double first = net_step(&n, 0.5f), last = first;
  for (int s = 0; s < 40; s++)
    last = net_step(&n, 0.5f);
  g_test_message("transformer: loss %.4f -> %.4f", first, last);
  g_assert_cmpfloat(first, >, 2.0);
  g_assert_cmpfloat(last, <, 0.6 * first);
  net_clear(&n);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/layers/learn/mlp", test_learn_mlp);
  g_test_add_func("/layers/learn/transformer", test_learn_transformer);
  return g_test_run();
}
