/* cdp.h: cyclic data parallelism (Fournier and Oyallon, arXiv 2403.08837,
 * 2024), private to strategy_cdp*.c. docs/PAPERS.md section 1 describes the
 * technique; docs/CDP.md what a user sees.
 *
 * The plan (strategy_cdp.c). N workers each run one micro-batch per step (or
 * A of them, accumulated); the model is cut into S contiguous stages
 * (stages.h). Worker k starts k * d after worker 0, d = T / N, with T the
 * step time of one worker estimated from the cost model, so the workers are
 * spread evenly over the cycle. Step 0 is the warm-up (the workers start one
 * after another); the report's steady state begins after it.
 *
 * Versions. w_t are the parameters after t updates (w_{t+1} = w_t - lr g_t,
 * g_t the gradient of step t averaged over the workers). A pass of step t
 * reads w_{t - delta}, delta = cdp_delta(worker, stage), recorded in
 * StOp.version: dp 0 everywhere; v1 1 everywhere; v2 0 for stage l of
 * worker r when l >= S-1-r, else 1. An update op ("optim stage l") in step
 * t applies the gradient of step t-1 (its StOp.version is 1) and
 * makes w_t; it waits (previous-step dependency) for that gradient's
 * reduction, and a pass that needs w_t waits for it. A holder alone steps
 * on its compute stream, in program order; one that others wait for steps
 * on an "update" stream of higher priority as soon as the gradient is in. The executor keeps
 * each buffer's versions as StOp.version says (a second parameter version or
 * gradient buffer alternates by step; no copy is scheduled).
 *
 * Who updates a stage ("holders", each keeping the stage's parameters,
 * gradients and optimizer states):
 * - plain CDP: every worker (a replica, as in DP); the stage's gradient is
 *   reduced among the workers by a chain or an all-reduce (--cdp-reduce);
 * - ZeRO (--zero-stage, strategy_cdp_zero.c): one owner per stage; the others
 *   chain-reduce their gradients to it and receive its parameters by a relay;
 * - model parallelism (--model-parallel, strategy_cdp_mp.c): one rank per
 *   (worker, stage); the first worker on each device of a stage holds its
 *   states for the workers that share the device ("guests").
 * A holder's extra buffers follow its users' versions (cdp_slots): a replica
 * under v1 keeps a second gradient buffer (the gradient of t-1 is applied
 * after its backward of t, which writes the next); under v2, a second
 * parameter version of the stages it reads one step old (w_t is made beside
 * w_{t-1} as soon as the gradient is in). A holder others wait for (a ZeRO
 * owner, a shared device) keeps both under v1 and v2, so that it makes w_t
 * as soon as the gradient of t-1 is in, whatever its own phase.
 *
 * Point-to-point conventions (for the executor, by StOp.data). A chain
 * RECV (tag CDP_TAG_REDUCE, ST_DATA_GRADS) adds what it receives to the
 * receiver's gradient of the stage, after the receiver's own backward of the
 * stage: the addition is fused into the receive, as NCCL's ring kernels fuse
 * it, and, as in the collective cost models, not costed on its own; its SEND
 * hands the sender's gradient over (zero after it). The total passed on
 * (CDP_TAG_TOTAL, ST_DATA_GRADS_TOTAL) overwrites the receiver's gradient, and
 * parameters (CDP_TAG_RELAY, ST_DATA_PARAMS) overwrite its copy. A message of
 * step t moves the data of step t - StOp.version: gradients of step t,
 * parameters w_t (made by this step's update), or w_{t-1} for a relay
 * marked version 1. Zero-byte messages (CDP_TAG_READY, CDP_TAG_DONE,
 * ST_DATA_NONE) are events between ranks that share a device, whose guests
 * compute with their holder's states (the executor resolves them by device).
 * Two parameter versions or gradient buffers alternate by step
 * (StBuffer.slot); a rank's replica (StRank.replica) is its worker.
 */
#pragma once

#include "strategy/strategy_common.h"

