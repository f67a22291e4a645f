/* plot.c: runs gnuplot on the scripts in plots/ (see plot.h).
 *
 * The C side only finds what the scripts need that gnuplot cannot work out
 * from the tables itself: the run's name and what each folded device stands
 * for (report.json), which devices memory.csv holds, a plan's search
 * (plan.json), the terminal, and the files of a comparison. Everything about
 * drawing lives in the scripts. */
#include "output/plot.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "output/output.h"
#include "output/plot_rundir.h"

/* More panels than this are unreadable on one page. */
#define MAX_PANELS 8

typedef struct {
  char *gnuplot;         /* absolute path of the program */
  const char *plots_dir; /* borrowed */
  const char *ext;       /* "png", "svg"; NULL for dumb (text on stdout) */
  const char *term;      /* terminal name and options, without size */
  const char *dev;       /* what the devices are called: "GPU", or "CPU" on the host */
  GPtrArray *written;    /* borrowed */
} Plotter;

/* ---- gnuplot variables ------------------------------------------------------ */

/* name='value'; a single-quoted gnuplot string only escapes ' as ''. */
static void
var_string(GString *vars, const char *name, const char *value)
{
  g_string_append_printf(vars, "%s='", name);
  for (const char *p = value; *p != '\0'; p++) {
    if (*p == '\'')
      g_string_append_c(vars, '\'');
    g_string_append_c(vars, *p);
  }
  g_string_append(vars, "'; ");
}

static void
var_int(GString *vars, const char *name, long value)
{
  g_string_append_printf(vars, "%s=%ld; ", name, value);
}

/* Runs `script` with `vars`; the image goes to DIR/STEM.EXT through a
 * temporary name, or to stdout for dumb. */
static gboolean
run_script(Plotter *pl, const char *script, GString *vars, const char *dir, const char *stem,
           GError **error)
{
  g_autofree char *script_path = g_build_filename(pl->plots_dir, script, NULL);
  if (!g_file_test(script_path, G_FILE_TEST_IS_REGULAR)) {
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO, "%s: plot script not found", script_path);
    return FALSE;
  }
  g_autofree char *base = pl->ext ? g_strdup_printf("%s.%s", stem, pl->ext) : NULL;
  g_autofree char *out = base ? g_build_filename(dir, base, NULL) : NULL;
  g_autofree char *tmp = out ? g_strconcat(out, ".tmp", NULL) : NULL;
  var_string(vars, "outfile", tmp ? tmp : "");
  var_string(vars, "term", pl->term);
  var_string(vars, "dev", pl->dev);

  char *argv[] = {pl->gnuplot, "-e", vars->str, script_path, NULL};
  g_autofree char *err_text = NULL;
  int status = 0;
  GError *local = NULL;
  /* gnuplot's stdout is ours (dumb plots print there): keep order with what
   * was printed before. */
  fflush(stdout);
  if (!g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, &err_text, &status,
                    &local)) {
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_FAILED, "%s: cannot run: %s", pl->gnuplot,
                local->message);
    g_error_free(local);
    return FALSE;
  }
  g_strstrip(err_text);
  if (!g_spawn_check_exit_status(status, NULL)) {
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_FAILED, "gnuplot failed on %s for %s:\n%s",
                script_path, dir, err_text[0] ? err_text : "(no message)");
    if (tmp)
      g_unlink(tmp);
    return FALSE;
  }
  /* Warnings do not fail a plot, but say something is off: pass them on. */
  if (err_text[0] != '\0')
    g_printerr("gnuplot (%s): %s\n", script, err_text);
  if (out == NULL)
    return TRUE;
  if (g_rename(tmp, out) != 0) {
    int saved = errno;
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO, "%s: cannot rename from %s: %s", out, tmp,
                g_strerror(saved));
    g_unlink(tmp);
    return FALSE;
  }
  g_ptr_array_add(pl->written, g_steal_pointer(&out));
  return TRUE;
}

/* ---- one run --------------------------------------------------------------------- */

