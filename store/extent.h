/*
 * extent: files larger than one extent.
 *
 * A file of at most extent_size bytes (every KV block) is one run, its
 * mapping in its own record, as object.h has it.  A larger one is cut at
 * multiples of extent_size: extent idx holds the bytes
 * [idx * extent_size, (idx + 1) * extent_size), each extent an object of
 * the backend of its own (a run of pages, a value), written, copied on
 * write, checksummed, committed and recovered as a one-run file is; an
 * extent never written is a hole, and the bytes of an extent past its own
 * size, up to the file's, are zeros.  So a sparse file holds nothing until
 * written, a write touches only its extents, and a commit records only the
 * extents that changed, with the file's record, in one transaction.
 *
 * Each function runs under the object's stripe as object.h says for its
 * counterpart; the extents of an object are changed only under the stripe
 * held exclusively, and loaded under s->lock.
 */
#ifndef OFFLOADFS_EXTENT_H
#define OFFLOADFS_EXTENT_H

#include "object.h"

/* A new store's extent_size: at most this, and the bucket size. */
#define OFS_EXTENT_SIZE_DEFAULT (64ULL << 20)
/* The setting that records it ("extent_size"); a store made without it has bucket_size. */
#define OFS_EXTENT_SETTING "extent_size"

struct ofs_ext {
	uint64_t idx;
	/* The committed version (v.ext = idx + 1); has: there is one. */
	struct meta_inode v;
	int has;
	uint64_t *pcs;        /* v's per-page checksums, once a verified read loaded them; s->lock */
	struct kvb_obj *obj;  /* working state while writers are open; extent 0's is o->obj */
	int reserved;         /* obj holds room for the whole extent (ofs_extents_write) */
};

struct ofs_extents {
	uint64_t ino;        /* the file's */
	struct ofs_ext *v;   /* by idx, ascending */
	size_t n, cap;
	uint64_t wsize;      /* the file's size as its writers see it */
	int resized;         /* wsize changed since the last commit */
	uint64_t wnext;      /* where the last write ended: the next in order starts there */
	/*
	 * The committed version is the file's record of one run (it became
	 * larger only in its working state): extent 0's committed version is
	 * that record's.
	 */
	int from_row;
};

/* Whether o's bytes are (or are being made) extents. */
static inline int ofs_is_extents(const struct ofs_object *o)
{
	return o->x != NULL || o->m.bucket == META_EXTENTS;
}

/* Bring o's extents into memory when its record says it has them (s->lock not held). */
int ofs_extents_load(struct ofs_store *s, struct ofs_object *o);
/* Let go of o's extents in memory (no working state open). */
void ofs_extents_free(struct ofs_extents *x);

/* A writer's open of a file of extents: extent 0's working state, as o->obj. */
int ofs_extents_open(struct ofs_store *s, struct ofs_object *o, const char *key, size_t klen);
/* Close every working state but extent 0's (o->obj, which the caller closes). */
void ofs_extents_close(struct ofs_store *s, struct ofs_object *o);
/*
 * A write (or truncate, fallocate) of a one-run file that takes it past
 * extent_size: o's working state becomes extent 0 of a file of extents.
 */
int ofs_extents_convert(struct ofs_store *s, struct ofs_object *o);

ssize_t ofs_extents_write(struct ofs_store *s, struct ofs_object *o, const void *buf, size_t len,
			  uint64_t off);
int ofs_extents_truncate(struct ofs_store *s, struct ofs_object *o, uint64_t size);
/* Room for [off, end): keep set, past the size without changing it (KEEP_SIZE). */
int ofs_extents_reserve(struct ofs_store *s, struct ofs_object *o, uint64_t off, uint64_t end,
			int keep);
/* The extents wholly inside [off, end) emptied: holes, their pages freed at the commit. */
int ofs_extents_punch(struct ofs_store *s, struct ofs_object *o, uint64_t off, uint64_t end);
/* The working size and the pages the working states (or committed extents) hold. */
void ofs_extents_view(struct ofs_store *s, struct ofs_object *o, uint64_t *size,
		      uint64_t *npages);
int ofs_extents_dirty(struct ofs_store *s, struct ofs_object *o);
/* Commit every extent that changed and the file's record, in one transaction. */
int ofs_extents_commit(struct ofs_store *s, struct ofs_object *o);
/*
 * Up to size bytes at off of what o holds now (its writers' view, else
 * its committed version), in b->own; holes read as zeros.  uncached: the
 * reader asked for uncached I/O (O_DIRECT), and what is aligned is read
 * past the backend's cache (kvb_read_uncached).
 */
ssize_t ofs_extents_pread(struct ofs_store *s, struct ofs_object *o, size_t size, uint64_t off,
			  int uncached, struct ofs_bytes *b);

/*
 * Removal of a file of extents whose record is being deleted: under
 * s->lock, in the deleting transaction, ofs_extents_take prepares the
 * removal of each extent (kvb_remove_prepare) and keeps their mappings,
 * setting *to_free to a mapping that names them (bucket META_EXTENTS);
 * once the transaction committed, ofs_store_remove frees them, or, when it
 * failed, ofs_extents_untake forgets them.  ofs_store_remove frees any
 * other mapping as kvb_remove does.
 */
int ofs_extents_take(struct ofs_store *s, uint64_t ino, struct kvb_map *to_free);
void ofs_extents_untake(struct ofs_store *s, const struct kvb_map *to_free);
void ofs_store_remove(struct ofs_store *s, const struct kvb_map *to_free);

/* The descriptor of a committed file of extents (see DESIGN.md). */
int ofs_extents_describe(struct ofs_store *s, struct ofs_object *o, char *buf, size_t len);

#endif
