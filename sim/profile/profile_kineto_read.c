/* profile_kineto_read.c: a Chrome trace's complete events into Kineto.ev.
 *
 * A torch.profiler trace of 10^6 kernels is 4·10^6 events, half a
 * gigabyte of JSON: as one cJSON tree it is tens of millions of small
 * allocations held at once, and parsing it was most of the import. Here
 * the text is walked at its top level only; each element of
 * "traceEvents" (or of the root array) is parsed by cJSON on its own,
 * read and freed before the next, so the heap holds one event at a time
 * (the names read are copied into a string chunk, the args kept only for
 * the CPU operators, the only events whose args are read later). A flat
 * event is not even parsed by cJSON: profile_kineto_scan.c reads it from
 * its text to the same values. The other members of the root are parsed
 * whole into a root object without "traceEvents".
 *
 * Anything unusual (malformed text, a repeated "traceEvents", a root
 * that is neither an object nor an array, an event that is refused) makes
 * the walk give up: the file is then read as one tree, as before, which
 * gives the same result or the same error message as it always did.
 */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "profile/profile_kineto_private.h"

/* ---- the walk ------------------------------------------------------------------- */

/* Takes `item`, the element `index` of the trace's events; FALSE stops the
 * walk. */
typedef gboolean (*KinetoEach)(cJSON *item, int index, gpointer data);

/* Reads the element `index` at the cursor without cJSON when it can:
 * 1 read (the cursor past it), 0 stop the walk, -1 not understood (the
 * cursor where it was: `each` gets it from cJSON). */
typedef int (*KinetoFast)(KinetoCursor *c, int index, gpointer data);

/* Containers nested in `v`, itself included, up to `cap`. */
static int
depth(const cJSON *v, int cap)
{
  if (!cJSON_IsArray(v) && !cJSON_IsObject(v))
    return 0;
  int deepest = 0;
  for (const cJSON *c = v->child; c != NULL && deepest < cap; c = c->next)
    deepest = MAX(deepest, depth(c, cap - 1));
  return deepest + 1;
}

/* One JSON value at the cursor, moving past it; NULL on malformed text,
 * and where the tree would have refused it: cJSON skips a byte-order mark
 * at the start of a parse only, and nests at most CJSON_NESTING_LIMIT
 * containers from the root, of which the trace's object and array are
 * two. */
static cJSON *
parse_value(KinetoCursor *c)
{
  if (c->end - c->p >= 3 && memcmp(c->p, "\xEF\xBB\xBF", 3) == 0)
    return NULL;
  const char *stop = NULL;
  cJSON *v = cJSON_ParseWithLengthOpts(c->p, (size_t)(c->end - c->p), &stop, FALSE);
  if (v != NULL && depth(v, CJSON_NESTING_LIMIT) > CJSON_NESTING_LIMIT - 2)
    g_clear_pointer(&v, cJSON_Delete);
  if (v != NULL)
    c->p = stop;
  return v;
}

/* The elements of the array at the cursor, each to `each` (which takes
 * it); FALSE on malformed text or when `each` says stop. */
static gboolean
stream_array(KinetoCursor *c, KinetoFast fast, KinetoEach each, gpointer data)
{
  if (!kineto_expect(c, '['))
    return FALSE;
  kineto_skip_space(c);
  if (c->p < c->end && *c->p == ']') {
    c->p++;
    return TRUE;
  }
  for (int index = 0;; index++) {
    kineto_skip_space(c);
    int read = fast(c, index, data);
    if (read == 0)
      return FALSE;
    if (read < 0) {
      cJSON *item = parse_value(c);
      if (item == NULL || !each(item, index, data))
        return FALSE;
    }
    kineto_skip_space(c);
    if (c->p >= c->end)
      return FALSE;
    if (*c->p == ']') {
      c->p++;
      return TRUE;
    }
    if (*c->p != ',')
      return FALSE;
    c->p++;
  }
}

