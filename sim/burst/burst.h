/* burst.h: the burst-parallel planner of DeepPool (Park et al., "Efficient
 * strong scaling through burst parallel training", MLSys 2022; the
 * mechanics in docs/PAPERS.md section 2).
 *
 * Strong scaling holds the global batch fixed while GPUs are added, so the
 * per-GPU batch shrinks and layers stop scaling at different points. Burst
 * parallelism gives every layer its own GPU count w (a power of two); the
 * layer runs on the first w ranks with the batch split over them, samples
 * move between layers whose GPU sets differ, and each layer's gradients are
 * all-reduced within its own set. The ranks a narrow layer leaves idle are
 * where background jobs go (sched/admission.h).
 *
 * The planner works on a layer DAG (StBurstGraph) whose nodes carry their
 * costs at every candidate width: compute (forward + backward at the local
 * batch), gradient sync within the set, and moving the node's output (and,
 * in backward, its gradient) from one width to another. Dynamic programming
 * over the nodes in topological order: the best time to finish node v at
 * width b is its compute + sync at b plus the least, over the predecessor's
 * admitted widths a, of (the predecessor's best at a + the transfer a -> b).
 *
 * Amplification limit: a predecessor u at width a is admitted only if
 *   amp = (compute_u(a) + sync_u(a) + transfer_u(a -> b)) * a / single_u < limit
 * where single_u is u's compute on one GPU with the whole batch; nodes whose
 * single-GPU time is under `exempt_ns` (300 us) are exempt (amp 1). When no
 * width is admitted, the least amplified one is taken (so a plan always
 * exists). The last node is held to the limit with no transfer out.
 *
 * Branches: the graph must be series-parallel with one source and one sink
 * (chains, and forks whose branches meet at one join: Inception modules,
 * residual blocks written as layers). Each branch is solved for every width
 * of its fork, and the join takes, per width, the slowest branch's arrival:
 * DeepPool's rule, which treats branches as running side by side.
 *
 * Branch packing (burst_pack.c): a node's set is ranks first .. first + w - 1.
 * By default every set starts at rank 0, so the branches of a fork run one
 * after another on overlapping GPUs. Packing then moves whole branches to
 * other first ranks, one move at a time, while the step's timeline
 * (st_burst_step_at_ns) gets faster: branches side by side on disjoint GPUs,
 * paying for moving every sample to and from them (xfer_far_ns), as
 * DeepPool's planner places the branches of a block (its backwardBranch:
 * the longest branch on the block's GPUs, the others on new GPUs or packed
 * after one another on GPUs a shorter branch left free).
 *
 * Every time here is an estimate from the cost models given to the graph;
 * the simulator then measures the schedule built from the plan.
 *
 * Ownership: a graph owns its nodes and their arrays; a plan owns its choices.
 */
#pragma once

#include <glib.h>
#include <stdint.h>
#include <stdio.h>

#include "cluster/cluster.h"
#include "model/model.h"
#include "profile/profile.h"

#define ST_BURST_ERROR (st_burst_error_quark())
GQuark st_burst_error_quark(void);

typedef struct {
  char *name;
  int32_t layer;       /* model layer, -1 when none */
  int32_t n_preds;
  int32_t *preds;      /* earlier nodes whose outputs this one reads */
  double single_ns;    /* forward + backward of the whole batch on one GPU */
  double *compute_ns;  /* [n_widths]: forward + backward at the local batch on one GPU of the set */
  double *bwd_ns;      /* [n_widths]: the backward's part of compute_ns */
  double *sync_ns;     /* [n_widths]: gradient all-reduce within the set (0 for one GPU) */
  double *xfer_ns;     /* [n_widths * n_widths]: [a * n_widths + b] moves the output from
                          width a to width b and its gradient back; 0 when a == b */
  double *xfer_far_ns; /* [n_widths * n_widths]: the same between sets that start at
                          different ranks (a packed branch): every sample moves */
  double *xfer_net_ns; /* [n_widths * n_widths]: the same when the two sets are not on
                          one machine (ranks_per_node) */
  int32_t *batch;      /* [n_widths]: local batch of the set's first GPU (the largest share) */
  int64_t params;      /* trainable parameters: its ranks step them */
} StBurstNode;

