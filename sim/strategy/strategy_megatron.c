/* strategy_megatron.c: `megatron`, the LLM-era 3D parallelism of
 * Megatron-LM: tensor parallelism (Shoeybi et al. 2019) with sequence
 * parallelism (Korthikanti et al. 2022) inside a node, pipeline
 * parallelism with 1F1B or interleaved 1F1B across (Narayanan et al.
 * 2021), data parallelism over the rest. docs/LLM.md describes it; the
 * pieces are shared with the other strategies:
 *
 * - one rank of a tensor-parallel group computes on the model derived as
 *   that rank (st_model_derive_as: heads, kv heads, ffn and vocabulary / t,
 *   layer_type.h), which is the schedule's model; tensor_parallel.h emits
 *   each pass with the group's collectives;
 * - the pipeline's stage programs (strategy_pipeline_stage.c) run the
 *   passes, p2p and gradient buckets, with model chunks for the
 *   interleaved order (strategy_pipeline_order.c).
 *
 * Layout, as Megatron-LM's RankGenerator orders ranks by default
 * ("tp-cp-ep-dp-pp", megatron/core/parallel_state.py): R = t x p x d ranks,
 * rank r is tensor rank r mod t of data-parallel replica (r / t) mod d of
 * pipeline stage r / (t d). A tensor-parallel group is t consecutive ranks
 * (on consecutive GPUs: inside a node when t divides the node's GPUs), a
 * data-parallel group the ranks t apart within a stage, a pipeline the
 * ranks t d apart. Communicators: "tp", "pipe" (p2p, indexed by stage),
 * "data" (gradient all-reduce), "tied" (the embedding's and the tied head's
 * stages, when they differ).
 *
 * With --context-parallel c (context_parallel.h) R = t x c x d x p, rank r
 * being context rank (r / t) mod c of replica (r / t c) mod d of stage
 * r / (t c d); a "cp" group is c ranks t apart; "data" spans the d c
 * ranks of a tensor index and stage (Megatron's dp-cp group), which ZeRO
 * shards over and experts spread across; the model is one context rank's
 * (s / c tokens, st_model_derive_cp).
 *
 * Stages are cut between units, Megatron's transformer layers, evenly or
 * as Megatron-LM's uneven options say (megatron_split.c), the embedding on
 * the first stage, the head and the loss on the last.
 *
 * A step runs M = global batch / (d x micro-batch) micro-batches through
 * each pipeline; interleaving (v > 1) needs M a multiple of p, as
 * Megatron-LM does.
 */
#include "strategy/strategy_pipeline.h"
#include "strategy/megatron.h"
#include "strategy/strategy_common.h"

#include <stdarg.h>

#include "cost/framework.h"
#include "model/layer_type.h"

typedef struct {
  int t, p, d, v; /* tensor, pipeline, data-parallel sizes; chunks per stage */
  int c;          /* context-parallel size (context_parallel.h) */
  int dc;         /* d x c: the ranks a stage's gradients are reduced over (Megatron's
                     dp-cp group), which ZeRO shards over and experts spread across */
  int e;          /* expert-parallel size, dividing t dc / k */
  int k;          /* the experts' tensor-parallel size, dividing t (t: Megatron's default) */
  int n_units;
  int moe_layers; /* routers in the model */
  int32_t *first; /* [p v + 1]: chunk k's layers, st_megatron_split's (owned) */
} Layout;

/* The sizes from the options, each checked against the ranks, the model and
 * the batch. */
