/* sched.h: the Schedule, the one artifact that the simulator and the executor
 * both consume.
 *
 * Shape. R ranks (workers) are placed on D devices; several ranks may share a
 * device. Each rank runs a program: streams (with priorities) of ops with
 * CUDA semantics: an op starts after the previous op of its stream and all of
 * its dependencies have finished. Ranks that do the same thing share one
 * program, so a schedule of 1024 identical data-parallel ranks holds one
 * program, not 1024 copies; a program is written relative to "this rank"
 * (peers and groups are resolved through communicators).
 *
 * Steps. A program describes one training step; the schedule runs it `steps`
 * times. A dependency may point into the previous step (step_offset -1), which
 * is how one step waits for the last one (ZeRO's parameter all-gather, CDP's
 * delayed gradients); in the first step such a dependency is already met.
 *
 * Communicators. A communicator partitions (some of) the ranks into groups,
 * like MPI_Comm_split. A collective op names a communicator; it runs over the
 * group that holds the executing rank, and matches the other members' ops on
 * that group in issue order (the n-th collective of a rank on a group meets
 * the n-th of every other member, and they must agree on kind and bytes).
 * Send/recv name a communicator and the peer's index in the group; they pair
 * in order per (sender, receiver, tag).
 *
 * Memory. Buffers are declared per program with a category and a size; an op
 * lists the buffers it allocates when it starts and frees when it ends.
 * Persistent buffers (weights, optimizer states) live for the whole run. Every
 * non-persistent buffer is allocated and freed once per step.
 *
 * Order. A program's ops are stored in a topological order: every same-step
 * dependency, and the previous op of the same stream, come earlier in the
 * array. So any schedule built through this API is acyclic within a step, and
 * an executor may enqueue ops in array order.
 *
 * Ownership: the schedule owns its model, cluster, communicators and programs.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "base/kinds.h"
#include "cluster/cluster.h"
#include "model/model.h"
#include "sched/admission.h"

#define ST_SCHED_ERROR (st_sched_error_quark())
GQuark st_sched_error_quark(void);

typedef struct {
  char *name;
  int32_t priority; /* higher runs first when streams share a device; 0 is normal */
  /* Multiplexing (sched/admission.h): a background stream runs a best-effort
   * job beside the foreground (the streams that are not background). Its
   * compute ops start in pieces that its device's admission control lets in
   * under `admission`; while a foreground exists it repeats its ops for as
   * long as the foreground runs, and stops when the foreground's last step
   * ends. FALSE (the default) for every ordinary stream. */
  gboolean background;
  StAdmissionPolicy admission; /* when background */
  /* Runs on the host CPU, not the GPU (ZeRO-Offload's CPU optimizer step,
   * zero.h): its COMP ops are elementwise work whose StOp.bytes of host
   * memory traffic take their time at the host's memory bandwidth
   * (st_cluster_host_memory_bandwidth, shared by the node's GPUs' ranks),
   * and occupy no GPU. FALSE for every GPU stream. The simulator's only. */
  gboolean host;
} StStream;

typedef struct {
  const char *name;   /* owned by the program (its string chunk) */
  uint8_t category;   /* StMemCategory */
  uint8_t persistent; /* allocated before the first step, never freed */
  int64_t bytes;
  /* What it holds, for the executor (st_program_buffer_holds): `data` of
   * layers [layer, layer_last] (micro-batch `micro` for activations), cut
   * into `parts` equal slices per layer when sharded (1: whole). */
  uint8_t data;       /* StData; ST_DATA_NONE: opaque */
  int32_t layer, layer_last, micro, parts;
  /* Versions (st_program_buffer_slot): -1 when this is the only buffer of
   * its data and layers. Else n persistent buffers hold the same data of the
   * same layers with slots 0 .. n-1, alternating by step: the data of step t
   * is in slot t mod n (parameters w_t, gradients of step t; an op of step t
   * with `version` v reads those of step t - v). Cyclic DP's second
   * parameter version and second gradient buffer. */
  int32_t slot;
} StBuffer;

typedef struct {
  uint32_t op;         /* index in the same program */
  int32_t step_offset; /* 0: this step; -1: the previous step */
} StDep;

