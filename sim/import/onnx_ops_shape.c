/* onnx_ops_shape.c: constants and tensor plumbing: Constant, Identity,
 * Shape, Size, Cast, Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
 * Concat, Split, Slice, Gather, Expand, ConstantOfShape, Range, Tile,
 * Trilu, Pad.
 *
 * None computes anything a training step pays for in FLOPs (Gather of an
 * embedding table is a lookup; Transpose and Concat move bytes). What they
 * matter for is shapes: exporters compute reshape targets with Shape,
 * Gather, Unsqueeze and Concat on int64 tensors, so each of these also
 * carries its output's contents when its inputs' are known.
 */
#include <math.h>
#include <string.h>

#include "base/limits.h"
#include "import/onnx_ops.h"
#include "model/layer_type.h"

/* Output 0 is input 0 seen with another shape: its type, its contents. */
static gboolean
view(OnnxGraph *g, const OnnxNode *node, int rank, const int64_t *dims, GError **error)
{
  const OnnxValue *in = onnx_in(g, node, 0);
  if (!onnx_set_shape(g, node, 0, in->elem, rank, dims, error))
    return FALSE;
  if (in->data != NULL)
    onnx_set_data(g, node, 0, g_memdup2(in->data, sizeof(double) * (size_t)MAX(in->n_data, 1)));
  return TRUE;
}

/* ---- Constant, Identity, Shape, Size, Cast ---------------------------------- */

static gboolean
constant_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  const OnnxAttr *a = node->n_attrs == 1 ? &node->attrs[0] : NULL;
  if (a == NULL)
    return onnx_node_error(g, node, error, "expected exactly one attribute");
  if (a->value >= 0) {
    const OnnxValue *t = onnx_value(g, a->value);
    if (!onnx_set_shape(g, node, 0, t->elem, t->rank, t->dims, error))
      return FALSE;
    if (t->data != NULL)
      onnx_set_data(g, node, 0, g_memdup2(t->data, sizeof(double) * (size_t)MAX(t->n_data, 1)));
    return TRUE;
  }
  double *data = NULL;
  int64_t n = 1;
  int elem = ONNX_FLOAT, rank = 0;
  if (strcmp(a->name, "value_float") == 0 || strcmp(a->name, "value_int") == 0) {
    data = g_new(double, 1);
    data[0] = a->name[6] == 'f' ? a->f : (double)a->i;
    elem = a->name[6] == 'f' ? ONNX_FLOAT : ONNX_INT64;
  } else if (strcmp(a->name, "value_floats") == 0 || strcmp(a->name, "value_ints") == 0) {
    gboolean floats = a->name[6] == 'f';
    n = floats ? a->n_floats : a->n_ints;
    data = g_new(double, MAX(n, 1));
    for (int64_t k = 0; k < n; k++)
      data[k] = floats ? a->floats[k] : (double)a->ints[k];
    elem = floats ? ONNX_FLOAT : ONNX_INT64;
    rank = 1;
  } else {
    return onnx_node_error(g, node, error, "attribute '%s' is not supported", a->name);
  }
  if (!onnx_set_shape(g, node, 0, elem, rank, &n, error)) {
    g_free(data);
    return FALSE;
  }
  onnx_set_data(g, node, 0, data);
  return TRUE;
}

static gboolean
identity_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  return onnx_need_inputs(g, node, 1, error) &&
         view(g, node, onnx_in(g, node, 0)->rank, onnx_in(g, node, 0)->dims, error);
}

/* Trilu keeps the shape; its contents (a mask, usually) are not followed. */
static gboolean
shape_only_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  return onnx_need_inputs(g, node, 1, error) && onnx_same_shape(g, node, 0, 0, error);
}

static gboolean
shape_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error))
    return FALSE;
  const OnnxValue *in = onnx_in(g, node, 0);
  int start = 0, end = in->rank;
  if (onnx_attr(node, "start") != NULL &&
      !onnx_axis(g, node, CLAMP(onnx_attr_int(node, "start", 0), -in->rank, in->rank),
                 in->rank + 1, "start", &start, error))
    return FALSE;
  if (onnx_attr(node, "end") != NULL &&
      !onnx_axis(g, node, CLAMP(onnx_attr_int(node, "end", in->rank), -in->rank, in->rank),
                 in->rank + 1, "end", &end, error))
    return FALSE;
  int64_t n = MAX(end - start, 0);
  if (!onnx_set_shape(g, node, 0, ONNX_INT64, 1, &n, error))
    return FALSE;
  double *data = g_new(double, MAX(n, 1));
  for (int64_t k = 0; k < n; k++)
    data[k] = (double)in->dims[start + k];
  onnx_set_data(g, node, 0, data);
  return TRUE;
}

