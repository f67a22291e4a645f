/* profile_kineto_private.h: what the PyTorch profiler trace importer's
 * files share (profile_import_kineto.h has the contract):
 * profile_import_kineto.c reads the events, nests them, attributes the
 * work and writes the layer entries; profile_import_kineto_links.c turns
 * NCCL kernels into link entries; profile_kineto_read.c walks the trace's
 * text, and profile_kineto_scan.c reads its flat events without cJSON.
 * Private to sim/profile/.
 */
#pragma once

#include <cjson/cJSON.h>
#include <math.h>

#include "profile/profile_import_kineto.h"

#define EVAL_PREFIX "autograd::engine::evaluate_function: "

typedef enum {
  EV_OP,     /* a CPU operator (or any CPU event that is no marker) */
  EV_LAYER,  /* a range naming a layer */
  EV_STEP,   /* ProfilerStep#k */
  EV_OPTIM,  /* Optimizer.step#CLASS.step */
  EV_MARK,   /* other ranges: user annotations, Optimizer.zero_grad# */
  EV_DEVICE, /* a kernel or copy on the GPU */
  EV_NCCL,   /* an NCCL kernel */
} Kind;

typedef struct {
  const char *name;    /* borrowed from the tree, or from Kineto.names */
  const cJSON *args;   /* read trace by trace: CPU operators' only (EV_OP), the only
                        * events whose args are read after reading; NULL when none */
  int64_t ts, end; /* ns */
  int64_t seq, corr;
  int thread;      /* index of its (pid, tid) */
  int layer;       /* EV_LAYER */
  /* CPU events: the innermost layer range, evaluate_function, optimizer
   * step and communication operator holding it (itself for the last
   * three), -1 when none; the step its start falls in. */
  int in_layer, in_eval, in_optim, in_comm;
  int step;
  uint8_t kind;
  uint8_t pass;    /* EV_LAYER */
  /* bytes, not gboolean: a trace of 10^6 kernels holds 4·10^6 of these */
  uint8_t eval, comm, outer;
} Ev;

typedef struct {
  const char *path;
  const StModel *model;
  GHashTable *layer_of; /* layer name (borrowed) -> GINT_TO_POINTER(first index + 1) */
  /* Names lately found to name no layer (owned; NULL when none), by a hash
   * of their length and ends: the same few operators, launches and kernels
   * recur in every step and layer, and each lookup of them in layer_of
   * (10^6 names) was a cache miss. */
  char *not_layer[16];
  GArray *ev;          /* Ev */
  GArray *steps;       /* int: EV_STEP events by start */
  int n_steps;
  gboolean gpu;
  int n_keys;          /* 2 per layer (fwd, bwd) + the optimizer */
  double *sum;         /* [n_keys][n_steps] */
  int *occ;            /* [n_keys][n_steps]: ranges of that pass */
  double *step_times;  /* [n_steps]: time_of's scratch */
  double unattributed; /* ns over all steps */
  int kernels;         /* GPU kernels read */
  int orphans;         /* of them, whose correlation id matches no launch */
  GHashTable *unattributed_by_name; /* name -> double * (ns) */
  /* When the events were streamed (profile_kineto_read.c) rather than
   * read from one tree: their names and the args kept, owned here. */
  GStringChunk *names;
  /* Names lately copied into `names`, by the same hash as not_layer: an
   * operator's, a launch's or a kernel's name recurs in every layer and is
   * copied once, not 10^6 times. Cleared with `names`. */
  const char *name_copied[16];
  GPtrArray *args;     /* cJSON *, owned */
} Kineto;

static inline Ev *
ev_at(const Kineto *k, int i)
{
  return &g_array_index(k->ev, Ev, i);
}

/* A JSON number that is a whole number a double holds exactly (|v| <=
 * 2^53), or `fallback`: anything else (1e300, NaN, 2.5, a string) is as good
 * as absent, never an undefined conversion. */
static inline int64_t
json_whole(const cJSON *v, int64_t fallback)
{
  if (!cJSON_IsNumber(v) || !(fabs(v->valuedouble) <= 0x1p53) ||
      v->valuedouble != floor(v->valuedouble))
    return fallback;
  return (int64_t)v->valuedouble;
}

/* An integer argument of an event, or `fallback` (json_whole). */
static inline int64_t
arg_int(const cJSON *args, const char *key, int64_t fallback)
{
  return json_whole(cJSON_GetObjectItemCaseSensitive(args, key), fallback);
}

/* A position in a trace's text, [p, end). */
typedef struct {
  const char *p, *end;
} KinetoCursor;

/* What cJSON skips as white space: every byte up to 32. */
static inline void
kineto_skip_space(KinetoCursor *c)
{
  while (c->p < c->end && (unsigned char)*c->p <= 32)
    c->p++;
}

/* Past white space and `ch`; FALSE when `ch` is not next. */
static inline gboolean
kineto_expect(KinetoCursor *c, char ch)
{
  kineto_skip_space(c);
  if (c->p >= c->end || *c->p != ch)
    return FALSE;
  c->p++;
  return TRUE;
}

/* An event's members that reading it looks at, as cJSON would have read
 * them (type 0: absent); their first occurrence, as cJSON's lookups find. */
#define KINETO_FLAT_MEMBERS 7
typedef struct {
  cJSON value[KINETO_FLAT_MEMBERS]; /* ph, name, ts, dur, cat, pid, tid */
  cJSON seq, corr;                  /* args' "Sequence number" and "correlation" */
  const char *args, *args_end;      /* the "args" object's text; NULL when none */
  gboolean args_read;               /* it has a key of KINETO_ARGS_READ */
} KinetoFlat;

/* The keys of a CPU operator's args that are read after reading
 * (batch_from_shapes, profile_import_kineto_links.c), each as "\0"-ended
 * text. A flat args without any of them reads as no args at all: it is
 * not kept (a launch's {"correlation": N}, 10^6 of them). Keep this in
 * step with those readers. */
#define KINETO_ARGS_READ \
  {"Input Dims", "Input type", "dtype", "In msg nelems", "Out msg nelems", "Group size"}

/* Reads the flat event at the cursor (profile_kineto_scan.c): a string
 * value's text is kept in text[member]. FALSE (the cursor anywhere, `out`
 * partly set) when it is not one the scan reads as cJSON would: then cJSON
 * must read it. O(its bytes). */
gboolean kineto_scan_flat(KinetoCursor *c, GString *const text[KINETO_FLAT_MEMBERS],
                          KinetoFlat *out);

/* The trace's complete events into k->ev, and its root (transfer full),
 * NULL with `error` set when it cannot be read or has no complete event
 * (profile_kineto_read.c). */
cJSON *kineto_read_trace(Kineto *k, GError **error);

/* Link entries for the NCCL kernels whose size and group are known, the
 * rest counted in stats->comm_unknown. `launch`: correlation id -> CPU
 * event index + 1; `world`: the trace's world size, 0 when unknown. */
void kineto_add_links(const Kineto *k, StProfile *p, const char *device, StLinkClass link_class,
                      GHashTable *launch, int world, StKinetoImport *stats);
