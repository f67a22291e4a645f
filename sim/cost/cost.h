/* cost.h: the cost models. Each is one file filling one table of functions,
 * registered with a name, a summary and its citation (cost_registry.c).
 *
 * Three families:
 * - compute: the time of a COMP op on an idle GPU. Models are tried in
 *   registry order and the first that answers wins: "profile" (measured,
 *   interpolated), then "estimate" (the efficiency published measurements
 *   show, by shape and GPU) unless the context's fallback is "roofline",
 *   then "roofline" (peak FLOP/s and memory bandwidth: a lower bound).
 * - comm: how a collective or a transfer moves bytes over links, as a short
 *   list of phases (ring, tree, hierarchical; a measured link profile when
 *   one covers the case), each saying how it loads the links of the cluster
 *   (StLinkUse). The engine runs the phases as flows that share every link
 *   they cross max-min fairly; st_comm_plan_ns() is the time alone.
 * - share: how kernels of several streams on one GPU split it: "interference"
 *   (the default: SM occupancy by priority with a measured leak, and memory
 *   bandwidth shared regardless of priority) or "priority" (priority alone).
 *
 * All are pure functions of their inputs: no state, safe from many threads.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "base/kinds.h"
#include "cluster/cluster.h"
#include "model/model.h"
#include "profile/profile.h"

#define ST_COST_ERROR (st_cost_error_quark())
GQuark st_cost_error_quark(void);

/* ---- compute ---------------------------------------------------------- */

/* What a COMP op does, as the cost models see it. */
typedef struct {
  StPass pass;
  const StLayer *layer; /* fwd / bwd / recompute: the layer; else may be NULL */
  int64_t batch;        /* samples, for layer passes */
  int64_t elems;        /* optim / compress / expand: elements touched */
  int64_t bytes;        /* optim / compress / expand: memory traffic in bytes */
  const char *kernel;   /* optim / compress / expand: profile name ("adam", "compress") */
  double share;         /* a part of a layer's pass (StOp.part): its share of the pass's
                           work, which st_compute_time scales the pass's time by; 0: the
                           whole pass */
  unsigned again_ops;   /* recompute: selective recomputation of these ops (StRecomputeOp
                           bits), which makes only what the layer drops of them again
                           (st_layer_again: again_flops, act_again), not its whole
                           forward; 0: a full recompute */
  int64_t tensors;      /* optim: the parameter tensors the update touches, which an
                           optimizer the framework does not fuse (no ST_FUSE_OPTIMIZER)
                           updates one after another, a few kernels each; compress and
                           expand (SAMO): the tensors compressed or expanded, each its
                           own kernels (compute_estimate.c); 0 or 1: one flat buffer */
} StWork;

struct StFramework;

typedef struct {
  const StCluster *cluster; /* borrowed */
  const StProfile *profile; /* borrowed, may be NULL */
  const StModel *model;     /* borrowed */
  StDtype dtype;            /* compute dtype: fp32, or bf16/fp16 under mixed precision */
  const char *fallback;     /* what answers where no profile entry does: "estimate" (NULL:
                               the default) or "roofline" (--compute-model) */
  const struct StFramework *framework; /* the schedule's preset (cost/framework.h): which
                                          kernels a pass launches; NULL: ideal */
  gboolean nchw;            /* images in NCHW: transposes around tensor-core convolutions */
  gboolean fp8;             /* --precision fp8: the transformer layers' linears run their
                               GEMMs in FP8 at the GPU's FP8 peak (StGpuSpec.fp8_flops; a
                               GPU without one runs them at dtype), with Transformer
                               Engine's casts (estimate_kernels.c); dtype stays 16-bit */
} StComputeCtx;

