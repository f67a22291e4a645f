/* strategy_zero.c: ZeRO-DP stages 1, 2 and 3 (Rajbhandari et al., SC 2020).
 *
 * With N ranks and P parameters, each rank keeps 1/N of:
 *   stage 1: optimizer states. Gradients are reduce-scattered per bucket
 *            when backward ends, each rank steps its shard, and the updated
 *            parameters are all-gathered before the next forward.
 *   stage 2: also gradients. Each bucket's gradient exists only from the
 *            backward of its first layer until its reduce-scatter, once per
 *            micro-batch; only the shard stays.
 *   stage 3: also parameters. Every layer's parameters are all-gathered
 *            before its forward and again before its backward and dropped
 *            after; `prefetch` gathers run ahead of the pass that needs them.
 *            Gathers and reductions use separate streams and communicators so
 *            a prefetch is not stuck behind a reduction.
 * Model states per rank (bytes, Adam in mixed precision, K = 12):
 *   stage 1: 2P + 2P + KP/N; stage 2: 2P + (2 + K)P/N; stage 3: (2 + 2 + K)P/N.
 *
 * With --sparsity p (sparse.h), Z = nnz non-zeros: reductions and gathers
 * move compressed vectors; every rank keeps the index lists (4Z: backward
 * compresses every layer and stage 3 expands every gathered one); stages 1
 * and 2 keep the dense 16-bit weights and, after the step, gather the
 * compressed weights into a temporary copy that an expand scatters into
 * them; stage 3 keeps its slice of the compressed weights and expands each
 * gathered layer on the gather stream. Mixed Adam, per rank:
 *   stage 1: 2P + 4Z + 2Z + (4 + 12)Z/N; stage 2: 2P + 4Z + (2 + 4 + 12)Z/N;
 *   stage 3: 4Z + (2 + 2 + 4 + 12)Z/N.
 *
 * With --offload optimizer (ZeRO-Offload, zero.h; stages 1-2, dense), the
 * K = 12 bytes of fp32 master weights and Adam moments per parameter are in
 * host memory: stage 1: 2P + 2P, stage 2: 2P + 2P/N on the GPU; and each
 * rank moves 2P/N bytes of gradient shard down and 2P/N of parameter shard
 * up over PCIe per step, the CPU stepping its shard in between.
 *
 * With --shard-group g (HSDP: PyTorch FSDP's HYBRID_SHARD, DeepSpeed ZeRO++'s
 * hpZ for the parameters), the N ranks form N/g groups of g consecutive
 * ranks (a node's GPUs when g is its GPU count) that each shard the states
 * over their g members, as above with N = g; the k = N/g ranks holding the
 * same shard (one per group) are the replicas: after each reduce-scatter in
 * the group, the shard is all-reduced over them. Per rank and step (stage 2,
 * one micro-batch, 16-bit): intra-group, a reduce-scatter and an all-gather
 * of 2P bytes over g; across groups, an all-reduce of 2P/g bytes over k.
 * Communicators "shard" (stage 3: "gather" and "reduce", both in-group) and
 * "replicate".
 *
 * The mechanism is zero.h's, which megatron shares.
 */
#include "strategy/zero.h"

