/* gpu_perf.h: what a GPU achieves, as opposed to its peak: the measured
 * numbers behind the "estimate" compute model (sim/cost/compute_estimate.c)
 * and the "interference" sharing model (sim/cost/share_interference.c).
 *
 * A GPU performance file (models/gpus/NAME.json, docs/FORMATS.md) is data,
 * not code: every section carries the published measurement it comes from
 * in a "source" string, and a section without one is refused. A cluster file
 * names its GPU's file (`gpu.performance`: a path relative to the cluster
 * file, or the object inline, as st_cluster_to_json writes it); a cluster
 * that names none gets models/gpus/default.json, found under
 * $STAGGER_DATA_DIR or in the source tree this was built from.
 *
 *   {"format": "stagger-gpu-performance", "version": 1, "gpu": "A100-SXM4",
 *    "sms": {"count": 108, "source": "..."},
 *    "launch": {"us": 4.5, "source": "..."},
 *    "memory":  {"fraction": 0.84, "source": "..."},
 *    "pool": {"fraction": 0.3, "source": "..."},
 *    "gemm": {"tile": [128, 128], "k_half": 128, "fp32_math": "fp32",
 *             "efficiency": {"fp32": 0.9, "tf32": 0.86, "16bit": 0.86}, "source": "..."},
 *    "conv": {... as gemm ...},
 *    "gemm_fp8": {"tile": [128, 128], "k_half": 256, "efficiency": {"fp8": 0.78},
 *                 "source": "..."},
 *    "attention": {"seq": [512, 1024], "efficiency": [0.5, 0.6],
 *                  "backward": [0.4, 0.5], "source": "..."},
 *    "attention_cudnn": {... as attention ...},
 *    "attention_triton": {... as attention ...},
 *    "sharing": {"priority_leak": 0.80, "source": "..."},
 *    "nccl": {"channels": 16, "hbm_per_byte": 3, "source": "..."},
 *    "nccl_bus": {"intra_node": 0.8, "intra_node_all_reduce": 1.0, "inter_node": 0.94,
 *                 "source": "..."},
 *    "power": {"tdp_w": 700, "limit": [0.5, 0.75, 1.0], "throughput": [0.7, 0.9, 1.0],
 *              "source": "..."},
 *    "framework_efficiency": {"megatron": 0.95}}
 *
 * Invariants: every fraction and efficiency is in (0, 1]; priority_leak in
 * [0, 1]; attention points ascending. "attention", "attention_cudnn", "attention_triton", "backward",
 * "gemm_fp8", "nccl", "nccl_bus", "power" and "framework_efficiency" (a calibration's) are
 * optional;
 * power's limits ascend in (0, 1] to 1
 * with throughput 1 there (the efficiencies above are at the rated power).
 * Ownership: an StGpuPerf is immutable once loaded and reference counted, so
 * cluster copies share it (st_gpu_perf_ref / st_gpu_perf_unref).
 */
#pragma once

#include <glib.h>

struct cJSON;

typedef struct {
  double value;
  char *source;        /* the published measurement it comes from */
} StPerfNumber;

/* A matrix-multiply curve (GEMMs, and convolutions as implicit GEMMs): a
 * kernel computes its M x N outputs in tiles of tile_m x tile_n, one per SM
 * at a time, each reducing K with a fixed prologue and epilogue worth k_half
 * of K; at large sizes it runs at `efficiency` of the math's peak. */
typedef struct {
  int tile_m, tile_n;
  double k_half;
  double eff_fp32, eff_tf32, eff_16bit; /* of the fp32, TF32 and 16-bit peaks */
  double eff_fp8;         /* gemm_fp8 only: of the FP8 peak (StGpuSpec.fp8_flops) */
  gboolean fp32_as_tf32;  /* fp32 work runs on TF32 tensor cores when the GPU has them */
  char *source;
} StGemmCurve;

/* Fused (flash) attention: the share of the 16-bit peak reached at a
 * sequence length, interpolated in log(s) between points, flat beyond;
 * forward, and backward where measured apart (its FLOPs are 2.5 times the
 * forward's, at a lower share). */
typedef struct {
  int n;               /* points; 0: no fused kernel measured (attention as GEMMs) */
  double *seq;         /* [n] ascending */
  double *efficiency;  /* [n], forward */
  double *backward;    /* [n], or NULL: the forward's */
  char *source;
} StAttnCurve;

/* The fused attention kernels a GPU file may measure, each under its own
 * key (st_attn_kernel_keys); a framework names the one it calls. */
typedef enum {
  ST_ATTN_FLASH2 = 0, /* "attention": FlashAttention-2 (PyTorch SDPA's flash backend) */
  ST_ATTN_CUDNN,      /* "attention_cudnn": cuDNN fused attention (Transformer Engine) */
  ST_ATTN_TRITON,     /* "attention_triton": the Triton FlashAttention of 2022
                         (flash_attn_triton, llm-foundry's attn_impl triton) */
  ST_ATTN_N,
} StAttnKernel;

extern const char *const st_attn_kernel_keys[ST_ATTN_N];
/* Its name in words ("FlashAttention-2"). */
extern const char *const st_attn_kernel_names[ST_ATTN_N];

