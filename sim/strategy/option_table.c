/* option_table.c: the table of shared options and setting them by name (see
 * options.h). Parsing lives here once, for the command line and the planner. */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "base/limits.h"
#include "base/units.h"
#include "cost/cost.h"
#include "cost/framework.h"
#include "strategy/options.h"

static const char *const OPTIMIZERS[] = {"sgd", "adam", NULL};     /* StOptimizer */
static const char *const PRECISIONS[] = {"fp32", "mixed", "fp8", NULL};   /* StPrecision */
/* --recompute-ops: every non-empty set of the first three StRecomputeOp, index + 1 = its
 * bits, each named as st_recompute_ops_format names it (a choice, so that the planner
 * takes lists of them); then torchtitan's policy, alone (index 7: bits 8, 1 <<
 * ST_RC_TORCHTITAN) */
static const char *const RECOMPUTE_OPS[] = {
  "core_attn", "mlp_act", "core_attn+mlp_act", "layernorm", "core_attn+layernorm",
  "mlp_act+layernorm", "core_attn+mlp_act+layernorm", "torchtitan", NULL};
static const char *const OFFLOADS[] = {"none", "optimizer", NULL};         /* StOffload */
static const char *const RESHARDS[] = {"forward", "backward", "step", NULL}; /* StReshard */

static gboolean
check_comm_algo(const char *value, GError **error)
{
  if (strcmp(value, "auto") == 0 || st_comm_algo_find(value) != NULL)
    return TRUE;
  g_autoptr(GString) known = g_string_new("auto");
  for (const StCommAlgo *const *a = st_comm_algos(); *a != NULL; a++)
    g_string_append_printf(known, ", %s", (*a)->name);
  g_set_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID, "unknown algorithm (known: %s)",
              known->str);
  return FALSE;
}

static gboolean
check_share_model(const char *value, GError **error)
{
  if (st_share_model_find(value) != NULL)
    return TRUE;
  g_autoptr(GString) known = g_string_new(NULL);
  for (const StShareModel *const *m = st_share_models(); *m != NULL; m++)
    g_string_append_printf(known, "%s%s", known->len ? ", " : "", (*m)->name);
  g_set_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID, "unknown GPU sharing model (known: %s)",
              known->str);
  return FALSE;
}

static gboolean
check_compute_model(const char *value, GError **error)
{
  if (st_compute_model_known(value))
    return TRUE;
  g_set_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID,
              "unknown compute model (known: estimate, roofline)");
  return FALSE;
}

static gboolean
check_framework(const char *value, GError **error)
{
  if (st_framework_find(value) != NULL)
    return TRUE;
  g_autoptr(GString) known = g_string_new(NULL);
  for (const StFramework *const *f = st_frameworks(); *f != NULL; f++)
    g_string_append_printf(known, "%s%s", known->len ? ", " : "", (*f)->name);
  g_set_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID, "unknown framework (known: %s)",
              known->str);
  return FALSE;
}

#define F(field) offsetof(StOptions, field)
#define BIG 1e15