/* Walks the text (`length` bytes) handing each event to `each` as it is
 * parsed, and sets *root_out to the root without "traceEvents" (transfer
 * full). FALSE when the text is malformed or unusual, or `each` stopped. */
static gboolean
stream_events(const char *text, gsize length, cJSON **root_out, KinetoFast fast, KinetoEach each,
              gpointer data)
{
  KinetoCursor c = {text, text + length};
  *root_out = NULL;
  kineto_skip_space(&c);
  if (c.p < c.end && *c.p == '[') {
    if (!stream_array(&c, fast, each, data))
      return FALSE;
    *root_out = cJSON_CreateArray();
    return TRUE;
  }
  g_autoptr(cJSON) root = cJSON_CreateObject();
  gboolean seen_events = FALSE;
  if (!kineto_expect(&c, '{'))
    return FALSE;
  kineto_skip_space(&c);
  if (c.p < c.end && *c.p == '}')
    return FALSE; /* no "traceEvents": the tree's path says so */
  for (;;) {
    kineto_skip_space(&c);
    g_autoptr(cJSON) key = c.p < c.end && *c.p == '"' ? parse_value(&c) : NULL;
    if (!cJSON_IsString(key) || !kineto_expect(&c, ':'))
      return FALSE;
    kineto_skip_space(&c);
    if (strcmp(key->valuestring, "traceEvents") == 0) {
      if (seen_events || c.p >= c.end || *c.p != '[' || !stream_array(&c, fast, each, data))
        return FALSE;
      seen_events = TRUE;
    } else {
      cJSON *value = parse_value(&c);
      if (value == NULL)
        return FALSE;
      cJSON_AddItemToObject(root, key->valuestring, value);
    }
    kineto_skip_space(&c);
    if (c.p < c.end && *c.p == ',') {
      c.p++;
      continue;
    }
    if (!kineto_expect(&c, '}') || !seen_events)
      return FALSE;
    *root_out = g_steal_pointer(&root);
    return TRUE;
  }
}

/* ---- the events ------------------------------------------------------------------- */

/* A slot of Kineto.not_layer or name_copied for `name` (n bytes). */
G_STATIC_ASSERT(G_N_ELEMENTS(((Kineto *)NULL)->not_layer) == 16);
G_STATIC_ASSERT(G_N_ELEMENTS(((Kineto *)NULL)->name_copied) == 16);
static gsize
name_slot(const char *name, size_t n)
{
  return (n * 31 + (unsigned char)name[0] * 7 + (n > 0 ? (unsigned char)name[n - 1] : 0)) % 16;
}

static int
layer_index(Kineto *k, const char *name, StPass *pass)
{
  size_t n = strlen(name);
  *pass = ST_PASS_FWD;
  char **miss = &k->not_layer[name_slot(name, n)];
  if (*miss != NULL && strcmp(*miss, name) == 0)
    return -1;
  for (int pass_i = 0; pass_i < 3; pass_i++) {
    static const char *const suffix[] = {"", ".forward", ".backward"};
    size_t s = strlen(suffix[pass_i]);
    if (n <= s || strcmp(name + n - s, suffix[pass_i]) != 0)
      continue;
    g_autofree char *stem = s > 0 ? g_strndup(name, n - s) : NULL;
    int i = GPOINTER_TO_INT(g_hash_table_lookup(k->layer_of, s > 0 ? stem : name)) - 1;
    if (i >= 0) {
      *pass = pass_i == 2 ? ST_PASS_BWD : ST_PASS_FWD;
      return i;
    }
  }
  g_free(*miss);
  *miss = g_strdup(name);
  return -1;
}

static gboolean
is_device_cat(const char *cat)
{
  return strcmp(cat, "kernel") == 0 || strcmp(cat, "gpu_memcpy") == 0 ||
         strcmp(cat, "gpu_memset") == 0;
}

