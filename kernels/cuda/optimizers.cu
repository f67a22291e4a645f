/* optimizers.cu: AdamW and SGD with momentum (kernels/ref/optimizers.c, the
 * formulas and their sources). AdamW's bias corrections are computed once
 * on the host, as the reference does, and passed in. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.cuh"

__global__ void
adamw_kernel(float *master, float *m, float *v, const void *grad, StKDtype gdt, void *param,
             StKDtype pdt, size_t n, float lr, float beta1, float beta2, float eps,
             float weight_decay, float c1, float c2, float grad_scale)
{
  ST_CU_FOR(i, n)
  {
    float g = st_cu_ld(grad, gdt, i) * grad_scale;
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float mhat = mi / c1, vhat = vi / c2;
    float w = master[i];
    w -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * w);
    master[i] = w;
    if (param != NULL)
      st_cu_st(param, pdt, i, w);
  }
}

__global__ void
sgd_kernel(float *master, float *momentum, const void *grad, StKDtype gdt, void *param,
           StKDtype pdt, size_t n, float lr, float mu, float weight_decay, float grad_scale)
{
  ST_CU_FOR(i, n)
  {
    float w = master[i];
    float g = st_cu_ld(grad, gdt, i) * grad_scale + weight_decay * w;
    if (momentum != NULL)
      g = momentum[i] = mu * momentum[i] + g;
    w -= lr * g;
    master[i] = w;
    if (param != NULL)
      st_cu_st(param, pdt, i, w);
  }
}

int
st_cu_adamw(void *stream, float *master, float *m, float *v, const void *grad, StKDtype gdt,
            void *param, StKDtype pdt, size_t n, float lr, float beta1, float beta2, float eps,
            float weight_decay, int t, float grad_scale)
{
  if (!st_cu_dt_ok(gdt) || !st_cu_dt_ok(pdt) || t < 1)
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  if (master == NULL || m == NULL || v == NULL || grad == NULL)
    return ST_K_EINVAL;
  float c1 = 1.0f - powf(beta1, (float)t), c2 = 1.0f - powf(beta2, (float)t);
  adamw_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    master, m, v, grad, gdt, param, pdt, n, lr, beta1, beta2, eps, weight_decay, c1, c2,
    grad_scale);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_sgd(void *stream, float *master, float *momentum, const void *grad, StKDtype gdt,
          void *param, StKDtype pdt, size_t n, float lr, float mu, float weight_decay,
          float grad_scale)
{
  if (!st_cu_dt_ok(gdt) || !st_cu_dt_ok(pdt))
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  if (master == NULL || grad == NULL || (momentum == NULL && mu != 0.0f))
    return ST_K_EINVAL;
  sgd_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    master, momentum, grad, gdt, param, pdt, n, lr, mu, weight_decay, grad_scale);
  ST_CU_CHECK_LAUNCH();
  return 0;
}
