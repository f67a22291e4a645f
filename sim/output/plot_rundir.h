/* plot_rundir.h: what plot.c reads from a run directory besides its tables
 * (plot_rundir.c): the run's name and step, and what the memory scripts need
 * from memory.csv and report.json. Private to sim/output/plot*.c. */
#pragma once

#include <glib.h>
#include <stdint.h>

/* What the gnuplot scripts need from memory.csv: its kind, the devices in
 * the order of their rows, and the devices each one stands for. */
typedef struct {
  char *kind;          /* "predicted" or "measured" */
  GArray *devices;     /* int */
  GArray *first, *last; /* int: index of each device's first and last data row */
  GHashTable *stands;  /* device -> "0-2,5" (char *), folded timelines only */
  int64_t capacity;    /* the GPU's memory, bytes (predicted runs; 0: not known) */
  int oom_device;      /* the device that runs out of memory, -1 when none */
  int64_t oom_bytes;   /* its peak as the device shows it (nvidia-smi), bytes */
  double oom_ms;       /* when it peaks */
} MemoryInfo;

void plot_memory_info_clear(MemoryInfo *m);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(MemoryInfo, plot_memory_info_clear)

/* Whether `dir` holds the file `name`. */
gboolean plot_has_file(const char *dir, const char *name);
/* The text of dir/name; NULL with the reason. Transfer full. */
char *plot_read_table(const char *dir, const char *name, GError **error);
/* "predicted step X (lo .. hi, 90 %)" from report.json, or NULL. Transfer full. */
char *plot_step_interval(const char *dir);
/* The run's name (report.json's, else the folder's). Transfer full. */
char *plot_run_name(const char *dir);
/* Fills `m` from dir's memory.csv and report.json. */
gboolean plot_memory_info_read(const char *dir, MemoryInfo *m, GError **error);
