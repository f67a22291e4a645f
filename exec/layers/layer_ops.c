/* layer_ops.c: the dense map and the convolution, shared by the plain
 * layers (linear, lm_head, conv2d) and the blocks (residual, transformer).
 *
 * Convolution is im2col + gemm (Chellapilla et al. 2006; Caffe): per image,
 * cols [cin k k, ho wo] = im2col(x), y [cout, ho wo] = W [cout, cin k k] cols.
 * Groups split both the rows of cols and the rows of W, so a grouped conv is
 * a gemm batched over groups. Images go through in chunks whose columns fit
 * ST_CONV_COLS_BYTES of scratch; without groups one gemm covers a chunk (W shared,
 * stride 0). A 1x1 conv with stride 1 and no padding needs no columns: its
 * input is already [cin, h w]. The backward recomputes the columns from the
 * kept input instead of saving them (k*k times the input).
 */
#include "exec/layers/layers_private.h"

int
st_dense_fwd(const StLayerCtx *c, const void *x, int rows, int in, int out, const void *w,
             const void *b, void *y)
{
  ST_TRY(c->k->gemm(c->stream, 0, 1, rows, out, in, 1.0f, x, w, 0.0f, y, c->dt, 1, 0, 0, 0));
  if (b != NULL)
    ST_TRY(c->k->bias_add(c->stream, y, b, rows, out, c->dt));
  return 0;
}

int
st_dense_bwd(const StLayerCtx *c, const void *x, const void *dy, int rows, int in, int out,
             const void *w, void *dx, void *dw, void *db)
{
  if (dx != NULL) /* dx [rows, in] = dy [rows, out] W [out, in] */
    ST_TRY(c->k->gemm(c->stream, 0, 0, rows, in, out, 1.0f, dy, w, 0.0f, dx, c->dt, 1, 0, 0, 0));
  if (dw != NULL) /* dW [out, in] += dy^T x */
    ST_TRY(c->k->gemm(c->stream, 1, 0, out, in, rows, 1.0f, dy, x, 1.0f, dw, c->dt, 1, 0, 0, 0));
  if (db != NULL)
    ST_TRY(c->k->bias_grad(c->stream, db, dy, rows, out, c->dt));
  return 0;
}

StConvGeom
st_conv_geom(int n, int cin, int h, int w, int cout, int k, int s, int p, int groups)
{
  StConvGeom g = {n, cin, h, w, cout, k, s, p, groups, 0, 0};
  g.ho = (h + 2 * p - k) / s + 1;
  g.wo = (w + 2 * p - k) / s + 1;
  return g;
}

/* The sizes every conv pass needs, in elements. */
typedef struct {
  size_t in_img, out_img;  /* one image of x, of y */
  int64_t pix;             /* ho * wo */
  int cin_g, cout_g, kk_g; /* per group: channels in, out, and cin_g * k * k */
  size_t cols_img;         /* one image's columns: cin k k x pix */
  int direct;              /* 1x1, stride 1, no padding: x is its own columns */
  int chunk;               /* images per pass */
} ConvSizes;

static ConvSizes
conv_sizes(const StConvGeom *g, StKDtype dt)
{
  ConvSizes z;
  z.pix = (int64_t)g->ho * g->wo;
  z.in_img = (size_t)g->cin * g->h * g->w;
  z.out_img = (size_t)g->cout * (size_t)z.pix;
  z.cin_g = g->cin / g->groups;
  z.cout_g = g->cout / g->groups;
  z.kk_g = z.cin_g * g->k * g->k;
  z.cols_img = (size_t)g->cin * g->k * g->k * (size_t)z.pix;
  z.direct = g->k == 1 && g->s == 1 && g->p == 0;
  size_t fit = (size_t)ST_CONV_COLS_BYTES / (z.cols_img * st_kdt_size(dt));
  z.chunk = z.direct ? g->n : (int)(fit < 1 ? 1 : fit > (size_t)g->n ? (size_t)g->n : fit);
  return z;
}

/* The columns of images b0 .. b0 + nb into cols (or x itself when direct). */
static int
conv_columns(const StLayerCtx *c, const StConvGeom *g, const ConvSizes *z, const void *x, int b0,
             int nb, void *cols, const void **src)
{
  if (z->direct) {
    *src = st_at(x, c->dt, (size_t)b0 * z->in_img);
    return 0;
  }
  for (int i = 0; i < nb; i++)
    ST_TRY(c->k->im2col(c->stream, st_at(cols, c->dt, (size_t)i * z->cols_img),
                        st_at(x, c->dt, (size_t)(b0 + i) * z->in_img), g->cin, g->h, g->w, g->k,
                        g->s, g->p, c->dt));
  *src = cols;
  return 0;
}

size_t
st_conv_cols_size(const StConvGeom *g, StKDtype dt)
{
  ConvSizes z = conv_sizes(g, dt);
  return z.direct ? 0 : (size_t)z.chunk * z.cols_img * st_kdt_size(dt);
}

