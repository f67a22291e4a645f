/* comm_share.c: communication kernels as sharers of their GPU (cost.h).
 *
 * NCCL moves bytes with kernels: each channel is one thread block that
 * stays resident on one SM for the whole collective, copying and reducing
 * chunks through FIFOs in device memory (Hu et al., "Demystifying NCCL",
 * 2025). A GEMM beside it has those SMs less and shares the memory
 * bandwidth with its traffic, which is how a data-parallel reduction
 * overlapped with backward, a ZeRO/FSDP gather beside a forward, or a
 * pipeline send slows the compute it hides behind. The GPU performance
 * file's nccl section gives the channels and the memory bytes per byte
 * sent, with their sources; the interference share model does the rest
 * (share_interference.c).
 */
#include "cost/cost_impl.h"

StShareTraits
st_comm_share_traits(const StCluster *cluster, const StCommPhase *phase)
{
  StShareTraits t = {0, 0, 0};
  const StGpuPerf *p = cluster->gpu.perf;
  if (p == NULL || p->nccl_channels.value <= 0 || phase->bytes <= 0)
    return t;
  t.fill = MIN(1.0, p->nccl_channels.value / p->sms.value);
  double achievable = cluster->gpu.memory_bandwidth * p->memory_fraction.value;
  if (achievable > 0)
    t.mem = MIN(1.0, phase->bandwidth * p->nccl_hbm_per_byte.value / achievable);
  return t;
}