static gboolean
layout_of(const StStrategyInput *in, const StModel *m, Layout *l, GError **error)
{
  const StOptions *o = in->options;
  *l = (Layout){
    .t = MAX(o->tensor_parallel, 1),
    .p = MAX(o->pipeline_stages, 1),
    .v = MAX(o->virtual_stages, 1),
    .c = MAX(o->context_parallel, 1),
    .e = MAX(o->expert_parallel, 1),
    .k = o->expert_tensor_parallel > 0 ? o->expert_tensor_parallel : MAX(o->tensor_parallel, 1),
  };
  int R = o->ranks;
  if (o->sparsity > 0)
    return st_strategy_refuse(error, "--sparsity: megatron keeps dense model states (SAMO's modifier applies "
                       "to dp, zero and pipeline)");
  if (o->offload == ST_OFFLOAD_OPTIMIZER && o->zero_stage != 1 && o->zero_stage != 2)
    return st_strategy_refuse(error, "--offload optimizer: megatron offloads the distributed optimizer's "
                       "shards (Megatron-LM's --optimizer-cpu-offload): needs --zero-stage 1 "
                       "or 2");
  if (o->offload == ST_OFFLOAD_OPTIMIZER && !in->cluster->links[ST_LINK_PCIE].present)
    return st_strategy_refuse(error, "--offload optimizer: cluster '%s' has no pcie link (its links.pcie)",
                in->cluster->name);
  if (R % (l->t * l->p) != 0)
    return st_strategy_refuse(error, "--tensor-parallel %d x --pipeline-stages %d = %d does not divide the %d "
                       "ranks (R = t x p x d)",
                l->t, l->p, l->t * l->p, R);
  if (R % (l->t * l->p * l->c) != 0)
    return st_strategy_refuse(error, "--context-parallel %d does not divide the %d data-parallel ranks "
                       "(R = t x c x d x p)", l->c, R / (l->t * l->p));
  l->d = R / (l->t * l->p * l->c);
  l->dc = l->d * l->c;
  if (l->v > 1 && l->p == 1)
    return st_strategy_refuse(error, "--virtual-stages %d: interleaving needs --pipeline-stages > 1", l->v);
  if (l->t % l->k != 0)
    return st_strategy_refuse(error, "--expert-tensor-parallel %d does not divide --tensor-parallel %d",
                              l->k, l->t);
  if (l->k < l->t && !o->sequence_parallel)
    return st_strategy_refuse(error, "--expert-tensor-parallel %d below --tensor-parallel %d needs "
                              "--sequence-parallel (each tensor rank then routes its own tokens, "
                              "as Megatron-LM requires for MoE with tensor parallelism)",
                              l->k, l->t);
  if (l->k == l->t && l->dc % l->e != 0)
    return st_strategy_refuse(error, "--expert-parallel %d does not divide the %d data-parallel%s ranks "
                       "(experts spread over data-parallel ranks, as Megatron-LM's expert "
                       "groups)", l->e, l->dc, l->c > 1 ? " x context-parallel" : "");
  if (l->k < l->t && l->t * l->dc / l->k % l->e != 0)
    return st_strategy_refuse(error, "--expert-parallel %d does not divide the %d expert slots of a "
                              "stage (tensor x data-parallel ranks / --expert-tensor-parallel %d)",
                              l->e, l->t * l->dc / l->k, l->k);
  for (int i = 0; i < m->n_layers; i++) {
    if (!m->layers[i].chain_open || (i > 0 && m->layers[i - 1].chain_open))
      continue;
    l->moe_layers++;
    int64_t experts = st_layer_attr(&m->layers[i], "experts", 0);
    if (experts % l->e != 0)
      return st_strategy_refuse(error, "--expert-parallel %d does not divide layer %d '%s''s %" G_GINT64_FORMAT
                         " experts", l->e, i, m->layers[i].name, experts);
  }
  if (l->e > 1 && l->moe_layers == 0)
    return st_strategy_refuse(error, "--expert-parallel %d: the model has no MoE layer", l->e);
  if (l->k != l->t && l->moe_layers == 0)
    return st_strategy_refuse(error, "--expert-tensor-parallel %d: the model has no MoE layer", l->k);
  gboolean splits = FALSE;
  for (int i = 0; i < m->n_layers && !splits; i++)
    splits = m->layers[i].type->tp == ST_TP_PARALLEL || m->layers[i].type->tp == ST_TP_VOCAB_IN ||
             m->layers[i].type->tp == ST_TP_VOCAB_OUT;
  if (l->t > 1 && !splits)
    return st_strategy_refuse(error, "--tensor-parallel %d: no layer of the model splits over a tensor group "
                       "(Megatron-LM splits attention, MLPs, the embedding and the head); every "
                       "tensor rank would run the whole model on the same samples", l->t);
  int M = o->accumulation; /* per pipeline: st_strategy_resolve with sample_group */
  if (l->v > 1 && M % l->p != 0)
    return st_strategy_refuse(error, "--virtual-stages %d: the %d micro-batches per "
                       "pipeline must be a multiple of the %d stages (Megatron-LM's interleaved "
                       "schedule)",
                l->v, M, l->p);
  l->first = st_megatron_split(m, l->p, l->v, o, &l->n_units, NULL, error);
  return l->first != NULL;
}