static gboolean
size_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error) ||
      !onnx_set_shape(g, node, 0, ONNX_INT64, 0, NULL, error))
    return FALSE;
  double *data = g_new(double, 1);
  data[0] = (double)onnx_elems(onnx_in(g, node, 0));
  onnx_set_data(g, node, 0, data);
  return TRUE;
}

static gboolean
cast_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error))
    return FALSE;
  const OnnxValue *in = onnx_in(g, node, 0);
  int to = (int)onnx_attr_int(node, "to", in->elem);
  if (!onnx_set_shape(g, node, 0, to, in->rank, in->dims, error))
    return FALSE;
  if (in->data != NULL) {
    double *data = g_memdup2(in->data, sizeof(double) * (size_t)MAX(in->n_data, 1));
    gboolean integral = to != ONNX_FLOAT && to != ONNX_DOUBLE && to != ONNX_FLOAT16 &&
                        to != ONNX_BFLOAT16;
    for (int64_t k = 0; integral && k < in->n_data; k++)
      data[k] = to == ONNX_BOOL ? (data[k] != 0) : trunc(data[k]);
    onnx_set_data(g, node, 0, data);
  }
  return TRUE;
}

/* ---- Reshape, Flatten, Squeeze, Unsqueeze, Transpose ------------------------ */

static gboolean
reshape_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 2, error))
    return FALSE;
  const OnnxValue *in = onnx_in(g, node, 0), *target = onnx_in(g, node, 1);
  if (target->data == NULL || target->rank != 1)
    return onnx_node_error(g, node, error,
                           "the target shape '%s' is not known when importing (export with "
                           "fixed shapes)",
                           target->name);
  int rank = (int)target->n_data;
  if (rank > ONNX_MAX_RANK)
    return onnx_node_error(g, node, error, "a shape of %d dims", rank);
  int64_t dims[ONNX_MAX_RANK], known = 1;
  int infer = -1;
  gboolean allowzero = onnx_attr_int(node, "allowzero", 0) != 0;
  for (int k = 0; k < rank; k++) {
    int64_t d = onnx_int(target->data[k]);
    if (d == 0 && !allowzero) {
      if (k >= in->rank)
        return onnx_node_error(g, node, error, "dim %d copies an input dim it has not", k);
      d = in->dims[k];
    }
    if (d == -1) {
      if (infer >= 0)
        return onnx_node_error(g, node, error, "two dims are -1");
      infer = k;
      d = 1;
    } else if (d < 0) {
      return onnx_node_error(g, node, error, "dim %d is %" G_GINT64_FORMAT, k, d);
    }
    dims[k] = d;
    if (!st_mul_i64(known, d, &known) || known > ONNX_MAX_ELEMS)
      return onnx_node_error(g, node, error, "the target shape has more than 2^50 elements");
  }
  int64_t total = onnx_elems(in);
  if (infer >= 0 && known > 0)
    dims[infer] = total / known;
  if (known * (infer >= 0 ? dims[infer] : 1) != total) {
    g_autofree char *shape = onnx_shape_text(in);
    return onnx_node_error(g, node, error, "cannot reshape %s (%" G_GINT64_FORMAT
                           " elements) as asked", shape, total);
  }
  return view(g, node, rank, dims, error);
}

static gboolean
flatten_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error))
    return FALSE;
  const OnnxValue *in = onnx_in(g, node, 0);
  int axis;
  if (!onnx_axis(g, node, onnx_attr_int(node, "axis", 1), in->rank + 1, "axis", &axis, error))
    return FALSE;
  int64_t dims[2] = {1, 1};
  for (int k = 0; k < in->rank; k++)
    dims[k < axis ? 0 : 1] *= in->dims[k];
  return view(g, node, 2, dims, error);
}

