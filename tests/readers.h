/* readers.h: inputs of N nodes for every reader of user files, and one call
 * per reader that reads such an input as the command line would (issue 23:
 * every reader linear in its input). Shared by tests/bench/bench_readers.c
 * (the 10^6-node benchmark, docs/PERFORMANCE.md) and
 * tests/test_reader_scaling.c (fails when 10x the input takes over 20x the
 * time).
 *
 * What N counts, per format (each written as a tool other than stagger
 * would write it):
 *   model     layers of a model JSON (linear and relu, alternating)
 *   profile   layer entries of a profile (one per layer and pass)
 *   schedule  ops of a schedule JSON's one program (a chain of COMP ops,
 *             every 8th an all-reduce, every 4th allocating a buffer that
 *             the next frees)
 *   chakra    nodes of a foreign Chakra trace of one rank (PyTorch-like:
 *             COMP nodes with num_ops, tensor_size and durations, every 8th
 *             an all-reduce, every 16th a METADATA node, data deps on the
 *             previous node and every third on the node 4 back, tensors
 *             that one node writes and the next reads, no stagger_*
 *             attribute)
 *   onnx      unnamed nodes of an ONNX graph (MatMul with one shared weight
 *             and Relu, alternating, on a [1, 8] input)
 *   kineto    kernels of a torch.profiler trace (one user_annotation range,
 *             cpu_op, launch and kernel per layer of an N-layer model,
 *             written beside it; reading includes reading that model)
 *   deeppool  rows of a DeepPool profile (one per layer of a model of
 *             linear layers of varied widths and relus, written beside it;
 *             reading includes reading that model)
 *   hf        decoder blocks of a Hugging Face config (n_layer = N: the file
 *             itself is 30 keys whatever N; what grows is the model made)
 *   space     values of a plan space file ("nodes": [1, ..., N])
 * A cluster file has no list that grows (nodes and GPUs are counts), so it
 * is not here.
 */
#pragma once

#include <glib.h>

typedef struct {
  const char *name;
  const char *what; /* what N counts, for the benchmark's table */
  /* Writes the input of n nodes into folder `dir`; returns its path (a
   * Chakra trace: the prefix). Transfer full. */
  char *(*write)(const char *dir, int64_t n, GError **error);
  /* Reads it as the command line does; FALSE with `error` when refused. */
  gboolean (*read)(const char *path, GError **error);
} StReaderInput;

/* Every format, ending with {NULL}. */
const StReaderInput *st_reader_inputs(void);
const StReaderInput *st_reader_input_find(const char *name);

/* CPU seconds (user + system, every thread) of this process so far. */
double st_reader_cpu_seconds(void);