typedef struct {
  uint8_t kind;     /* StOpKind */
  uint8_t sub;      /* StPass (COMP), StCollKind (COMM_COLL), StCopyKind (COPY); 0 otherwise */
  uint16_t stream;  /* index in the program's streams */
  int32_t layer;    /* model layer, -1 when none */
  int32_t micro;    /* micro-batch, -1 when none */
  int32_t batch;    /* samples of a layer pass */
  int32_t comm;     /* communicator of COMM ops, -1 otherwise */
  int32_t peer;     /* SEND/RECV: the peer's index in this rank's group */
  int32_t tag;      /* SEND/RECV: pairs in order per (sender, receiver, tag); a COMP layer
                       pass: -1, or a step of its part cut around context parallelism's
                       exchanges (st_op_cp_step) */
  int32_t label;    /* index in the program's labels (a bucket's name), -1 when none */
  int32_t version;  /* parameters a pass reads: 0 the current ones, k those of k steps ago
                       (delayed update rules, as cyclic DP's); an optimizer step applies
                       the gradient of k steps ago; a COMM op moves the parameters or
                       gradients of k steps ago (StBuffer.slot) */
  uint8_t data;     /* COMM/COPY: what moves (StData), of layers [layer, layer_last] */
  uint8_t part;     /* a layer pass in parts around tensor-parallel collectives
                       (st_layer_tp_parts): 0 the whole pass, k >= 1 part k of it (a
                       transformer block's attention half 1, MLP half 2), on its COMP op
                       and on the collectives that belong to that part */
  /* Samples (st_op_samples), for the executor: 0 when not said, the rank's
   * own contiguous share as its replica computes it; else the op's `batch`
   * samples are s = replica + sample_first + t * sample_stride, t < batch,
   * counted over the step's global batch (burst parallelism: rank j of a
   * layer on w GPUs holds s = j mod w). Kept in the struct's padding. */
  uint16_t sample_stride;
  int32_t layer_last; /* with `layer`, -1 when none */
  int32_t sample_first; /* with sample_stride */
  int64_t bytes;    /* COLL: full buffer; SEND/RECV/COPY: payload; elementwise COMP: traffic */
  int64_t elems;    /* optim / compress / expand: elements */
  uint32_t dep_first; /* deps[dep_first .. dep_first + n_deps) */
  uint32_t n_deps;
  uint32_t mem_first; /* mem[mem_first ..]: n_alloc buffers allocated at start, then n_free freed at end */
  uint16_t n_alloc;
  uint16_t n_free;
} StOp;

/* A layer pass's part cut in `steps` around context parallelism's exchanges
 * (model.h, st_layer_cp_share) runs one COMP op per step; the step travels
 * in StOp.tag, unused by compute ops, as steps x 256 + step. */
static inline void
st_op_set_cp_step(StOp *op, int step, int steps)
{
  op->tag = steps * 256 + step;
}

/* The step of a COMP op (0 when it is a whole part) and their count (0). */
static inline int
st_op_cp_step(const StOp *op)
{
  return op->kind == ST_OP_COMP && op->tag >= 256 ? op->tag % 256 : 0;
}

static inline int
st_op_cp_steps(const StOp *op)
{
  return op->kind == ST_OP_COMP && op->tag >= 256 ? op->tag / 256 : 0;
}

/* The sample range lives in what was padding: ops stay 80 bytes, which the
 * simulator's memory at millions of ops counts on. */
G_STATIC_ASSERT(sizeof(void *) != 8 || sizeof(StOp) == 80);

typedef struct {
  char *name;
  GArray *streams;   /* StStream */
  GArray *buffers;   /* StBuffer */
  GArray *ops;       /* StOp, topologically ordered (see above) */
  GArray *deps;      /* StDep */
  GArray *mem;       /* uint32_t buffer indices */
  GPtrArray *labels; /* char *, owned */
  int32_t job;       /* whose layers op->layer indexes: 0 the main job, k schedule->jobs[k-1] */
  /* private: buffer names (one chunk: programs hold thousands) */
  GStringChunk *names;
  /* private: the op being built (st_program_begin .. st_program_commit) */
  StOp pending;
  gboolean building;
  GArray *pending_deps, *pending_alloc, *pending_free;
  GHashTable *label_index;
  uint32_t n_refs, n_unresolved;
} StProgram;

/* The arrays are read-only once built, and communicators that partition
 * the ranks alike (ZeRO-3's world, gather and reduce) share one copy of them
 * (reference-counted), so a schedule of R ranks holds 12 bytes per rank per
 * distinct partition, not per communicator. */