static void
var_size(GString *vars, const Plotter *pl, int width, int height, int text_width,
         int text_height)
{
  var_int(vars, "width", pl->ext ? width : text_width);
  var_int(vars, "height", pl->ext ? height : text_height);
}

/* How many devices a "0-3,8" list names. */
static int
stands_count(const char *stands)
{
  int count = 0;
  g_auto(GStrv) ranges = g_strsplit(stands ? stands : "", ",", -1);
  for (char **r = ranges; *r != NULL; r++) {
    int first = 0, last = 0;
    int n = sscanf(*r, "%d-%d", &first, &last);
    count += n == 2 ? last - first + 1 : n == 1 ? 1 : 0;
  }
  return count;
}

/* "GPU 0 (stands for 4 GPUs: 0-3)"; long lists are left out of the title. */
static char *
panel_label(const char *dev, int device, const char *stands)
{
  int count = stands_count(stands);
  if (count <= 1)
    return g_strdup_printf("%s %d", dev, device);
  if (strlen(stands) <= 40)
    return g_strdup_printf("%s %d (stands for %d %ss: %s)", dev, device, count, dev, stands);
  return g_strdup_printf("%s %d (stands for %d %ss)", dev, device, count, dev);
}

static gboolean
plot_memory(Plotter *pl, const char *dir, const char *name, GError **error)
{
  g_autofree char *path = g_build_filename(dir, "memory.csv", NULL);
  g_auto(MemoryInfo) info = {0};
  if (!plot_memory_info_read(dir, &info, error))
    return FALSE;
  int n = MIN((int)info.devices->len, MAX_PANELS);
  /* Two columns of panels on a page, one on a terminal. */
  int cols = pl->ext && n > 1 ? 2 : 1;
  int rows = (n + cols - 1) / cols;
  g_autoptr(GString) vars = g_string_new(NULL);
  var_string(vars, "datafile", path);
  var_string(vars, "name", name);
  var_string(vars, "kind", info.kind);
  var_int(vars, "ndev", n);
  var_int(vars, "columns", cols);
  var_size(vars, pl, 1400, MAX(900, 420 * rows), 120, 28 * rows + 4);
  for (int i = 0; i < n; i++) {
    int d = g_array_index(info.devices, int, i);
    const char *stands = g_hash_table_lookup(info.stands, GINT_TO_POINTER(d));
    g_autofree char *key = g_strdup_printf("dev%d", i + 1);
    var_int(vars, key, d);
    g_autofree char *first_key = g_strdup_printf("first%d", i + 1);
    var_int(vars, first_key, g_array_index(info.first, int, i));
    g_autofree char *last_key = g_strdup_printf("last%d", i + 1);
    var_int(vars, last_key, g_array_index(info.last, int, i));
    g_autofree char *label_key = g_strdup_printf("label%d", i + 1);
    g_autofree char *label = panel_label(pl->dev, d, stands);
    var_string(vars, label_key, label);
  }
  /* The second line: the calibration's interval on the step, and which
   * panels are shown when not all. */
  g_autofree char *step = plot_step_interval(dir);
  g_autoptr(GString) note = g_string_new(step != NULL ? step : "");
  if ((int)info.devices->len > n)
    g_string_append_printf(note, "%sfirst %d of %u recorded %ss", note->len ? "; " : "", n,
                           info.devices->len, pl->dev);
  /* The GPU's capacity as a line, and the device that goes over it marked
   * at its peak as the device shows it (tensors and what the framework
   * holds beyond them: what runs a GPU out of memory). */
  var_int(vars, "capacity", (long)info.capacity);
  var_int(vars, "oomdev", info.oom_device);
  var_int(vars, "oombytes", (long)info.oom_bytes);
  char oom_ms[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append_printf(vars, "oomms=%s; ",
                         g_ascii_formatd(oom_ms, sizeof oom_ms, "%.6f", info.oom_ms));
  if (info.oom_device >= 0) {
    g_autofree char *at = st_format_bytes(info.oom_bytes);
    g_autofree char *cap = st_format_bytes(info.capacity);
    g_autofree char *over = st_format_bytes(info.oom_bytes - info.capacity);
    g_autofree char *label = g_strdup_printf("OUT OF MEMORY: %s on the device > %s", at, cap);
    var_string(vars, "oomlabel", label);
    g_string_append_printf(note, "%sOUT OF MEMORY: %s %d peaks at %s on the device (nvidia-smi), "
                           "over its %s by %s", note->len ? "; " : "", pl->dev, info.oom_device,
                           at, cap, over);
  } else {
    var_string(vars, "oomlabel", "");
  }
  var_string(vars, "note", note->str);
  return run_script(pl, "memory.gp", vars, dir, "memory", error);
}

static gboolean
plot_table(Plotter *pl, const char *dir, const char *name, const char *table,
           const char *script, const char *stem, GError **error)
{
  g_autofree char *path = g_build_filename(dir, table, NULL);
  g_autoptr(GString) vars = g_string_new(NULL);
  var_string(vars, "datafile", path);
  var_string(vars, "name", name);
  /* The Gantt grows with its lanes, up to a cap (gantt.gp). */
  var_int(vars, "lane_size", pl->ext ? 28 : 2);
  var_int(vars, "max_height", pl->ext ? 6000 : 200);
  var_size(vars, pl, 1400, 700, 120, 32);
  return run_script(pl, script, vars, dir, stem, error);
}

/* link_rates.csv's columns with their capacities from links.csv, for links.gp. */
static gboolean
plot_links(Plotter *pl, const char *dir, const char *name, GError **error)
{
  g_autofree char *rates = g_build_filename(dir, "link_rates.csv", NULL);
  g_autofree char *table = g_build_filename(dir, "links.csv", NULL);
  g_autofree char *rates_text = NULL, *links_text = NULL;
  GError *local = NULL;
  if (!g_file_get_contents(rates, &rates_text, NULL, &local) ||
      !g_file_get_contents(table, &links_text, NULL, &local)) {
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO, "%s", local->message);
    g_error_free(local);
    return FALSE;
  }
  /* links.csv: name is column 2, capacity_GBps column 5 (docs/FORMATS.md). */
  g_autoptr(GHashTable) capacity = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  g_auto(GStrv) rows = g_strsplit(links_text, "\n", -1);
  for (int i = 1; rows[i] != NULL; i++) {
    g_auto(GStrv) f = g_strsplit(rows[i], ",", -1);
    if (g_strv_length(f) >= 5)
      g_hash_table_insert(capacity, g_strdup(f[1]), g_strdup(f[4]));
  }
  g_autoptr(GString) caps = g_string_new(NULL);
  g_autofree char *header = g_strndup(rates_text, strcspn(rates_text, "\n"));
  g_auto(GStrv) cols = g_strsplit(header, ",", -1);
  for (int i = 1; cols[i] != NULL; i++) {
    const char *cap = g_hash_table_lookup(capacity, cols[i]);
    if (cap == NULL) {
      g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_INVALID, "%s: link '%s' is not in %s", rates,
                  cols[i], table);
      return FALSE;
    }
    g_string_append_printf(caps, "%s%s", i > 1 ? " " : "", cap);
  }
  g_autoptr(GString) vars = g_string_new(NULL);
  var_string(vars, "datafile", rates);
  var_string(vars, "name", name);
  var_string(vars, "caps", caps->str);
  var_size(vars, pl, 1400, 600, 120, 30);
  return run_script(pl, "links.gp", vars, dir, "links", error);
}

