/* onnx_map.h: an inferred ONNX graph (onnx_graph.h) into a sequence of
 * stagger layers.
 *
 * A stagger model is a chain: each layer reads the previous one's output.
 * A graph is cut where a single activation tensor carries everything that
 * follows (a "cut": after the node that makes it, no other activation is
 * still needed); between two cuts lies a segment, which may branch inside
 * (a residual block, attention). onnx_segment.c finds the cuts.
 *
 * Rules (onnx_map_*.c, listed in import_onnx.c, tried in order) each
 * recognize a pattern starting at one segment and describe the segments it
 * covers as stagger layers: a convolution, a ReLU, a bottleneck block (a
 * segment plus the ReLU after it), the two halves of a pre-LN transformer
 * block. What a rule proposes is checked before it is taken: loaded through
 * the model loader from the segment's input shape, it must produce the
 * segment's output shape and exactly its parameters (and, for blocks whose
 * type counts only matrix products, exactly its dense FLOPs). A segment no
 * rule describes, or whose proposal fails the check, becomes a `custom`
 * layer with the numbers computed from the graph (onnx_segment.c), and a
 * warning that says why.
 */
#pragma once

#include <cjson/cJSON.h>

#include "import/onnx_graph.h"

typedef struct {
  int in, out;   /* cut values: what the segment reads and what it makes */
  int *nodes;    /* [n_nodes] activation nodes in file order, owned */
  int n_nodes;
} OnnxSegment;

typedef struct {
  OnnxGraph *g;
  OnnxSegment *segs;      /* [n_segs] */
  int n_segs;
  const char *dtype;      /* the model's ("fp32", "fp16", "bf16") */
  int dtype_bytes;
  GHashTable *counted;    /* parameter values already in a layer (index + 1) */
  GHashTable *names;      /* layer names taken */
  /* Base name -> GINT_TO_POINTER(k): every "base_j" with 1 <= j < k is
   * taken, so the next unique name is looked for from k on (thousands of
   * unnamed nodes share a base: probing from 1 each time was quadratic). */
  GHashTable *suffix_next;
  int embedding_table;    /* the first embedding's table (a value), or -1 */
  gboolean loss;          /* a loss follows the network (its softmax is the loss's) */
  GHashTable *customs;    /* custom layers by kind (operators + reason) -> what the
                             warning says of them (import_onnx.c) */
  GPtrArray *custom_order; /* the kinds in order of first appearance */
  GHashTable *checked;    /* proposals that loaded, by what the loader reads but names
                             (onnx_check.c) -> what it derived; onnx_checked_new() */
  StImportResult *result;
} OnnxMap;

typedef struct {
  const char *name;       /* for warnings ("bottleneck") */
  /* Describes segments seg, seg+1, ... as layers appended to `out`;
   * returns how many segments they cover, 0 when the pattern is not there
   * (`why` may say what was missing, for the warning). */
  int (*match)(OnnxMap *m, int seg, cJSON *out, GString *why);
  /* The layer type counts only matrix products: the check compares FLOPs. */
  gboolean dense_only;
} OnnxRule;

/* onnx_map_basic.c, onnx_map_residual.c, onnx_map_transformer.c,
 * onnx_map_llama.c */
extern const OnnxRule st_onnx_rules_basic[];
extern const OnnxRule st_onnx_rules_residual[];
extern const OnnxRule st_onnx_rules_transformer[];
extern const OnnxRule st_onnx_rules_llama[];

/* ---- checking a proposal (onnx_check.c) ------------------------------------- */

/* Does the proposal `layers` describe segments [seg, seg + n)? Loaded
 * through the model loader from the first segment's input shape, it must
 * make the last one's output shape and hold exactly their parameters not
 * yet counted (and, `dense_only`, compute their dense FLOPs). FALSE with
 * the reason appended to `why`. A proposal equal to one that loaded before
 * but for its layers' names is not loaded again: what the loader derived
 * is kept in m->checked. */
gboolean onnx_check_proposal(OnnxMap *m, int seg, int n, const cJSON *layers,
                             gboolean dense_only, GString *why);
/* An empty m->checked. Transfer full. */
GHashTable *onnx_checked_new(void);

/* ---- segments (onnx_segment.c) --------------------------------------------- */

/* Finds the cuts of an inferred graph and fills m->segs. */
gboolean onnx_segments(OnnxMap *m, GError **error);
void onnx_segments_clear(OnnxMap *m);

/* Parameters (elements) read by segments [first, first + n) not yet counted,
 * and their dense and total forward FLOPs per sample. */
int64_t onnx_segments_params(const OnnxMap *m, int first, int n);
double onnx_segments_flops(const OnnxMap *m, int first, int n, double *dense);
/* Marks the parameters of segments [first, first + n) as counted. */
void onnx_segments_count(OnnxMap *m, int first, int n);

/* A layer name from the nodes of segments [first, first + n): the module
 * path their names share ("/layer1/layer1.0/conv1/Conv" -> "layer1.0.conv1"),
 * else `fallback`; made unique. Transfer full. */
char *onnx_layer_name(OnnxMap *m, int first, int n, const char *fallback);
/* Gives back a name onnx_layer_name took (a rejected proposal's). */
void onnx_layer_name_release(OnnxMap *m, const char *name);

/* Appends to `out` a custom layer for segments [first, first + n), with its
 * parameters, FLOPs, kept bytes (estimated from what each operator keeps)
 * and output shape computed from the graph. */
void onnx_custom_layer(OnnxMap *m, int first, int n, cJSON *out);

/* ---- what rules share (onnx_map_basic.c) ------------------------------------- */

/* The node of segment `seg` when it holds exactly one, of op `op` (NULL:
 * any), else NULL. */
const OnnxNode *onnx_single(const OnnxMap *m, int seg, const char *op);
/* How many nodes of `op` the segment holds. */
int onnx_count(const OnnxMap *m, int seg, const char *op);
/* The initializer a weight value is made of (through weight-side nodes),
 * when there is exactly one; else NULL. */
const OnnxValue *onnx_weight_source(const OnnxGraph *g, const OnnxValue *v);
/* Does segment `seg` end in Add(its input, a branch), on [batch, s, d]? */
gboolean onnx_residual_end(const OnnxMap *m, int seg);
/* Is its attention masked to the past: a Trilu in it, or a Where on a
 * constant condition (a stored triangle)? */
gboolean onnx_causal(const OnnxMap *m, int seg);
/* Heads of attention scores [batch, heads, s, s] or [batch x heads, s, s]
 * (torch's MultiheadAttention) over `tokens`; 0 when they are neither. */
int64_t onnx_heads(const OnnxMap *m, const OnnxValue *scores, int64_t tokens);
/* Is `node` a Dropout that drops something: not a probability known to be
 * 0, nor training_mode known to be off? */
gboolean onnx_dropout_active(const OnnxGraph *g, const OnnxNode *node);
/* The first consumer of `v` among the segment's nodes with op `op`. */
const OnnxNode *onnx_consumer(const OnnxMap *m, int seg, const OnnxValue *v, const char *op);