/* --update-rule, in the option table's order. */
typedef enum {
  CDP_RULE_V1 = 0, /* every stage steps with the previous step's gradient */
  CDP_RULE_V2,     /* rank r's stages l >= S-1-r with the fresh one, the others the previous */
  CDP_RULE_DP,     /* every stage with the fresh gradient: the reference, it waits */
} CdpRule;

/* --cdp-reduce */
typedef enum {
  CDP_REDUCE_CHAIN = 0,   /* point-to-point add-and-forward as the workers finish the stage */
  CDP_REDUCE_COLLECTIVE,  /* one all-reduce per stage once every worker finished it */
} CdpReduce;

/* --stage-split */
typedef enum {
  CDP_SPLIT_FLOPS = 0,
  CDP_SPLIT_PARAMS,
  CDP_SPLIT_MEMORY,
} CdpSplit;

/* Point-to-point tags: sends and receives pair in order per (sender,
 * receiver, tag); CDP_TAG(kind, stage) keeps each stage's messages apart,
 * since two ranks may exchange several stages' in different orders. */
#define CDP_TAG(kind, stage) (((kind) << 20) | (stage))
enum {
  CDP_TAG_REDUCE = 1, /* partial gradient sums along a chain */
  CDP_TAG_TOTAL,      /* the reduced gradient, passed on to the other holders */
  CDP_TAG_RELAY,      /* ZeRO: a stage's parameters, owner to user to user */
  CDP_TAG_ACT,        /* model parallelism: activations to the next stage */
  CDP_TAG_GRAD,       /* model parallelism: their gradient back to the previous stage */
  CDP_TAG_READY,      /* shared device: the holder's update is done (0 bytes) */
  CDP_TAG_DONE,       /* shared device: a guest's backward is in the gradient (0 bytes) */
  CDP_TAG_TURN,       /* stretched stagger: the device is free for the receiver's pass
                         (0 bytes); CDP_TAG_TURN + i for the receiver's pass i */
};

#define CDP_NONE UINT32_MAX

typedef struct {
  const StOptions *options; /* borrowed, resolved */
  const StProfile *profile; /* borrowed, may be NULL */
  StSchedule *schedule;     /* being built; owns the model and cluster below */
  const StModel *model;
  const StCluster *cluster;
  StStateBytes bytes;
  int n;                    /* workers */
  int s;                    /* stages */
  int a;                    /* micro-batches per worker per step */
  int mb;                   /* samples per micro-batch */
  CdpRule rule;
  CdpReduce reduce;
  CdpSplit split;
  int zero;                 /* ZeRO stage, 0 = none */
  gboolean mp;
  int32_t *first;           /* [s + 1]: stage l is layers [first[l], first[l + 1]) */
  int64_t *params;          /* [s]: parameters (elements) of each stage */
  int32_t *stage_of;        /* [layers]: the stage of each layer */
  /* Estimates from the cost model, ns, for one worker alone on idle devices. */
  double *fwd_ns, *bwd_ns;  /* [s]: one micro-batch's forward / backward of the stage */
  double *update_ns;        /* [s]: the stage's optimizer step */
  double *hop_ns;           /* [n * s], model parallelism: worker k moving stage l's
                               output to stage l+1 (and its gradient back) at
                               [k * s + l], between the devices it is placed on */
  double step_ns;           /* T: one worker's step */
  int64_t delay_ns;         /* d = T / N: worker k starts k * d after worker 0 */
  int32_t *owner;           /* [s], ZeRO: the worker owning the stage's states; else NULL */
  int32_t *hosts;           /* [s], model parallelism: devices of each stage; else NULL */
  int32_t *base;            /* [s], model parallelism: the first of them */
  int gpus_free_hops;       /* model parallelism: the devices the stagger would need if
                               moving activations between stages cost nothing */
  /* Model parallelism's slack (strategy_cdp_slack.c). */
  double slack;             /* --cdp-slack: the stretch the plan may take on */
  double step_free_ns;      /* T0: one worker's step with free transfers */
  double stretch;           /* the least stretch that absorbs the transfers on the devices
                               free transfers need (INFINITY: none does; 0 not computed) */
  double absorbed_ns;       /* the largest transfer absorbed, ns (0 when not absorbed) */
  gboolean absorbed;        /* the stretched stagger is the plan: step_ns = T0 (1 + stretch) */
  int gpus_unabsorbed;      /* devices the transfers need without the stretch */
} CdpPlan;