typedef struct {
  char *name;
  int32_t n_groups;
  int32_t *group_of; /* [n_ranks]: group of each rank, -1 when not a member */
  int32_t *index_of; /* [n_ranks]: position of each rank in its group, -1 when not a member */
  int32_t *offsets;  /* [n_groups + 1]: group g is members[offsets[g] .. offsets[g + 1]) */
  int32_t *members;  /* ranks, ascending within a group */
  int32_t n_members; /* private: the length of members */
} StComm;

typedef struct {
  int32_t node;  /* node index */
  int32_t local; /* GPU index within its node */
} StDevice;

typedef struct {
  int32_t device;
  int32_t program;
  int64_t start_ns; /* its first step begins this long after time 0 (a staggered start) */
  /* The data-parallel replica whose samples it computes: every stage of one
   * pipeline (or of one cyclic-DP worker under model parallelism) works on
   * the same micro-batches, the first making their inputs and the last
   * their targets. st_schedule_new sets it to the rank itself. */
  int32_t replica;
} StRank;

/* Settings every strategy shares, recorded with the schedule for reports. */
typedef struct {
  char *strategy;        /* registry name ("dp", "zero") */
  char *description;     /* one line: "zero stage 2, 8 ranks, micro-batch 32" */
  StPrecision precision;
  StOptimizer optimizer;
  int32_t micro_batch;   /* samples per micro-batch per rank */
  int32_t accumulation;  /* micro-batches per rank per step */
  int64_t global_batch;  /* samples per step over all ranks */
  double sparsity;       /* SAMO (--sparsity): fraction of each layer's weights pruned by a
                            fixed mask, [0, 1); 0 dense */
  StRecompute recompute; /* --recompute: what the RECOMPUTE ops make again (a layer's whole
                            forward, or under selective its StLayerMemory.again only); the
                            layers that have one say which are recomputed */
  unsigned recompute_ops; /* --recompute-ops: under selective, the StRecomputeOp bits whose
                             parts of `again` the recomputes make; 0 = core_attn */
  char *compute_model;   /* --compute-model: what costs COMP work no profile entry covers
                            ("estimate", "roofline"); NULL = "estimate" */
  char *framework;       /* --framework: the preset (cost/framework.h) whose defaults the
                            schedule follows; NULL = "ideal" (a schedule from before presets) */
  gboolean nchw;         /* images in NCHW (--memory-format): transposes around tensor-core
                            convolutions */
  int64_t gather_bucket_bytes; /* ZeRO-3 parameter gathers run as collectives of at most this
                                  many bytes, one after another (the framework's); 0: whole */
  double moe_imbalance;  /* --moe-imbalance under expert parallelism: every MoE expert's pass
                            costs this many times its balanced one (st_op_work), the busiest
                            rank's load over the mean; 0 or 1: balanced */
} StSettings;

/* A training job beside the main one: a background job multiplexed onto the
 * same GPUs, with its own model and batch. */
typedef struct {
  char *name;
  StModel *model;  /* owned */
  StSettings settings;
} StJob;

/* A fact a strategy reports about itself ("zero_stage": 2). */
typedef struct {
  char *key;
  char *text;   /* NULL for a number */
  double number;
} StNote;

typedef struct {
  StModel *model;         /* owned: the main job's model (job 0) */
  StCluster *cluster;     /* owned; `gpus` is the device count */
  StSettings settings;    /* the main job's settings */
  GPtrArray *jobs;        /* StJob *, owned: jobs 1, 2, ... beside the main one; often empty */
  int32_t steps;          /* times the programs run; 0: until the state repeats (--steps auto,
                             output/steady.h), at most st_steady_cap steps */
  int32_t warmup_steps;   /* steps before the steady state, left out of the step time;
                             -1 (default): the first, when there are several. With
                             steps 0, the first step the steady window may start at */
  int32_t warmup_scale;   /* how many steps its warm-up may scale with (cyclic DP's workers,
                             a pipeline's stages): --steps auto's cap grows with it; 1 */
  int32_t n_devices;
  StDevice *devices;      /* [n_devices] */
  int32_t n_ranks;
  StRank *ranks;          /* [n_ranks] */
  GPtrArray *comms;       /* StComm *, owned */
  GPtrArray *programs;    /* StProgram *, owned */
  GArray *notes;          /* StNote */
} StSchedule;

