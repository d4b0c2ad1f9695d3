/*
 * ns: namespace transactions.  A change of entries and its directories'
 * times and link counts is one metadata transaction; a delete or rename
 * that finds the metadata disk full is rolled back and run once more
 * after meta_make_room, so that freeing space works on a full disk.  The
 * in-memory copies of the objects involved (ofs_object_find) follow the
 * records.  Negative errno.
 */
#ifndef OFFLOADFS_NS_H
#define OFFLOADFS_NS_H

#include <sys/types.h>

#include "object.h"

/* -EINVAL for an empty name, -ENAMETOOLONG past META_NAME_MAX. */
int ofs_ns_check_name(const char *name);

/*
 * Make name in parent, a directory or a file of mode (with type bits)
 * owned by uid and gid (a setgid parent's group wins, as on ext4), in
 * state META_COMMITTED or META_NEW (a file to be written, dropped by
 * recovery if never committed).  *m is its record.  Under s->lock.
 */
int ofs_ns_make(struct ofs_store *s, uint64_t parent, const char *name, mode_t mode, uid_t uid,
		gid_t gid, int state, struct meta_inode *m);
/*
 * Take back the entry a create made (ofs_ns_make with META_NEW) when the
 * create failed, unless content was committed to it since.  Under s->lock.
 */
void ofs_ns_unmake(struct ofs_store *s, uint64_t ino);
/* unlink(2) and rmdir(2).  Take s->lock. */
int ofs_ns_unlink(struct ofs_store *s, uint64_t parent, const char *name);
int ofs_ns_rmdir(struct ofs_store *s, uint64_t parent, const char *name);
/*
 * unlink(2) of n names (name i: names[i], lens[i] bytes, in parents[i]) in
 * one transaction with their directories' times: errs[i] is name i's
 * result, and a name whose errs[i] is not 0 on entry is left out.  A
 * missing name (ENOENT, also a name's second time in the batch) or a
 * directory (EISDIR) changes nothing; should the transaction fail, each
 * name is unlinked on its own.  Returns 0, or -ENOMEM with nothing done.
 * Takes s->lock.
 */
int ofs_ns_unlink_many(struct ofs_store *s, const uint64_t *parents, const char *const *names,
		       const size_t *lens, size_t n, int *errs);
/* rename(2) with flags 0 or RENAME_NOREPLACE, within a tenant.  Takes s->lock. */
int ofs_ns_rename(struct ofs_store *s, uint64_t parent, const char *name, uint64_t newparent,
		  const char *newname, unsigned flags);
/*
 * Drop m's name on its own (a file whose value the backend lost): deleted,
 * or detached while open; its storage freed.  Under s->lock.
 */
int ofs_ns_drop(struct ofs_store *s, const struct meta_inode *m);

#endif
