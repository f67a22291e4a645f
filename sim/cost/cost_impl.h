/* cost_impl.h: what the cost model files share. Private to sim/cost/ (and
 * its tests): the rest of the tree reaches the models through the registry
 * functions of cost.h.
 */
#pragma once

#include "cost/cost.h"

/* The registered implementations, one per file. */
extern const StComputeModel st_compute_profile;   /* compute_profile.c */
extern const StComputeModel st_compute_roofline;  /* compute_roofline.c */
extern const StCommAlgo st_comm_ring;             /* comm_ring.c */
extern const StCommAlgo st_comm_tree;             /* comm_tree.c */
extern const StCommAlgo st_comm_hierarchical;     /* comm_hierarchical.c */
extern const StShareModel st_share_priority;      /* share_priority.c */

/* The link class a flat (single-level) algorithm over `group` is limited
 * by: the slowest one it spans. LOCAL when every member shares one device,
 * INTRA_NODE within one node, INTER_NODE otherwise. */
StLinkClass st_comm_flat_link(const StGroupShape *group);

/* Empties `plan` and names it. */
void st_comm_plan_init(StCommPlan *plan, const char *algo, StCostSource source);

/* Appends a phase on `link`: `bytes` per device (one direction) after
 * `alphas` times the link's latency; bandwidth from the cluster. */
void st_comm_plan_add(StCommPlan *plan, const StCluster *cluster, StLinkClass link,
                      double bytes, double alphas);

/* Bytes each device moves for `full_bytes` of one member: several members
 * on one device (group->per_device > 1) each send their own share through
 * it, so the device's traffic scales by per_device. */
static inline double
st_comm_device_bytes(const StGroupShape *group, int64_t full_bytes)
{
  return (double)full_bytes * (double)MAX(group->per_device, 1);
}
