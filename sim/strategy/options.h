/* options.h: the options that `sim`, `schedule`, `run`, `validate` and `plan`
 * share, meaning the same thing everywhere (see docs/ARCHITECTURE.md).
 *
 * One table (option_table.c) describes every option: its name on the command
 * line, its type and range, where it lives in StOptions and its help. The CLI
 * builds its option parser from the table and the planner sets options by
 * name through it, so adding an option is a field here and a row there.
 * st_options_resolve() checks the whole against the cluster and derives what
 * was left implicit (ranks, global batch, accumulation). Strategies read the
 * options and never change them.
 */
#pragma once

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

#include "base/kinds.h"
#include "cluster/cluster.h"

#define ST_OPTIONS_ERROR (st_options_error_quark())
GQuark st_options_error_quark(void);

typedef struct {
  int nodes;            /* --nodes: copies of the cluster's node; 0 = not given: as in the file
                           (given, it is at least 1, as --gpus and --ranks) */
  int gpus_per_node;    /* --gpus-per-node: GPUs of each node in use, spread over its NICs
                           (st_cluster_keep_gpus_per_node); 0 = not given: all */
  int gpus;             /* --gpus: use the first G GPUs; 0 = not given: all */
  int ranks;            /* --ranks: data-parallel workers, round-robin on GPUs; 0 = not given: one per GPU */
  int micro_batch;      /* --micro-batch: samples per micro-batch per rank */
  int64_t global_batch; /* --global-batch: samples per step; 0 = ranks * micro-batch */
  int steps;            /* --steps: training steps to run; 0 = auto: until steady (the
                           schedule's state repeats, output/steady.h), within a cap */
  StOptimizer optimizer;
  StPrecision precision;
  int64_t bucket_bytes; /* --bucket-bytes: gradient bucket size; 0 = one bucket per layer;
                           -1 = not given: the framework's (resolved) */
  int zero_stage;       /* --zero-stage: 1, 2 or 3; 0 = not given (zero then uses 1) */
  int prefetch;         /* --prefetch: ZeRO-3 layers gathered ahead of use */
  int reshard;          /* --reshard: StReshard, 0 = forward (ZeRO-3's gathered parameters
                           dropped after each pass) */
  int offload;          /* --offload: StOffload, 0 = none (zero and megatron, ZeRO stages 1-2) */
  int shard_group;      /* --shard-group: zero shards over groups of this many consecutive
                           ranks and replicates across them (HSDP); 0 = all ranks */
  char *comm_algo;      /* --comm-algo: auto, ring, tree, hierarchical */
  char *share_model;    /* --share-model: GPU sharing model (cost.h); NULL = the default */
  char *compute_model;  /* --compute-model: estimate (NULL) or roofline, where no profile answers */
  int pipeline_stages;   /* --pipeline-stages: G_inter, stages per pipeline; 0 = auto (the fewest
                            whose estimated memory per GPU fits) */
  int pipeline_schedule; /* --pipeline-schedule: StPipeOrder (strategy_pipeline.h), 0 = 1f1b;
                            zb-h1, zb-h2: zero-bubble orders (pipeline only) */
  int balance;           /* --balance: StPipeBalance (strategy_pipeline.h), 0 = time */
  int recompute;         /* --recompute: StRecompute (base/kinds.h), 0 = none */
  int recompute_every;   /* --recompute-every: under full, checkpoint only every K-th
                            transformer layer (strategy/recompute.h); 0 = not given: every
                            layer of the model */
  int recompute_ops;     /* --recompute-ops: under selective, the ops dropped, a choice
                            whose index + 1 is their StRecomputeOp bits ("core_attn" 0,
                            "mlp_act" 1, "core_attn+mlp_act" 2, ...); 0 = core_attn */
  int offload_activations; /* --offload-activations: the first N transformer layers copy
                              what they save for backward to host memory after their
                              forward and back before their backward (strategy/offload.h);
                              0 = none */
  int seq_len;           /* --seq-len: tokens per sequence of a token model; 0 = the model's */
  double sparsity;       /* --sparsity: SAMO, fraction p of weights pruned, [0, 1); 0 = dense */
  int update_rule;       /* --update-rule: cdp's update rule, CdpRule (strategy/cdp.h), 0 = v1 */
  int stages;            /* --stages: cdp's stages S, clamped to the layers; 0 = not given (4) */
  int stage_split;       /* --stage-split: CdpSplit (strategy/cdp.h), 0 = equal FLOPs */
  int cdp_reduce;        /* --cdp-reduce: CdpReduce (strategy/cdp.h), 0 = p2p chain */
  gboolean model_parallel; /* --model-parallel: cdp with each stage on devices of its own */
  double cdp_slack;      /* --cdp-slack: under --model-parallel, the largest step-time increase
                            (fraction of the step with free transfers) the stagger may take on
                            to absorb transfers and keep the devices transfers-free would need;
                            0 = never (default 0.01) */
  double amp_limit;      /* --amp-limit: burst's amplification limit; 0 = not given (2.0) */
  int mux_foreground;    /* --foreground: multiplex's foreground strategy, index in
                            {burst, dp, zero}; 0 = burst */
  char *mux_background;  /* --background: multiplex's jobs "MODEL:bN[:local|dp],..."; NULL or
                            "none": no background job */
  double mux_piece_us;   /* --mux-piece-us: background piece, us of GPU time alone; 0 = 500 */
  double mux_slowdown;   /* --mux-slowdown: % the foreground may be slowed; 0 = 10 */
  double mux_long_recv_us; /* --mux-long-recv-us: a foreground receive this long admits; 0 = 500 */
  int mux_bg_pieces;     /* --mux-bg-pieces: background pieces beside a foreground; 0 = 1 */
  int mux_bg_pieces_alone; /* --mux-bg-pieces-alone: ... on a GPU without one; 0 = 4 */
  int mux_fg_pieces;     /* --mux-fg-pieces: foreground pieces in flight; 0 = 2 */
  int64_t max_memory;    /* --max-memory: bytes a simulation may need (engine_budget.c);
                            0 = what this machine has available (st_memory_available) */
  int tensor_parallel;   /* --tensor-parallel: megatron's TP group size t; 0 = not given (1) */
  gboolean sequence_parallel; /* --sequence-parallel: megatron's SP over the TP group */
  int expert_parallel;   /* --expert-parallel: megatron's EP group size; 0 = not given (1) */
  int expert_tensor_parallel; /* --expert-tensor-parallel: megatron's experts' tensor-parallel
                                 size k, dividing t; 0 = not given (t) */
  int expert_recompute;  /* --expert-recompute: 0 on (under --recompute full, MoE segments
                            rerun before their backward), 1 off (their blocks stay) */
  double moe_imbalance;  /* --moe-imbalance: megatron, with EP: the busiest expert-parallel
                            rank's routed tokens over the mean, >= 1; 0 = not given (1,
                            balanced) */
  int moe_routing;       /* --moe-routing: StMoeRouting (strategy/moe_routing.h), the ranks a
                            token reaches under a per-rank dispatcher (default 0: random) */
  int context_parallel;  /* --context-parallel: megatron's CP group size; 0 = not given (1) */
  int cp_comm;           /* --cp-comm: StCpComm (strategy/context_parallel.h), 0 = ring */
  int virtual_stages;    /* --virtual-stages: megatron's model chunks per pipeline stage
                            (interleaved 1F1B); 0 = not given (1) */
  int first_stage_layers; /* --first-stage-layers: megatron's first stage's transformer
                             layers; 0 = as the others */
  int last_stage_layers;  /* --last-stage-layers: the last stage's; 0 = as the others */
  gboolean account_for_embedding; /* --account-for-embedding: the embedding counts as a layer
                                     in megatron's split */
  gboolean account_for_loss;      /* --account-for-loss: the loss does */
  int layer_split;        /* --layer-split: StLayerSplit (strategy/megatron.h), 0 = even */
  int vocab_multiple;    /* --vocab-multiple: megatron pads the vocabulary to a multiple of
                            this x t; 0 = not given (128, Megatron-LM's) */
  char *framework;       /* --framework: preset of cost/framework.h; NULL = the strategy's
                            (st_strategy_build fills it in before building) */
  int grad_reduce;       /* --grad-reduce: StGradReduce; 0 = the framework's */
  int memory_format;     /* --memory-format: 0 auto (the framework's), 1 nchw, 2 nhwc */
  int overlap_grad_reduce; /* --overlap-grad-reduce: 0 auto (the framework's), 1 on, 2 off */
  int tp_comm_overlap;   /* --tp-comm-overlap: 0 auto (the framework's), 1 on, 2 off */
  int overlap_param_gather; /* --overlap-param-gather: 0 auto (the framework's), 1 on, 2 off */
  int defer_grad_sync;   /* --defer-grad-sync: 0 auto (the framework's), 1 on, 2 off */
  /* Derived by st_options_resolve(): */
  int accumulation;     /* micro-batches per rank (per group of ranks sharing samples) per
                           step */
} StOptions;

