/* layer_residual.c: torchvision's ResNet blocks (model types in
 * sim/model/layer_block.c), as a chain of conv-bn units plus a shortcut:
 *
 *   basic_block  conv3x3(stride)-bn-relu, conv3x3-bn
 *   bottleneck   conv1x1-bn-relu, conv3x3(stride, groups)-bn-relu, conv1x1-bn
 *   then out = relu(main + shortcut), the shortcut a conv1x1(stride)-bn
 *   ("downsample") when the stride is not 1 or the channels change, else x.
 *
 * Convs have no bias; batch norms are affine, in training mode. Parameter
 * layout, torchvision's state_dict order: per unit conv weight [cout, cin /
 * groups, k, k], bn weight [cout], bn bias [cout]; then the downsample's
 * three. Init: conv U with std sqrt(2 / fan_out) (torchvision's kaiming
 * normal, fan_out = cout k k), bn 1 and 0.
 *
 * The block keeps its input and output (the model says so); `saved` holds,
 * per unit, the conv output (the bn's input), the bn's fp32 mean and 1/std
 * [cout], and the relu output when there is one (the next conv's input):
 * the tensors the model counts in act_bytes. The backward recomputes
 * nothing but each conv's columns. The convs run one after another, so they
 * share one block of columns, sized for the largest (the scratch that
 * sim/model/layer_block.c's memory() counts).
 */
#include <math.h>
#include <string.h>

#include "exec/layers/layers_private.h"

typedef struct {
  StConvGeom g;
  int relu; /* a relu follows the bn (all main units but the last) */
} Unit;

typedef struct {
  int n_units; /* main path */
  Unit u[4];   /* main units, then the downsample at u[n_units] when down */
  int down;
} Block;

static Block
block_of(const StLayer *l, int batch)
{
  const int64_t *d = l->in_shape.dims;
  int cin = (int)d[0], h = (int)d[1], w = (int)d[2];
  int planes = (int)st_layer_attr(l, "planes", 1), stride = (int)st_layer_attr(l, "stride", 1);
  Block b = {0};
  int cout;
  if (strcmp(l->type->name, "bottleneck") == 0) {
    int groups = (int)st_layer_attr(l, "groups", 1);
    int width = (int)(planes * st_layer_attr(l, "width_per_group", 64) / 64 * groups);
    cout = 4 * planes;
    b.n_units = 3;
    b.u[0] = (Unit){st_conv_geom(batch, cin, h, w, width, 1, 1, 0, 1), 1};
    b.u[1] = (Unit){st_conv_geom(batch, width, h, w, width, 3, stride, 1, groups), 1};
    b.u[2] = (Unit){st_conv_geom(batch, width, b.u[1].g.ho, b.u[1].g.wo, cout, 1, 1, 0, 1), 0};
  } else {
    cout = planes;
    b.n_units = 2;
    b.u[0] = (Unit){st_conv_geom(batch, cin, h, w, planes, 3, stride, 1, 1), 1};
    b.u[1] = (Unit){st_conv_geom(batch, planes, b.u[0].g.ho, b.u[0].g.wo, planes, 3, 1, 1, 1), 0};
  }
  b.down = stride != 1 || cin != cout;
  if (b.down)
    b.u[b.n_units] = (Unit){st_conv_geom(batch, cin, h, w, cout, 1, stride, 0, 1), 0};
  return b;
}

static int
units(const Block *b)
{
  return b->n_units + b->down;
}

static size_t
unit_weights(const Unit *u)
{
  return (size_t)u->g.cout * (u->g.cin / u->g.groups) * u->g.k * u->g.k;
}

static size_t
unit_out(const Unit *u)
{
  return (size_t)u->g.n * u->g.cout * u->g.ho * u->g.wo;
}

/* A unit's parameters (weight, gamma, beta) inside the flat vector, and its
 * saved tensors: conv output [n, cout, ho, wo], mean and rstd [cout], relu
 * output (when relu). */
typedef struct {
  size_t w, gamma, beta; /* element offsets */
  void *conv, *act;
  float *mean, *rstd;
} UnitAt;

static void
unit_layout(const Block *b, StKDtype dt, char *saved, UnitAt *at, size_t *saved_bytes)
{
  StCarve cv = {saved, 0};
  size_t off = 0;
  for (int i = 0; i < units(b); i++) {
    const Unit *u = &b->u[i];
    at[i].w = off;
    at[i].gamma = off + unit_weights(u);
    at[i].beta = at[i].gamma + (size_t)u->g.cout;
    off = at[i].beta + (size_t)u->g.cout;
    at[i].conv = st_carve(&cv, unit_out(u) * st_kdt_size(dt));
    at[i].mean = st_carve(&cv, (size_t)u->g.cout * sizeof(float));
    at[i].rstd = st_carve(&cv, (size_t)u->g.cout * sizeof(float));
    at[i].act = u->relu ? st_carve(&cv, unit_out(u) * st_kdt_size(dt)) : NULL;
  }
  if (saved_bytes != NULL)
    *saved_bytes = cv.offset;
}

static void
residual_init(const StLayer *l, float *params, uint64_t seed)
{
  Block b = block_of(l, 1);
  UnitAt at[4];
  unit_layout(&b, ST_KDT_F32, NULL, at, NULL);
  for (int i = 0; i < units(&b); i++) {
    const Unit *u = &b.u[i];
    float fan_out = (float)(u->g.cout * u->g.k * u->g.k);
    st_init_uniform(params + at[i].w, unit_weights(u), sqrtf(6.0f / fan_out), seed, l, i);
    st_init_fill(params + at[i].gamma, (size_t)u->g.cout, 1.0f);
    st_init_fill(params + at[i].beta, (size_t)u->g.cout, 0.0f);
  }
}

