/* runtime_memory.h: the memory a training process holds on a GPU beyond the
 * schedule's tensors, as its framework's allocator and libraries hold it
 * (the preset's memory group, cost/framework.h), and the three figures a
 * user reads:
 *
 *   allocated = tensors + the library workspaces that live in the caching
 *               allocator                       (torch.cuda.max_memory_allocated)
 *   reserved  = allocated x (1 + the allocator's reserve: the cached,
 *               fragmented segments over what is allocated at the peak),
 *               at most what the device has left beside `fixed`: the caching
 *               allocator frees its cached segments and retries before it
 *               reports out of memory (c10/cuda/CUDACachingAllocator.cpp,
 *               release_cached_blocks after a failed cudaMalloc), so the
 *               reserve fills free memory and never runs a GPU out of it
 *                                               (torch.cuda.max_memory_reserved)
 *   device    = reserved + the CUDA context and the libraries' memory outside
 *               the allocator + NCCL's buffers, per communicator each rank
 *               joins with peers on other GPUs  (nvidia-smi)
 *
 * per rank on the device (each rank a process with its own context). A GPU
 * runs out of memory when `device` passes its capacity, that is when the
 * allocated bytes and `fixed` do: that is what the planner's --mem-cap and
 * the report's out_of_memory compare.
 */
#pragma once

#include <stdint.h>

#include "base/kinds.h"
#include "sched/sched.h"

typedef struct StRuntimeMemory {
  int64_t workspace; /* bytes added to the tensors in the allocator */
  double reserve;    /* reserved / allocated - 1 */
  int64_t fixed;     /* bytes outside the allocator: contexts, NCCL */
  int64_t capacity;  /* the device's memory; 0: unbounded */
} StRuntimeMemory;

/* What each device of `schedule` holds beyond its tensors: out[d] for every
 * device d (n_devices entries), from the schedule's framework preset (none
 * for a schedule without one). O(ranks x communicators). */
void st_runtime_memory(const StSchedule *schedule, StRuntimeMemory *out);
/* The same for some devices only: out[row_of[d]] for each device d with
 * row_of[d] >= 0, no two devices on one row (a folded run's recorded
 * devices). O(ranks x communicators). */
void st_runtime_memory_rows(const StSchedule *schedule, const int32_t *row_of, int n_rows,
                            StRuntimeMemory *out);

/* The three figures for a device whose tensors peak at `tensors` bytes. */
void st_runtime_memory_figures(const StRuntimeMemory *rt, int64_t tensors,
                               int64_t out[ST_MEMKIND_N]);
