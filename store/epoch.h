/*
 * epoch.h: the epoch table batch clients validate their descriptors with
 * (ROOT/batch-epochs; layout in lib/offloadfs_batch_proto.h, use in
 * docs/batch.md, "Descriptors a client keeps").  Only the daemon keeps it:
 * s->epochs is NULL in tools and when the table could not be made.
 */
#ifndef OFS_STORE_EPOCH_H
#define OFS_STORE_EPOCH_H

#include <stdint.h>

struct ofs_store;

/* Map (or make) the table, gen + 1, live.  Failing leaves s->epochs NULL: not fatal. */
int ofs_epochs_open(struct ofs_store *s, char *err, size_t errlen);
/* Not live, gen + 1, unmapped. */
void ofs_epochs_close(struct ofs_store *s);
/* Unmapped, left as it is (live): what a crash leaves; the next mount retires it. */
void ofs_epochs_forget(struct ofs_store *s);
/*
 * A table left in ROOT (root_fd): not live, gen + 1, through its file.
 * For whoever changes a store without keeping the table (fsck --repair,
 * a store opened without one).  A live table that cannot be changed
 * makes it wait until whatever clients kept has expired.
 */
void ofs_epochs_retire(int root_fd, const char *root);
/* ino's names or content changed: descriptors of it are stale.  Under s->lock. */
void ofs_epochs_bump(struct ofs_store *s, uint64_t ino);
/* Every descriptor is stale (a directory moved).  Under s->lock. */
void ofs_epochs_bump_all(struct ofs_store *s);
/* ino's (gen, epoch) now, for a descriptor; zeros without a table.  Under s->lock. */
void ofs_epochs_get(const struct ofs_store *s, uint64_t ino, uint64_t *gen, uint64_t *epoch);

#endif
