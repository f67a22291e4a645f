/* test_plan_write.c: plan.json as st_plan_write streams it, a point at a
 * time (sim/plan/plan_json.c), is byte for byte the text of the whole tree
 * st_plan_to_json gives, on plans with simulated, pruned, infeasible and
 * over-the-cap points, settings and unlisted reasons; and strings that
 * need escapes.
 */
#include <string.h>

#include "base/json.h"
#include "plan/plan.h"
#include "plan/plan_private.h"
#include "testutil.h"

static void
check_streamed(const StPlan *plan)
{
  g_autofree char *dir = st_test_tmpdir();
  g_autoptr(GError) error = NULL;
  g_assert_true(st_plan_write(plan, dir, &error));
  g_assert_no_error(error);
  g_autofree char *path = g_build_filename(dir, "plan.json", NULL);
  g_autofree char *streamed = st_test_read(path, NULL);
  g_autoptr(cJSON) root = st_plan_to_json(plan);
  g_autofree char *text = cJSON_Print(root);
  g_autofree char *whole = g_strconcat(text, "\n", NULL);
  g_assert_cmpstr(streamed, ==, whole);
}

static void
test_streamed(void)
{
  /* ResNet-18, every strategy on 1-2 nodes: simulated, pruned before and
   * after building, infeasible points, options in settings. */
  g_autoptr(StModel) m = st_test_model("models/resnet18.json");
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 0, 0);
  g_autoptr(StPlanSpec) spec =
    st_test_plan_spec("nodes", "1,2", "micro-batch", "8,64", "global-batch", "512", NULL);
  g_autoptr(StPlan) plan = st_test_plan_run(spec, m, c);
  g_assert_cmpint(plan->counts.simulated, >, 0);
  g_assert_cmpint(plan->counts.pruned, >, 0);
  g_assert_cmpint(plan->counts.infeasible, >, 0);
  check_streamed(plan);

  /* GPT-2 under a cap that its larger micro-batches exceed. */
  g_autoptr(StModel) gpt = st_test_model("models/gpt2-124m.json");
  g_autoptr(StPlanSpec) capped = st_test_plan_spec("strategy", "dp,zero", "nodes", "1",
                                                   "micro-batch", "1,64", "mem-cap", "10GiB",
                                                   NULL);
  g_autoptr(StPlan) oom = st_test_plan_run(capped, gpt, c);
  g_assert_cmpint(oom->counts.oom, >, 0);
  check_streamed(oom);
}

static void
test_escapes(void)
{
  /* Strings whose characters need escapes, at their start, middle and end,
   * between runs of plain ones (the writer appends a plain run at once):
   * the same text as cJSON_Print's. */
  static const char *const texts[] = {
    "", "plain", "\"quoted\"", "back\\slash", "line\nbreak\r\n", "\ttab\b\f",
    "\001control\037", "caf\xc3\xa9 \xe2\x80\x94 utf-8", "a\"b\\c\nd\001e",
  };
  g_autoptr(cJSON) obj = cJSON_CreateObject();
  for (guint i = 0; i < G_N_ELEMENTS(texts); i++) {
    g_autofree char *key = g_strdup_printf("k%u %s", i, texts[i]);
    cJSON_AddStringToObject(obj, key, texts[i]);
  }
  g_autoptr(GString) ours = g_string_new(NULL);
  st_plan_json_text(ours, obj, 0);
  g_autofree char *theirs = cJSON_Print(obj);
  g_assert_cmpstr(ours->str, ==, theirs);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/plan/write/streamed", test_streamed);
  g_test_add_func("/plan/write/escapes", test_escapes);
  return g_test_run();
}