static Kind
classify(Kineto *k, const char *name, const char *cat, Ev *e)
{
  if (is_device_cat(cat))
    return g_str_has_prefix(name, "nccl") ? EV_NCCL : EV_DEVICE;
  StPass pass;
  if ((e->layer = layer_index(k, name, &pass)) >= 0) {
    e->pass = (uint8_t)pass;
    return EV_LAYER;
  }
  if (g_str_has_prefix(name, "ProfilerStep#"))
    return EV_STEP;
  if (g_str_has_prefix(name, "Optimizer.step#"))
    return EV_OPTIM;
  if (g_str_has_prefix(name, "Optimizer.") || strcmp(cat, "user_annotation") == 0 ||
      strcmp(cat, "gpu_user_annotation") == 0 || strcmp(cat, "python_function") == 0)
    return EV_MARK;
  e->eval = (uint8_t)g_str_has_prefix(name, EVAL_PREFIX);
  e->comm = (uint8_t)(g_str_has_prefix(name, "nccl:") || strcmp(name, "record_param_comms") == 0);
  return EV_OP;
}

/* A pid or tid as text: a string as it is, a number as "%.0f" prints it.
 * Whole numbers (every pid and tid) get their digits without printf, which
 * was a tenth of the reading, two calls an event. `buf` holds n >= 24. */
static const char *
text_of(const cJSON *v, char *buf, size_t n)
{
  if (cJSON_IsString(v))
    return v->valuestring;
  if (!cJSON_IsNumber(v))
    return "";
  double d = v->valuedouble;
  if (!(fabs(d) < 1e15) || d != floor(d) || (d == 0 && signbit(d))) {
    g_snprintf(buf, n, "%.0f", d);
    return buf;
  }
  uint64_t u = d < 0 ? (uint64_t)-(int64_t)d : (uint64_t)d;
  char digits[24];
  int len = 0;
  do {
    digits[len++] = (char)('0' + u % 10);
    u /= 10;
  } while (u != 0);
  size_t i = 0;
  if (d < 0)
    buf[i++] = '-';
  while (len > 0)
    buf[i++] = digits[--len];
  buf[i] = '\0';
  return buf;
}

/* The times an event may have, us: 4e15 us is 127 years, 1e15 us 31.7. */
#define KINETO_MAX_TS_US 4e15
#define KINETO_MAX_DUR_US 1e15

/* The members of an event that reading it looks at (NULL: absent), from
 * its cJSON object or from the fast scan below; `seq` and `corr` are its
 * args' "Sequence number" and "correlation". */
typedef struct {
  const cJSON *ph, *name, *ts, *dur, *cat, *pid, *tid, *args, *seq, *corr;
} EvItems;

static void
items_of(const cJSON *item, EvItems *v)
{
  v->ph = cJSON_GetObjectItemCaseSensitive(item, "ph");
  v->name = cJSON_GetObjectItemCaseSensitive(item, "name");
  v->ts = cJSON_GetObjectItemCaseSensitive(item, "ts");
  v->dur = cJSON_GetObjectItemCaseSensitive(item, "dur");
  v->cat = cJSON_GetObjectItemCaseSensitive(item, "cat");
  v->pid = cJSON_GetObjectItemCaseSensitive(item, "pid");
  v->tid = cJSON_GetObjectItemCaseSensitive(item, "tid");
  v->args = cJSON_GetObjectItemCaseSensitive(item, "args");
  v->seq = cJSON_GetObjectItemCaseSensitive(v->args, "Sequence number");
  v->corr = cJSON_GetObjectItemCaseSensitive(v->args, "correlation");
}

/* `name` copied into k->names, or its copy made before when it is the
 * one its slot remembers. */
static const char *
name_copy(Kineto *k, const char *name)
{
  const char **seen = &k->name_copied[name_slot(name, strlen(name))];
  if (*seen == NULL || strcmp(*seen, name) != 0)
    *seen = g_string_chunk_insert(k->names, name);
  return *seen;
}