static const StOptionSpec SPECS[] = {
  {"nodes", ST_OPT_INT, F(nodes), 1, 1e6, NULL, NULL, "N",
   "Copies of the cluster file's node (default: as in the file)"},
  {"gpus-per-node", ST_OPT_INT, F(gpus_per_node), 1, 1e6, NULL, NULL, "K",
   "Use K GPUs of each node, as Slurm's --gpus-per-node places a job: the node's NICs stay "
   "(at most one per GPU) and GPU i of a node uses NIC i x NICs / K, so the K are spread "
   "over them; --nodes N then holds N x K GPUs, every node alike, where --gpus alone would "
   "leave a partial last node (default: all of the file's)"},
  {"gpus", ST_OPT_INT, F(gpus), 1, 1e7, NULL, NULL, "G",
   "Use the first G GPUs, node by node (default: all)"},
  {"ranks", ST_OPT_INT, F(ranks), 1, 1e7, NULL, NULL, "R",
   "Data-parallel workers, round-robin on the GPUs; more ranks than GPUs share them "
   "(default: one per GPU)"},
  {"micro-batch", ST_OPT_INT, F(micro_batch), 1, 1e7, NULL, NULL, "B",
   "Samples per micro-batch per rank (default: 32, or the global batch shared out over the "
   "ranks, up to 32, when --global-batch is given)"},
  {"global-batch", ST_OPT_INT64, F(global_batch), 0, BIG, NULL, NULL, "N",
   "Samples per step over all ranks; a multiple of ranks x micro-batch, the quotient is "
   "gradient accumulation (default: ranks x micro-batch)"},
  {"steps", ST_OPT_INT_AUTO, F(steps), 1, ST_MAX_STEPS, NULL, NULL, "N|auto",
   "Training steps: auto runs until the schedule's state repeats from step to step (its "
   "steady state) and reports that step (run and validate measure the steps the simulator "
   "finds steady); N runs N, the first being warm-up (default: auto)"},
  {"optimizer", ST_OPT_CHOICE, F(optimizer), 0, 0, OPTIMIZERS, NULL, "sgd|adam",
   "sgd (with momentum) or adam (AdamW) (default: adam)"},
  {"precision", ST_OPT_CHOICE, F(precision), 0, 0, PRECISIONS, NULL, "fp32|mixed|fp8",
   "fp32, or mixed: 16-bit weights, gradients and activations with fp32 master weights, or "
   "fp8: mixed with the transformer layers' linears in FP8 (Transformer Engine's hybrid "
   "recipe; a GPU with an FP8 peak, Hopper on; simulated only) (default: fp32)"},
  {"bucket-bytes", ST_OPT_BYTES, F(bucket_bytes), 0, 1125899906842624.0 /* 1 PiB */, NULL, NULL, "SIZE",
   "Gradient bucket size, bytes or with a unit such as 25MiB; 0 = one bucket per layer "
   "(default: the framework's, 25MiB for PyTorch DDP)"},
  {"zero-stage", ST_OPT_INT, F(zero_stage), 1, 3, NULL, NULL, "1|2|3",
   "ZeRO stage: 1 optimizer states, 2 + gradients, 3 + parameters sharded (zero's default: "
   "1; other strategies shard only when it is given)"},
  {"prefetch", ST_OPT_INT, F(prefetch), 0, 1e4, NULL, NULL, "N",
   "ZeRO-3: parameter gathers issued ahead of the layer that needs them (default: 1)"},
  {"offload", ST_OPT_CHOICE, F(offload), 0, 0, OFFLOADS, NULL, "none|optimizer",
   "zero stages 1-2 and megatron's distributed optimizer: optimizer: ZeRO-Offload, fp32 master weights, optimizer states and the "
   "optimizer step in host memory on the CPU, gradient shards down and parameters up over "
   "PCIe each step (simulated only) (default: none)"},
  {"shard-group", ST_OPT_INT, F(shard_group), 0, ST_MAX_GPUS, NULL, NULL, "N",
   "zero: hybrid sharding (HSDP, FSDP's HYBRID_SHARD): states sharded over groups of N "
   "consecutive ranks (a node: its GPUs), replicated across groups; gradients "
   "reduce-scattered in the group then all-reduced across groups; 0 = all ranks "
   "(default: 0)"},
  {"comm-algo", ST_OPT_STRING, F(comm_algo), 0, 0, NULL, check_comm_algo, "NAME",
   "Collective algorithm: auto (the fastest alone), ring, tree, hierarchical (default: auto)"},
  {"compute-model", ST_OPT_STRING, F(compute_model), 0, 0, NULL, check_compute_model, "NAME",
   "What costs compute no profile entry covers: estimate (kernels at the efficiency published "
   "measurements show, models/gpus/) or roofline (peak FLOP/s and bandwidth: a lower bound); "
   "a profile's entries always come first (default: estimate)"},
  {"share-model", ST_OPT_STRING, F(share_model), 0, 0, NULL, check_share_model, "NAME",
   "How kernels of several ranks or jobs on one GPU slow each other: interference (SMs by "
   "priority with a measured leak, memory bandwidth shared) or priority (priority isolates "
   "perfectly) (default: interference)"},
  {"pipeline-stages", ST_OPT_INT, F(pipeline_stages), 0, 1e6, NULL, NULL, "N",
   "pipeline, megatron: stages per pipeline (G_inter), dividing the ranks; 0 = pipeline: the "
   "fewest whose estimated memory per GPU fits, megatron: 1 (default: 0)"},
  {"pipeline-schedule", ST_OPT_CHOICE, F(pipeline_schedule), 0, 0,
   (const char *const[]){"1f1b", "gpipe", "zb-h1", "zb-h2", "dualpipev", NULL}, NULL,
   "1f1b|gpipe|zb-h1|zb-h2|dualpipev",
   "pipeline: micro-batch order, 1f1b (one forward one backward), gpipe (all forwards, "
   "then all backwards), or Qi et al.'s zero-bubble orders, each backward split into its "
   "input's gradient (B) and its weights' (W, run later where the stage would idle): zb-h1 "
   "(1F1B's memory, a third of its bubble when f = b = w) or zb-h2 (no bubble, 2S - 1 "
   "micro-batches in flight); or dualpipev, DeepSeek's V-shaped DualPipe: each stage "
   "holds two model chunks (down and back up), a bubble of (S - 1)(f + 2b - w), at least "
   "2S micro-batches (default: 1f1b)"},
  {"balance", ST_OPT_CHOICE, F(balance), 0, 0,
   (const char *const[]){"time", "memory", "params", NULL}, NULL, "time|memory|params",
   "pipeline: what the contiguous stages balance: forward + backward time from the cost "
   "model, memory per GPU, or parameters (default: time)"},
  {"recompute", ST_OPT_CHOICE, F(recompute), 0, 0,
   (const char *const[]){"none", "selective", "full", NULL}, NULL, "none|selective|full",
   "Activation recomputation (Korthikanti et al. 2022): none keeps every activation; "
   "selective drops the attention scores of dense attention and recomputes them before each "
   "backward (refused for a model that keeps none: flash attention); full keeps each layer's input only and runs "
   "its forward again before its backward (default: none)"},
  {"recompute-every", ST_OPT_INT, F(recompute_every), 1, 16777216, NULL, NULL, "K",
   "With --recompute full: checkpoint only the transformer layers, every K-th of them (the "
   "K-th, 2K-th, ...; torchtitan's selective layer checkpointing with ac_freq K, Megatron-LM's "
   "--recompute-granularity full at one layer per group when K = 1); other layers keep their "
   "activations (default: not given, every layer of the model is checkpointed)"},
  {"recompute-ops", ST_OPT_CHOICE, F(recompute_ops), 0, 0, RECOMPUTE_OPS, NULL, "OPS",
   "With --recompute selective: which ops of each transformer layer drop their outputs and "
   "make them again before its backward, joined by '+': core_attn (the attention scores), "
   "mlp_act (the MLP's activation output), layernorm (the norms' outputs) (Megatron-LM's "
   "--recompute-modules); or torchtitan, its per-op policy (activation_checkpoint mode "
   "selective, option op): each llama_block keeps only its attention kernel's outputs and "
   "every other matmul's (wq, wv, w1, w2), all else made again (default: core_attn)"},
  {"offload-activations", ST_OPT_INT, F(offload_activations), 0, 16777216, NULL, NULL, "N",
   "dp, zero, pipeline: the first N transformer layers of the model copy the activations "
   "they save for backward to host memory over PCIe after their forward, on a copy stream, "
   "and back before their backward, one layer ahead (Megatron-LM's --cpu-offloading with "
   "--cpu-offloading-num-layers N; PyTorch's save_on_cpu); simulated only; 0 = none "
   "(default: 0)"},
  {"seq-len", ST_OPT_INT, F(seq_len), 0, 16777216, NULL, NULL, "N",
   "Tokens per sequence of a token model (one whose first layer reads token ids); the model "
   "file's input is the default"},
  {"sparsity", ST_OPT_DOUBLE, F(sparsity), 0, 0.999999, NULL, NULL, "P",
   "SAMO (dp, zero, pipeline): fraction of weights pruned by a fixed mask, in [0, 1); "
   "master weights, gradients and optimizer states kept for the non-zeros only "
   "(default: 0, dense)"},
  {"update-rule", ST_OPT_CHOICE, F(update_rule), 0, 0,
   (const char *const[]){"v1", "v2", "dp", NULL}, NULL, "v1|v2|dp",
   "cdp: v1 steps every stage with the previous step's gradient; v2 gives rank r's stages "
   "l >= S-1-r the fresh one; dp steps with the fresh gradient (the reference, which waits "
   "for it) (default: v1)"},
  {"stages", ST_OPT_INT, F(stages), 1, 1e6, NULL, NULL, "S",
   "cdp: contiguous stages the model is cut into, at most one per layer (default: 4)"},
  {"stage-split", ST_OPT_CHOICE, F(stage_split), 0, 0,
   (const char *const[]){"flops", "params", "memory", NULL}, NULL, "flops|params|memory",
   "cdp: what the stages balance: forward + backward FLOPs, parameters, or memory (model "
   "states + activations of a micro-batch) (default: flops)"},
  {"cdp-reduce", ST_OPT_CHOICE, F(cdp_reduce), 0, 0,
   (const char *const[]){"chain", "collective", NULL}, NULL, "chain|collective",
   "cdp: each stage's gradient reduced by a point-to-point chain as workers finish it, or "
   "by one all-reduce per stage (default: chain)"},
  {"model-parallel", ST_OPT_FLAG, F(model_parallel), 0, 0, NULL, NULL, NULL,
   "cdp: each stage on devices of its own, shared by the workers whose stagger lets them "
   "(default: off)"},
  {"cdp-slack", ST_OPT_DOUBLE, F(cdp_slack), 0, 1e3, NULL, NULL, "X",
   "cdp --model-parallel: the largest step-time increase, as a fraction of the step with free "
   "transfers, that the stagger may take on to absorb transfers between stages and keep the "
   "GPUs free transfers would need (the paper's max(N, S) for equal stages); above it, more "
   "GPUs instead; 0 = never (default: 0.01)"},
  {"amp-limit", ST_OPT_DOUBLE, F(amp_limit), 0, 1e6, NULL, NULL, "X",
   "burst: amplification limit; a layer may take w GPUs only while (its time on w GPUs + "
   "gradient sync + moving its output) x w / its time alone on one GPU stays under X; layers "
   "under 300 us alone are exempt; 0 = 2 (default: 2, DeepPool's)"},
  {"foreground", ST_OPT_CHOICE, F(mux_foreground), 0, 0,
   (const char *const[]){"burst", "dp", "zero", NULL}, NULL, "burst|dp|zero",
   "multiplex: the strategy of the foreground job, on high-priority streams (default: burst)"},
  {"background", ST_OPT_STRING, F(mux_background), 0, 0, NULL, NULL, "JOBS",
   "multiplex: background jobs on low-priority streams, MODEL:bBATCH[:local|dp] "
   "comma-separated (vgg16:b16,resnet50:b8); MODEL is a file or models/MODEL.json under "
   "$STAGGER_DATA_DIR or beside --model; local trains a copy on each GPU, dp one copy over "
   "all GPUs; none: the foreground alone (default: none)"},
  {"mux-piece-us", ST_OPT_DOUBLE, F(mux_piece_us), 0, 1e9, NULL, NULL, "US",
   "multiplex: the longest background piece, in us of GPU time alone (beside a foreground a "
   "piece is as long as the slowdown budget left, one op at least); 0 = 500 (default: 500)"},
  {"mux-slowdown", ST_OPT_DOUBLE, F(mux_slowdown), 0, 1e6, NULL, NULL, "PCT",
   "multiplex: the foreground slowdown admission holds: a background piece only while the "
   "foreground runs at most PCT % slower than alone, as a moving average and over its steps "
   "since admission opened (a budget: a step over it is paid back); 0 = 10 (default: 10)"},
  {"mux-long-recv-us", ST_OPT_DOUBLE, F(mux_long_recv_us), 0, 1e12, NULL, NULL, "US",
   "multiplex: a foreground receive waited on longer than this admits background work even "
   "when the foreground's moving average is slowed, while the budget is not overdrawn; "
   "0 = 500 (default: 500)"},
  {"mux-bg-pieces", ST_OPT_INT, F(mux_bg_pieces), 0, 1e4, NULL, NULL, "N",
   "multiplex: background pieces in flight on a GPU beside the foreground; 0 = 1 (default: 1)"},
  {"mux-bg-pieces-alone", ST_OPT_INT, F(mux_bg_pieces_alone), 0, 1e4, NULL, NULL, "N",
   "multiplex: background pieces in flight on a GPU without foreground; 0 = 4 (default: 4)"},
  {"mux-fg-pieces", ST_OPT_INT, F(mux_fg_pieces), 0, 1e4, NULL, NULL, "N",
   "multiplex: foreground pieces in flight, for the executor's launcher; 0 = 2 (default: 2)"},
  {"max-memory", ST_OPT_BYTES, F(max_memory), 0, 1152921504606846976.0 /* 1 EiB */, NULL, NULL,
   "SIZE",
   "Refuse a simulation estimated to need more memory than this, such as 16GiB, before it "
   "starts (default: what this machine has available; plan: no limit; docs/RELIABILITY.md)"},
  {"tensor-parallel", ST_OPT_INT, F(tensor_parallel), 1, 1024, NULL, NULL, "T",
   "megatron: tensor-parallel group size (Megatron-LM's column- and row-parallel layers, "
   "attention heads, kv heads, ffn and vocabulary split T ways; all-reduces in forward and "
   "backward); ranks of a group are consecutive, inside a node first (default: 1)"},
  {"sequence-parallel", ST_OPT_FLAG, F(sequence_parallel), 0, 0, NULL, NULL, NULL,
   "megatron: sequence parallelism over the tensor-parallel group: norms and dropouts on "
   "s/T tokens, all-gather + reduce-scatter in place of each all-reduce (default: off)"},
  {"expert-parallel", ST_OPT_INT, F(expert_parallel), 1, 1024, NULL, NULL, "E",
   "megatron: expert-parallel group size for MoE layers: each rank keeps experts/E of every "
   "MoE layer, tokens dispatched to them and combined by all-to-all; E divides the "
   "data-parallel ranks (default: 1)"},
  {"expert-tensor-parallel", ST_OPT_INT, F(expert_tensor_parallel), 1, 1024, NULL, NULL, "K",
   "megatron: the experts' tensor-parallel size (Megatron-LM's --expert-tensor-parallel-size), "
   "dividing T, with --sequence-parallel when below T: each expert splits its ffn K ways and "
   "computes on the rows of K tensor ranks; the expert-parallel groups then span the tensor "
   "ranks too, E dividing T x DP / K (default: T)"},
  {"expert-recompute", ST_OPT_CHOICE, F(expert_recompute), 0, 0,
   (const char *const[]){"on", "off", NULL}, NULL, "on|off",
   "megatron, with expert parallelism and --recompute full: rerun each MoE layer's dispatch, "
   "owned experts and combine before its backward, as a checkpointed layer does (on), or "
   "keep the experts' saved blocks from their forward (off: what stagger's executor runs) "
   "(default: on)"},
  {"moe-imbalance", ST_OPT_DOUBLE, F(moe_imbalance), 1, 1e3, NULL, NULL, "F",
   "megatron, with --expert-parallel: dropless routing's load imbalance, the busiest "
   "expert-parallel rank's routed tokens over the mean (1 + MaxVio of Wang et al. 2024, "
   "arXiv 2408.15664, at the rank's level); every MoE layer waits for that rank: its experts' "
   "passes, its all-to-alls and its dispatched rows take F times the balanced ones. An "
   "assumption the user states, not a measurement (default: 1, balanced)"},
  {"moe-routing", ST_OPT_CHOICE, F(moe_routing), 0, 0,
   (const char *const[]){"random", "contiguous", NULL}, NULL, "random|contiguous",
   "megatron, with --expert-parallel under a framework whose dispatcher sends a token once "
   "per rank (automodel: DeepEP): which experts a token picks, so how many ranks its row "
   "travels to: random (k distinct experts drawn uniformly, a balanced learned router) or "
   "contiguous (experts tk .. tk+k-1 mod X: NeMo Automodel's FakeBalancedGate, which its "
   "benchmark recipes run; one rank when X/E is a multiple of k) (default: random)"},
  {"context-parallel", ST_OPT_INT, F(context_parallel), 1, 1024, NULL, NULL, "C",
   "megatron: context-parallel group size: each rank holds s/C tokens of every sequence "
   "(two chunks, i and 2C-1-i, so causal work is even), attention exchanges keys and values "
   "(--cp-comm); C divides the data-parallel ranks, gradients reduced over DP x CP "
   "(default: 1)"},
  {"cp-comm", ST_OPT_CHOICE, F(cp_comm), 0, 0, (const char *const[]){"ring", "all-to-all", NULL},
   NULL, "ring|all-to-all",
   "megatron, with --context-parallel: ring (Transformer Engine's p2p ring attention, each "
   "key/value chunk sent beside the attention on the one before) or all-to-all (DeepSpeed "
   "Ulysses: Q, K, V to heads/C per rank before attention, the output back after) "
   "(default: ring)"},
  {"virtual-stages", ST_OPT_INT, F(virtual_stages), 1, 1024, NULL, NULL, "V",
   "megatron: model chunks per pipeline stage, Megatron-LM's interleaved 1F1B schedule (V > 1 "
   "needs --pipeline-stages > 1) (default: 1)"},
  {"first-stage-layers", ST_OPT_INT, F(first_stage_layers), 0, 1e6, NULL, NULL, "N",
   "megatron: transformer layers on the first pipeline stage, the stages between sharing the "
   "rest evenly (Megatron-LM's --decoder-first-pipeline-num-layers; Llama 3 405B: 7 of 126 on "
   "16 stages) (default: an even split)"},
  {"last-stage-layers", ST_OPT_INT, F(last_stage_layers), 0, 1e6, NULL, NULL, "N",
   "megatron: transformer layers on the last pipeline stage (Megatron-LM's "
   "--decoder-last-pipeline-num-layers) (default: an even split)"},
  {"account-for-embedding", ST_OPT_FLAG, F(account_for_embedding), 0, 0, NULL, NULL, NULL,
   "megatron: the embedding counts as one layer of the split, the first chunk holding one "
   "transformer layer fewer (Megatron-LM's --account-for-embedding-in-pipeline-split)"},
  {"account-for-loss", ST_OPT_FLAG, F(account_for_loss), 0, 0, NULL, NULL, NULL,
   "megatron: the head's loss counts as one layer, the last chunk holding one fewer "
   "(Megatron-LM's --account-for-loss-in-pipeline-split)"},
  {"layer-split", ST_OPT_CHOICE, F(layer_split), 0, 0,
   (const char *const[]){"even", "balanced", NULL}, NULL, "even|balanced",
   "megatron: how model chunks share the transformer layers when no uneven option is given: "
   "even (Megatron-LM's, p x v must divide them) or balanced (contiguous chunks of least "
   "largest forward + backward FLOPs, embedding and head included) (default: even)"},
  {"vocab-multiple", ST_OPT_INT, F(vocab_multiple), 0, 1 << 20, NULL, NULL, "K",
   "megatron: pad the vocabulary to a multiple of K x T, as Megatron-LM's "
   "--make-vocab-size-divisible-by; 1 pads only what T does not divide; 0 = 128 (default: "
   "128)"},
  {"framework", ST_OPT_STRING, F(framework), 0, 0, NULL, check_framework, "NAME",
   "What the training framework does by default: pytorch (eager, DDP), megatron, torchtitan, "
   "fsdp (PyTorch FSDP as llm-foundry runs it), deepspeed, automodel (NeMo Automodel's "
   "Transformer Engine + DeepEP recipes), or ideal (everything fused and "
   "overlapped: a bound, and stagger's own executor); stagger sim --list-frameworks says "
   "what each does (default: megatron for megatron, deepspeed for zero, pytorch for dp, "
   "ideal for the rest and for --sparsity; run and validate: ideal)"},
  {"grad-reduce", ST_OPT_CHOICE, F(grad_reduce), 0, 0,
   (const char *const[]){"auto", "16bit", "fp32", NULL}, NULL, "auto|16bit|fp32",
   "Under --precision mixed: the dtype gradients are kept and reduced in (Megatron-LM's "
   "--grad-reduce-in-bf16 is 16bit); auto = the framework's (default: auto)"},
  {"overlap-grad-reduce", ST_OPT_CHOICE, F(overlap_grad_reduce), 0, 0,
   (const char *const[]){"auto", "on", "off", NULL}, NULL, "auto|on|off",
   "Data-parallel gradient reductions during backward as buckets fill (on), or in one "
   "bucket once backward ends (off, Megatron-LM's default); auto = the framework's "
   "(default: auto)"},
  {"overlap-param-gather", ST_OPT_CHOICE, F(overlap_param_gather), 0, 0,
   (const char *const[]){"auto", "on", "off", NULL}, NULL, "auto|on|off",
   "Under ZeRO stages 1-2: the updated parameters gathered bucket by bucket in forward "
   "order, each layer's next forward waiting only for its own bucket (Megatron-LM's "
   "--overlap-param-gather), or all before the next forward starts (off); auto = the "
   "framework's (default: auto, off in every preset)"},
  {"reshard", ST_OPT_CHOICE, F(reshard), 0, 0, RESHARDS, NULL, "forward|backward|step",
   "Under ZeRO stage 3: when a layer's gathered parameters are dropped: after every pass "
   "(forward: FSDP2's reshard_after_forward=True, DeepSpeed's), from a micro-batch's "
   "forward to its backward (backward: reshard_after_forward=False, one gather per "
   "micro-batch, the layers' whole 16-bit weights held between), or until the step's last "
   "backward (step: also set_reshard_after_backward(False), as NeMo Automodel's MoE "
   "recipes run: one gather per step) (default: forward)"},
  {"defer-grad-sync", ST_OPT_CHOICE, F(defer_grad_sync), 0, 0,
   (const char *const[]){"auto", "on", "off", NULL}, NULL, "auto|on|off",
   "Under ZeRO stages 2-3 with gradient accumulation: no reduce-scatter until the last "
   "micro-batch, each layer's whole gradient kept and accumulated in the reduce dtype "
   "until then (on: FSDP2's set_requires_gradient_sync(False), NeMo Automodel's "
   "defer_fsdp_grad_sync: less communication, the unsharded gradients in memory), or "
   "reduce-scattered after every micro-batch (off); auto = the framework's (default: auto, "
   "on under automodel)"},
  {"tp-comm-overlap", ST_OPT_CHOICE, F(tp_comm_overlap), 0, 0,
   (const char *const[]){"auto", "on", "off", NULL}, NULL, "auto|on|off",
   "With --sequence-parallel: each tensor-parallel all-gather and reduce-scatter pipelined "
   "in t chunks with its GEMMs (Transformer Engine's userbuffers, Megatron-LM's "
   "--tp-comm-overlap: one chunk exposed, the rest beside the compute, which the "
   "collective's SMs slow); the executor cannot run it; auto = the framework's (default: "
   "auto, off in every preset)"},
  {"memory-format", ST_OPT_CHOICE, F(memory_format), 0, 0,
   (const char *const[]){"auto", "nchw", "nhwc", NULL}, NULL, "auto|nchw|nhwc",
   "Layout of images: nchw (PyTorch's default, which cuDNN transposes around its "
   "tensor-core convolutions) or nhwc (channels_last); auto = the framework's (default: "
   "auto)"},
  {NULL},
};