/* Communicators laid out as the top says; `color` is scratch of R. */
static void
add_comms(StSchedule *s, const Layout *l, const StPipe *pp, StPipeComms *comms, int *tp_comm,
          int *cp_comm)
{
  /* td: the ranks of a stage (tensor x context x data); the data groups
   * span the context-parallel ranks too (Megatron's dp-cp group) */
  int R = s->n_ranks, t = l->t, td = l->t * l->dc;
  g_autofree int32_t *color = g_new(int32_t, R);
  for (int r = 0; r < R; r++)
    color[r] = r / t;
  *tp_comm = st_schedule_add_comm(s, "tp", color);
  *cp_comm = -1;
  if (l->c > 1) {
    for (int r = 0; r < R; r++)
      color[r] = r % t + t * (r / (t * l->c));
    *cp_comm = st_schedule_add_comm(s, "cp", color);
  }
  for (int r = 0; r < R; r++)
    color[r] = r % td;
  comms->pipe = st_schedule_add_comm(s, "pipe", color);
  for (int r = 0; r < R; r++)
    color[r] = r % t + t * (r / td);
  comms->data = st_schedule_add_comm(s, "data", color);
  comms->data_gather = pp->zero_stage == 3 ? st_schedule_add_comm(s, "data gather", color) : -1;
  comms->ep = comms->expert_data = comms->expert_data_gather = -1;
  comms->expert_tp = -1;
  if (pp->moe_segments) {
    /* Megatron-LM's expert groups (parallel_state.py's expert
     * RankGenerator, etp-ep-dp-pp): a stage's ranks q = r mod td counted
     * in blocks of k (the experts' tensor group), those split into td /
     * (k e) blocks of e, experts spread over a block, their gradients
     * reduced across the blocks. With k = t the blocks of k are the tensor
     * groups: the data-parallel index split into d / e blocks of e. */
    int e = l->e, k = l->k;
    for (int r = 0; r < R; r++)
      color[r] = r % td % k + k * (r % td / (k * e)) + (td / e) * (r / td);
    comms->ep = st_schedule_add_comm(s, "ep", color);
    for (int r = 0; r < R; r++)
      color[r] = r % td % k + k * (r % td / k % e) + k * e * (r / td);
    comms->expert_data = st_schedule_add_comm(s, "expert data", color);
    if (k > 1 && k < t) {
      for (int r = 0; r < R; r++)
        color[r] = r / k;
      comms->expert_tp = st_schedule_add_comm(s, "expert tp", color);
    }
    comms->expert_data_gather =
      pp->zero_stage == 3 ? st_schedule_add_comm(s, "expert data gather", color) : -1;
  }
  comms->tied = -1;
  if (pp->tied_copy) {
    for (int r = 0; r < R; r++) {
      int stage = r / td;
      gboolean member = pp->stage_of[pp->tied_head] == stage ||
                        pp->stage_of[pp->tied_embed] == stage;
      color[r] = member ? r % td : -1;
    }
    comms->tied = st_schedule_add_comm(s, "tied", color);
  }
}

/* ---- notes ---------------------------------------------------------------------- */