typedef struct {
  int32_t n_ranks;     /* GPUs a node's set may lie in: ranks 0 .. n_ranks - 1 */
  int32_t ranks_per_node; /* ranks r and s share a machine when r / it == s / it
                             (0: all on one) */
  int32_t n_widths;
  int32_t *widths;     /* [n_widths]: GPU counts 1, 2, 4, ... */
  int64_t batch;       /* samples planned (one micro-batch), split over each node's GPUs */
  GPtrArray *nodes;    /* StBurstNode *, owned, in topological order */
  double step_ns;      /* the optimizer step of every node's parameters on one rank; a rank
                          steps the share of the nodes it runs (all of them on rank 0
                          unless branches are packed) */
  double sync_drag;    /* the share of its speed a backward loses while an all-reduce runs
                          beside it (NCCL's SMs, under a framework whose collectives
                          contend: cost/framework.h); 0: none */
} StBurstGraph;

/* An empty graph whose widths are the powers of two up to min(max_gpus,
 * batch): no GPU gets an empty share. */
StBurstGraph *st_burst_graph_new(int max_gpus, int64_t batch);
void st_burst_graph_free(StBurstGraph *graph);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StBurstGraph, st_burst_graph_free)

/* Adds a node reading the outputs of `preds` (earlier nodes); its cost arrays
 * are zeroed and its local batches filled. Returns its index. */
int st_burst_graph_add(StBurstGraph *graph, const char *name, int layer, const int *preds,
                       int n_preds);

static inline StBurstNode *
st_burst_graph_node(const StBurstGraph *graph, int i)
{
  return (StBurstNode *)g_ptr_array_index(graph->nodes, i);
}

/* Samples of rank j among w sharing `batch`: the first batch % w get one more. */
static inline int
st_burst_share(int64_t batch, int w, int j)
{
  return (int)(batch / w + (j < batch % w ? 1 : 0));
}

typedef struct {
  double amp_limit; /* 2.0 */
  gboolean pack;    /* TRUE: place branches on disjoint GPUs where the step gets faster */
  double exempt_ns; /* 300 us */
  gboolean refine;  /* TRUE: improve the dynamic programming's widths on the step's
                       timeline (st_burst_step_ns), within the limit */
} StBurstParams;

void st_burst_params_init(StBurstParams *params);

typedef struct {
  int32_t width;        /* index into the graph's widths */
  int32_t gpus;
  int32_t first_rank;   /* its set: ranks first_rank .. first_rank + gpus - 1 */
  int32_t batch;        /* local batch of the first GPU */
  double compute_ns, sync_ns;
  double xfer_in_ns;    /* moving its input in from its predecessors' sets (the slowest) */
  double amplification; /* with the transfer to its successor's width; 1 when exempt */
  double end_ns;        /* the dynamic programming's finish: compute, sync and transfers
                           one after another from the start of the iteration */
} StBurstChoice;

typedef struct {
  int32_t n_nodes;
  StBurstChoice *nodes;   /* [n_nodes] */
  double step_ns;         /* predicted step of the plan: st_burst_step_ns */
  double dp_step_ns;      /* the same of every node on dp_gpus (data parallelism) */
  int32_t refined;        /* nodes whose width the timeline changed from the dynamic
                             programming's (StBurstParams.refine) */
  int32_t packed;         /* branches moved off rank 0 (StBurstParams.pack) */
  double unpacked_step_ns; /* step_ns with every set from rank 0 (the plan before packing) */
  double iteration_ns;    /* DeepPool's objective: every node's compute, sync and transfer
                             in turn, the last node's end_ns */
  double gpu_ns;          /* GPU-time held: sum of gpus x (compute + sync) per node and of
                             the larger set's gpus x transfer per edge */
  int32_t dp_gpus;        /* the widest width */
  double dp_iteration_ns; /* every node on dp_gpus, one after another (data parallelism) */
  double dp_gpu_ns;       /* dp_gpus x dp_iteration_ns */
} StBurstPlan;

/* The step of `graph` with node v on widths[width[v]] (indices), as the
 * schedule runs it: the forward in topological order, each node after its
 * inputs have moved (half of xfer_ns: the activations); the backward in
 * reverse, each node after its output's gradient has moved back (the other
 * half), at 1 - sync_drag of its speed while an all-reduce runs; each
 * node's gradient all-reduce on a stream of its own once its backward is
 * done, one after another, beside the backward; then the
 * optimizer step (step_ns) once the compute and the last all-reduce are
 * done. DeepPool's objective counts the all-reduces in the chain instead,
 * which a step whose syncs hide behind the backward does not pay. */