/* groups.csv: one line per communicator (its columns, header counted). */
static gboolean
plot_groups(Plotter *pl, const char *dir, const char *name, GError **error)
{
  g_autofree char *path = g_build_filename(dir, "groups.csv", NULL);
  g_autofree char *text = plot_read_table(dir, "groups.csv", error);
  if (text == NULL)
    return FALSE;
  long commas = 0;
  for (const char *c = text; *c != '\0' && *c != '\n'; c++)
    commas += *c == ',';
  g_autoptr(GString) vars = g_string_new(NULL);
  var_string(vars, "datafile", path);
  var_string(vars, "name", name);
  var_int(vars, "n_comms", commas - 1); /* less time_us and total */
  var_size(vars, pl, 1400, 600, 120, 30);
  return run_script(pl, "groups.gp", vars, dir, "groups", error);
}

static gboolean
plot_run(Plotter *pl, const char *dir, GError **error)
{
  g_autofree char *name = plot_run_name(dir);
  if (!plot_memory(pl, dir, name, error))
    return FALSE;
  if (plot_has_file(dir, "comm.csv") &&
      !plot_table(pl, dir, name, "comm.csv", "comm.gp", "comm", error))
    return FALSE;
  if (plot_has_file(dir, "groups.csv") && !plot_groups(pl, dir, name, error))
    return FALSE;
  if (plot_has_file(dir, "link_rates.csv") && plot_has_file(dir, "links.csv") &&
      !plot_links(pl, dir, name, error))
    return FALSE;
  if (plot_has_file(dir, "ops.csv") &&
      !plot_table(pl, dir, name, "ops.csv", "gantt.gp", "gantt", error))
    return FALSE;
  /* A whole training run (`sim --train-tokens`, docs/GOODPUT.md). */
  if (plot_has_file(dir, "goodput.csv") &&
      !plot_table(pl, dir, name, "goodput.csv", "goodput.gp", "goodput", error))
    return FALSE;
  if (plot_has_file(dir, "run_timeline.csv") &&
      !plot_table(pl, dir, name, "run_timeline.csv", "run_timeline.gp", "run_timeline", error))
    return FALSE;
  return TRUE;
}