typedef struct {
  char *gpu;           /* the GPU the numbers were measured on ("A100-SXM4", "default") */
  char *path;          /* the file, or NULL when inline */
  char *note;          /* free text, may be NULL */
  /* memory.fraction: the share of the peak memory bandwidth that streaming
   * kernels sustain (a kernel moving bytes at this rate uses the memory
   * system fully, as far as sharing is concerned). */
  StPerfNumber memory_fraction;
  /* sharing.priority_leak: the share of a lower-priority neighbour's
   * slowdown that a higher stream priority does NOT remove (0: priority
   * isolates perfectly; 1: priority does nothing). */
  StPerfNumber priority_leak;
  /* The "estimate" compute model's curves. */
  StPerfNumber sms;          /* streaming multiprocessors (value: a count) */
  StPerfNumber launch_us;    /* the least time a kernel takes, launch included, us */
  StPerfNumber pool_fraction; /* share of the memory bandwidth pooling kernels sustain */
  StGemmCurve gemm, conv;
  /* gemm_fp8 (optional; tile_m 0 when absent): FP8 GEMMs (E4M3 x E4M3 or E5M2
   * inputs, bf16 output, fp32 accumulation, as cuBLASLt runs Transformer
   * Engine's) at their own large-size efficiency and k_half; absent, an FP8
   * GEMM takes the gemm curve's 16-bit efficiency at the FP8 peak. */
  StGemmCurve gemm_fp8;
  StAttnCurve attention[ST_ATTN_N]; /* by kernel; n 0 where the file has none (the
                                      others then take FlashAttention-2's) */
  /* nccl (optional; absent: communication slows no compute): what NCCL's
   * kernels hold while they move bytes, as the interference share model
   * sees them (cost/comm_share.c): `channels` thread blocks, one SM each,
   * and `hbm_per_byte` bytes of this GPU's memory traffic per byte a device
   * sends (the received chunk written, read back beside the local one,
   * reduced, written on). channels 0: not given. */
  StPerfNumber nccl_channels;
  StPerfNumber nccl_hbm_per_byte;
  /* nccl_bus (optional; absent: 1, the links' full rate): the share of the
   * links' bandwidth NCCL's collectives reach at large sizes, nccl-tests'
   * bus bandwidth over the link's rate, within a node and across nodes; an
   * all-reduce within a node on its own (in-switch reduction, NVLS, beats
   * the rings; 0: as the others). Point-to-point transfers and measured
   * link profiles are not scaled. */
  StPerfNumber bus_intra, bus_intra_all_reduce, bus_inter;
  /* power (optional): the rated power, and the share of its math
   * throughput (GEMMs, convolutions, attention) the GPU keeps under a power
   * limit of `limit` x tdp_w, piecewise linear; n 0: no curve. */
  struct {
    double tdp_w;
    int n;
    double *limit, *throughput;
    char *source;
  } power;
  /* framework_efficiency (written by a calibration, cost/calibration.h): the
   * share of the efficiencies above (GEMMs, convolutions, attention) that a
   * framework's software reaches, by framework name; absent: 1. */
  int n_framework;
  struct {
    char *name;
    double factor;
  } framework[16];
  int refs;
} StGpuPerf;

#define ST_GPU_PERF_ERROR (st_gpu_perf_error_quark())
GQuark st_gpu_perf_error_quark(void);

/* Reads a file; errors name it and the key. Transfer full. */
StGpuPerf *st_gpu_perf_load(const char *path, GError **error);
/* From a parsed object; `origin` names it in messages. Transfer full. */
StGpuPerf *st_gpu_perf_from_json(const struct cJSON *obj, const char *origin, GError **error);
/* The library file models/gpus/<name>.json, under $STAGGER_DATA_DIR, else in
 * the source tree. Transfer full. */
StGpuPerf *st_gpu_perf_load_named(const char *name, GError **error);
/* Whether `s` names a library file ("h100-sxm") rather than a path: letters,
 * digits, '-', '_' and '.', no ".json" ending. */
gboolean st_gpu_perf_is_name(const char *s);
/* st_gpu_perf_load_named("default"). Transfer full. */
StGpuPerf *st_gpu_perf_load_default(GError **error);
/* The share of the math throughput kept under a cap of `limit_w` watts
 * (0, or at least the rated power: 1). */
double st_gpu_perf_power_factor(const StGpuPerf *perf, double limit_w);
/* The framework efficiency of `framework` (1 when none is set or NULL). */
double st_gpu_perf_framework_factor(const StGpuPerf *perf, const char *framework);
/* Sets it (a calibration's; the perf must be private to the caller). */
void st_gpu_perf_set_framework_factor(StGpuPerf *perf, const char *framework, double factor);
/* The object st_gpu_perf_from_json reads back to equal numbers. Transfer full. */
struct cJSON *st_gpu_perf_to_json(const StGpuPerf *perf);

StGpuPerf *st_gpu_perf_ref(StGpuPerf *perf);
void st_gpu_perf_unref(StGpuPerf *perf);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StGpuPerf, st_gpu_perf_unref)