typedef struct {
  const char *name;
  const char *summary;
  const char *citation;
  /* TRUE with the time when this model can cost `work`, FALSE to pass. */
  gboolean (*cost)(const StComputeCtx *ctx, const StWork *work, double *time_ns,
                   StCostSource *source);
  /* Optional (NULL: never knows): TRUE with the fraction of the device the
   * work fills alone, in (0, 1], for the share model (StShareClient.fill). */
  gboolean (*fill)(const StComputeCtx *ctx, const StWork *work, double *fill);
  /* Optional (NULL: never knows): TRUE with the measured share of a
   * lower-priority neighbour's slowdown that priority does not remove, in
   * [0, 1] (StShareClient.leak). */
  gboolean (*leak)(const StComputeCtx *ctx, const StWork *work, double *leak);
} StComputeModel;

/* NULL-terminated, in the order they are tried. */
const StComputeModel *const *st_compute_models(void);
/* The names --compute-model takes: what answers where no profile does. */
gboolean st_compute_model_known(const char *name);
/* The first model that answers; the roofline always does. */
double st_compute_time(const StComputeCtx *ctx, const StWork *work, StCostSource *source);
/* The FLOPs and memory traffic in bytes of `work` as the roofline counts
 * them (compute_roofline.c's header): a layer pass's FLOPs and activation
 * and weight traffic at ctx->dtype; an elementwise pass's bytes, 0 FLOPs. */
void st_compute_work_traffic(const StComputeCtx *ctx, const StWork *work, double *flops,
                             double *bytes);
/* Elements of the weights of `layer` (as derived: one tensor rank's) whose
 * GEMMs run in FP8 under ctx->fp8: the linears of the transformer layers,
 * as estimate_kernels.c lists them, of which Transformer Engine caches an
 * FP8 copy and, on Hopper, its transpose. 0 without ctx->fp8. `linears`
 * (may be NULL): how many linears those weights belong to. */
int64_t st_compute_fp8_weights(const StComputeCtx *ctx, const StLayer *layer, int *linears);
/* The fill of the first model that knows one (a profile's measured "fill",
 * compute_profile.c), else 1: a kernel fills the device alone. */
double st_compute_fill(const StComputeCtx *ctx, const StWork *work);

/* What the sharing model needs to know of a kernel besides its priority. */
typedef struct {
  double fill;  /* fraction of the SMs it occupies alone, (0, 1] */
  double mem;   /* fraction of the achievable memory bandwidth it uses alone, [0, 1] */
  double leak;  /* share of a lower priority's slowdown its priority leaves, [0, 1] */
} StShareTraits;

/* The traits of `work`, whose time alone is `time_ns`: the fill as
 * st_compute_fill; mem = the bytes st_compute_work_traffic counts /
 * (time_ns x memory bandwidth x the GPU's achievable fraction), at most 1; leak from the profile's sharing
 * measurement of this pass when it has one, else the GPU performance file's
 * sharing.priority_leak (cluster/gpu_perf.h). */
StShareTraits st_compute_share_traits(const StComputeCtx *ctx, const StWork *work,
                                      double time_ns);

/* ---- communication ---------------------------------------------------- */

/* How a phase loads the links of the cluster (cluster/links.h) per byte of
 * its progress (StCommPhase.bytes, what each member device sends): a link
 * carries its coefficient times the phase's rate. A collective loads every
 * member device's links in both directions; a point-to-point transfer the
 * sender's out side and the receiver's in side. A phase uses at most one of
 * nic_dev and nic_node. */
typedef struct {
  double gpu;      /* each member device's NVLink / NVSwitch ports */
  double mem;      /* each member device's memory (members sharing one device) */
  double nic_dev;  /* each member device's NIC: traffic of its own */
  double nic_node; /* each node's NICs: the node's traffic, shared over the NICs of the
                      group's devices on that node in proportion to those devices */
  double leaf;     /* each up- and downlink of the group's leaf switches, when it spans
                      several */
} StLinkUse;

/* One phase of a collective: every member device sends `bytes`, after a
 * fixed `latency_ns`. Phases run one after another. */
typedef struct {
  StLinkClass link;  /* the slowest link class it crosses (labels, profile lookups) */
  int64_t latency_ns;
  double bytes;      /* per device, one direction */
  StLinkUse use;
  double bandwidth;  /* bytes/s per device alone on idle links */
  double cap;        /* bytes/s it never exceeds, even alone (a measured rate); 0: none */
} StCommPhase;

