/* embeddings.cu: token lookup and position rows (kernels/ref/embeddings.c).
 * The lookup's backward gives each thread one column of the table and walks
 * the ids in order: repeated ids add up without atomics, in the reference's
 * order, so results are bitwise those of the host, at the price of
 * parallelism over `dim` only (a few microseconds per thousand tokens). */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.cuh"

__global__ void
embedding_fwd_kernel(void *out, const void *table, const int32_t *ids, int n, int dim, int first,
                     int rows, StKDtype dt)
{
  ST_CU_FOR(i, (size_t)n * dim)
  {
    int64_t row = (int64_t)ids[i / dim] - first;
    st_cu_st(out, dt, i,
             row >= 0 && row < rows ? st_cu_ld(table, dt, (size_t)row * dim + i % dim) : 0.0f);
  }
}

__global__ void
embedding_bwd_kernel(void *dtable, const void *dout, const int32_t *ids, int n, int dim, int first,
                     int rows, StKDtype dt)
{
  ST_CU_FOR(j, (size_t)dim)
  for (int i = 0; i < n; i++) {
    int64_t row = (int64_t)ids[i] - first;
    if (row < 0 || row >= rows)
      continue;
    size_t t = (size_t)row * dim + j;
    st_cu_st(dtable, dt, t, st_cu_ld(dtable, dt, t) + st_cu_ld(dout, dt, (size_t)i * dim + j));
  }
}

__global__ void
add_rows_kernel(void *out, const void *pos, size_t per, size_t total, StKDtype dt)
{
  ST_CU_FOR(i, total) st_cu_st(out, dt, i, st_cu_ld(out, dt, i) + st_cu_ld(pos, dt, i % per));
}

__global__ void
add_rows_bwd_kernel(void *dpos, const void *dout, int batch, size_t per, StKDtype dt)
{
  ST_CU_FOR(i, per)
  {
    float sum = 0.0f;
    for (int b = 0; b < batch; b++)
      sum += st_cu_ld(dout, dt, (size_t)b * per + i);
    st_cu_st(dpos, dt, i, st_cu_ld(dpos, dt, i) + sum);
  }
}

int
st_cu_embedding_fwd(void *stream, void *out, const void *table, const int32_t *ids, int n,
                    int dim, int first, int rows, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || n < 0 || dim < 0 || first < 0 || rows < 0)
    return ST_K_EINVAL;
  if (n == 0 || dim == 0)
    return 0;
  if (out == NULL || table == NULL || ids == NULL)
    return ST_K_EINVAL;
  embedding_fwd_kernel<<<st_cu_grid((size_t)n * dim), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    out, table, ids, n, dim, first, rows, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_embedding_bwd(void *stream, void *dtable, const void *dout, const int32_t *ids, int n,
                    int dim, int first, int rows, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || n < 0 || dim < 0 || first < 0 || rows < 0)
    return ST_K_EINVAL;
  if (n == 0 || dim == 0)
    return 0;
  if (dtable == NULL || dout == NULL || ids == NULL)
    return ST_K_EINVAL;
  embedding_bwd_kernel<<<st_cu_grid((size_t)dim), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    dtable, dout, ids, n, dim, first, rows, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_add_rows(void *stream, void *out, const void *pos, int batch, int rows, int cols,
               StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || batch < 0 || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  size_t per = (size_t)rows * cols;
  if (batch == 0 || per == 0)
    return 0;
  if (out == NULL || pos == NULL)
    return ST_K_EINVAL;
  size_t total = per * batch;
  add_rows_kernel<<<st_cu_grid(total), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(out, pos, per,
                                                                                 total, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_add_rows_bwd(void *stream, void *dpos, const void *dout, int batch, int rows, int cols,
                   StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || batch < 0 || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  size_t per = (size_t)rows * cols;
  if (batch == 0 || per == 0)
    return 0;
  if (dpos == NULL || dout == NULL)
    return ST_K_EINVAL;
  add_rows_bwd_kernel<<<st_cu_grid(per), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    dpos, dout, batch, per, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}
