/* framework_runtime.c: what a PyTorch training process costs beyond its
 * kernels (framework.h, StFrameworkRuntime), with the measurements each
 * number is read from. Every preset but `ideal` runs on it. */
#include "cost/framework.h"

const StFrameworkRuntime st_runtime_pytorch = {
  .host_us_per_kernel = 7.0,
  .host_source =
    "a tiny CUDA elementwise op in PyTorch eager takes about 7 us per call of wall-clock "
    "(flagos-ai/FlagGems issue #4812); the dispatch alone 5-6.8 us per op (pytorch/pytorch "
    "issue #41383)",
  .allocator_reserve = 0.15,
  .context_bytes = 600LL << 20,
  .nccl_bytes_per_comm = 440LL << 20,
  .workspace_bytes = 32LL << 20,
  .memory_source =
    "reserve: the caching allocator holds 10-30 % over what is allocated in LLM training; "
    "GMLake (Guo et al., ASPLOS 2024) cuts fragmentation by 15 % on average against it; "
    "context: 0.3-0.45 GB for the CUDA context with lazy loading (pytorch/pytorch #86509, "
    "#107667), 1.06 GB of non-PyTorch memory measured on an H100 with NCCL initialised "
    "(NVIDIA/nccl #1685), less one communicator's buffers: 600 MiB; NCCL: 24 channels x "
    "(4 MiB SIMPLE + 4.69 MiB LL128 + 0.5 MiB LL) per ring connection and as much for the "
    "tree (nccl src/init.cc computeBuffSizes; 24 channels on 8-GPU NVSwitch nodes, nccl #1225, "
    "#1367): 440 MiB per communicator, within the 0.5-1.6 GB measured (nccl #964, #864); "
    "cuBLAS: 32 MiB workspace per stream on Hopper, 8.125 MiB elsewhere "
    "(aten/src/ATen/cuda/CublasHandlePool.cpp), the larger taken",
};

const StFrameworkRuntime st_runtime_none = {
  .host_source = "none: a bound",
  .memory_source = "none: a bound",
};