static void
note_layout(StSchedule *s, const Layout *l, const StPipe *pp, const StModel *m)
{
  st_schedule_note_number(s, "tensor_parallel", l->t);
  st_schedule_note_number(s, "sequence_parallel", m->layers[0].sp ? 1 : 0);
  st_schedule_note_number(s, "pipeline_stages", l->p);
  st_schedule_note_number(s, "virtual_stages", l->v);
  st_schedule_note_number(s, "data_parallel", l->d);
  st_schedule_note_number(s, "expert_parallel", l->e);
  if (l->k != l->t)
    st_schedule_note_number(s, "expert_tensor_parallel", l->k);
  if (pp->moe_imbalance > 1)
    st_schedule_note_number(s, "moe_imbalance", pp->moe_imbalance);
  st_schedule_note_number(s, "context_parallel", l->c);
  st_schedule_note_number(s, "micro_batches", pp->n_micro);
  st_schedule_note_number(s, "transformer_layers", l->n_units);
  g_autofree int *per_stage = g_new(int, l->p);
  int n_units;
  g_autofree int32_t *first = st_megatron_split(m, l->p, l->v, pp->options, &n_units, per_stage,
                                                NULL);
  g_autoptr(GString) stages = g_string_new(NULL);
  for (int st = 0; first != NULL && st < l->p; st++)
    g_string_append_printf(stages, "%s%d", st ? "," : "", per_stage[st]);
  st_schedule_note_text(s, "stage_transformer_layers", stages->str);
  /* Narayanan et al. 2021, section 2.2: (p - 1) / (v m) of the ideal time. */
  st_schedule_note_number(s, "bubble_fraction_estimate",
                          (double)(l->p - 1) / ((double)l->v * pp->n_micro));
  st_schedule_note_text(s, "rank_order", l->c > 1 ? "tp-cp-dp-pp (Megatron-LM's tp-cp-ep-dp-pp)"
                                                   : "tp-dp-pp (Megatron-LM's tp-cp-ep-dp-pp)");
  /* Stage 0's layers per pass over a micro-batch: what its collectives move. */
  int64_t tp_bytes = 0;
  for (int k = 0; l->t > 1 && k < l->p * l->v; k += l->p)
    for (int i = pp->first[k]; i < pp->first[k + 1]; i++) {
      tp_bytes += st_tp_pass_comm_bytes(m, i, ST_PASS_FWD, pp->options->micro_batch,
                                        pp->bytes.activation);
      tp_bytes += st_tp_pass_comm_bytes(m, i, ST_PASS_BWD, pp->options->micro_batch,
                                        pp->bytes.activation);
      if (pp->recomputes[i] == ST_RECOMPUTE_FULL) /* selective: no collective */
        tp_bytes += st_tp_pass_comm_bytes(m, i, ST_PASS_RECOMPUTE, pp->options->micro_batch,
                                          pp->bytes.activation);
    }
  st_schedule_note_number(s, "tp_bytes_per_gpu_stage0", (double)tp_bytes * pp->n_micro);
  /* What each rank of stage 0 sends over "cp" per step (context_parallel.h). */
  int64_t cp_bytes = 0;
  for (int k = 0; pp->tp != NULL && pp->tp->cp != NULL && k < l->p * l->v; k += l->p)
    for (int i = pp->first[k]; i < pp->first[k + 1]; i++) {
      int b = pp->options->micro_batch;
      cp_bytes += st_cp_pass_bytes(pp->tp->cp, m, i, ST_PASS_FWD, b) +
                  st_cp_pass_bytes(pp->tp->cp, m, i, ST_PASS_BWD, b);
      if (pp->options->recompute == ST_RECOMPUTE_FULL)
        cp_bytes += st_cp_pass_bytes(pp->tp->cp, m, i, ST_PASS_RECOMPUTE, b);
    }
  if (l->c > 1)
    st_schedule_note_number(s, "cp_bytes_per_gpu_stage0", (double)cp_bytes * pp->n_micro);
  if (pp->tied_copy)
    st_schedule_note_text(s, "tied_embedding",
                          "the head's stage keeps a copy; gradients summed over \"tied\"");
}

/* ---- build ------------------------------------------------------------------------ */

