/* work.h: what the compute cost models see of a COMP op (cost/cost.h's
 * StWork and StComputeCtx), in one place for everyone who costs ops: the
 * engine, the planner's bounds, the Chakra exporter.
 */
#pragma once

#include "cost/cost.h"
#include "sched/sched.h"

/* The dtype COMP ops compute in: fp32, or under mixed precision bf16 where
 * the GPU has bf16 peaks, else fp16. */
StDtype st_schedule_compute_dtype(const StSchedule *s);

/* The compute context of program `p`'s ops: the schedule's cluster, the
 * job's model, the compute dtype; `profile` borrowed, may be NULL. */
StComputeCtx st_program_compute_ctx(const StSchedule *s, const StProgram *p,
                                    const StProfile *profile);

/* The work of COMP op `op` of program `p` (its layer, pass, batch; the
 * kernel name of an elementwise pass: the optimizer's for optim). */
StWork st_op_work(const StSchedule *s, const StProgram *p, const StOp *op);