/* ---- building --------------------------------------------------------- */

/* A schedule on the first cluster->gpus GPUs of `cluster`, with `n_ranks`
 * ranks placed by `placement` (NULL: round-robin, rank r on device r % D).
 * Takes ownership of model and cluster. */
StSchedule *st_schedule_new(StModel *model, StCluster *cluster, int n_ranks,
                            const int32_t *placement);
void st_schedule_free(StSchedule *schedule);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StSchedule, st_schedule_free)

/* Adds a communicator from a color per rank (-1: not a member): ranks of one
 * color form a group, groups ordered by color, members ascending. */
int st_schedule_add_comm(StSchedule *schedule, const char *name, const int32_t *color);
/* A communicator with every rank in one group. */
int st_schedule_add_world(StSchedule *schedule, const char *name);
int st_schedule_find_comm(const StSchedule *schedule, const char *name);
/* Takes ownership; returns the program index. */
int st_schedule_add_program(StSchedule *schedule, StProgram *program);
/* Adds a job beside the main one; takes ownership of `model`, copies the
 * settings' strings. Returns its index (1, 2, ...) for StProgram.job. */
int st_schedule_add_job(StSchedule *schedule, const char *name, StModel *model,
                        const StSettings *settings);
void st_schedule_note_number(StSchedule *schedule, const char *key, double value);
void st_schedule_note_text(StSchedule *schedule, const char *key, const char *text);

StProgram *st_program_new(const char *name);
void st_program_free(StProgram *program);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StProgram, st_program_free)
int st_program_add_stream(StProgram *program, const char *name, int priority);
/* A stream on the host CPU (StStream.host). */
int st_program_add_host_stream(StProgram *program, const char *name);
uint32_t st_program_add_buffer(StProgram *program, const char *name, StMemCategory category,
                               int64_t bytes, gboolean persistent);
/* Says what a buffer holds (for the executor): `data` of layers [layer,
 * layer_last], micro-batch `micro` (-1 when not per micro-batch), in `parts`
 * slices per layer (1: whole). */
void st_program_buffer_holds(StProgram *program, uint32_t buffer, StData data, int layer,
                             int layer_last, int micro, int parts);

/* Makes `buffer` (persistent) slot `slot` of the buffers that hold the same
 * data of the same layers and alternate by step (StBuffer.slot). */
void st_program_buffer_slot(StProgram *program, uint32_t buffer, int slot);

/* Interned per program: the same text gives the same index. */
int32_t st_program_label(StProgram *program, const char *text);

/* Op templates: every field not named is "none" (-1 or 0). */
StOp st_op_comp(int stream, StPass pass, int layer, int micro, int batch);
StOp st_op_elementwise(int stream, StPass pass, int layer, int64_t elems, int64_t bytes);
StOp st_op_coll(int stream, StCollKind kind, int comm, int64_t bytes);
StOp st_op_send(int stream, int comm, int peer, int tag, int64_t bytes);
StOp st_op_recv(int stream, int comm, int peer, int tag, int64_t bytes);
StOp st_op_copy(int stream, StCopyKind kind, int64_t bytes);
/* Says what a COMM or COPY op moves: `data` of layers [layer, layer_last]. */
void st_op_moves(StOp *op, StData data, int layer, int layer_last);
/* Says which samples a layer pass, a transfer or a copy of activations
 * covers (StOp.sample_stride): its `batch` samples replica + first + t *
 * stride of the step's global batch, relative to the executing rank's
 * replica so that ranks of one shape can share a program. */
static inline void
st_op_samples(StOp *op, int first, int stride)
{
  g_return_if_fail(first >= 0 && stride >= 1 && stride <= G_MAXUINT16);
  op->sample_first = first;
  op->sample_stride = (uint16_t)stride;
}

/* Building one op: begin with a template, add dependencies and memory
 * effects, commit to get its index. Dependencies must be earlier ops (or
 * previous-step ones); duplicates are dropped. */
void st_program_begin(StProgram *program, const StOp *op);
void st_program_after(StProgram *program, uint32_t op);
void st_program_after_prev_step(StProgram *program, uint32_t op);
void st_program_alloc(StProgram *program, uint32_t buffer);
void st_program_free_buffer(StProgram *program, uint32_t buffer);
uint32_t st_program_commit(StProgram *program);