/* Megatron-LM pads the vocabulary to a multiple of 128 t
 * (--make-vocab-size-divisible-by 128, times the tensor-parallel size), so
 * that every rank's share is whole and aligned; the padding rows are
 * computed like the others (--vocab-multiple K: of K t). The padded size,
 * or 0 when nothing changes. */
#define VOCAB_MULTIPLE 128

static int64_t
pad_vocab(StModel *m, int t, int k)
{
  int64_t padded = 0, multiple = (int64_t)(k > 0 ? k : VOCAB_MULTIPLE) * t;
  for (int i = 0; i < m->n_layers; i++) {
    StLayer *layer = &m->layers[i];
    for (int a = 0; a < layer->n_attrs; a++) {
      StAttr *attr = &layer->attrs[a];
      if (g_strcmp0(attr->key, "vocab") != 0 || attr->value % multiple == 0)
        continue;
      attr->value = (attr->value + multiple - 1) / multiple * multiple;
      padded = attr->value;
    }
  }
  return padded;
}

/* The model one rank of a tensor-parallel and context-parallel group
 * computes (transfer full). */
static StModel *
rank_model(const StModel *model, const StOptions *o, int64_t *padded, GError **error)
{
  int t = MAX(o->tensor_parallel, 1), c = MAX(o->context_parallel, 1);
  gboolean sp = o->sequence_parallel && t > 1;
  if (c > 1 && !st_megatron_cp_check(model, o, error))
    return NULL;
  g_autoptr(StModel) copy = st_model_copy(model);
  *padded = t > 1 ? pad_vocab(copy, t, o->vocab_multiple) : 0;
  int k = o->expert_tensor_parallel > 0 && o->expert_tensor_parallel < t && sp
            && t % o->expert_tensor_parallel == 0 ? o->expert_tensor_parallel : t;
  StModel *m = st_model_derive_etp(copy, NULL, t, sp, c, k, error);
  if (m == NULL && c > 1)
    g_prefix_error(error, "--tensor-parallel %d --context-parallel %d: ", t, c);
  else if (m == NULL)
    g_prefix_error(error, "--tensor-parallel %d: ", t);
  return m;
}