/* ---- a comparison ------------------------------------------------------------------- */

static int
compare_names(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Subdirectories of `dir` that are runs, sorted by name. */
static GPtrArray *
list_runs(const char *dir, GError **error)
{
  GError *local = NULL;
  g_autoptr(GDir) d = g_dir_open(dir, 0, &local);
  if (d == NULL) {
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO, "%s", local->message);
    g_error_free(local);
    return NULL;
  }
  GPtrArray *runs = g_ptr_array_new_with_free_func(g_free);
  const char *entry;
  while ((entry = g_dir_read_name(d)) != NULL) {
    g_autofree char *sub = g_build_filename(dir, entry, NULL);
    if (g_file_test(sub, G_FILE_TEST_IS_DIR) && plot_has_file(sub, "memory.csv"))
      g_ptr_array_add(runs, g_strdup(entry));
  }
  g_ptr_array_sort(runs, compare_names);
  return runs;
}

static gboolean
plot_compare(Plotter *pl, const char *dir, GPtrArray *runs, GError **error)
{
  g_autofree char *base = g_path_get_basename(dir);
  g_autoptr(GString) mem = g_string_new(NULL);
  g_autoptr(GString) comm = g_string_new(NULL);
  int n_comm = 0;
  for (guint i = 0; i < runs->len; i++) {
    const char *run = g_ptr_array_index(runs, i);
    g_autofree char *sub = g_build_filename(dir, run, NULL);
    g_autofree char *memory = g_build_filename(sub, "memory.csv", NULL);
    g_auto(MemoryInfo) info = {0};
    if (!plot_memory_info_read(sub, &info, error))
      return FALSE;
    g_autofree char *file_key = g_strdup_printf("file%u", i + 1);
    g_autofree char *name_key = g_strdup_printf("name%u", i + 1);
    g_autofree char *first_key = g_strdup_printf("first%u", i + 1);
    g_autofree char *last_key = g_strdup_printf("last%u", i + 1);
    var_string(mem, file_key, memory);
    var_string(mem, name_key, run);
    var_int(mem, first_key, g_array_index(info.first, int, 0));
    var_int(mem, last_key, g_array_index(info.last, int, 0));
    /* The folded devices and how many each stands for, so the script can
     * sum over all GPUs (devs1 = "0", wts1 = "8"). */
    g_autoptr(GString) devs = g_string_new(NULL);
    g_autoptr(GString) wts = g_string_new(NULL);
    for (guint k = 0; k < info.devices->len; k++) {
      int d = g_array_index(info.devices, int, k);
      int count = stands_count(g_hash_table_lookup(info.stands, GINT_TO_POINTER(d)));
      if (count > 1) {
        g_string_append_printf(devs, "%s%d", devs->len ? " " : "", d);
        g_string_append_printf(wts, "%s%d", wts->len ? " " : "", count);
      }
    }
    g_autofree char *devs_key = g_strdup_printf("devs%u", i + 1);
    g_autofree char *wts_key = g_strdup_printf("wts%u", i + 1);
    var_string(mem, devs_key, devs->str);
    var_string(mem, wts_key, wts->str);
    if (plot_has_file(sub, "comm.csv")) {
      g_autofree char *table = g_build_filename(sub, "comm.csv", NULL);
      n_comm++;
      g_autofree char *comm_file = g_strdup_printf("file%d", n_comm);
      g_autofree char *comm_name = g_strdup_printf("name%d", n_comm);
      var_string(comm, comm_file, table);
      var_string(comm, comm_name, run);
    }
  }
  g_autofree char *mem_title = g_strdup_printf("%s: memory of each run", base);
  var_string(mem, "title", mem_title);
  var_int(mem, "n", runs->len);
  var_size(mem, pl, 1400, 1500, 120, 90);
  if (!run_script(pl, "compare_memory.gp", mem, dir, "compare_memory", error))
    return FALSE;
  if (n_comm == 0)
    return TRUE;
  g_autofree char *comm_title =
    g_strdup_printf("%s: send rate over all %ss of each run", base, pl->dev);
  var_string(comm, "title", comm_title);
  var_int(comm, "n", n_comm);
  var_size(comm, pl, 1400, 700, 120, 32);
  return run_script(pl, "compare_comm.gp", comm, dir, "compare_comm", error);
}

