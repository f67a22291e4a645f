/* profile_import_deeppool.h: DeepPool's per-layer GPU profiles into
 * stagger's profile format (profile.h).
 *
 * The DeepPool artifact (DeepPoolML/DeepPool) publishes, per model, blocks of
 * rows, one block per local batch size:
 *
 *   conv2d{"in_channels":3,"kernel_size":3,...}[128][3,224,224]  13.509  13.509  13.561  13.612
 *   linear{"bias":true,"in_features":4096,"out_features":1000}[128]4096   0.057 ...
 *   SUM(avg)  203.845
 *
 * each row a layer's type and hyperparameters (JSON), the batch, the input
 * shape per sample ([C,H,W], or a feature count), then the average time in
 * milliseconds of forward + backward together (then p50, p90, p99 where
 * given). Header (#config) and SUM rows are skipped.
 *
 * The layer signature mapping, DeepPool row -> layers of the stagger model
 * with the same type, hyperparameters and input shape:
 *
 *   conv2d{in_channels, kernel_size, out_channels, padding, stride}
 *                              -> conv2d {out_channels, kernel, padding, stride}
 *   conv2d{..., kernel_size: [h, w], padding: [h, w], ...}
 *                              -> conv2d_rect {kernel_h, kernel_w, padding_h, padding_w}
 *   maxPool2d{kernel_size, padding, stride}  -> maxpool2d {kernel, padding, stride}
 *   avgPool2d{kernel_size, padding, stride}  -> avgpool2d {kernel, padding, stride}
 *   concat                                    -> concat (on the concatenated shape)
 *   adAvgPool2d{output_height = output_width} -> adaptive_avgpool2d {output_size}
 *   flatten                                   -> flatten
 *   linear{in_features, out_features}         -> linear {out_features} on [in_features]
 *   ReLU2d                                    -> relu
 *   ResnetBottleneck{inplanes, planes, stride, base_width, groups}
 *                              -> bottleneck {planes, stride, width_per_group, groups}
 *
 * (input channels and features come from the shape). Every row must match at
 * least one layer; each match becomes an entry keyed by that layer's
 * signature, pass fwd+bwd, x = the batch, time = the average (the simulator
 * splits fwd+bwd by the layer's FLOPs). Rows that map to one signature at one
 * batch (the repeated blocks of a stage) are averaged. Layers without a row
 * (DeepPool's VGG runs its ReLUs inside the convolutions; it has no dropout or
 * loss layer) are listed in `missing` and keep the simulator's roofline
 * estimate.
 */
#pragma once

#include <glib.h>

#include "model/model.h"
#include "profile/profile.h"

typedef struct {
  int rows;           /* rows read (not counting headers and sums) */
  int entries;        /* (signature, batch) entries written */
  int batches;        /* distinct batch sizes */
  GPtrArray *missing; /* char *, owned: names of model layers that no row matched */
} StDeepPoolImport;

void st_deeppool_import_clear(StDeepPoolImport *stats);

/* Reads DeepPool profile `path` for `model`, with entries for GPU `device`
 * (the cluster file's GPU name that should use them). `stats` may be NULL.
 * Errors name the file and the line. Transfer full. */
StProfile *st_profile_import_deeppool(const char *path, const StModel *model,
                                      const char *device, StDeepPoolImport *stats,
                                      GError **error);