int
st_conv_fwd(const StLayerCtx *c, const StConvGeom *g, const void *x, const void *wt, void *y,
            void *cols)
{
  ConvSizes z = conv_sizes(g, c->dt);
  const StKernels *k = c->k;
  if (cols == NULL)
    ST_SCRATCH(cols, c, st_conv_cols_size(g, c->dt));
  int64_t kk_all = (int64_t)g->cin * g->k * g->k;
  for (int b0 = 0; b0 < g->n; b0 += z.chunk) {
    int nb = g->n - b0 < z.chunk ? g->n - b0 : z.chunk;
    const void *src;
    ST_TRY(conv_columns(c, g, &z, x, b0, nb, cols, &src));
    void *yb = st_at(y, c->dt, (size_t)b0 * z.out_img);
    if (g->groups == 1) { /* y_i [cout, pix] = W [cout, cin k k] cols_i, W shared */
      ST_TRY(k->gemm(c->stream, 0, 0, g->cout, (int)z.pix, (int)kk_all, 1.0f, wt, src, 0.0f, yb,
                     c->dt, nb, 0, (int64_t)z.cols_img, (int64_t)z.out_img));
      continue;
    }
    for (int i = 0; i < nb; i++) /* batched over groups */
      ST_TRY(k->gemm(c->stream, 0, 0, z.cout_g, (int)z.pix, z.kk_g, 1.0f, wt,
                     st_at(src, c->dt, (size_t)i * z.cols_img), 0.0f,
                     st_at(yb, c->dt, (size_t)i * z.out_img), c->dt, g->groups,
                     (int64_t)z.cout_g * z.kk_g, (int64_t)z.kk_g * z.pix,
                     (int64_t)z.cout_g * z.pix));
  }
  return 0;
}

int
st_conv_bwd(const StLayerCtx *c, const StConvGeom *g, const void *x, const void *wt,
            const void *dy, void *dx, int dx_add, void *dwt, void *cols)
{
  ConvSizes z = conv_sizes(g, c->dt);
  const StKernels *k = c->k;
  size_t es = st_kdt_size(c->dt);
  if (cols == NULL)
    ST_SCRATCH(cols, c, st_conv_cols_size(g, c->dt));
  int64_t kk_all = (int64_t)g->cin * g->k * g->k;
  float beta_dx = dx_add ? 1.0f : 0.0f;
  for (int b0 = 0; b0 < g->n; b0 += z.chunk) {
    int nb = g->n - b0 < z.chunk ? g->n - b0 : z.chunk;
    const void *dyb = st_at(dy, c->dt, (size_t)b0 * z.out_img);
    const void *src;
    if (dwt != NULL) { /* dW_g [cout_g, kk_g] += dy_g [cout_g, pix] cols_g^T, image by image */
      ST_TRY(conv_columns(c, g, &z, x, b0, nb, cols, &src));
      for (int i = 0; i < nb; i++)
        ST_TRY(k->gemm(c->stream, 0, 1, z.cout_g, z.kk_g, (int)z.pix, 1.0f,
                       st_at(dyb, c->dt, (size_t)i * z.out_img),
                       st_at(src, c->dt, (size_t)i * z.cols_img), 1.0f, dwt, c->dt, g->groups,
                       (int64_t)z.cout_g * z.pix, (int64_t)z.kk_g * z.pix,
                       (int64_t)z.cout_g * z.kk_g));
    }
    if (dx == NULL)
      continue;
    /* dcols_g [kk_g, pix] = W_g^T dy_g: straight into dx when direct, else
     * into the columns (free again) and scattered back by col2im */
    void *dxb = st_at(dx, c->dt, (size_t)b0 * z.in_img);
    void *dst = z.direct ? dxb : cols;
    float beta = z.direct ? beta_dx : 0.0f;
    if (g->groups == 1)
      ST_TRY(k->gemm(c->stream, 1, 0, (int)kk_all, (int)z.pix, g->cout, 1.0f, wt, dyb, beta, dst,
                     c->dt, nb, 0, (int64_t)z.out_img, (int64_t)z.cols_img));
    else
      for (int i = 0; i < nb; i++)
        ST_TRY(k->gemm(c->stream, 1, 0, z.kk_g, (int)z.pix, z.cout_g, 1.0f, wt,
                       st_at(dyb, c->dt, (size_t)i * z.out_img), beta,
                       st_at(dst, c->dt, (size_t)i * z.cols_img), c->dt, g->groups,
                       (int64_t)z.cout_g * z.kk_g, (int64_t)z.cout_g * z.pix,
                       (int64_t)z.kk_g * z.pix));
    if (z.direct)
      continue;
    if (!dx_add) /* col2im adds */
      ST_TRY(k->memset0(c->stream, dxb, (size_t)nb * z.in_img * es));
    for (int i = 0; i < nb; i++)
      ST_TRY(k->col2im(c->stream, st_at(dxb, c->dt, (size_t)i * z.in_img),
                       st_at(cols, c->dt, (size_t)i * z.cols_img), g->cin, g->h, g->w, g->k,
                       g->s, g->p, c->dt));
  }
  return 0;
}