/* --grad-reduce: the dtype gradients are kept and reduced in under mixed
 * precision. */
typedef enum {
  ST_GRAD_REDUCE_AUTO = 0, /* the framework's (StFramework.grad_bytes_mixed) */
  ST_GRAD_REDUCE_16BIT,    /* the compute dtype (Megatron-LM's --grad-reduce-in-bf16) */
  ST_GRAD_REDUCE_FP32,     /* fp32 gradient buffers, reduced in fp32 */
} StGradReduce;

/* --offload: what ZeRO keeps in host memory (zero.h). */
typedef enum {
  ST_OFFLOAD_NONE = 0,
  ST_OFFLOAD_OPTIMIZER, /* ZeRO-Offload (Ren et al., ATC 2021): fp32 master weights, optimizer
                           states and the optimizer step on the CPU */
} StOffload;

/* When ZeRO-3 drops a layer's gathered parameters (--reshard; FSDP2's
 * reshard_after_forward and set_reshard_after_backward). */
typedef enum {
  ST_RESHARD_FORWARD = 0, /* after every pass that read them (FSDP2's default, DeepSpeed's) */
  ST_RESHARD_BACKWARD,    /* kept from a micro-batch's forward to its backward
                             (reshard_after_forward=False): one gather per micro-batch */
  ST_RESHARD_STEP,        /* kept until the last micro-batch's backward
                             (set_reshard_after_backward(False) before it too, as NeMo
                             Automodel's MoE recipes do): one gather per step */
} StReshard;