/* ---- several runs, and a validation (stagger validate --out DIR) ------------------------ */

/* Every run below `dir`, then the runs compared; a validate case (its runs
 * are predicted/ and measured/) also gets their Gantts one above the other. */
static gboolean
plot_runs(Plotter *pl, const char *dir, GPtrArray *runs, GError **error)
{
  for (guint i = 0; i < runs->len; i++) {
    g_autofree char *sub = g_build_filename(dir, g_ptr_array_index(runs, i), NULL);
    if (!plot_run(pl, sub, error))
      return FALSE;
  }
  if (runs->len > 0 && !plot_compare(pl, dir, runs, error))
    return FALSE;
  g_autofree char *pred = g_build_filename(dir, "predicted", "ops.csv", NULL);
  g_autofree char *meas = g_build_filename(dir, "measured", "ops.csv", NULL);
  if (!g_file_test(pred, G_FILE_TEST_IS_REGULAR) || !g_file_test(meas, G_FILE_TEST_IS_REGULAR))
    return TRUE;
  g_autofree char *base = g_path_get_basename(dir);
  g_autofree char *pred_name = g_strdup_printf("%s, predicted", base);
  g_autofree char *meas_name = g_strdup_printf("%s, measured", base);
  g_autoptr(GString) vars = g_string_new(NULL);
  var_string(vars, "datafile", pred);
  var_string(vars, "name", pred_name);
  var_string(vars, "datafile2", meas);
  var_string(vars, "name2", meas_name);
  var_int(vars, "lane_size", pl->ext ? 28 : 2);
  var_int(vars, "max_height", pl->ext ? 6000 : 200);
  var_size(vars, pl, 1400, 900, 120, 48);
  return run_script(pl, "gantt.gp", vars, dir, "validate_gantt", error);
}

/* Every case below `dir` (those with a validate.json), then the step times
 * of all of them from validate.csv. */