/* The threads met, "pid/tid" -> index + 1. Events come in runs of one
 * thread, so the last one's pid and tid and its index are kept: the same
 * values again (a number of the same bits, a string of the same text, so
 * the same key text) need no key and no hash lookup. */
typedef struct {
  int type;          /* cJSON_Number, cJSON_String, or 0: any other (the key's text "") */
  double number;
  GString *text;
} ThreadPart;

typedef struct {
  GHashTable *table; /* owns its keys */
  GString *key;      /* scratch */
  ThreadPart last[2]; /* the last pid and tid looked up */
  int last_index;    /* its index, -1 before the first */
} Threads;

/* Whether `v` is what `part` holds. */
static gboolean
part_is(const ThreadPart *part, const cJSON *v)
{
  if (cJSON_IsNumber(v))
    return part->type == cJSON_Number && memcmp(&part->number, &v->valuedouble,
                                                sizeof(double)) == 0;
  if (cJSON_IsString(v))
    return part->type == cJSON_String && strcmp(part->text->str, v->valuestring) == 0;
  return part->type == 0;
}

static void
part_set(ThreadPart *part, const cJSON *v)
{
  part->type = cJSON_IsNumber(v) ? cJSON_Number : cJSON_IsString(v) ? cJSON_String : 0;
  part->number = part->type == cJSON_Number ? v->valuedouble : 0;
  g_string_assign(part->text, part->type == cJSON_String ? v->valuestring : "");
}

static void
threads_init(Threads *th)
{
  th->table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  th->key = g_string_new(NULL);
  for (int i = 0; i < 2; i++)
    th->last[i] = (ThreadPart){0, 0, g_string_new(NULL)};
  th->last_index = -1;
}

static void
threads_clear(Threads *th)
{
  g_hash_table_unref(th->table);
  g_string_free(th->key, TRUE);
  for (int i = 0; i < 2; i++)
    g_string_free(th->last[i].text, TRUE);
}

/* The index of the thread of `pid` and `tid` (text_of's text joined by
 * '/'), numbered in the order first met. */
static int
thread_of(Threads *th, const cJSON *pid, const cJSON *tid)
{
  if (th->last_index >= 0 && part_is(&th->last[0], pid) && part_is(&th->last[1], tid))
    return th->last_index;
  char pid_buf[32], tid_buf[32];
  GString *key = th->key;
  g_string_assign(key, text_of(pid, pid_buf, sizeof pid_buf));
  g_string_append_c(key, '/');
  g_string_append(key, text_of(tid, tid_buf, sizeof tid_buf));
  gpointer t = g_hash_table_lookup(th->table, key->str);
  if (t == NULL) {
    t = GINT_TO_POINTER(g_hash_table_size(th->table) + 1);
    g_hash_table_insert(th->table, g_strdup(key->str), t);
  }
  part_set(&th->last[0], pid);
  part_set(&th->last[1], tid);
  th->last_index = GPOINTER_TO_INT(t) - 1;
  return th->last_index;
}

/* Event `index` into k->ev when it is a complete event (*kept set to
 * its index there, -1 otherwise). Streamed (k->names set), its name is
 * copied; else borrowed from the tree, and its args with it. `thread` is
 * scratch. */
