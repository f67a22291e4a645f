/* strategy_burst.h (private to strategy_burst*.c): what the burst
 * strategy's two emitters share. strategy_burst.c builds the plan and
 * writes a chain's programs; strategy_burst_dag.c writes those of a model
 * with branches or a packed plan (st_burst_emit_micro_dag). The Burst is the
 * build's (one per schedule), an Emit one rank's program being written;
 * both borrow everything they point to.
 */
#pragma once

#include "burst/burst.h"
#include "strategy/strategy_common.h"

typedef struct {
  const StStrategyInput *in;
  StSchedule *s;
  const StModel *m;
  const int32_t *w;      /* [n_layers]: GPUs of each layer */
  const int32_t *lo;     /* [n_layers]: its first rank (a packed branch's is not 0) */
  gboolean dag;          /* branches in the model or packed: layers move along the model's
                            edges between any two sets (emit_micro_dag) */
  int world;             /* a communicator of every rank (dag: peers are ranks) */
  int n;                 /* layers */
  int64_t M;             /* samples per micro-batch */
  int A;                 /* micro-batches */
  StStateBytes bytes;
  GHashTable *xcomm;     /* (small << 16 | large) -> communicator of a transition */
  GHashTable *scomm;     /* width -> communicator of the gradient all-reduce */
} Burst;

typedef struct {
  Burst *b;
  StProgram *p;
  int j;                  /* the rank this program is written for */
  int compute, sync, send, recv;
  uint32_t last_comp;     /* UINT32_MAX until the first compute op */
  uint32_t last_reduce;   /* UINT32_MAX until the first all-reduce */
  int *batch;             /* [n]: this rank's samples of each layer, 0 where it runs none */
  gboolean *moved;        /* [n + 1]: samples change GPU sets at boundary i */
  StTensors *t;           /* the micro-batch's tensors (tensors.h) */
  /* Per micro-batch, per layer (UINT32_MAX: none). */
  uint32_t *fwd, *bwd;    /* op ids */
  uint32_t *ready;        /* op after which layer i's input (fwd) is complete */
  uint32_t *gready;       /* op after which layer i's output gradient (bwd) is complete */
} Emit;

#define NONE UINT32_MAX

static inline int
share(const Burst *b, int w, int j)
{
  return st_burst_share(b->M, w, j);
}

static inline int
part(const Emit *e, int i)
{
  return e->j >= e->b->lo[i] && e->j < e->b->lo[i] + e->b->w[i];
}

/* Bytes per sample of layer i's output, in the activation dtype. */
int64_t st_burst_out_bytes(const Burst *b, int i);

/* The communicator of ranks lo .. lo + w - 1, for their all-reduce. */
int st_burst_scomm(Burst *b, int lo, int w);

/* One transfer op of `samples` samples (every `large`-th from `first`);
 * `after`, `after2` (NONE: nothing) and the buffer effects. */
uint32_t st_burst_transfer(Emit *e, StOp op, int micro, int samples, int first, int large,
                           StData data, int layer, uint32_t after, uint32_t after2,
                           uint32_t alloc, uint32_t release, gboolean packed);

/* One micro-batch along the model's edges (strategy_burst_dag.c). */
void st_burst_emit_micro_dag(Emit *e, int micro);
