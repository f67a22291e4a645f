/* sched_private.h: what sched.c and sched_comm.c share, not for readers of
 * a schedule. */
#pragma once

#include <glib.h>

/* Frees a communicator (StComm *) and drops its references to the arrays it
 * may share with others; the schedule's comms array calls it. */
void st_sched_comm_free(gpointer comm);