static gboolean
squeeze_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error))
    return FALSE;
  const OnnxValue *in = onnx_in(g, node, 0);
  g_autofree int64_t *axes = NULL;
  int n_axes;
  if (!onnx_ints_arg(g, node, 1, "axes", &axes, &n_axes, error))
    return FALSE;
  gboolean drop[ONNX_MAX_RANK] = {0};
  for (int k = 0; k < n_axes; k++) {
    int axis;
    if (!onnx_axis(g, node, axes[k], in->rank, "axes", &axis, error))
      return FALSE;
    if (in->dims[axis] != 1)
      return onnx_node_error(g, node, error, "dim %d is %" G_GINT64_FORMAT ", not 1", axis,
                             in->dims[axis]);
    drop[axis] = TRUE;
  }
  int64_t dims[ONNX_MAX_RANK];
  int rank = 0;
  for (int k = 0; k < in->rank; k++)
    if (!(n_axes < 0 ? in->dims[k] == 1 : drop[k]))
      dims[rank++] = in->dims[k];
  return view(g, node, rank, dims, error);
}

static gboolean
unsqueeze_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error))
    return FALSE;
  const OnnxValue *in = onnx_in(g, node, 0);
  g_autofree int64_t *axes = NULL;
  int n_axes;
  if (!onnx_ints_arg(g, node, 1, "axes", &axes, &n_axes, error))
    return FALSE;
  if (n_axes < 0)
    return onnx_node_error(g, node, error, "no axes");
  int rank = in->rank + n_axes;
  if (rank > ONNX_MAX_RANK)
    return onnx_node_error(g, node, error, "a result of %d dims", rank);
  gboolean added[ONNX_MAX_RANK] = {0};
  for (int k = 0; k < n_axes; k++) {
    int axis;
    if (!onnx_axis(g, node, axes[k], rank, "axes", &axis, error))
      return FALSE;
    if (added[axis])
      return onnx_node_error(g, node, error, "axis %d given twice", axis);
    added[axis] = TRUE;
  }
  int64_t dims[ONNX_MAX_RANK];
  for (int k = 0, j = 0; k < rank; k++)
    dims[k] = added[k] ? 1 : in->dims[j++];
  return view(g, node, rank, dims, error);
}

static gboolean
transpose_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error))
    return FALSE;
  const OnnxValue *in = onnx_in(g, node, 0);
  int n;
  const int64_t *perm = onnx_attr_ints(node, "perm", &n);
  if (perm != NULL && n != in->rank)
    return onnx_node_error(g, node, error, "perm has %d entries for %d dims", n, in->rank);
  int64_t dims[ONNX_MAX_RANK];
  gboolean used[ONNX_MAX_RANK] = {0};
  for (int k = 0; k < in->rank; k++) {
    int64_t p = perm != NULL ? perm[k] : in->rank - 1 - k;
    if (p < 0 || p >= in->rank || used[p])
      return onnx_node_error(g, node, error, "perm is not a permutation");
    used[p] = TRUE;
    dims[k] = in->dims[p];
  }
  return onnx_set_shape(g, node, 0, in->elem, in->rank, dims, error);
}

/* ---- Concat, Split, Slice, Gather ------------------------------------------ */

static gboolean
concat_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error))
    return FALSE;
  const OnnxValue *first = onnx_in(g, node, 0);
  int axis;
  if (!onnx_axis(g, node, onnx_attr_int(node, "axis", 0), first->rank, "axis", &axis, error))
    return FALSE;
  int64_t dims[ONNX_MAX_RANK];
  memcpy(dims, first->dims, sizeof(dims));
  dims[axis] = 0;
  gboolean all_data = first->rank == 1;
  for (int i = 0; i < node->n_in; i++) {
    const OnnxValue *in = onnx_in(g, node, i);
    if (in == NULL || in->rank != first->rank)
      return onnx_node_error(g, node, error, "inputs of different ranks");
    for (int k = 0; k < in->rank; k++)
      if (k != axis && in->dims[k] != first->dims[k])
        return onnx_node_error(g, node, error, "inputs differ in dim %d", k);
    dims[axis] += in->dims[axis];
    all_data = all_data && in->data != NULL;
  }
  if (!onnx_set_shape(g, node, 0, first->elem, first->rank, dims, error))
    return FALSE;
  if (all_data && dims[0] <= ONNX_MAX_DATA) {
    double *data = g_new(double, MAX(dims[0], 1));
    int64_t at = 0;
    for (int i = 0; i < node->n_in; i++) {
      const OnnxValue *in = onnx_in(g, node, i);
      memcpy(data + at, in->data, sizeof(double) * (size_t)in->n_data);
      at += in->n_data;
    }
    onnx_set_data(g, node, 0, data);
  }
  return TRUE;
}

