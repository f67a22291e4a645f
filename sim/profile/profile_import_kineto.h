/* profile_import_kineto.h: a PyTorch profiler trace (the Chrome-trace JSON
 * that torch.profiler's export_chrome_trace writes) into stagger's profile
 * format (profile.h): per-layer forward and backward times, the optimizer
 * step, and NCCL collectives as link measurements. docs/INTEROP.md says
 * what the traced job must enable.
 *
 * Events. Complete events ("ph": "X"; others are ignored) of either layout
 * Chrome traces allow: an object with "traceEvents" (Kineto, the default
 * profiler since PyTorch 1.8 with Kineto built in) or a bare array (the
 * legacy profiler, e.g. Debian's python3-torch without Kineto). Times are
 * microseconds. Device work is Kineto's "kernel", "gpu_memcpy" and
 * "gpu_memset" events; a trace without any is a CPU trace, whose work is
 * the outermost operator events of each thread. CPU and GPU traces are
 * attributed the same way, through the CPU event that did the work (a
 * kernel's is the runtime call that launched it: the same args
 * "correlation").
 *
 * Layers. A range whose name is a layer of the model (record_function(NAME),
 * or NAME.forward) is that layer's forward; NAME.backward its backward. Work
 * inside a range belongs to the innermost one. Work outside any range but
 * inside the autograd engine's "autograd::engine::evaluate_function: ..."
 * event whose "Sequence number" is that of a forward operator inside a
 * layer's range is that layer's backward (Kineto records the numbers; the
 * legacy profiler does not, so there the backward needs its NAME.backward
 * ranges). Work inside "Optimizer.step#CLASS.step" (PyTorch names it so) is
 * the optimizer's step: an entry "sgd" or "adam" at x = the model's
 * parameters. Everything else is counted as not attributed.
 *
 * Steps and times. "ProfilerStep#k" ranges are the steps (none: the whole
 * trace is one); work is in the step whose window holds the CPU event that
 * did it. Per step, a layer's pass takes the sum of its work divided by how
 * many ranges of that pass (of the forward, when the backward has none) the
 * step holds; the entry is the median over steps, the spread p90 - p10.
 * The batch is the traced micro-batch: given, or the first dimension of the
 * first input of the first operator in a layer range (record_shapes).
 *
 * Links. An NCCL kernel ("nccl..." events) launched inside an operator
 * "nccl:COLLECTIVE" or "record_param_comms" becomes a link measurement when
 * its size and group are known: bytes from the operator's "In msg nelems" /
 * "Out msg nelems" and "dtype", else its "Input Dims" and "Input type"
 * (record_shapes); nccl-tests' size, so an all-gather's output; ranks from
 * "Group size", else the trace's "distributedInfo" "world_size"; the time is
 * the kernel's. Same (collective, ranks, bytes): the median.
 */
#pragma once

#include <glib.h>

#include "model/model.h"
#include "profile/profile.h"

typedef struct {
  const char *device;   /* the device name the entries carry; NULL: the trace's GPU, or "host" */
  int64_t batch;        /* samples per traced micro-batch; 0: from the shapes */
  StLinkClass link;     /* the link class of the traced collectives */
} StKinetoOptions;

typedef struct {
  int events;           /* complete events read */
  int steps;            /* profiler steps (1 when the trace has none) */
  gboolean gpu;         /* device work events: a GPU trace */
  int64_t batch;        /* the batch the entries are at */
  char *device;         /* the device they are for */
  int entries;          /* layer entries written (fwd and bwd separately) */
  int links;            /* link entries written */
  gboolean optimizer;   /* an optimizer entry was written */
  double unattributed_ns; /* work per step that no layer, optimizer or collective took */
  char *unattributed_top; /* "aten::add_ 120 us, ..." the largest such operators, or NULL */
  int comm_unknown;     /* NCCL kernels whose size or group was not known */
  int orphans;          /* GPU kernels whose correlation id matches no launch */
  GPtrArray *missing;   /* char *, owned: layers without a forward entry */
} StKinetoImport;

void st_kineto_import_clear(StKinetoImport *stats);

/* Reads trace `path` for `model` (the layer names the ranges use). `stats`
 * may be NULL. Errors name the file. A trace that yields nothing is
 * refused rather than written as zeros: no layer's range found, every
 * kernel's correlation id matching no launch, or every layer measuring 0 us
 * (events without durations). Transfer full. */
StProfile *st_profile_import_kineto(const char *path, const StModel *model,
                                    const StKinetoOptions *options, StKinetoImport *stats,
                                    GError **error);