/* Forward references, for previous-step dependencies on an op that is built
 * later (the next step's first all-gather waits for this step's optimizer,
 * which comes at the end). Use the returned handle with
 * st_program_after_prev_step, then st_program_resolve it to the real op once
 * built. A program must have no unresolved reference when it is added to a
 * schedule. */
uint32_t st_program_forward_ref(StProgram *program);
void st_program_resolve(StProgram *program, uint32_t ref, uint32_t op);

/* ---- reading ---------------------------------------------------------- */

static inline const StProgram *
st_schedule_program_of(const StSchedule *s, int rank)
{
  return (const StProgram *)g_ptr_array_index(s->programs, s->ranks[rank].program);
}

static inline const StComm *
st_schedule_comm(const StSchedule *s, int comm)
{
  return (const StComm *)g_ptr_array_index(s->comms, comm);
}

static inline const StOp *
st_program_op(const StProgram *p, uint32_t op)
{
  return &g_array_index(p->ops, StOp, op);
}

/* The lists of one op. A program with no deps (or no buffers) has no array
 * storage at all: then the list is NULL, and its length 0. */
static inline const StDep *
st_program_deps(const StProgram *p, const StOp *op)
{
  return p->deps->len > 0 ? &g_array_index(p->deps, StDep, op->dep_first) : NULL;
}

static inline const uint32_t *
st_program_allocs(const StProgram *p, const StOp *op)
{
  return p->mem->len > 0 ? &g_array_index(p->mem, uint32_t, op->mem_first) : NULL;
}

static inline const uint32_t *
st_program_frees(const StProgram *p, const StOp *op)
{
  return p->mem->len > 0 ? &g_array_index(p->mem, uint32_t, op->mem_first + op->n_alloc)
                         : NULL;
}

/* Jobs: 0 is the main one (schedule->model, ->settings). */
static inline int
st_schedule_n_jobs(const StSchedule *s)
{
  return 1 + (int)s->jobs->len;
}

static inline const StModel *
st_schedule_job_model(const StSchedule *s, int job)
{
  return job == 0 ? s->model : ((const StJob *)g_ptr_array_index(s->jobs, job - 1))->model;
}

static inline const StSettings *
st_schedule_job_settings(const StSchedule *s, int job)
{
  return job == 0 ? &s->settings : &((const StJob *)g_ptr_array_index(s->jobs, job - 1))->settings;
}

/* The model whose layers the ops of `p` index. */
static inline const StModel *
st_program_model(const StSchedule *s, const StProgram *p)
{
  return st_schedule_job_model(s, p->job);
}

/* The rank `rank` reaches through communicator `comm` at group index `peer`. */
int st_schedule_peer_rank(const StSchedule *s, int rank, int comm, int peer);
/* The point-to-point ops (sends and receives) of each program, in op order:
 * a rank's peers found without walking every op of its program.
 * [n_programs] of GArray of uint32, transfer full. */
GPtrArray *st_schedule_p2p_ops(const StSchedule *s);

/* Where the group of `rank` in `comm` sits (ranks, devices, nodes). */
void st_schedule_group_shape(const StSchedule *s, int comm, int group, StGroupShape *shape);

/* A short human name: "fwd conv1 m0", "all_reduce bucket 3", "send -> 2".
 * Transfer full. */
char *st_op_describe(const StSchedule *s, const StProgram *p, uint32_t op);

/* Total bytes of persistent buffers of a program, per category. */
void st_program_persistent_bytes(const StProgram *p, int64_t out[ST_MEM_N]);

/* ---- serialization and checks (sched_json.c, sched_check.c) ------------ */

/* Self-contained JSON: model, cluster, settings, devices, ranks,
 * communicators, programs. st_schedule_from_json gives back an equal schedule. */
struct cJSON *st_schedule_to_json(const StSchedule *schedule);
StSchedule *st_schedule_from_json(const struct cJSON *root, const char *origin, GError **error);
gboolean st_schedule_save(const StSchedule *schedule, const char *path, GError **error);
StSchedule *st_schedule_load(const char *path, GError **error);

/* Checks the invariants: indices in range; topological order; each send has
 * its receive with equal bytes; the members of each collective agree on kind
 * and bytes, in order; every buffer allocated and freed once per step, freed
 * by an op that runs after its allocation, or persistent; every rank of a
 * collective's group is a member. The first violation is reported with the
 * rank, the program and the op. */
gboolean st_schedule_check(const StSchedule *schedule, GError **error);
