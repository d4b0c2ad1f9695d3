/*
 * object: an object's life in the store: the record it was committed with,
 * its working state while writers have it open (written, truncated,
 * allocated, committed, closed), and reading a version of it.
 *
 * The caller keeps a struct ofs_object for each object in use (the daemon
 * in its inode table) and holds the object's stripe of s->rw as each
 * function says: shared for reads, exclusive for writes and commits.
 * Functions take s->lock inside that when they need it (store.h's lock
 * order).  Errors are negative errno values.
 */
#ifndef OFFLOADFS_OBJECT_H
#define OFFLOADFS_OBJECT_H

#include <assert.h>
#include <sys/types.h>
#include <time.h>

#include "htab.h"
#include "store.h"

struct ofs_extents;

struct ofs_object {
	struct htab_node node; /* in s->objects, keyed by inode number; s->lock */
	struct meta_inode m;  /* the committed record, with in-memory times; s->lock */
	/*
	 * Handles open on the object (and truncates by path in progress):
	 * while there are any, dropping its name detaches the record
	 * (unlinked 2) rather than deleting it (unlinked 1).  s->lock.
	 */
	uint32_t nopen;
	signed char unlinked;
	/* The working state while writers are open: set under the stripe (write) and s->lock. */
	struct kvb_obj *obj;
	/*
	 * A file larger than one extent (extent.h): its extents, loaded when
	 * first read or written; its writers' working states.  Set under the
	 * stripe and s->lock (a reader's load: s->lock only); NULL for a file
	 * of one run.
	 */
	struct ofs_extents *x;
	uint32_t nwriters;    /* the stripe (write) */
	/*
	 * The first write into obj that failed (negative errno), 0: none.
	 * Bytes the kernel acknowledged to a writer (a write-back of mmap or
	 * cached pages) may be lost with it, so nothing of obj may commit:
	 * commits fail with it until the working state is closed.  The
	 * stripe (write).
	 */
	int werr;
	uint64_t *pcs;        /* per-page checksums of the committed version, for verify; s->lock */
	/* Its tenant directory (fixed: no rename across tenants); 0: not looked up.  s->lock. */
	uint64_t tenant;
	/* Queued at s->evict.dirty[atime_slot] in round atime_round (evict.h).  s->lock. */
	uint64_t atime_round;
	size_t atime_slot;
	/* Round in which a record update (utimens) set atime: a queued use does not undo it. */
	uint64_t atime_set_round;
};

/*
 * The objects in memory: the caller allocates them (the daemon's inodes
 * embed one), the store finds them.  Under s->lock.
 */
struct ofs_object *ofs_object_find(struct ofs_store *s, uint64_t ino);
/* o->m set; an object of that number must not be in the table.  -ENOMEM. */
int ofs_object_insert(struct ofs_store *s, struct ofs_object *o);
void ofs_object_remove(struct ofs_store *s, struct ofs_object *o);
/* Any one object taken out of the table (NULL: empty), for emptying it. */
struct ofs_object *ofs_object_pop(struct ofs_store *s);
/*
 * Delete the record and free the storage of an object whose name was
 * dropped while it was open, once nothing has it open (unlinked 2 -> 1).
 * Under s->lock.
 */
void ofs_object_settle(struct ofs_store *s, struct ofs_object *o);

static inline pthread_rwlock_t *ofs_store_rw(struct ofs_store *s, uint64_t ino)
{
	return &s->rw[ino & (OFS_NLOCKS - 1)];
}

/* Wall-clock time in nanoseconds, as the records keep it. */
static inline int64_t ofs_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The committed version's mapping. */
static inline struct kvb_map ofs_committed(const struct meta_inode *m)
{
	struct kvb_map map = { .bucket = m->bucket, .page = m->page, .npages = m->npages,
			       .size = m->size };
	return map;
}

/* The committed version as the DRAM tier names it. */
static inline void ofs_version(const struct meta_inode *m, struct ofs_dram_version *v)
{
	v->bucket = m->bucket;
	v->page = m->page;
	v->size = m->size;
	v->csum = m->csum;
}

/*
 * The durability barrier under s->lock (ofs_store_sync), counted, a
 * failure logged.  No lock held, or an object's stripe.
 */
int ofs_store_barrier(struct ofs_store *s, uint64_t *released);
/*
 * ENOSPC may only mean that freed pages wait for the next barrier: run it
 * and say (1) whether a retry can succeed.  A cache evicts for room
 * (ofs_evict_for_put): for a file of the tenant directory tenant (0:
 * none) growing by bytes.
 */
int ofs_store_reclaim(struct ofs_store *s, uint64_t tenant, uint64_t bytes);

/* The rest under o's stripe (write). */
/* Open o's working state from its committed version. */
int ofs_object_open(struct ofs_store *s, struct ofs_object *o);
/* Drop the working state, committed or not. */
void ofs_object_close(struct ofs_store *s, struct ofs_object *o);
/*
 * Commit the working state when it changed: data, checksums, then the
 * metadata record, then the old pages freed (at the next barrier).  With
 * sync, run the barrier too.  A poisoned state fails with its error.
 */
int ofs_object_commit(struct ofs_store *s, struct ofs_object *o, int sync);
/*
 * Write into the working state: the count or -errno; a failure poisons it
 * (werr).  -ENOSPC, never written, while the metadata disk is short.
 */