/* The parameter version (0 or 1 steps old) a pass of `worker` reads in `stage`. */
int cdp_delta(const CdpPlan *c, int worker, int stage);

/* Bytes of one micro-batch for a per-sample quantity at the model's dtype. */
int64_t cdp_batch_bytes(const CdpPlan *c, int64_t per_sample);

/* ---- a rank's program (strategy_cdp_rank.c) ------------------------------ */

/* An op that later ops may depend on, possibly before it exists: `op` once
 * built, `ref` a forward reference handed out for previous-step
 * dependencies before that (resolved when the op is built). */
typedef struct {
  uint32_t op;
  uint32_t ref;
} CdpMark;

/* The ops of one stage of one step that others depend on. */
typedef enum {
  CDP_MARK_UPDATE = 0, /* holder: the optimizer step */
  CDP_MARK_TOTAL,      /* holder: the reduced gradient is complete here */
  CDP_MARK_F_FIRST,    /* first forward op of the stage (first micro-batch) */
  CDP_MARK_B_FIRST,    /* first backward op (first micro-batch) */
  CDP_MARK_B_LAST,     /* last backward op (last micro-batch) */
  CDP_MARK_GATE,       /* ZeRO user: the relay receive; guest: the holder's READY */
  CDP_MARK_SENT,       /* ZeRO user: its chain send (the gradient may be rewritten) */
  CDP_MARK_FORWARDED,  /* ZeRO-3 user: the relay send that must end before the free */
  CDP_MARK_N,
} CdpMarkId;

/* A dependency of a pass on a mark of its stage: same step or previous. */
typedef struct {
  uint8_t mark; /* CdpMarkId */
  uint8_t prev; /* TRUE: on the previous step's op */
} CdpGate;

#define CDP_GATES_MAX 4

/* How a holder keeps a stage. */
typedef struct {
  int versions;    /* parameter versions: 1, or 2 (w_t made while w_{t-1} is still read) */
  int grads;       /* gradient buffers: 1, or 2 (the gradient of t-1 is still to be
                      applied when the backward of t writes the next) */
} CdpSlots;

/* What a rank is for one stage. */
typedef enum {
  CDP_ROLE_NONE = 0,   /* a stage without parameters: passes only */
  CDP_ROLE_HOLDER,     /* keeps and updates the stage (a replica, a ZeRO owner, a device's first) */
  CDP_ROLE_USER,       /* ZeRO: receives the parameters by relay, chain-reduces to the owner */
  CDP_ROLE_GUEST,      /* model parallelism: computes with its device holder's states */
} CdpRole;

typedef struct {
  CdpRole role;
  int delta;             /* cdp_delta of this rank's worker */
  CdpSlots slots;        /* holders */
  gboolean serves;       /* holders: other ranks wait for its update (relay users, guests) */
  uint32_t grads_step;   /* transient gradient allocated by the first backward, or CDP_NONE */
  uint32_t relayed;      /* ZeRO-3 user: parameters received for this step, or CDP_NONE */
  CdpMark marks[CDP_MARK_N];
  /* Dependencies of the stage's first forward, first backward and last
   * backward ops. */
  CdpGate gate_f[CDP_GATES_MAX], gate_b[CDP_GATES_MAX], gate_b_last[CDP_GATES_MAX];
  int n_gate_f, n_gate_b, n_gate_b_last;
} CdpStage;

typedef struct CdpRank CdpRank;

