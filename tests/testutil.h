/* testutil.h: small helpers shared by the test programs. */
#pragma once

#include <glib.h>

/* Absolute path of a file in the source tree ("models/resnet50.json").
 * Transfer full. */
char *st_test_src(const char *relative);

/* A fresh temporary directory, removed with its contents at exit. Transfer full. */
char *st_test_tmpdir(void);

/* Reads a whole file (g_assert on failure). Transfer full. */
char *st_test_read(const char *path, gsize *length);
