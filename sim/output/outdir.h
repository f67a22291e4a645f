/* outdir.h: how a command's output folder (--out DIR) comes into place.
 *
 * A command writes everything into a fresh temporary folder beside DIR (in
 * DIR's parent, so on the same filesystem) and st_outdir_commit moves it into
 * place once it is complete, with a manifest.json saying which command wrote
 * it, with which version, when, and whether it is complete or partial. So:
 *
 *  - a reader never sees a half-written folder, and a failed command (a full
 *    disk, an error half-way) leaves DIR exactly as it was;
 *  - a new run never mixes with an old one: DIR is replaced whole, never
 *    written into (a previous run's strategy folders cannot linger beside
 *    the new ones);
 *  - only stagger's own output is replaced without asking: DIR may be
 *    absent, an empty folder, or a folder whose manifest.json says stagger
 *    wrote it and lists every file in it (a file a user put there is never
 *    deleted without `force`). Anything else (a file, a folder of other things, an output of
 *    a stagger older than the manifest) is refused when the command starts,
 *    before any work, unless `force` says to replace it. The filesystem root,
 *    the home folder and any folder holding the current directory are
 *    refused even with `force`.
 *
 * The swap is one atomic exchange (renameat2 RENAME_EXCHANGE) where the
 * filesystem has it, else two renames; the old folder is then deleted
 * (symbolic links are removed, never followed). The temporary folder is
 * ".DIR.stagger-PID-XXXXXX"; one that a killed command left behind is
 * removed by the next command that writes DIR.
 *
 * manifest.json:
 *   {"format": "stagger-output", "version": 1, "command": "stagger sim ...",
 *    "stagger": "0.1.0", "date": "2026-11-21T10:00:00Z",
 *    "status": "complete" | "partial", "note": "..." | null,
 *    "files": ["dp/report.json", ...]}   (every file but itself)
 */
#pragma once

#include <glib.h>

#define ST_OUTDIR_MANIFEST "manifest.json"

/* Codes of ST_OUTPUT_ERROR beyond base/error.h's, for the CLI's exit code. */
typedef enum {
  ST_OUTDIR_ERROR_NOT_OURS = 100, /* DIR holds something stagger did not write */
} StOutDirError;

typedef struct StOutDir StOutDir;

/* Checks DIR and makes the temporary folder. `command` is the command line
 * as typed and `version` stagger's, for the manifest (both copied).
 * Transfer full; NULL with `error` set (ST_OUTDIR_ERROR_NOT_OURS when DIR is
 * not stagger's and `force` is FALSE). */
StOutDir *st_outdir_begin(const char *dir, const char *command, const char *version,
                          gboolean force, GError **error);

/* Where to write now: the temporary folder (borrowed). */
const char *st_outdir_path(const StOutDir *out);

/* Writes the manifest (status "partial" when `partial`; `note` says why, or
 * NULL) and moves the folder into place. After it, st_outdir_path is DIR.
 * On failure DIR is as it was and the temporary folder is removed. */
gboolean st_outdir_commit(StOutDir *out, gboolean partial, const char *note, GError **error);

/* Adds `files` (paths written into a finished output folder afterwards, as
 * `stagger plot` writes its figures) to the list of the manifest.json that
 * holds them, in their folder or the nearest above, so that the next command
 * writing there still knows the folder as stagger's. Nothing to do where no
 * manifest with a list is found. */
gboolean st_outdir_adopt(const char *dir, const GPtrArray *files, GError **error);

/* Removes the temporary folder unless committed. NULL-safe. */
void st_outdir_free(StOutDir *out);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StOutDir, st_outdir_free)