/* Hooks by which the builders shape a rank's step; any may be NULL. */
typedef struct {
  /* At the start of the step. */
  void (*step_begin)(CdpRank *r);
  /* Before the first forward (`backward` FALSE) or backward op of stage l,
   * first micro-batch. */
  void (*before_pass)(CdpRank *r, int l, gboolean backward);
  /* After the first forward op of stage l (first micro-batch). */
  void (*after_forward)(CdpRank *r, int l);
  /* After the last backward op of stage l (last micro-batch). */
  void (*after_backward)(CdpRank *r, int l);
  /* Before any micro-batch's forward or backward of stage l: a dependency
   * of its first op, if it returns TRUE. */
  gboolean (*turn_in)(CdpRank *r, int l, int micro, gboolean backward, StDep *dep);
  /* After any micro-batch's forward or backward of stage l: its last op. */
  void (*turn_out)(CdpRank *r, int l, int micro, gboolean backward, uint32_t last);
} CdpHooks;

struct CdpRank {
  const CdpPlan *c;
  StProgram *p;
  int rank;         /* schedule rank */
  int worker;
  int lo, hi;       /* the stages it runs: [lo, hi) */
  /* Streams, -1 until used. */
  int compute, update;
  int grads_in, grads_out;               /* chain receives / sends, collectives */
  int total_in, total_out;               /* the reduced gradient passed on */
  int sync;                              /* model parallelism: events */
  GHashTable *peer_streams;              /* "what peer" -> stream + 1 (cdp_peer_stream) */
  int world;          /* communicator of every rank: point-to-point peers are ranks */
  int holders_comm;   /* collectives among a stage's holders */
  CdpStage *st;       /* [s], indexed by stage; [lo, hi) used */
  const CdpHooks *hooks;
  gpointer data;      /* the builder's */
};

/* A rank running stages [lo, hi) of `worker` with a fresh program. */
void cdp_rank_init(CdpRank *r, const CdpPlan *c, int rank, int worker, int lo, int hi,
                   const CdpHooks *hooks, gpointer data);
/* Emits the step (passes of every micro-batch, the hooks' ops around them)
 * and returns the program (transfer full). */
StProgram *cdp_rank_finish(CdpRank *r);
void cdp_rank_clear(CdpRank *r);

void cdp_mark_init(CdpMark *m);
/* For st_program_after_prev_step: the op, or a forward reference to it. */
uint32_t cdp_mark_prev(StProgram *p, CdpMark *m);
void cdp_mark_set(StProgram *p, CdpMark *m, uint32_t op);
void cdp_add_gate(CdpGate *gates, int *n, CdpMarkId mark, gboolean prev);

/* A stream, created on first use. */
int cdp_stream(CdpRank *r, int *slot, const char *name, int priority);
/* A stream for `what` ("params in <-") exchanged with one peer rank about
 * one stage (-1: any): a send waits for its receiver, so messages to or
 * from different peers go on streams of their own, lest one late peer hold
 * up the others, and so do different stages', whose order the two ends
 * need not share (the owner sends in update order, a user receives in
 * backward order). Past 48 streams, further ones share one. */
int cdp_peer_stream(CdpRank *r, const char *what, int peer, int stage);
/* A buffer of stage l's layers. */
uint32_t cdp_stage_buffer(CdpRank *r, int l, const char *what, StMemCategory category,
                          int64_t bytes, gboolean persistent, StData data);
/* The slots of a holder whose users (itself included) read versions `seen`
 * (bit 0: version 0 is read, bit 1: version 1); `serves`: other ranks wait
 * for its updates (a shared device's guests, a ZeRO owner's relay). */
CdpSlots cdp_slots(const CdpPlan *c, unsigned seen, gboolean serves);
/* Makes the rank the holder of stage l: buffers, and the gates of its passes
 * on its update. */
void cdp_holder(CdpRank *r, int l, CdpSlots slots);
/* Where the holder's update goes in program order: before the stage's first
 * forward (0), its first backward (1), or after its last backward (2, in
 * place once this step's passes are done with w_{t-1}). */
int cdp_update_point(const CdpStage *st);
/* The holder's optimizer step of stage l: applies the gradient of the
 * previous step once its reduction is complete; `after` / `after_prev` are
 * further same-step / previous-step dependencies. */
uint32_t cdp_emit_update(CdpRank *r, int l, const uint32_t *after, int n_after,
                         const uint32_t *after_prev, int n_after_prev);