#define ST_COMM_MAX_PHASES 4

typedef struct {
  const char *algo;         /* name of the algorithm that made it */
  StCostSource source;      /* ALPHA_BETA, or LINK_PROFILE */
  int n_phases;
  StCommPhase phases[ST_COMM_MAX_PHASES];
} StCommPlan;

typedef struct {
  const char *name;
  const char *summary;
  const char *citation;
  /* Fills `plan` for `kind` over `bytes` (the full buffer); FALSE when the
   * algorithm does not apply (hierarchical inside one node, tree for
   * anything but all-reduce). A group of one rank gets zero phases. */
  gboolean (*plan)(const StCluster *cluster, StCollKind kind, int64_t bytes,
                   const StGroupShape *group, StCommPlan *plan);
} StCommAlgo;

const StCommAlgo *const *st_comm_algos(void);
const StCommAlgo *st_comm_algo_find(const char *name);

/* Plans a collective: `algo` "auto" takes the applicable algorithm fastest
 * alone on idle links, as NCCL's tuner does (comm_plan.c), a name forces
 * one. A measured link profile for this case wins over the models (source
 * LINK_PROFILE): one phase at the measured rate that loads the links as the
 * ring would (comm_plan.c says how it shares). */
gboolean st_comm_plan_collective(const StCluster *cluster, const StProfile *profile,
                                 const char *algo, StCollKind kind, int64_t bytes,
                                 const StGroupShape *group, StCommPlan *plan, GError **error);

/* A point-to-point transfer of `bytes` between two devices (one phase). */
void st_comm_plan_p2p(const StCluster *cluster, int device_a, int device_b, int64_t bytes,
                      StCommPlan *plan);
/* The same, or the profile's measured send_recv over that link when it has
 * one for the cluster's GPU (source LINK_PROFILE). `profile` may be NULL. */
void st_comm_plan_p2p_profiled(const StCluster *cluster, const StProfile *profile, int device_a,
                               int device_b, int64_t bytes, StCommPlan *plan);

/* What a phase's communication kernels hold on each member device while it
 * moves bytes (comm_share.c): NCCL's channels (one thread block each, on an
 * SM of its own) as a share of the SMs, and its memory traffic at the
 * phase's rate alone as a share of the achievable bandwidth; leak 0 (its
 * blocks are resident: priority gives a kernel beside it nothing back).
 * All zero when the GPU performance file has no nccl section. */
StShareTraits st_comm_share_traits(const StCluster *cluster, const StCommPhase *phase);

/* Time of a plan alone on idle links: sum of latency + bytes / bandwidth. */
double st_comm_plan_ns(const StCommPlan *plan);

/* Bytes/s per device that `use` allows alone on idle links for a group of
 * `shape` (a point-to-point transfer: a group of its two devices): the least
 * over the links it loads of capacity / load. */
double st_comm_use_rate(const StCluster *cluster, const StLinkUse *use, const StGroupShape *shape);

/* ---- GPU sharing ------------------------------------------------------- */

/* A kernel running on a device, as the sharing model sees it. */
typedef struct {
  int priority;   /* higher first */
  double fill;    /* fraction of the device the kernel uses alone, (0, 1] */
  double weight;  /* identical kernels folded into this one (>= 1) */
  double rate;    /* out: speed relative to running alone, (0, 1] ... or 0 */
  double mem;     /* fraction of the achievable memory bandwidth it uses alone, [0, 1] */
  double leak;    /* share of lower priorities' slowdown its priority leaves, [0, 1] */
} StShareClient;

typedef struct {
  const char *name;
  const char *summary;
  const char *citation;
  /* Sets each client's rate. A client alone gets rate 1. */
  void (*rates)(StShareClient *clients, int n);
} StShareModel;

/* NULL-terminated; the first is the default. */
const StShareModel *const *st_share_models(void);
const StShareModel *st_share_model_find(const char *name);