static gboolean
plot_validation(Plotter *pl, const char *dir, GError **error)
{
  GError *local = NULL;
  g_autoptr(GDir) d = g_dir_open(dir, 0, &local);
  if (d == NULL) {
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO, "%s", local->message);
    g_error_free(local);
    return FALSE;
  }
  g_autoptr(GPtrArray) cases = g_ptr_array_new_with_free_func(g_free);
  for (const char *entry; (entry = g_dir_read_name(d)) != NULL;) {
    g_autofree char *sub = g_build_filename(dir, entry, NULL);
    if (g_file_test(sub, G_FILE_TEST_IS_DIR) && plot_has_file(sub, "validate.json"))
      g_ptr_array_add(cases, g_steal_pointer(&sub));
  }
  g_ptr_array_sort(cases, compare_names);
  for (guint i = 0; i < cases->len; i++) {
    const char *one = g_ptr_array_index(cases, i);
    g_autoptr(GPtrArray) runs = list_runs(one, error);
    if (runs == NULL || !plot_runs(pl, one, runs, error))
      return FALSE;
  }
  g_autofree char *table = g_build_filename(dir, "validate.csv", NULL);
  g_autofree char *base = g_path_get_basename(dir);
  g_autofree char *title = g_strdup_printf("%s: step time, predicted and measured", base);
  g_autoptr(GString) vars = g_string_new(NULL);
  var_string(vars, "datafile", table);
  var_string(vars, "title", title);
  var_size(vars, pl, 1400, 700, 120, 32);
  return run_script(pl, "validate.gp", vars, dir, "validate", error);
}

/* ---- a plan (stagger plan --out DIR) ------------------------------------------------------- */

/* What plan.json says about the search (the objective, the strategies in
 * order, the memory cap) goes to plots/plan.gp as variables; the points are
 * read from plan.csv. */
static gboolean
plot_plan(Plotter *pl, const char *dir, GError **error)
{
  g_autofree char *path = g_build_filename(dir, "plan.csv", NULL);
  g_autofree char *json_path = g_build_filename(dir, "plan.json", NULL);
  g_autoptr(cJSON) plan = st_json_load_file(json_path, error);
  if (plan == NULL)
    return FALSE;
  const cJSON *search = cJSON_GetObjectItem(plan, "search");
  const char *objective = cJSON_GetStringValue(cJSON_GetObjectItem(search, "objective"));
  const cJSON *cap = cJSON_GetObjectItem(search, "mem_cap_bytes");
  if (objective == NULL || !cJSON_IsNumber(cap)) {
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_PARSE,
                "%s: search.objective or search.mem_cap_bytes missing", json_path);
    return FALSE;
  }
  g_autoptr(GString) strategies = g_string_new(NULL);
  const cJSON *name;
  cJSON_ArrayForEach(name, cJSON_GetObjectItem(search, "strategies"))
    if (cJSON_IsString(name))
      g_string_append_printf(strategies, "%s%s", strategies->len ? " " : "", name->valuestring);
  g_autofree char *cap_text = g_strdup_printf("%.0f", cJSON_GetNumberValue(cap));
  g_autoptr(GString) vars = g_string_new(NULL);
  var_string(vars, "datafile", path);
  var_string(vars, "objective", objective);
  var_string(vars, "strategies", strategies->str);
  var_string(vars, "mem_cap_bytes", cap_text);
  g_autofree char *base = g_path_get_basename(dir);
  const char *axes[][3] = {{"gpus", "plan_gpus", "against GPUs used"},
                           {"memory", "plan_memory", "against peak memory per GPU"}};
  for (gsize i = 0; i < G_N_ELEMENTS(axes); i++) {
    g_autoptr(GString) mine = g_string_new(vars->str);
    g_autofree char *title = g_strdup_printf("%s: the configurations searched, %s", base,
                                             axes[i][2]);
    var_string(mine, "title", title);
    var_string(mine, "axis", axes[i][0]);
    var_size(mine, pl, 1400, 800, 120, 36);
    if (!run_script(pl, "plan.gp", mine, dir, axes[i][1], error))
      return FALSE;
  }
  return TRUE;
}

/* What the devices of the runs under `dir` are called: report.json's
 * device_kind of the run there, or of the first run (or validation case)
 * below it; "GPU" when no report says. */