/* A send or receive template moving `data` of layers [layer, layer_last]
 * (ST_DATA_NONE: an event), labelled. */
StOp cdp_p2p_op(CdpRank *r, gboolean send, int stream, int peer_rank, int tag, int64_t bytes,
                StData data, int layer, int layer_last, const char *label);
/* The same for stage l's layers, built with same-step dependencies. */
uint32_t cdp_emit_p2p(CdpRank *r, gboolean send, int stream, int peer_rank, int tag,
                      int64_t bytes, StData data, int l, const char *label,
                      const uint32_t *after, int n_after);
/* Reduction of stage l's gradient among `holders` (ranks in chain order;
 * this rank is holders[me]), once this rank's backward and `after` (its
 * guests' contributions) are in: a chain or an all-reduce. Sets the stage's
 * total mark. */
void cdp_emit_reduction(CdpRank *r, int l, const int32_t *holders, int n, int me,
                        const uint32_t *after, int n_after);

/* The schedule rank that runs `stage` of `worker`. */
int cdp_rank_of(const CdpPlan *c, int worker, int stage);

/* ---- builders ------------------------------------------------------------------ */

/* Plain CDP: every worker a holder of every stage (strategy_cdp_rank.c). */
gboolean cdp_build_replicas(CdpPlan *c, GError **error);
/* ZeRO relay (strategy_cdp_zero.c). */
gboolean cdp_build_zero(CdpPlan *c, GError **error);
/* Per step, the collectives that ZeRO-DP of the same stage would issue. */
int cdp_zero_collectives_replaced(const CdpPlan *c);
/* Model parallelism (strategy_cdp_mp.c): devices per stage from the
 * estimated stagger, each worker's passes and transfers between the devices
 * it is placed on, a stage's devices inside one node when they fit (sets
 * hosts and base; returns the GPUs the layout spans, idle ones between
 * included: the cluster must have that many). A stage
 * never gets fewer devices than `hosts` already gives it, so calling it
 * again after the transfers were re-estimated for the new placement reaches
 * a fixed point (strategy_cdp.c). */
int cdp_mp_place(CdpPlan *c);
/* Lays out the devices `hosts` gives each stage (sets base); returns the
 * GPUs the layout spans, as cdp_mp_place. */
int cdp_mp_lay_out(CdpPlan *c);
/* Slack (strategy_cdp_slack.c): the least stretch e >= 0 such that, with
 * the devices `hosts` gives each stage (placed for free transfers) and
 * each worker's cycle stretched to T0 (1 + e), every worker's transfers
 * (hop_ns, for base) fit between its passes and every device's cycle has
 * room for its workers' passes and the stage's optimizer step; INFINITY
 * when a transfer follows a pass of no length. T0 is step_free_ns. */
double cdp_mp_stretch(const CdpPlan *c);
/* The largest transfer of hop_ns, ns. */
double cdp_mp_hop_max(const CdpPlan *c);
/* Turns on a shared device under the stretched stagger: worker k's pass i
 * of stage l (i = 2 micro, + 1 for the backward) waits for the pass that
 * precedes it on the device in the stretched timeline (`from`'s pass
 * `from_pass`, of the previous step when `prev`) to end, and hands the
 * device on to `to`'s pass `to_pass` when it ends; -1 when the turn is the
 * worker's own (its program order keeps it) or more than a step apart (not
 * declared). Indexed [(k * s + l) * 2a + i]; transfer full. Only when
 * `absorbed`. */
typedef struct {
  int from, from_pass;
  gboolean prev;
  int to, to_pass;
} CdpTurn;
CdpTurn *cdp_mp_turns(const CdpPlan *c);
gboolean cdp_mp_check(const CdpPlan *c, int used, GError **error);
gboolean cdp_build_mp(CdpPlan *c, GError **error);

/* StStrategy.estimate (strategy_cdp_estimate.c): the model states every
 * rank surely holds, and without model parallelism one micro-batch's saved
 * blocks, as a lower bound of the peak. */
gboolean cdp_estimate(const StStrategyInput *in, StEstimate *est, GError **error);