static gboolean
read_items(Kineto *k, Threads *threads, const EvItems *v, int index, int *kept, GError **error)
{
  const cJSON *ph = v->ph, *name = v->name, *ts = v->ts, *dur = v->dur, *cat = v->cat;
  *kept = -1;
  if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X") != 0)
    return TRUE;
  if (!cJSON_IsString(name) || !cJSON_IsNumber(ts) || !cJSON_IsNumber(dur) ||
      dur->valuedouble < 0) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_PARSE,
                "%s: event %d: a complete event (\"ph\": \"X\") needs \"name\", \"ts\" and "
                "\"dur\" >= 0", k->path, index);
    return FALSE;
  }
  /* In microseconds: absolute clocks (since 1970, ~1.8e15 us) fit; two
   * times and their difference stay inside int64 ns. */
  if (!(fabs(ts->valuedouble) <= KINETO_MAX_TS_US) || !(dur->valuedouble <= KINETO_MAX_DUR_US)) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_INVALID,
                "%s: event %d: \"ts\" %g us, \"dur\" %g us: outside +-%g us and 0 to %g us",
                k->path, index, ts->valuedouble, dur->valuedouble, KINETO_MAX_TS_US,
                KINETO_MAX_DUR_US);
    return FALSE;
  }
  Ev e = {.name = name->valuestring, .thread = thread_of(threads, v->pid, v->tid),
          .in_layer = -1, .in_eval = -1, .in_optim = -1, .in_comm = -1, .step = -1};
  e.args = v->args;
  e.ts = llround(ts->valuedouble * 1e3);
  e.end = e.ts + llround(dur->valuedouble * 1e3);
  e.seq = json_whole(v->seq, -1);
  e.corr = json_whole(v->corr, -1);
  e.kind = (uint8_t)classify(k, e.name, cJSON_IsString(cat) ? cat->valuestring : "", &e);
  if (k->names != NULL) {
    e.name = name_copy(k, e.name);
    e.args = NULL; /* the caller keeps a CPU operator's */
  }
  k->gpu = k->gpu || e.kind == EV_DEVICE || e.kind == EV_NCCL;
  *kept = (int)k->ev->len;
  g_array_append_val(k->ev, e);
  return TRUE;
}

/* Event `index`, `item`, into k->ev when it is a complete event; streamed,
 * a CPU operator's args are taken from `item`. */
static gboolean
read_event(Kineto *k, Threads *threads, cJSON *item, int index, GError **error)
{
  EvItems v;
  items_of(item, &v);
  int kept;
  if (!read_items(k, threads, &v, index, &kept, error))
    return FALSE;
  if (kept >= 0 && k->names != NULL && ev_at(k, kept)->kind == EV_OP && v.args != NULL) {
    ev_at(k, kept)->args = v.args;
    g_ptr_array_add(k->args, cJSON_DetachItemViaPointer(item, (cJSON *)v.args));
  }
  return TRUE;
}

typedef struct {
  Kineto *k;
  Threads *threads;
  GString *text[KINETO_FLAT_MEMBERS]; /* scratch for kineto_scan_flat */
} Stream;

/* KinetoFast: a flat event (profile_kineto_scan.c) read as cJSON would
 * have read it, else -1. */
static int
read_fast(KinetoCursor *c, int index, gpointer data)
{
  Stream *s = data;
  KinetoCursor at = *c;
  KinetoFlat f;
  if (!kineto_scan_flat(&at, s->text, &f))
    return -1;
  EvItems v = {NULL};
  const cJSON **slots[] = {&v.ph, &v.name, &v.ts, &v.dur, &v.cat, &v.pid, &v.tid};
  for (int i = 0; i < KINETO_FLAT_MEMBERS; i++)
    *slots[i] = f.value[i].type != 0 ? &f.value[i] : NULL;
  cJSON args = {.type = cJSON_Object};
  if (f.args != NULL) {
    v.args = &args; /* not read but for being there; a CPU operator's is parsed below */
    v.seq = f.seq.type != 0 ? &f.seq : NULL;
    v.corr = f.corr.type != 0 ? &f.corr : NULL;
  }
  int kept;
  if (!read_items(s->k, s->threads, &v, index, &kept, NULL))
    return 0;
  /* Args with no key read later read as none: not parsed, not kept. */
  if (kept >= 0 && f.args != NULL && f.args_read && ev_at(s->k, kept)->kind == EV_OP) {
    cJSON *parsed = cJSON_ParseWithLengthOpts(f.args, (size_t)(f.args_end - f.args), NULL, FALSE);
    g_assert(parsed != NULL); /* the scan read it */
    ev_at(s->k, kept)->args = parsed;
    g_ptr_array_add(s->k->args, parsed);
  }
  *c = at;
  return 1;
}

