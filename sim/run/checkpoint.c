/* checkpoint.c: what a checkpoint of a layout writes, and how long it takes
 * (run.h, docs/GOODPUT.md "Checkpoints").
 *
 * The sharding arithmetic: a checkpoint holds one copy of the model's states,
 * U bytes (weights and optimizer states, no gradients). A layout whose most
 * loaded GPU holds S bytes of them on N GPUs holds N S / U copies; U / S
 * distinct shards. Pure data parallelism: S = U, one shard, N copies; ZeRO-3
 * on N: S = U / N, N shards, one copy; Megatron t x p x d: S = U / (t p), t p
 * shards, d copies.
 *
 * Who writes: under ST_CKPT_WRITERS_FIRST each shard is written once, by the
 * first rank holding it (the U / S ranks of the first replica, packed on
 * consecutive nodes: DDP's rank 0, DeepSpeed's and FSDP's sharded files,
 * Megatron's data-parallel rank 0 of each model-parallel rank); under
 * ST_CKPT_WRITERS_SPREAD every rank writes U / N (Megatron-Core's
 * --ckpt-fully-parallel-save, torch.distributed.checkpoint's deduplication).
 *
 * Times: a writer's bytes cross its host link (GPU to host memory, every GPU
 * its own link), then the node's path to storage; nodes beyond the tier's
 * max_writers wait in rounds, and no write beats the tier's aggregate
 * bandwidth. Synchronous: the steps wait the copy and the write. Asynchronous
 * (torch.distributed.checkpoint.async_save, Megatron's --async-save): they
 * wait the copy; the write overlaps the steps that follow, and the
 * checkpoint is durable when it ends. A restart reads every rank's S back.
 */
#include <math.h>

#include "run/run.h"

double
st_checkpoint_model_bytes(int64_t params, StPrecision precision, StOptimizer optimizer)
{
  /* ZeRO (Rajbhandari et al., SC 2020) section 3.1: mixed-precision Adam
   * keeps 2 bytes of fp16 weights and K = 12 of fp32 master weights,
   * momentum and variance per parameter; fp32 training 4 + 8. SGD with
   * momentum: one state. */
  gboolean mixed = st_precision_16bit(precision);
  double states = optimizer == ST_OPTIMIZER_ADAM ? 8 : 4;
  return (double)params * ((mixed ? 2 : 4) + states + (mixed ? 4 : 0));
}

double
st_checkpoint_rank_bytes(const StSchedule *s)
{
  double most = 0;
  for (int r = 0; r < s->n_ranks; r++) {
    const StProgram *p = g_ptr_array_index(s->programs, s->ranks[r].program);
    if (p->job != 0)
      continue;
    double bytes = 0;
    for (guint b = 0; b < p->buffers->len; b++) {
      const StBuffer *buf = &g_array_index(p->buffers, StBuffer, b);
      if (buf->persistent && buf->slot <= 0 &&
          (buf->category == ST_MEM_PARAMS || buf->category == ST_MEM_OPTIMIZER))
        bytes += (double)buf->bytes;
    }
    most = MAX(most, bytes);
  }
  return most;
}

void
st_checkpoint_cost(const StRunStep *step, const StRunSpec *spec, StCheckpointCost *out)
{
  *out = (StCheckpointCost){0};
  const StStorage *st = &spec->storage;
  double n = MAX(step->gpus, 1);
  double s = MAX(step->state_bytes_rank, 1.0);
  double u = MAX(step->state_bytes_model, s);
  int per_node = MAX(step->gpus_per_node, 1);
  int nodes = MAX(step->nodes, 1);
  out->copies = n * s / u;
  if (spec->writers == ST_CKPT_WRITERS_SPREAD) {
    out->writers = (int)n;
    out->bytes_writer = u / n;
    out->writer_nodes = nodes;
  } else {
    out->writers = (int)CLAMP(llround(u / s), 1, (long)n);
    out->bytes_writer = s;
    out->writer_nodes = MIN(nodes, (out->writers + per_node - 1) / per_node);
  }
  out->bytes_total = out->bytes_writer * out->writers;
  double host_bw = step->host_bw > 0 ? step->host_bw : 25e9;
  double node_bytes = out->bytes_total / out->writer_nodes;
  double rounds = st->max_writers > 0 ? ceil((double)out->writer_nodes / st->max_writers) : 1;
  out->copy_s = out->bytes_writer / host_bw;
  out->write_s = rounds * node_bytes / st->write_bw_node;
  if (st->aggregate_bw > 0)
    out->write_s = MAX(out->write_s, out->bytes_total / st->aggregate_bw);
  out->stall_s = spec->ckpt_async ? out->copy_s : out->copy_s + out->write_s;
  /* Every rank reads its own states back: S per GPU, N S in all. */
  double read_node = s * MIN(per_node, (int)n);
  double read_rounds = st->max_writers > 0 ? ceil((double)nodes / st->max_writers) : 1;
  out->load_s = read_rounds * read_node / st->read_bw_node + s / host_bw;
  if (st->aggregate_bw > 0)
    out->load_s = MAX(out->load_s, n * s / st->aggregate_bw + s / host_bw);
}