static const char *
device_noun(const char *dir)
{
  const char *candidates[] = {"report.json", "*/report.json", "*/predicted/report.json"};
  for (gsize i = 0; i < G_N_ELEMENTS(candidates); i++) {
    g_autofree char *pattern = g_build_filename(dir, candidates[i], NULL);
    g_autoptr(GPtrArray) found = g_ptr_array_new_with_free_func(g_free);
    if (strchr(candidates[i], '*') == NULL) {
      g_ptr_array_add(found, g_strdup(pattern));
    } else {
      g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
      for (const char *name; d != NULL && (name = g_dir_read_name(d)) != NULL;)
        g_ptr_array_add(found, g_build_filename(dir, name, candidates[i] + 2, NULL));
      g_ptr_array_sort(found, compare_names);
    }
    for (guint k = 0; k < found->len; k++) {
      const char *path = g_ptr_array_index(found, k);
      if (!g_file_test(path, G_FILE_TEST_IS_REGULAR))
        continue;
      g_autoptr(cJSON) report = st_json_load_file(path, NULL);
      const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(report, "device_kind"));
      return g_strcmp0(kind, "CPU") == 0 ? "CPU" : "GPU";
    }
  }
  return "GPU";
}

/* ---- entry ----------------------------------------------------------------------------- */

/* pngcairo draws antialiased text and lines; gd's png is the fallback that
 * every gnuplot build has. */
static const char *
png_terminal(const char *gnuplot)
{
  char *argv[] = {(char *)gnuplot, "-e", "set terminal pngcairo", NULL};
  int status = 0;
  gboolean ran = g_spawn_sync(NULL, argv, NULL,
                              G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL, NULL,
                              NULL, NULL, NULL, &status, NULL);
  return ran && g_spawn_check_exit_status(status, NULL) ? "pngcairo noenhanced"
                                                        : "png noenhanced";
}

gboolean
st_plot_dir(const char *dir, const char *plots_dir, const char *format, GPtrArray *written,
            GError **error)
{
  g_return_val_if_fail(dir != NULL && plots_dir != NULL && written != NULL, FALSE);
  if (format == NULL)
    format = "png";
  if (strcmp(format, "png") != 0 && strcmp(format, "svg") != 0 && strcmp(format, "dumb") != 0) {
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_INVALID,
                "unknown plot format '%s' (expected one of: png, svg, dumb)", format);
    return FALSE;
  }
  if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) {
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO, "%s: no such directory", dir);
    return FALSE;
  }
  gboolean single = plot_has_file(dir, "memory.csv");
  gboolean plan = !single && plot_has_file(dir, "plan.csv");
  gboolean validation = !single && plot_has_file(dir, "validate.csv");
  g_autoptr(GPtrArray) runs = NULL;
  if (!single && !plan && !validation) {
    runs = list_runs(dir, error);
    if (runs == NULL)
      return FALSE;
    if (runs->len == 0) {
      g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_INVALID,
                  "%s: no memory.csv here or in a subdirectory (expected the --out "
                  "directory of stagger sim, run or validate)",
                  dir);
      return FALSE;
    }
  }

  g_autofree char *gnuplot = g_find_program_in_path("gnuplot");
  if (gnuplot == NULL) {
    g_set_error_literal(error, ST_OUTPUT_ERROR, ST_ERROR_UNSUPPORTED,
                        "gnuplot not found: install gnuplot (Debian: gnuplot-nox)");
    return FALSE;
  }
  Plotter pl = {
    .gnuplot = gnuplot,
    .plots_dir = plots_dir,
    .ext = strcmp(format, "dumb") == 0 ? NULL : format,
    .term = strcmp(format, "png") == 0   ? png_terminal(gnuplot)
            : strcmp(format, "svg") == 0 ? "svg noenhanced background '#ffffff'"
                                         : "dumb noenhanced",
    .written = written,
    .dev = device_noun(dir),
  };
  if (plan)
    return plot_plan(&pl, dir, error);
  if (validation)
    return plot_validation(&pl, dir, error);
  if (single)
    return plot_run(&pl, dir, error);
  return plot_runs(&pl, dir, runs, error);
}