ssize_t ofs_object_write(struct ofs_store *s, struct ofs_object *o, const void *buf, size_t size,
			 uint64_t off);
/*
 * copy_file_range(2): up to len bytes at off_in of what src holds now (as
 * ofs_object_pread reads it) written at off_out of dst's working state as
 * ofs_object_write writes (quota, poisoning, committed with dst), inside
 * the backend when it can.  The count (short at src's end, 0 past it) or
 * -errno; -EINVAL for overlapping ranges of one file.  Under dst's stripe
 * (write) and src's (read, or the same).
 */
ssize_t ofs_object_copy(struct ofs_store *s, struct ofs_object *src, uint64_t off_in,
			struct ofs_object *dst, uint64_t off_out, size_t len);
int ofs_object_truncate(struct ofs_store *s, struct ofs_object *o, uint64_t size);
/*
 * fallocate(2) over [off, end) of the working state: mode 0 grows it,
 * FALLOC_FL_KEEP_SIZE reserves past the end, PUNCH_HOLE and ZERO_RANGE
 * write zeros (a file is one run: a hole keeps its pages).  The caller has
 * checked the mode.  A change of content sets mtime and ctime.  */
int ofs_object_fallocate(struct ofs_store *s, struct ofs_object *o, int mode, uint64_t off,
			 uint64_t end);
/* Record m as o's attributes (metadata only).  Under s->lock. */
int ofs_object_update(struct ofs_store *s, struct ofs_object *o, const struct meta_inode *m);
/*
 * Set (flags: META_XATTR_CREATE, META_XATTR_REPLACE) or remove (value
 * NULL) a user xattr of the object ino, which the caller holds in memory,
 * with its ctime, in one transaction.  Under s->lock.
 */
int ofs_object_xattr_change(struct ofs_store *s, uint64_t ino, const char *name,
			    const char *value, size_t size, int flags);
/*
 * The close of a writer's descriptor: commit.  On failure the last
 * writer's bytes are dropped (a fresh working state), a poisoned state is
 * kept for the other descriptors; *stale: a cache of the working state's
 * bytes (the kernel's) must be dropped.
 */
int ofs_object_flush(struct ofs_store *s, struct ofs_object *o, int *stale);
/* A writer's release: commit (a failure logged), the last one closes the working state. */
void ofs_object_release_writer(struct ofs_store *s, struct ofs_object *o, int *stale);
/*
 * Before the last close of an object whose name was dropped while open
 * (it deletes the record: ofs_object_settle), the backend's prepare,
 * outside s->lock as an unlink's.  Takes s->lock; o held open.
 */
void ofs_object_prepare_last_close(struct ofs_store *s, struct ofs_object *o);

/*
 * A writer's open: the working state opened (truncated with trunc) and
 * counted in nwriters.  Takes o's stripe (write) itself.
 */
int ofs_object_open_writer(struct ofs_store *s, struct ofs_object *o, int trunc);

/* A writer's close: 1 when it was the last (the working state is to be closed). */
static inline int ofs_writer_gone(struct ofs_object *o)
{
	assert(o->nwriters > 0);
	return --o->nwriters == 0;
}

/*
 * The bytes of a read, wherever they are: a buffer of ours (own), the
 * backend's own buffer (ref, given back by ofs_bytes_release), or a range
 * of a bucket file (fd >= 0), which a reply can splice without a copy.
 */
struct ofs_bytes {
	const void *ptr;
	char *own;
	size_t cap; /* own from ofs_bytes_alloc_aligned: its size (0: malloc's) */
	void *ref;
	int fd;
	off_t pos;
};

/*
 * Read size bytes at off of o's version map (size already cut to the end
 * of the file), from the DRAM tier, the backend's buffer, a copy checked
 * page by page when verify is on, or the bucket file.  The count, or
 * -errno; a page that fails its checksum is EIO, never wrong bytes, and is
 * logged and counted unless quiet.  -ENOENT: the backend no longer has the
 * value.  Under o's stripe (read); b is released by the caller.
 */
ssize_t ofs_object_read(struct ofs_store *s, struct ofs_object *o, const struct kvb_map *map,
			size_t size, uint64_t off, int quiet, struct ofs_bytes *b);
void ofs_bytes_release(struct ofs_store *s, struct ofs_bytes *b);
/* b->own of at least size bytes aligned to the page size, for an uncached read. */
int ofs_bytes_alloc_aligned(struct ofs_store *s, struct ofs_bytes *b, size_t size);
/*
 * The XXH3-64 of o's committed bytes (one run): its checksum, or, when
 * that is the sum of its page sums (kvb_hash.h), the bytes read and
 * hashed.  Under o's stripe (read), which keeps that version.
 */
int ofs_object_content_csum(struct ofs_store *s, struct ofs_object *o, uint64_t *csum);
/*
 * Read up to size bytes at off of what o holds now: its working state
 * while writers have it, else its committed version (*map: the version
 * read).  0 at or past the end.  uncached: the reader asked for uncached
 * I/O (O_DIRECT); committed runs and extents are then read past the
 * backend's cache where aligned (kvb_read_uncached), into our buffer.
 * Under o's stripe (read).
 */
ssize_t ofs_object_pread(struct ofs_store *s, struct ofs_object *o, size_t size, uint64_t off,
			 int uncached, struct ofs_bytes *b, struct kvb_map *map);

#endif