/* KinetoEach: one streamed event; a faulty one stops the walk, so that
 * the tree's path says what is wrong as it always did. */
static gboolean
read_streamed(cJSON *item, int index, gpointer data)
{
  Stream *s = data;
  gboolean ok = read_event(s->k, s->threads, item, index, NULL);
  cJSON_Delete(item);
  return ok;
}

static gboolean
read_events(Kineto *k, cJSON *events, GError **error)
{
  Threads threads;
  threads_init(&threads);
  cJSON *item;
  int index = -1;
  gboolean ok = TRUE;
  cJSON_ArrayForEach(item, events)
  {
    if (!(ok = read_event(k, &threads, item, ++index, error)))
      break;
  }
  threads_clear(&threads);
  return ok;
}

cJSON *
kineto_read_trace(Kineto *k, GError **error)
{
  /* Mapped, not read: half a gigabyte read is a copy into as much fresh
   * memory, each page faulted in. A file that cannot be mapped is read,
   * which also words the error when it cannot be opened. */
  g_autoptr(GMappedFile) mapped = g_mapped_file_new(k->path, FALSE, NULL);
  g_autofree char *read_text = NULL;
  const char *text = "";
  gsize length = 0;
  if (mapped != NULL && g_mapped_file_get_length(mapped) > 0) {
    text = g_mapped_file_get_contents(mapped);
    length = g_mapped_file_get_length(mapped);
  } else if (mapped == NULL) {
    GError *local = NULL;
    if (!g_file_get_contents(k->path, &read_text, &length, &local)) {
      g_set_error(error, ST_BASE_ERROR, ST_ERROR_IO, "%s", local->message);
      g_error_free(local);
      return NULL;
    }
    text = read_text;
  }
  k->names = g_string_chunk_new(1 << 14);
  k->args = g_ptr_array_new_with_free_func((GDestroyNotify)cJSON_Delete);
  Threads threads;
  threads_init(&threads);
  Stream s = {k, &threads, {NULL}};
  for (gsize i = 0; i < G_N_ELEMENTS(s.text); i++)
    s.text[i] = g_string_new(NULL);
  cJSON *root = NULL;
  gboolean streamed = stream_events(text, length, &root, read_fast, read_streamed, &s);
  for (gsize i = 0; i < G_N_ELEMENTS(s.text); i++)
    g_string_free(s.text[i], TRUE);
  threads_clear(&threads);
  if (!streamed) {
    const char *path = k->path;
    g_array_set_size(k->ev, 0);
    k->gpu = FALSE;
    g_clear_pointer(&k->args, g_ptr_array_unref);
    g_string_chunk_free(k->names);
    k->names = NULL;
    memset(k->name_copied, 0, sizeof k->name_copied);
    root = st_json_parse(text, length, path, error);
    if (root == NULL)
      return NULL;
    cJSON *events = cJSON_IsArray(root) ? root : cJSON_GetObjectItemCaseSensitive(root,
                                                                                 "traceEvents");
    if (!cJSON_IsArray(events)) {
      g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_PARSE, "%s: expected a Chrome trace: an "
                  "array of events or an object with \"traceEvents\"", path);
      cJSON_Delete(root);
      return NULL;
    }
    if (!read_events(k, events, error)) {
      cJSON_Delete(root);
      return NULL;
    }
  }
  if (k->ev->len == 0) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_PARSE,
                "%s: no complete events (\"ph\": \"X\"): not a profiler trace", k->path);
    cJSON_Delete(root);
    return NULL;
  }
  return root;
}