static gboolean
split_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error))
    return FALSE;
  const OnnxValue *in = onnx_in(g, node, 0);
  int axis;
  if (!onnx_axis(g, node, onnx_attr_int(node, "axis", 0), in->rank, "axis", &axis, error))
    return FALSE;
  g_autofree int64_t *split = NULL;
  int n_split;
  if (!onnx_ints_arg(g, node, 1, "split", &split, &n_split, error))
    return FALSE;
  if (n_split >= 0 && n_split != node->n_out)
    return onnx_node_error(g, node, error, "%d split sizes for %d outputs", n_split,
                           node->n_out);
  int64_t total = 0, size = in->dims[axis];
  int64_t chunk = (size + node->n_out - 1) / MAX(node->n_out, 1); /* opset 18: last smaller */
  for (int i = 0; i < node->n_out; i++) {
    int64_t dims[ONNX_MAX_RANK];
    memcpy(dims, in->dims, sizeof(dims));
    dims[axis] = n_split >= 0 ? split[i] : MIN(chunk, size - total);
    if (dims[axis] < 0)
      return onnx_node_error(g, node, error, "a negative split size");
    if (dims[axis] > size - total) /* total <= size: never overflows */
      return onnx_node_error(g, node, error, "split sizes add to more than %" G_GINT64_FORMAT,
                             size);
    total += dims[axis];
    if (!onnx_set_shape(g, node, i, in->elem, in->rank, dims, error))
      return FALSE;
  }
  if (total != size)
    return onnx_node_error(g, node, error, "split sizes add to %" G_GINT64_FORMAT ", not %"
                           G_GINT64_FORMAT, total, size);
  return TRUE;
}

static gboolean
slice_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error))
    return FALSE;
  const OnnxValue *in = onnx_in(g, node, 0);
  g_autofree int64_t *starts = NULL, *ends = NULL, *axes = NULL, *steps = NULL;
  int n_starts, n_ends, n_axes, n_steps;
  if (!onnx_ints_arg(g, node, 1, "starts", &starts, &n_starts, error) ||
      !onnx_ints_arg(g, node, 2, "ends", &ends, &n_ends, error) ||
      !onnx_ints_arg(g, node, 3, "axes", &axes, &n_axes, error) ||
      !onnx_ints_arg(g, node, 4, "steps", &steps, &n_steps, error))
    return FALSE;
  if (n_starts < 0 || n_ends != n_starts || (n_axes >= 0 && n_axes != n_starts) ||
      (n_steps >= 0 && n_steps != n_starts))
    return onnx_node_error(g, node, error, "starts, ends, axes and steps disagree in length");
  int64_t dims[ONNX_MAX_RANK], first[ONNX_MAX_RANK] = {0}, step[ONNX_MAX_RANK];
  memcpy(dims, in->dims, sizeof(dims));
  for (int k = 0; k < ONNX_MAX_RANK; k++)
    step[k] = 1;
  for (int k = 0; k < n_starts; k++) {
    int axis;
    if (!onnx_axis(g, node, n_axes >= 0 ? axes[k] : k, in->rank, "axes", &axis, error))
      return FALSE;
    int64_t d = in->dims[axis], s = n_steps >= 0 ? steps[k] : 1;
    if (s == 0)
      return onnx_node_error(g, node, error, "a step of 0");
    int64_t b = starts[k] < 0 ? starts[k] + d : starts[k];
    int64_t e = ends[k] < 0 ? ends[k] + d : ends[k];
    if (s > 0) {
      b = CLAMP(b, 0, d);
      e = CLAMP(e, 0, d);
      dims[axis] = e > b ? (e - b + s - 1) / s : 0;
    } else {
      b = CLAMP(b, 0, d - 1);
      e = CLAMP(e, -1, d - 1);
      dims[axis] = b > e ? (b - e - s - 1) / -s : 0;
    }
    first[axis] = b;
    step[axis] = s;
  }
  if (!onnx_set_shape(g, node, 0, in->elem, in->rank, dims, error))
    return FALSE;
  if (in->data != NULL && in->rank == 1) {
    double *data = g_new(double, MAX(dims[0], 1));
    for (int64_t k = 0; k < dims[0]; k++)
      data[k] = in->data[first[0] + k * step[0]];
    onnx_set_data(g, node, 0, data);
  }
  return TRUE;
}