double st_burst_step_ns(const StBurstGraph *graph, const int32_t *width);
/* The same with node v on ranks first[v] .. first[v] + widths[width[v]] - 1
 * (NULL: all from rank 0): each rank runs its nodes on one compute stream,
 * a node starting once its inputs have arrived and every rank of its set is
 * free; an edge between sets that start at the same rank costs xfer_ns,
 * otherwise xfer_far_ns; each all-reduce waits for the sync streams of its
 * set, and slows the backwards that its first rank runs meanwhile. */
double st_burst_step_at_ns(const StBurstGraph *graph, const int32_t *width,
                           const int32_t *first);
/* The cost of node u's output edge from (width index a, first rank fa) to
 * (b, fb), both ways: xfer_ns when both start at one rank, else xfer_far_ns within a
 * machine (ranks_per_node), xfer_net_ns across machines. */
double st_burst_edge_ns(const StBurstGraph *graph, int u, int a, int fa, int b, int fb);

/* Branch packing (burst_pack.c): moves whole branches of the graph's forks
 * to other first ranks while st_burst_step_at_ns gets faster. `first` [n]
 * holds the first ranks, in and out. Returns the branches moved. */
int st_burst_pack(const StBurstGraph *graph, const int32_t *width, int32_t *first);

/* Plans `graph`. Fails when the graph is empty or not series-parallel with
 * one source and one sink, naming the node at fault. Transfer full. */
StBurstPlan *st_burst_plan_new(const StBurstGraph *graph, const StBurstParams *params,
                               GError **error);
void st_burst_plan_free(StBurstPlan *plan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StBurstPlan, st_burst_plan_free)

/* The per-node table (GPUs, local batch, compute, sync, transfer in,
 * amplification, finish) and the predicted iteration and GPU-time against
 * data parallelism. */
void st_burst_plan_print(const StBurstPlan *plan, const StBurstGraph *graph,
                         const StBurstParams *params, FILE *out);
/* The same as text. Transfer full. */
char *st_burst_plan_table(const StBurstPlan *plan, const StBurstGraph *graph,
                          const StBurstParams *params);
/* Runs of equal GPU sets, compact: "conv1_1-pool3:8 conv4_1-fc8:1"; a set that does not
 * start at rank 0 says where: "b2:2@4" (ranks 4 and 5). Transfer full. */
char *st_burst_plan_summary(const StBurstPlan *plan, const StBurstGraph *graph);

/* ---- costs from a model (burst_costs.c) -------------------------------- */

typedef struct {
  const StModel *model;     /* node i is layer i, reading its inputs (st_model_layer_inputs) */
  const StCluster *cluster; /* its `gpus` devices */
  const StProfile *profile; /* may be NULL */
  const char *comm_algo;    /* "auto", ... as st_comm_plan_collective takes it */
  int ranks;                /* workers, rank r on device r % gpus; widths up to this */
  int64_t batch;            /* samples of one micro-batch */
  StDtype compute_dtype;    /* what the engine computes in */
  StDtype activation_dtype; /* of the activations moved between sets */
  int grad_bytes;           /* per parameter, for the gradient all-reduce */
  const char *compute_model; /* --compute-model (cost.h: StComputeCtx.fallback), may be NULL */
  gboolean fp8;             /* --precision fp8 (StComputeCtx.fp8) */
  const struct StFramework *framework; /* the schedule's preset (StComputeCtx.framework) */
  gboolean nchw;            /* StComputeCtx.nchw */
  const char *optimizer;    /* its kernel's name (st_optimizer_name), for the step */
  int optim_traffic;        /* bytes the optimizer step moves per parameter */
} StBurstCostInput;

/* The graph of a model (its layers and their inputs) with every cost filled from the same cost
 * models the engine uses: compute from the profile or the roofline, the
 * all-reduce from the comm models over the first w ranks' devices, and a
 * transfer as the point-to-point time of the bytes the busiest GPU of the two
 * sets sends or receives (its own share stays put), both ways. */
StBurstGraph *st_burst_graph_for_model(const StBurstCostInput *input, GError **error);
