/* optimizers.c: AdamW (Loshchilov and Hutter 2019, PyTorch's torch.optim.AdamW)
 * and SGD with momentum (PyTorch's torch.optim.SGD, dampening 0), on fp32
 * master weights and states. The gradient arrives in its storage dtype,
 * scaled by grad_scale first (averaging over ranks, loss-scale removal); the
 * updated master is also written to `param` in its dtype, when given. */
#include <math.h>

#include "kernels/ref/ref.h"

int
st_ref_adamw(void *stream, float *master, float *m, float *v, const void *grad, StKDtype gdt,
             void *param, StKDtype pdt, size_t n, float lr, float beta1, float beta2, float eps,
             float weight_decay, int t, float grad_scale)
{
  if (!st_ref_dt_ok(gdt) || !st_ref_dt_ok(pdt) || t < 1)
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  if (master == NULL || m == NULL || v == NULL || grad == NULL)
    return ST_K_EINVAL;
  /* bias corrections of step t, computed once (the CUDA launcher does the same) */
  float c1 = 1.0f - powf(beta1, (float)t), c2 = 1.0f - powf(beta2, (float)t);
  for (size_t i = 0; i < n; i++) {
    float g = st_ref_ld(grad, gdt, i) * grad_scale;
    m[i] = beta1 * m[i] + (1.0f - beta1) * g;
    v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
    float mhat = m[i] / c1, vhat = v[i] / c2;
    master[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * master[i]);
    if (param != NULL)
      st_ref_st(param, pdt, i, master[i]);
  }
  return 0;
}

int
st_ref_sgd(void *stream, float *master, float *momentum, const void *grad, StKDtype gdt,
           void *param, StKDtype pdt, size_t n, float lr, float mu, float weight_decay,
           float grad_scale)
{
  if (!st_ref_dt_ok(gdt) || !st_ref_dt_ok(pdt))
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  /* momentum may be NULL only without momentum (mu == 0) */
  if (master == NULL || grad == NULL || (momentum == NULL && mu != 0.0f))
    return ST_K_EINVAL;
  for (size_t i = 0; i < n; i++) {
    float g = st_ref_ld(grad, gdt, i) * grad_scale + weight_decay * master[i];
    if (momentum != NULL)
      g = momentum[i] = mu * momentum[i] + g;
    master[i] -= lr * g;
    if (param != NULL)
      st_ref_st(param, pdt, i, master[i]);
  }
  return 0;
}