const StOptionSpec *
st_option_specs(void)
{
  return SPECS;
}

const StOptionSpec *
st_option_find(const char *name)
{
  for (const StOptionSpec *s = SPECS; s->name != NULL; s++)
    if (strcmp(s->name, name) == 0)
      return s;
  return NULL;
}

static gboolean
invalid(GError **error, const StOptionSpec *spec, const char *value, const char *format, ...)
  G_GNUC_PRINTF(4, 5);

static gboolean
invalid(GError **error, const StOptionSpec *spec, const char *value, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *why = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID, "--%s %s: %s", spec->name, value, why);
  return FALSE;
}

/* A number in range; integral unless `fractional`. */
static gboolean
parse_number(const StOptionSpec *spec, const char *value, gboolean fractional, double *out,
             GError **error)
{
  char *end = NULL;
  double v = g_ascii_strtod(value, &end);
  if (end == value || *end != '\0' || !isfinite(v) || (!fractional && v != floor(v)))
    return invalid(error, spec, value, "not %s", fractional            ? "a number"
                                                 : spec->type == ST_OPT_INT_AUTO ? "an integer nor auto"
                                                                                 : "an integer");
  if (v < spec->min || v > spec->max)
    return invalid(error, spec, value, "must be between %.16g and %.16g", spec->min, spec->max);
  *out = v;
  return TRUE;
}