/* The columns block the block's convs share: the largest any of them needs. */
static size_t
cols_size(const Block *b, StKDtype dt)
{
  size_t most = 0;
  for (int i = 0; i < units(b); i++)
    most = MAX(most, st_conv_cols_size(&b->u[i].g, dt));
  return most;
}

static size_t
residual_saved(const StLayer *l, int batch, StKDtype dt)
{
  Block b = block_of(l, batch);
  UnitAt at[4];
  size_t bytes;
  unit_layout(&b, dt, NULL, at, &bytes);
  return bytes;
}

/* conv then batch norm of unit i: y = bn(conv(x)), the conv output kept. */
static int
unit_forward(const StLayerCtx *c, const Unit *u, const UnitAt *at, const void *params,
             const void *x, void *y, void *cols)
{
  ST_TRY(st_conv_fwd(c, &u->g, x, st_at(params, c->dt, at->w), at->conv, cols));
  return c->k->batchnorm_fwd(c->stream, y, at->mean, at->rstd, at->conv,
                             st_at(params, c->dt, at->gamma), st_at(params, c->dt, at->beta),
                             u->g.n, u->g.cout, u->g.ho * u->g.wo, c->dt);
}

static int
residual_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                 const void *in, void *out, void *saved)
{
  Block b = block_of(l, batch);
  UnitAt at[4];
  unit_layout(&b, c->dt, saved, at, NULL);
  const Unit *last = &b.u[b.n_units - 1];
  size_t n_out = unit_out(last);
  void *cols;
  ST_SCRATCH(cols, c, cols_size(&b, c->dt));
  const void *x = in;
  for (int i = 0; i < b.n_units; i++) {
    const Unit *u = &b.u[i];
    void *y = u->relu ? at[i].act : out; /* the last unit's bn lands in out */
    ST_TRY(unit_forward(c, u, &at[i], params, x, y, cols));
    if (u->relu)
      ST_TRY(c->k->relu_fwd(c->stream, y, y, c->dt, unit_out(u)));
    x = y;
  }
  const void *shortcut = in;
  if (b.down) {
    void *tmp;
    ST_SCRATCH(tmp, c, n_out * st_kdt_size(c->dt));
    ST_TRY(unit_forward(c, &b.u[b.n_units], &at[b.n_units], params, in, tmp, cols));
    shortcut = tmp;
  }
  ST_TRY(c->k->add(c->stream, out, out, shortcut, c->dt, n_out));
  return c->k->relu_fwd(c->stream, out, out, c->dt, n_out);
}

/* Backward of unit i's bn and conv: from dy (the bn output's gradient) to dx
 * (the unit input's; written, or added with dx_add; NULL to skip). dc holds
 * the conv output's gradient. */
static int
unit_backward(const StLayerCtx *c, const Unit *u, const UnitAt *at, const void *params,
              void *dparams, const void *x, const void *dy, void *dc, void *dx, int dx_add,
              void *cols)
{
  ST_TRY(c->k->batchnorm_bwd(c->stream, dc, st_at(dparams, c->dt, at->gamma),
                             st_at(dparams, c->dt, at->beta), dy, at->conv, at->mean, at->rstd,
                             st_at(params, c->dt, at->gamma), u->g.n, u->g.cout,
                             u->g.ho * u->g.wo, c->dt));
  return st_conv_bwd(c, &u->g, x, st_at(params, c->dt, at->w), dc, dx, dx_add,
                     st_at(dparams, c->dt, at->w), cols);
}

static int
residual_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                  const void *in, const void *out, const void *saved, const void *dout,
                  void *din, void *dparams)
{
  Block b = block_of(l, batch);
  UnitAt at[4];
  unit_layout(&b, c->dt, (char *)saved, at, NULL);
  size_t most = 0;
  for (int i = 0; i < units(&b); i++)
    most = unit_out(&b.u[i]) > most ? unit_out(&b.u[i]) : most;
  size_t es = st_kdt_size(c->dt);
  void *g, *dc, *cols; /* the gradient flowing down the main path; a conv output's gradient */
  ST_SCRATCH(g, c, most * es);
  ST_SCRATCH(dc, c, most * es);
  ST_SCRATCH(cols, c, cols_size(&b, c->dt));
  size_t n_out = unit_out(&b.u[b.n_units - 1]);
  ST_TRY(c->k->relu_bwd(c->stream, g, dout, out, c->dt, n_out));
  /* the shortcut first, while g is the sum's gradient: it writes din */
  if (b.down)
    ST_TRY(unit_backward(c, &b.u[b.n_units], &at[b.n_units], params, dparams, in, g, dc, din, 0,
                         cols));
  else if (din != NULL)
    ST_TRY(c->k->copy(c->stream, din, g, n_out * es, 0));
  for (int i = b.n_units - 1; i >= 0; i--) {
    const Unit *u = &b.u[i];
    if (u->relu) /* g is the relu output's gradient: through the relu, in place */
      ST_TRY(c->k->relu_bwd(c->stream, g, g, at[i].act, c->dt, unit_out(u)));
    const void *x = i == 0 ? in : at[i - 1].act;
    void *dx = i == 0 ? din : g; /* g is free once the bn has read it */
    ST_TRY(unit_backward(c, u, &at[i], params, dparams, x, g, dc, dx, i == 0, cols));
  }
  return 0;
}

const StLayerImpl st_impl_basic_block = {
  .type = "basic_block",
  .init = residual_init,
  .saved_bytes = residual_saved,
  .forward = residual_forward,
  .backward = residual_backward,
};

const StLayerImpl st_impl_bottleneck = {
  .type = "bottleneck",
  .init = residual_init,
  .saved_bytes = residual_saved,
  .forward = residual_forward,
  .backward = residual_backward,
};
