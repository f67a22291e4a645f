/* embeddings.c: the table lookup of token embeddings and the broadcast add
 * of learned position rows. The lookup's backward is a scatter-add in id
 * order (repeated ids add up), which the CUDA version reproduces exactly.
 * A table may hold a slice of the vocabulary (a tensor-parallel rank's):
 * ids outside it read zeros and add nothing. */
#include "kernels/ref/ref.h"

int
st_ref_embedding_fwd(void *stream, void *out, const void *table, const int32_t *ids, int n,
                     int dim, int first, int rows, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || n < 0 || dim < 0 || first < 0 || rows < 0)
    return ST_K_EINVAL;
  if (n == 0 || dim == 0)
    return 0;
  if (out == NULL || table == NULL || ids == NULL)
    return ST_K_EINVAL;
  for (int i = 0; i < n; i++) {
    int64_t row = (int64_t)ids[i] - first;
    for (int j = 0; j < dim; j++)
      st_ref_st(out, dt, (size_t)i * dim + j,
                row >= 0 && row < rows ? st_ref_ld(table, dt, (size_t)row * dim + j) : 0.0f);
  }
  return 0;
}

int
st_ref_embedding_bwd(void *stream, void *dtable, const void *dout, const int32_t *ids, int n,
                     int dim, int first, int rows, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || n < 0 || dim < 0 || first < 0 || rows < 0)
    return ST_K_EINVAL;
  if (n == 0 || dim == 0)
    return 0;
  if (dtable == NULL || dout == NULL || ids == NULL)
    return ST_K_EINVAL;
  for (int i = 0; i < n; i++) {
    int64_t row = (int64_t)ids[i] - first;
    if (row < 0 || row >= rows)
      continue;
    for (int j = 0; j < dim; j++) {
      size_t t = (size_t)row * dim + j;
      st_ref_st(dtable, dt, t, st_ref_ld(dtable, dt, t) + st_ref_ld(dout, dt, (size_t)i * dim + j));
    }
  }
  return 0;
}

int
st_ref_add_rows(void *stream, void *out, const void *pos, int batch, int rows, int cols,
                StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || batch < 0 || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  size_t per = (size_t)rows * cols;
  if (batch == 0 || per == 0)
    return 0;
  if (out == NULL || pos == NULL)
    return ST_K_EINVAL;
  for (int b = 0; b < batch; b++)
    for (size_t i = 0; i < per; i++) {
      size_t o = (size_t)b * per + i;
      st_ref_st(out, dt, o, st_ref_ld(out, dt, o) + st_ref_ld(pos, dt, i));
    }
  return 0;
}

int
st_ref_add_rows_bwd(void *stream, void *dpos, const void *dout, int batch, int rows, int cols,
                    StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || batch < 0 || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  size_t per = (size_t)rows * cols;
  if (batch == 0 || per == 0)
    return 0;
  if (dpos == NULL || dout == NULL)
    return ST_K_EINVAL;
  for (size_t i = 0; i < per; i++) {
    float sum = 0.0f;
    for (int b = 0; b < batch; b++)
      sum += st_ref_ld(dout, dt, (size_t)b * per + i);
    st_ref_st(dpos, dt, i, st_ref_ld(dpos, dt, i) + sum);
  }
  return 0;
}