gboolean
st_options_set(StOptions *o, const char *name, const char *value, GError **error)
{
  const StOptionSpec *spec = st_option_find(name);
  if (spec == NULL) {
    g_set_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID, "unknown option --%s", name);
    return FALSE;
  }
  char *field = (char *)o + spec->offset;
  double v = 0;
  switch (spec->type) {
  case ST_OPT_INT_AUTO:
    if (strcmp(value, "auto") == 0) {
      *(int *)(void *)field = 0;
      return TRUE;
    }
    /* fall through */
  case ST_OPT_INT:
    if (!parse_number(spec, value, FALSE, &v, error))
      return FALSE;
    *(int *)(void *)field = (int)v;
    return TRUE;
  case ST_OPT_INT64:
    if (!parse_number(spec, value, FALSE, &v, error))
      return FALSE;
    *(int64_t *)(void *)field = (int64_t)v;
    return TRUE;
  case ST_OPT_DOUBLE:
    if (!parse_number(spec, value, TRUE, &v, error))
      return FALSE;
    *(double *)(void *)field = v;
    return TRUE;
  case ST_OPT_BYTES: {
    int64_t bytes;
    g_autoptr(GError) local = NULL;
    if (g_ascii_isdigit(value[0]) && strspn(value, "0123456789") == strlen(value))
      bytes = g_ascii_strtoll(value, NULL, 10);
    else if (!st_parse_bytes(value, &bytes, &local))
      return invalid(error, spec, value, "%s", local->message);
    if (bytes < spec->min || bytes > spec->max) {
      g_autofree char *max = st_format_bytes((int64_t)spec->max);
      return invalid(error, spec, value, "must be between 0 and %s", max);
    }
    *(int64_t *)(void *)field = bytes;
    return TRUE;
  }
  case ST_OPT_CHOICE: {
    for (int i = 0; spec->choices[i] != NULL; i++) {
      if (strcmp(spec->choices[i], value) == 0) {
        *(int *)(void *)field = i;
        return TRUE;
      }
    }
    g_autofree char *names = g_strjoinv("|", (char **)spec->choices);
    return invalid(error, spec, value, "must be one of %s", names);
  }
  case ST_OPT_FLAG: {
    static const char *const yes[] = {"true", "on", "1", NULL}, *const no[] = {"false", "off", "0", NULL};
    gboolean *flag = (gboolean *)(void *)field;
    if (g_strv_contains(yes, value))
      *flag = TRUE;
    else if (g_strv_contains(no, value))
      *flag = FALSE;
    else
      return invalid(error, spec, value, "must be true or false");
    return TRUE;
  }
  case ST_OPT_STRING: {
    g_autoptr(GError) local = NULL;
    if (spec->check != NULL && !spec->check(value, &local))
      return invalid(error, spec, value, "%s", local->message);
    char **slot = (char **)(void *)field;
    g_free(*slot);
    *slot = g_strdup(value);
    return TRUE;
  }
  }
  g_return_val_if_reached(FALSE);
}

char *
st_options_get(const StOptions *o, const char *name)
{
  const StOptionSpec *spec = st_option_find(name);
  g_return_val_if_fail(spec != NULL, NULL);
  const char *field = (const char *)o + spec->offset;
  switch (spec->type) {
  case ST_OPT_INT_AUTO:
    if (*(const int *)(const void *)field == 0)
      return g_strdup("auto");
    /* fall through */
  case ST_OPT_INT:
    return g_strdup_printf("%d", *(const int *)(const void *)field);
  case ST_OPT_INT64:
  case ST_OPT_BYTES:
    return g_strdup_printf("%" G_GINT64_FORMAT, *(const int64_t *)(const void *)field);
  case ST_OPT_DOUBLE:
    return g_strdup_printf("%g", *(const double *)(const void *)field);
  case ST_OPT_CHOICE:
    return g_strdup(spec->choices[*(const int *)(const void *)field]);
  case ST_OPT_STRING:
    return g_strdup(*(char *const *)(const void *)field);
  case ST_OPT_FLAG:
    return g_strdup(*(const gboolean *)(const void *)field ? "true" : "false");
  }
  g_return_val_if_reached(NULL);
}
