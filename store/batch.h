/*
 * batch.h: batch requests of a tenant (docs/batch.md), without FUSE.
 *
 * One struct ofs_batch per open description of a tenant's control file:
 * a client writes a request (reserve, commit, lookup, delete or abort of
 * up to OFS_BATCH_KEYS_MAX keys, wire format in offloadfs_batch_proto.h)
 * and reads its reply.  Reserved runs are working states of the
 * description, never in any record: closing it (the client closed or
 * died) frees them, and after a daemon crash the rebuild of the bitmaps
 * from the records does.  A commit reads the pages back and checks them
 * against the client's page checksums, then makes every entry visible in
 * one metadata transaction.
 *
 * Lock order: the description's lock, then store.lock.
 */
#ifndef OFFLOADFS_BATCH_H
#define OFFLOADFS_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "meta.h"

struct ofs_store;
struct ofs_batch;

/* Who sends a request, and what of it the kernel's caches must be told. */
struct ofs_batch_caller {
	uint32_t uid, gid, umask; /* owner and mode of the files a commit makes */
	/* A name a commit made: the kernel may remember it as missing. */
	void (*added)(void *arg, uint64_t dir, const char *name, size_t len);
	/* A name a delete removed. */
	void (*removed)(void *arg, uint64_t dir, const char *name, size_t len);
	/* A file a lookup used, whose st_atime moved. */
	void (*used)(void *arg, uint64_t ino);
	void *arg;
};

/* Tenant ino's record (a directory below the root); -ENOENT when it is not one. */
int ofs_batch_tenant(struct ofs_store *s, uint64_t ino, struct meta_inode *m);

/* A description of tenant ino's control file: 0, or -ENOENT (not a tenant), -ENOMEM. */
int ofs_batch_open(struct ofs_store *s, uint64_t tenant, struct ofs_batch **out);
/* Its reservations freed, and it. */
void ofs_batch_close(struct ofs_store *s, struct ofs_batch *b);
/* Its reservations freed (the store unmounts); b stays open. */
void ofs_batch_drop_reserved(struct ofs_store *s, struct ofs_batch *b);

/*
 * Run the request in buf and keep its reply for ofs_batch_reply: 0, or a
 * negative errno for a request that got no reply (malformed, no memory).
 * Per-key results and the batch's status are in the reply.
 */
int ofs_batch_request(struct ofs_store *s, struct ofs_batch *b, const char *buf, size_t size,
		      const struct ofs_batch_caller *c);
/*
 * send(arg, p, len) with the bytes [off, off + size) of the last reply
 * (fewer at its end; none past it), the description locked meanwhile:
 * what send returns.
 */
int ofs_batch_reply(struct ofs_batch *b, uint64_t off, size_t size,
		    int (*send)(void *arg, const char *p, size_t len), void *arg);

#endif
