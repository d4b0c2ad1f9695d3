/*
 * fsck: the check, and with repair the repair, of an unmounted store
 * (offloadctl fsck).  FUSE-free; it reads the metadata and the backend
 * (the bucket files, or the values of a KV store) as the daemon would.
 *
 * It takes the same exclusive lock on ROOT as the daemon (so it refuses a
 * mounted store), never touches a database that is not ours, and without
 * repair writes nothing, not even a schema upgrade.  It checks invariant 1
 * (committed runs disjoint, in range and inside their bucket files; the
 * clean snapshot equal to the bitmaps rebuilt from the mappings, i.e. no
 * leaked pages) and invariant 2 (every committed object's checksum), plus
 * the schema version, the geometry (the daemon's check), the bucket file
 * sizes and that every object is reachable.  Repair quarantines into
 * <tenant>/lost+found, frees leaked pages, deletes objects no tenant holds
 * and restores missing or truncated bucket files.  On a store of a KV
 * backend (ubsio) there are no pages or bucket files: it checks instead
 * that every committed value is in the KV store with its recorded length,
 * and its checksum; the library is loaded as the daemon loads it.
 */
#ifndef OFFLOADFS_FSCK_H
#define OFFLOADFS_FSCK_H

#include <stdio.h>

struct ofs_config;

/*
 * Check the store cfg names (root, meta_path, and the ubsio options; the
 * backend is the one the store records).  out gets the report, err why
 * the check could not run (each line after the program's name, as
 * error(3) prints) and the progress.  Returns the exit status: 0 only when
 * clean (or repaired), 1 when problems were found, 2 when the check could
 * not run.
 */
int ofs_fsck(const struct ofs_config *cfg, int repair, FILE *out, FILE *err);

#endif