static StSchedule *
build(const StStrategyInput *in, GError **error)
{
  const StOptions *o = in->options;
  int t = MAX(o->tensor_parallel, 1);
  gboolean sp = o->sequence_parallel && t > 1;
  int64_t padded;
  g_autoptr(StModel) m = rank_model(in->model, o, &padded, error);
  if (m == NULL)
    return NULL;
  Layout l;
  if (!layout_of(in, m, &l, error))
    return NULL;
  /* Megatron-LM's own orders only; the split backward's orders are the
   * pipeline strategy's (they would need each tensor-parallel part's B and
   * W around its collectives). */
  if (st_pipe_order_splits((StPipeOrder)o->pipeline_schedule)) {
    g_free(l.first);
    st_strategy_refuse(error, "--pipeline-schedule zb-h1/zb-h2/dualpipev: megatron runs "
                       "Megatron-LM's 1F1B (interleaved with --virtual-stages); the "
                       "zero-bubble orders are the pipeline strategy's, as is dualpipev");
    return NULL;
  }
  StPipe pp;
  if (!st_pipe_init(&pp, m, in->cluster, in->profile, o, error)) {
    g_free(l.first);
    st_pipe_clear(&pp);
    return NULL;
  }
  pp.order = ST_PIPE_1F1B;
  pp.n_stages = l.p;
  pp.n_chunks = l.v;
  pp.n_data = l.dc;
  pp.n_micro = o->accumulation;
  pp.zero_stage = o->zero_stage;
  pp.offload = o->offload == ST_OFFLOAD_OPTIMIZER;
  /* MoE layers run as segments with expert parallelism, and with sequence
   * parallelism over a tensor group (the experts then compute on every
   * tensor rank's rows). */
  g_autofree int32_t *owner = g_new(int32_t, m->n_layers);
  pp.ep = l.e;
  pp.etp = l.k;
  pp.moe_segments = l.moe_layers > 0 && (l.e > 1 || sp);
  for (int i = 0; i < m->n_layers; i++)
    owner[i] = -1;
  for (int i = 0; pp.moe_segments && i < m->n_layers; i++) {
    if (!m->layers[i].chain_open || (i > 0 && m->layers[i - 1].chain_open))
      continue;
    int X = (int)st_layer_attr(&m->layers[i], "experts", 0);
    for (int x = 0; x < X; x++)
      owner[i + 1 + x] = x / (X / l.e);
  }
  pp.expert_owner = pp.moe_segments ? owner : NULL;
  pp.moe_imbalance = pp.moe_segments && l.e > 1 && o->moe_imbalance > 1 ? o->moe_imbalance : 1.0;
  pp.dispatch_per_rank = st_options_framework(o)->dispatch_per_rank;
  pp.moe_routing = o->moe_routing;
  st_pipe_set_split(&pp, g_steal_pointer(&l.first));

  int R = o->ranks;
  const StModel *mm = m;
  StSchedule *s = st_schedule_new(g_steal_pointer(&m), st_cluster_copy(in->cluster), R, NULL);
  StPipeComms comms;
  int tp_comm, cp_comm;
  add_comms(s, &l, &pp, &comms, &tp_comm, &cp_comm);
  StCpSpec cp = {cp_comm, l.c, (StCpComm)o->cp_comm, pp.bytes.activation};
  StTpSpec tp = {tp_comm, l.t, pp.bytes.activation,
                 o->sequence_parallel && st_options_tp_comm_overlap(o), -1,
                 l.c > 1 ? &cp : NULL, -1};
  if (l.t > 1 || l.c > 1)
    pp.tp = &tp;
  int td = l.t * l.dc;
  int n_ep = pp.moe_segments ? l.e : 1;
  for (int st = 0; st < l.p; st++)
    for (int j = 0; j < n_ep; j++) {
      int program = st_schedule_add_program(s, st_pipe_stage_program(&pp, st, j, &comms));
      for (int r = st * td; r < (st + 1) * td; r++) {
        /* its tensor and context groups compute the same samples; experts
         * spread over the data x context ranks */
        int replica = (r / (l.t * l.c)) % l.d, ep_index = r % td / l.k % n_ep;
        if (ep_index != j)
          continue;
        s->ranks[r].program = program;
        s->ranks[r].replica = replica;
      }
    }

  s->steps = o->steps;
  s->settings.strategy = g_strdup("megatron");
  s->settings.precision = o->precision;
  s->settings.recompute = (StRecompute)o->recompute;
  s->settings.optimizer = o->optimizer;
  s->settings.micro_batch = o->micro_batch;
  s->settings.accumulation = pp.n_micro;
  s->settings.global_batch = o->global_batch;
  /* one rank holding every expert computes the same rows however they route */
  s->settings.moe_imbalance = pp.moe_imbalance;
  g_autofree char *zero = pp.zero_stage > 0 ? g_strdup_printf(", ZeRO %d over DP", pp.zero_stage)
                                             : g_strdup("");
  g_autofree char *ep = l.e > 1 ? g_strdup_printf(" (EP %d)", l.e) : g_strdup("");
  g_autofree char *cpx = l.c > 1 ? g_strdup_printf(" x CP %d (%s)", l.c,
                                                   o->cp_comm == ST_CP_RING ? "ring"
                                                                            : "all-to-all")
                                 : g_strdup("");
  g_autofree char *chunks = l.v > 1 ? g_strdup_printf(" (%d chunks each, interleaved 1F1B)", l.v)
                                    : g_strdup(l.p > 1 ? " (1F1B)" : "");
  g_autofree char *recompute = st_recompute_describe(&pp.recompute);
  s->settings.description = g_strdup_printf(
    "megatron: TP %d%s%s x PP %d%s x DP %d%s%s (%d ranks), %d micro-batches of %d per pipeline%s",
    l.t, sp ? " + SP" : "", cpx, l.p, chunks, l.d, ep, zero, R, pp.n_micro, o->micro_batch,
    recompute);
  note_layout(s, &l, &pp, mm);
  if (pp.offload)
    st_schedule_note_text(s, "offload", "optimizer");
  if (padded > 0) {
    st_schedule_note_number(s, "vocab_padded", (double)padded);
    /* the executor's data and loss keep to the file's (exec/layers/layer_loss.c) */
    for (int i = 0; i < in->model->n_layers; i++)
      if (st_layer_attr(&in->model->layers[i], "vocab", 0) > 0) {
        st_schedule_note_number(s, "vocab_unpadded",
                                (double)st_layer_attr(&in->model->layers[i], "vocab", 0));
        break;
      }
  }
  st_schedule_note_number(s, "zero_stage", pp.zero_stage);
  st_pipe_clear(&pp);
  return s;
}