static gboolean
gather_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 2, error))
    return FALSE;
  const OnnxValue *data = onnx_in(g, node, 0), *index = onnx_in(g, node, 1);
  int axis;
  if (!onnx_axis(g, node, onnx_attr_int(node, "axis", 0), data->rank, "axis", &axis, error))
    return FALSE;
  int rank = data->rank - 1 + index->rank;
  if (rank > ONNX_MAX_RANK)
    return onnx_node_error(g, node, error, "a result of %d dims", rank);
  int64_t dims[ONNX_MAX_RANK];
  int r = 0;
  for (int k = 0; k < axis; k++)
    dims[r++] = data->dims[k];
  for (int k = 0; k < index->rank; k++)
    dims[r++] = index->dims[k];
  for (int k = axis + 1; k < data->rank; k++)
    dims[r++] = data->dims[k];
  if (!onnx_set_shape(g, node, 0, data->elem, rank, dims, error))
    return FALSE;
  /* Picking from a vector: a dim out of a shape, the common case. */
  if (data->data != NULL && index->data != NULL && data->rank == 1) {
    double *out = g_new(double, MAX(index->n_data, 1));
    for (int64_t k = 0; k < index->n_data; k++) {
      int64_t i = onnx_int(index->data[k]);
      if (i < 0)
        i += data->dims[0];
      if (i < 0 || i >= data->dims[0]) {
        g_free(out);
        return onnx_node_error(g, node, error, "index %" G_GINT64_FORMAT " out of range", i);
      }
      out[k] = data->data[i];
    }
    onnx_set_data(g, node, 0, out);
  }
  return TRUE;
}

/* ---- Expand, ConstantOfShape, Range, Tile, Trilu, Pad ----------------------- */

/* The contents of input `i` as a shape, into dims (rank in *rank). */
static gboolean
shape_arg(const OnnxGraph *g, const OnnxNode *node, int i, int64_t *dims, int *rank,
          GError **error)
{
  const OnnxValue *v = onnx_in(g, node, i);
  if (v == NULL || v->data == NULL || v->rank != 1 || v->n_data > ONNX_MAX_RANK)
    return onnx_node_error(g, node, error,
                           "its shape input is not known when importing (export with fixed "
                           "shapes)");
  *rank = (int)v->n_data;
  for (int k = 0; k < *rank; k++) {
    dims[k] = onnx_int(v->data[k]);
    if (dims[k] < 0)
      return onnx_node_error(g, node, error, "a negative dim in its shape input");
  }
  return TRUE;
}

static gboolean
expand_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 2, error))
    return FALSE;
  const OnnxValue *in = onnx_in(g, node, 0);
  int64_t shape[ONNX_MAX_RANK], dims[ONNX_MAX_RANK];
  int rank;
  if (!shape_arg(g, node, 1, shape, &rank, error))
    return FALSE;
  int out_rank = MAX(rank, in->rank);
  for (int k = 0; k < out_rank; k++) {
    int64_t a = k - (out_rank - in->rank) >= 0 ? in->dims[k - (out_rank - in->rank)] : 1;
    int64_t b = k - (out_rank - rank) >= 0 ? shape[k - (out_rank - rank)] : 1;
    if (a != b && a != 1 && b != 1)
      return onnx_node_error(g, node, error, "cannot broadcast dim %d (%" G_GINT64_FORMAT
                             " to %" G_GINT64_FORMAT ")", k, a, b);
    dims[k] = a == 1 ? b : a;
  }
  return onnx_set_shape(g, node, 0, in->elem, out_rank, dims, error);
}

static gboolean
constant_of_shape_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  int64_t dims[ONNX_MAX_RANK];
  int rank;
  if (!onnx_need_inputs(g, node, 1, error) || !shape_arg(g, node, 0, dims, &rank, error))
    return FALSE;
  const OnnxAttr *a = onnx_attr(node, "value");
  const OnnxValue *fill = a != NULL && a->value >= 0 ? onnx_value(g, a->value) : NULL;
  if (!onnx_set_shape(g, node, 0, fill != NULL ? fill->elem : ONNX_FLOAT, rank, dims, error))
    return FALSE;
  int64_t n = onnx_elems(onnx_out(g, node, 0));
  if (n <= ONNX_MAX_DATA) {
    double *data = g_new(double, MAX(n, 1));
    for (int64_t k = 0; k < n; k++)
      data[k] = fill != NULL && fill->data != NULL ? fill->data[0] : 0;
    onnx_set_data(g, node, 0, data);
  }
  return TRUE;
}

