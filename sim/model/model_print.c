/* model_print.c: the per-layer table and totals of `stagger model show`. */
#include <string.h>

#include "base/units.h"
#include "model/layer_type.h"
#include "model/model.h"

/* 25557032 -> "25,557,032". Transfer full. */
static char *
group_digits(int64_t value)
{
  g_autofree char *digits = g_strdup_printf("%" G_GINT64_FORMAT, value);
  GString *s = g_string_new(NULL);
  const char *p = digits;
  if (*p == '-')
    g_string_append_c(s, *p++);
  size_t n = strlen(p);
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && (n - i) % 3 == 0)
      g_string_append_c(s, ',');
    g_string_append_c(s, p[i]);
  }
  return g_string_free(s, FALSE);
}

/* The cells of one row, as text. */
typedef struct {
  char *shapes, *params, *act;
} Row;

static void
row_clear(Row *row)
{
  g_free(row->shapes);
  g_free(row->params);
  g_free(row->act);
}

void
st_model_print(const StModel *model, FILE *out)
{
  g_return_if_fail(model != NULL && out != NULL);
  int n = model->n_layers;
  Row *rows = g_new0(Row, n);
  int w_index = snprintf(NULL, 0, "%d", MAX(n - 1, 0)), w_name = 4, w_type = 4, w_shapes = 14, w_params = 6, w_act = 8;
  for (int i = 0; i < n; i++) {
    const StLayer *layer = &model->layers[i];
    g_autofree char *in = st_shape_format(&layer->in_shape);
    g_autofree char *o = st_shape_format(&layer->out_shape);
    rows[i].shapes = g_strdup_printf("%s -> %s", in, o);
    rows[i].params = group_digits(layer->params);
    rows[i].act = st_format_bytes(layer->act_bytes);
    w_name = MAX(w_name, (int)strlen(layer->name));
    w_type = MAX(w_type, (int)strlen(layer->type->name));
    w_shapes = MAX(w_shapes, (int)strlen(rows[i].shapes));
    w_params = MAX(w_params, (int)strlen(rows[i].params));
    w_act = MAX(w_act, (int)strlen(rows[i].act));
  }

  g_autofree char *input = st_shape_format(&model->input);
  fprintf(out, "model %s%s%s%s\n", model->name, model->path ? " (" : "",
          model->path ? model->path : "", model->path ? ")" : "");
  fprintf(out, "dtype %s, input %s, %d layers; numbers per sample\n\n",
          st_dtype_name(model->dtype), input, n);
  fprintf(out, "%*s  %-*s  %-*s  %-*s  %*s  %9s  %9s  %*s\n", w_index, "#", w_name, "name",
          w_type, "type", w_shapes, "input -> output", w_params, "params", "fwd GFLOP",
          "bwd GFLOP", w_act, "act kept");
  for (int i = 0; i < n; i++) {
    const StLayer *layer = &model->layers[i];
    fprintf(out, "%*d  %-*s  %-*s  %-*s  %*s  %9.3f  %9.3f  %*s\n", w_index, i, w_name,
            layer->name, w_type, layer->type->name, w_shapes, rows[i].shapes, w_params,
            rows[i].params, layer->fwd_flops / 1e9, layer->bwd_flops / 1e9, w_act, rows[i].act);
    row_clear(&rows[i]);
  }
  g_free(rows);

  g_autofree char *params = group_digits(model->params);
  g_autofree char *params_si = st_format_count((double)model->params);
  g_autofree char *act = st_format_bytes(model->act_bytes);
  g_autofree char *act_exact = group_digits(model->act_bytes);
  fprintf(out, "\ntotals per sample\n");
  fprintf(out, "  parameters   %s (%s)\n", params, params_si);
  if (model->active_params != model->params) {
    g_autofree char *active = group_digits(model->active_params);
    g_autofree char *active_si = st_format_count((double)model->active_params);
    fprintf(out, "  active       %s (%s) per token (experts: top_k of them)\n", active,
            active_si);
  }
  fprintf(out, "  forward      %.3f GFLOP\n", model->fwd_flops / 1e9);
  fprintf(out, "  backward     %.3f GFLOP\n", model->bwd_flops / 1e9);
  fprintf(out, "  activations  %s (%s bytes kept for backward)\n", act, act_exact);
  fprintf(out, "\nact kept: bytes saved for backward; a tensor that two neighbouring layers\n"
               "keep (a ReLU's output, the next conv's input) is counted once, at the first.\n");
}
