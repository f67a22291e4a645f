/* chakra_trace.c: see chakra_trace.h. */
#include "chakra_trace.h"

#include "interop/chakra.h"

EtWriter *
st_test_et_open(const char *prefix, int rank)
{
  g_autofree char *path = st_chakra_rank_path(prefix, rank);
  g_autoptr(GError) error = NULL;
  EtWriter *w = et_writer_open(path, &error);
  g_assert_no_error(error);
  EtMeta meta;
  chakra_proto_msg__global_metadata__init(&meta);
  meta.version = (char *)"0.0.4";
  g_assert_true(et_writer_add(w, &meta.base, &error));
  return w;
}

void
st_test_et_close(EtWriter *w)
{
  g_autoptr(GError) error = NULL;
  g_assert_true(et_writer_close(w, &error));
  g_assert_no_error(error);
}

void
st_test_et_node(EtWriter *w, uint64_t id, const char *name, int type, uint64_t duration_us,
                const uint64_t *deps, size_t n_deps, EtAttrs *a)
{
  EtNode n;
  chakra_proto_msg__node__init(&n);
  n.id = id;
  n.name = (char *)name;
  n.type = type;
  n.duration_micros = duration_us;
  n.data_deps = (uint64_t *)deps;
  n.n_data_deps = n_deps;
  if (a != NULL)
    et_attrs_attach(a, &n);
  g_autoptr(GError) error = NULL;
  g_assert_true(et_writer_add(w, &n.base, &error));
  g_assert_no_error(error);
}