static gboolean
range_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 3, error))
    return FALSE;
  const OnnxValue *s = onnx_in(g, node, 0), *l = onnx_in(g, node, 1), *d = onnx_in(g, node, 2);
  if (s->data == NULL || l->data == NULL || d->data == NULL || d->data[0] == 0)
    return onnx_node_error(g, node, error, "its bounds are not known when importing");
  int64_t n = onnx_int(MAX(ceil((l->data[0] - s->data[0]) / d->data[0]), 0));
  if (n > ST_ATTR_MAX)
    return onnx_node_error(g, node, error, "a range of %" G_GINT64_FORMAT " elements", n);
  if (!onnx_set_shape(g, node, 0, s->elem, 1, &n, error))
    return FALSE;
  if (n <= ONNX_MAX_DATA) {
    double *data = g_new(double, MAX(n, 1));
    for (int64_t k = 0; k < n; k++)
      data[k] = s->data[0] + (double)k * d->data[0];
    onnx_set_data(g, node, 0, data);
  }
  return TRUE;
}

static gboolean
tile_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 2, error))
    return FALSE;
  const OnnxValue *in = onnx_in(g, node, 0);
  int64_t repeats[ONNX_MAX_RANK], dims[ONNX_MAX_RANK];
  int rank;
  if (!shape_arg(g, node, 1, repeats, &rank, error))
    return FALSE;
  if (rank != in->rank)
    return onnx_node_error(g, node, error, "%d repeats for %d dims", rank, in->rank);
  for (int k = 0; k < rank; k++)
    dims[k] = in->dims[k] * repeats[k];
  return onnx_set_shape(g, node, 0, in->elem, rank, dims, error);
}

static gboolean
pad_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error))
    return FALSE;
  const OnnxValue *in = onnx_in(g, node, 0);
  g_autofree int64_t *pads = NULL;
  int n;
  if (!onnx_ints_arg(g, node, 1, "pads", &pads, &n, error))
    return FALSE;
  if (n != 2 * in->rank)
    return onnx_node_error(g, node, error, "%d pads for %d dims (axes are not supported)", n,
                           in->rank);
  int64_t dims[ONNX_MAX_RANK];
  for (int k = 0; k < in->rank; k++) {
    dims[k] = in->dims[k] + pads[k] + pads[k + in->rank];
    if (dims[k] < 0)
      return onnx_node_error(g, node, error, "pads remove more than dim %d holds", k);
  }
  return onnx_set_shape(g, node, 0, in->elem, in->rank, dims, error);
}

const OnnxOp st_onnx_shape_ops[] = {
  {"Constant", constant_infer, NULL, 0, 0, 0},
  {"Identity", identity_infer, NULL, 0, 0, 0},
  {"Shape", shape_infer, NULL, 0, 0, 0},
  {"Size", size_infer, NULL, 0, 0, 0},
  {"Cast", cast_infer, NULL, 0, 0, 0},
  {"Reshape", reshape_infer, NULL, 0, 0, 0},
  {"Flatten", flatten_infer, NULL, 0, 0, 0},
  {"Squeeze", squeeze_infer, NULL, 0, 0, 0},
  {"Unsqueeze", unsqueeze_infer, NULL, 0, 0, 0},
  {"Transpose", transpose_infer, NULL, 0, 0, 0},
  {"Concat", concat_infer, NULL, 0, ONNX_ALL_INPUTS, 0},
  {"Split", split_infer, NULL, 0, 0, 0},
  {"Slice", slice_infer, NULL, 0, 0, 0},
  {"Gather", gather_infer, NULL, 0, 1u << 0, 0},
  {"Expand", expand_infer, NULL, 0, 1u << 0, 0},
  {"ConstantOfShape", constant_of_shape_infer, NULL, 0, 0, 0},
  {"Range", range_infer, NULL, 0, 0, 0},
  {"Tile", tile_infer, NULL, 0, 1u << 0, 0},
  {"Trilu", shape_only_infer, NULL, 0, 0, 0},
  {"Pad", pad_infer, NULL, 0, 0, 0},
  {NULL},
};
