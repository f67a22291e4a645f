/* cost_impl.h: what the cost model files share. Private to sim/cost/ (and
 * its tests): the rest of the tree reaches the models through the registry
 * functions of cost.h.
 */
#pragma once

#include "cost/cost.h"

/* The registered implementations, one per file. */
extern const StComputeModel st_compute_profile;   /* compute_profile.c */
extern const StComputeModel st_compute_estimate;  /* compute_estimate.c */
extern const StComputeModel st_compute_roofline;  /* compute_roofline.c */
extern const StCommAlgo st_comm_ring;             /* comm_ring.c */
extern const StCommAlgo st_comm_tree;             /* comm_tree.c */
extern const StCommAlgo st_comm_hierarchical;     /* comm_hierarchical.c */
extern const StShareModel st_share_interference;  /* share_interference.c */
extern const StShareModel st_share_priority;      /* share_priority.c */

/* The link class a flat (single-level) algorithm over `group` is limited
 * by: the slowest one it spans. LOCAL when every member shares one device,
 * INTRA_NODE within one node, INTER_NODE otherwise. */
StLinkClass st_comm_flat_link(const StGroupShape *group);

/* How a flat ring (or chain) through every member device loads the links:
 * within one device its memory; within one node every device's ports; over
 * N nodes of g devices each, g - 1 of each node's g hops on NVLink and one
 * through the NICs (NCCL spreads its rings' node crossings over the NICs),
 * so each device's ports carry (g-1)/g of what it sends, each node's NICs
 * together as much as one device sends, and each leaf boundary the same. */
StLinkUse st_comm_flat_use(const StGroupShape *group);

/* Empties `plan` and names it. */
void st_comm_plan_init(StCommPlan *plan, const char *algo, StCostSource source);

/* Appends a phase: `bytes` per device (one direction) loading the links as
 * `use` says, after `intra_steps` latencies of the group's fastest link
 * class that it spans (memory: none; intra_node) and `inter_steps` of the
 * inter_node link; its bandwidth alone from the cluster and the shape. */
void st_comm_plan_add(StCommPlan *plan, const StCluster *cluster, const StGroupShape *group,
                      StLinkClass link, double bytes, StLinkUse use, double intra_steps,
                      double inter_steps);

/* Bytes each device moves for `full_bytes` of one member: several members
 * on one device (group->per_device > 1) each send their own share through
 * it, so the device's traffic scales by per_device. */
static inline double
st_comm_device_bytes(const StGroupShape *group, int64_t full_bytes)
{
  return (double)full_bytes * (double)MAX(group->per_device, 1);
}