gboolean
st_megatron_shape(const StStrategyInput *in, StMegatronShape *out, GError **error)
{
  const StOptions *o = in->options;
  int64_t padded;
  *out = (StMegatronShape){0};
  StModel *m = rank_model(in->model, o, &padded, error);
  Layout l;
  if (m == NULL || !layout_of(in, m, &l, error)) {
    st_model_free(m);
    return FALSE;
  }
  *out = (StMegatronShape){l.t, l.p, l.dc, l.v, l.e, g_steal_pointer(&l.first), m, l.c};
  return TRUE;
}

void
st_megatron_shape_clear(StMegatronShape *shape)
{
  g_free(shape->first);
  st_model_free(shape->model);
  *shape = (StMegatronShape){0};
}

/* Every step applies all its micro-batches' gradients, summed over the
 * data-parallel replicas, before the next forward. */
static StUpdate
update(const StOptions *options)
{
  (void)options;
  return (StUpdate){ST_UPDATE_SYNC, "synchronous SGD/Adam"};
}

/* A tensor-parallel group, its context-parallel ranks and its pipeline
 * compute the same samples. */
static int
sample_group(const StOptions *o)
{
  return MAX(o->tensor_parallel, 1) * MAX(o->context_parallel, 1) * MAX(o->pipeline_stages, 1);
}

static gboolean
knob_applies(const char *option, const StModel *m)
{
  if (g_strcmp0(option, "expert-parallel") != 0)
    return TRUE;
  for (int i = 0; i < m->n_layers; i++)
    if (m->layers[i].chain_open)
      return TRUE;
  return FALSE;
}

/* The planner's space (docs/LLM.md): sequence parallelism whenever there is
 * tensor parallelism (Megatron-LM's advice: it only removes memory, the
 * bytes moved are the same), and ZeRO 1-3, not none: stage 1 (Megatron's
 * distributed optimizer) moves the all-reduce's bytes as a reduce-scatter
 * and an all-gather and holds less. The user's lists replace these. */
static const StStrategyKnob KNOBS[] = {
  {"tensor-parallel", "1,2,4,8"},
  {"pipeline-stages", "1,2,4,8,16"},
  {"virtual-stages", "1,2,4"},
  {"sequence-parallel", "true"},
  {"zero-stage", "1,2,3"},
  {"recompute", "none,selective,full"},
  {"recompute-every", NULL},
  {"recompute-ops", NULL},
  {"expert-parallel", "1,2,4,8"},
  {"context-parallel", NULL},
  {"cp-comm", NULL},
  {"offload", NULL},
  {NULL},
};

const StStrategy st_strategy_megatron = {
  .name = "megatron",
  .summary = "Megatron-LM's 3D parallelism: tensor (and sequence) parallelism inside a node, "
             "1F1B or interleaved pipelines across, data parallelism over the rest",
  .citation = "Shoeybi et al., Megatron-LM, arXiv:1909.08053, 2019; Narayanan et al., "
              "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM, "
              "SC 2021; Korthikanti et al., Reducing Activation Recomputation in Large "
              "Transformer Models, MLSys 2023 (arXiv:2205.05198)",
  .build = build,
  .knobs = KNOBS,
  .knob_applies = knob_applies,
  .update = update,
  .sample_group = sample_group,
  .estimate = st_megatron_estimate,
};