static StSchedule *
build(const StStrategyInput *in, GError **error)
{
  const StOptions *o = in->options;
  StSparse sparse;
  if (!st_sparse_init(&sparse, o, error))
    return NULL;
  const StSparse *sp = st_sparse_on(&sparse) ? &sparse : NULL;
  gboolean offload = o->offload == ST_OFFLOAD_OPTIMIZER;
  int stage = o->zero_stage > 0 ? o->zero_stage : 1;
  if (offload && (stage == 3 || sp != NULL)) {
    g_set_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID,
                "--offload optimizer: modelled for zero stages 1 and 2, dense (ZeRO-Offload); "
                "not with %s", stage == 3 ? "--zero-stage 3 (ZeRO-Infinity's offload)"
                                          : "--sparsity");
    return NULL;
  }
  if (offload && !in->cluster->links[ST_LINK_PCIE].present) {
    g_set_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID,
                "--offload optimizer: cluster '%s' has no pcie link (its links.pcie) to copy "
                "gradients and parameters between GPU and host over", in->cluster->name);
    return NULL;
  }
  int group = o->shard_group > 0 ? o->shard_group : o->ranks;
  if (o->ranks % group != 0 || (group != o->ranks && sp != NULL)) {
    g_set_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID,
                "--shard-group %d: %s", o->shard_group,
                sp != NULL ? "hybrid sharding is not modelled with --sparsity"
                           : "must divide the ranks");
    if (sp == NULL)
      g_prefix_error(error, "%d ranks: ", o->ranks);
    return NULL;
  }
  StDpFrame frame;
  st_dp_frame_init(&frame, in, "zero");
  StProgram *p = frame.program;
  const StModel *m = frame.model;
  /* What gradients, shards and gathers hold per layer: its parameters, or
   * their non-zeros. */
  g_autofree int64_t *elems = sp ? st_sparse_layer_nnz(sp, m) : g_new(int64_t, m->n_layers);
  for (int i = 0; sp == NULL && i < m->n_layers; i++)
    elems[i] = m->layers[i].params;
  int64_t nnz = 0;
  for (int i = 0; i < m->n_layers; i++)
    nnz += elems[i];
  StZeroSpan span = {.prefix = "", .first = 0, .last = m->n_layers - 1};
  StZeroSpec spec = {
    .program = p,
    .model = m,
    .bytes = frame.bytes,
    .stage = stage,
    .n = group,
    .prefetch = o->prefetch,
    .reshard = (StReshard)o->reshard,
    .compute = frame.compute,
    .elems = elems,
    .spans = &span,
    .n_spans = 1,
    .bucket_bytes = o->bucket_bytes,
    .overlap_param_gather = st_options_overlap_param_gather(o),
    .last_micro = o->accumulation - 1,
    .defer_sync = stage >= 2 && sp == NULL && st_options_defer_grad_sync(o),
    .sparse = sp,
    .offload = offload,
  };
  if (offload) {
    spec.copy_stream = st_program_add_stream(p, "offload", 0);
    spec.host_stream = st_program_add_host_stream(p, "cpu");
  }
  /* HSDP: colors of the groups (consecutive ranks) and of the replicas. */
  g_autofree int32_t *in_group = g_new(int32_t, o->ranks);
  g_autofree int32_t *across = g_new(int32_t, o->ranks);
  for (int r = 0; r < o->ranks; r++) {
    in_group[r] = r / group;
    across[r] = r % group;
  }
  gboolean hybrid = group < o->ranks;
  if (spec.stage == 3) {
    spec.gather_stream = st_program_add_stream(p, "gather", 0);
    spec.reduce_stream = st_program_add_stream(p, "reduce", 0);
    spec.gather_comm = hybrid ? st_schedule_add_comm(frame.schedule, "gather", in_group)
                              : st_schedule_add_world(frame.schedule, "gather");
    spec.reduce_comm = hybrid ? st_schedule_add_comm(frame.schedule, "reduce", in_group)
                              : st_schedule_add_world(frame.schedule, "reduce");
  } else {
    spec.reduce_stream = spec.gather_stream = st_program_add_stream(p, "comm", 0);
    spec.reduce_comm = spec.gather_comm =
      hybrid ? st_schedule_add_comm(frame.schedule, "shard", in_group) : frame.world;
  }
  if (hybrid) {
    spec.replicate = TRUE;
    spec.replicate_comm = st_schedule_add_comm(frame.schedule, "replicate", across);
  }
  g_autoptr(StZero) z = st_zero_new(&spec);
  StPassHooks hooks = st_zero_hooks(z);
  for (int micro = 0; micro < o->accumulation; micro++)
    st_dp_emit_micro_batch(&frame, micro, &hooks);
  st_zero_emit_step(z, UINT32_MAX);

  int n_buckets = st_zero_n_buckets(z);
  StSchedule *s = st_dp_frame_finish(&frame);
  s->settings.strategy = g_strdup("zero");
  s->settings.description =
    g_strdup_printf("zero stage %d: %d ranks, micro-batch %d x %d, %d gradient bucket%s%s%s",
                    spec.stage, s->n_ranks, o->micro_batch, o->accumulation, n_buckets,
                    n_buckets == 1 ? "" : "s",
                    spec.stage == 3 ? ", parameters gathered per layer" : "",
                    offload ? ", optimizer offloaded to the CPU" : "");
  if (hybrid) {
    char *d = s->settings.description;
    s->settings.description = g_strdup_printf("%s, sharded in %d groups of %d (HSDP)", d,
                                              o->ranks / group, group);
    g_free(d);
  }
  st_schedule_note_number(s, "zero_stage", spec.stage);
  st_schedule_note_number(s, "gradient_buckets", n_buckets);
  if (spec.stage == 3)
    st_schedule_note_number(s, "prefetch", o->prefetch);
  if (hybrid) {
    st_schedule_note_number(s, "shard_group", group);
    st_schedule_note_number(s, "shard_groups", o->ranks / group);
  }
  if (sp != NULL)
    st_sparse_note(sp, s, nnz);
  if (offload) {
    /* What lives in host memory per rank, and what crosses PCIe per step. */
    int64_t shard = st_zero_shard_elems(z);
    st_schedule_note_text(s, "offload", "optimizer");
    st_schedule_note_number(s, "host_optimizer_bytes", (double)shard * spec.bytes.optimizer);
    st_schedule_note_number(s, "pcie_bytes_per_step",
                            (double)shard * (spec.bytes.grad + spec.bytes.weight));
  }
  return s;
}

static const StStrategyKnob KNOBS[] = {
  {"zero-stage", "1,2,3"},
  {"recompute", NULL},
  {"recompute-every", NULL},
  {"recompute-ops", NULL},
  {"offload-activations", NULL},
  {"offload", NULL},
  {"shard-group", NULL},
  {NULL},
};

const StStrategy st_strategy_zero = {
  .name = "zero",
  .summary = "ZeRO-DP: optimizer states (1), gradients (2) and parameters (3) sharded over "
             "ranks; reduce-scatter + all-gather",
  .citation = "Rajbhandari et al., ZeRO: Memory Optimizations Toward Training Trillion "
              "Parameter Models, SC 2020",
  .build = build,
  .update = st_sparse_update,
  .estimate = st_zero_estimate,
  .knobs = KNOBS,
};