/* Defaults: micro-batch 32, steps auto, adam, fp32, buckets and gradient
 * dtype of the framework, no ZeRO stage given, prefetch 1, comm algorithm
 * auto. */
void st_options_init(StOptions *options);
void st_options_clear(StOptions *options);
void st_options_copy(StOptions *dst, const StOptions *src);

/* Fills ranks, global_batch and accumulation for `cluster` (already resized
 * by --nodes/--gpus), and the bucket size from the framework when not given
 * (options->framework, else the default preset); fails with a message naming the option when the
 * numbers do not fit together (global batch not a multiple of ranks *
 * micro-batch, ZeRO stage out of range, ...). */
gboolean st_options_resolve(StOptions *options, const StCluster *cluster, GError **error);
/* The same where groups of `group` ranks compute the same samples (a
 * tensor-parallel group times a pipeline's stages: StStrategy.sample_group):
 * `group` must divide the ranks, the global batch is a multiple of (ranks /
 * group) x micro-batch, and accumulation counts the micro-batches each
 * group runs per step. group 1 is st_options_resolve. */
gboolean st_options_resolve_group(StOptions *options, const StCluster *cluster, int group,
                                  GError **error);

/* ---- the table of options (option_table.c) ----------------------------- */

typedef enum {
  ST_OPT_INT = 1, /* int */
  ST_OPT_INT_AUTO, /* int, or the word "auto" for 0 */
  ST_OPT_INT64,   /* int64_t */
  ST_OPT_BYTES,   /* int64_t: a plain number of bytes or a size with a unit ("25MiB") */
  ST_OPT_DOUBLE,  /* double */
  ST_OPT_CHOICE,  /* int: the index of the value in `choices` (an enum in that order) */
  ST_OPT_STRING,  /* char *, owned; `check` may restrict the values */
  ST_OPT_FLAG,    /* gboolean: given alone on the command line ("--model-parallel"); by
                     name: true, false, on, off, 1, 0 */
} StOptionType;

typedef struct {
  const char *name;            /* the spelling after "--" */
  StOptionType type;
  size_t offset;               /* of the field in StOptions */
  double min, max;             /* accepted range of numbers */
  const char *const *choices;  /* ST_OPT_CHOICE: names in enum order, NULL-terminated */
  gboolean (*check)(const char *value, GError **error); /* ST_OPT_STRING, may be NULL */
  const char *arg;             /* placeholder in --help: "N", "1|2|3" */
  const char *help;            /* one line, saying the default */
} StOptionSpec;

/* Every option, terminated by an entry with name NULL. */
const StOptionSpec *st_option_specs(void);
const StOptionSpec *st_option_find(const char *name);

/* Sets option `name` ("zero-stage") from text ("2"); errors name the option
 * and say what it accepts: "--zero-stage 4: must be between 1 and 3". */
gboolean st_options_set(StOptions *options, const char *name, const char *value,
                        GError **error);

/* The value of option `name` as text (the form st_options_set reads). Transfer full. */
char *st_options_get(const StOptions *options, const char *name);

struct StFramework;
/* The preset `options` name; `ideal` when none is named (st_strategy_build
 * names the strategy's before building). */
const struct StFramework *st_options_framework(const StOptions *options);
/* Bytes of a gradient element: fp32 4; under mixed precision --grad-reduce,
 * else the framework's. */
int st_options_grad_bytes(const StOptions *options);
/* Whether images are NCHW: --memory-format, else the framework's. */
gboolean st_options_nchw(const StOptions *options);
/* Whether data-parallel reductions run during backward: --overlap-grad-reduce,
 * else the framework's (under ZeRO stages 1-2 its overlap_zero12). When not,
 * st_options_resolve makes the gradients one bucket reduced after backward. */
gboolean st_options_overlap(const StOptions *options);
/* Whether tensor-parallel collectives are pipelined with their GEMMs:
 * --tp-comm-overlap, else the framework's. */
gboolean st_options_tp_comm_overlap(const StOptions *options);
/* Whether ZeRO 1-2's parameter gathers overlap the next forward:
 * --overlap-param-gather, else the framework's. */
gboolean st_options_overlap_param_gather(const StOptions *options);
/* ZeRO 2-3: gradients reduced only after the last micro-batch, accumulated
 * unsharded until then (StFramework.defer_grad_sync, --defer-grad-sync). */
gboolean st_options_defer_grad_sync(const StOptions *options);
