/*
 * kvb: storage backends behind a data-path table and an administration
 * table, called through the kvb_* wrappers below.
 *
 * store/ (and offloadctl) talk to objects only through struct kvb; they
 * never know whether the bytes live in bucket-file pages (kvbackend/pages/)
 * or in a distributed KV store (kvbackend/ubsio/).  An object
 * has a committed mapping (what the metadata store records) and, while a
 * writer has it open, a working state (struct kvb_obj) that becomes the
 * committed mapping only through commit_prepare + commit_done.  Everything
 * returns 0 (or a byte count) or a negative errno; nothing here speaks FUSE.
 */
#ifndef OFFLOADFS_KVB_H
#define OFFLOADFS_KVB_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct meta;

/*
 * Where an object's bytes are: the mapping columns of the metadata store.
 * In a KV backend bucket is 0 for an object with a value, page is the
 * value's id (vid) and npages counts checksum pages of page_size bytes.
 */
struct kvb_map {
	int32_t bucket;  /* -1: no pages (empty object) */
	uint64_t page;
	uint64_t npages;
	uint64_t size;
	/*
	 * Set by commit_prepare of a KV backend: the key the value was put
	 * under, to record with the mapping; valid until commit_done.
	 */
	const char *skey;
};

#define KVB_MAP_EMPTY ((struct kvb_map){ .bucket = -1 })

struct kvb_statfs {
	uint64_t block_size;
	uint64_t blocks;
	uint64_t blocks_free;
	uint64_t files, files_free;  /* a key limit; 0: none */
};

struct kvb_obj;

/* Calls a backend makes to its storage, counted for metrics. */
enum kvb_call { KVB_CALL_READ, KVB_CALL_WRITE, KVB_CALL_ZERO, KVB_CALL_SYNC, KVB_CALL_SPLICE,
		KVB_CALL_COPY, KVB_NCALLS };

static inline const char *kvb_call_name(int c)
{
	static const char *const names[KVB_NCALLS] = { "read", "write", "zero", "sync", "splice",
						       "copy" };

	return c >= 0 && c < KVB_NCALLS ? names[c] : "?";
}

struct kvb_stats {
	uint64_t allocations;     /* runs handed out (new runs and in-place extensions) */
	uint64_t alloc_failures;  /* requests that found no room (ENOSPC) */
	uint64_t frees;           /* runs given back */
	uint64_t calls[KVB_NCALLS], errors[KVB_NCALLS];
};

/*
 * A backend is two const tables over one arg: the data path, which the
 * store calls for every object (writers, reads, removes, the durability
 * barrier), and administration (mount and unmount, what statfs, metrics,
 * descriptors, fsck and scrub ask).  Methods marked "may be NULL" are
 * optional; the wrappers below answer for them.
 */
struct kvb_ops {
	/*
	 * Working state for a writer of the object whose committed mapping is
	 * c.  key is the object's path below the root, "<tenant>/<key>" (no
	 * '/' for a file in the root): the pages backend hashes the part after
	 * the tenant, a KV backend names the value by all of it.
	 */
	int (*obj_open)(void *arg, const struct kvb_map *c, const char *key, size_t klen,
			struct kvb_obj **out);
	ssize_t (*obj_write)(void *arg, struct kvb_obj *o, const void *buf, size_t len,
			     uint64_t off);
	/*
	 * May be NULL (-EOPNOTSUPP: the caller copies through memory).  As
	 * obj_write of the len bytes at from_off of from, a committed mapping
	 * or another writer's view (settled), without bringing them into
	 * memory: the pages backend copies between bucket files inside the
	 * kernel (copy_file_range(2), a reflink where the filesystem shares
	 * blocks).  The checksums are those of the bytes as copied.
	 */
	ssize_t (*obj_copy)(void *arg, struct kvb_obj *o, const struct kvb_map *from,
			    uint64_t from_off, size_t len, uint64_t off);
	/* Set the size: shrink, or grow with zeros reserving the exact run. */
	int (*obj_truncate)(void *arg, struct kvb_obj *o, uint64_t size);
	/*
	 * May be NULL.  Reserve room for size bytes without changing the size
	 * (fallocate with FALLOC_FL_KEEP_SIZE): writes up to it then find
	 * their pages.  Only the working state holds the reservation: a
	 * commit keeps the pages the size needs.
	 */
	int (*obj_reserve)(void *arg, struct kvb_obj *o, uint64_t size);
	/*
	 * May be NULL (both).  Between reserve_begin and reserve_end, the
	 * runs the calling thread's obj_reserve calls allocate for fresh
	 * working states get their blocks only at the end, adjacent ones
	 * together.  reserve_end sets errs[i] for each of objs (NULL
	 * entries allowed): 0, or -ENOSPC when its run found no room, in
	 * which case the run is dropped and the state is fresh again (an
	 * obj_reserve outside the pair tries the other buckets).
	 */
	int (*reserve_begin)(void *arg);
	void (*reserve_end)(void *arg, struct kvb_obj *const *objs, size_t n, int *errs);
	/* The working view, for reads and getattr while a writer is open. */
	void (*obj_view)(void *arg, struct kvb_obj *o, struct kvb_map *view);
	/* 1 when the working state differs from the committed mapping. */
	int (*obj_dirty)(void *arg, struct kvb_obj *o);
	/*
	 * May be NULL.  Before bytes [off, off + len) of the view are read (by
	 * read or read_fd on it): make the working storage hold them (the
	 * pages backend copies lazily on write).  Called with the object's
	 * data lock shared, so it must serialise itself.
	 */
	int (*obj_settle)(void *arg, struct kvb_obj *o, uint64_t off, uint64_t len);
	/*
	 * Make the working data stable (fsync it when sync is set) and give
	 * the mapping, the checksum (of either kind, kvb_hash.h) and the per-page checksums
	 * (map->npages of them, valid until commit_done) to record.  Then
	 * exactly one commit_done: ok=1 once the record is committed (the old
	 * pages are freed at the next barrier), ok=0 when it failed (the
	 * committed mapping stays).
	 */
	int (*obj_commit_prepare)(void *arg, struct kvb_obj *o, int sync, struct kvb_map *map,
				  uint64_t *csum, const uint64_t **pcsums);
	void (*obj_commit_done)(void *arg, struct kvb_obj *o, int ok);
	/*
	 * May be NULL.  How many page sums of the committed version the next
	 * commit_prepare could use to hash only the pages changed since (0:
	 * none); obj_sums_known gives them (n of them, those of the committed
	 * record of mapping of, ignored unless that is the writer's committed one).
	 */
	uint64_t (*obj_sums_wanted)(void *arg, struct kvb_obj *o);
	void (*obj_sums_known)(void *arg, struct kvb_obj *o, const struct kvb_map *of,
			       const uint64_t *pcs, uint64_t n);
	/* Drop the working state, freeing what was never committed. */
	void (*obj_close)(void *arg, struct kvb_obj *o);
	/*
	 * May be NULL (nothing is held in memory).  The caller is done with
	 * o's bytes for now (a writer that filled it and moved on, or a
	 * buffer bound reached): the backend may move them out of its
	 * memory, where a crash leaves them for the cleanup at the next
	 * start, and commit them from there.  Every other call on o works
	 * as before; one that changes o brings the bytes back first.
	 * 0: staged (or nothing to stage).
	 */
	int (*obj_stage)(void *arg, struct kvb_obj *o);
	/*
	 * May be NULL (-EOPNOTSUPP).  The working run, reserved with
	 * obj_reserve, holds size bytes that someone else wrote there through
	 * the bucket file (a batch client): take size as the working size
	 * without writing, and count the bucket as written for the next
	 * barrier.  commit_prepare then hashes the pages as they are; or,
	 * with pcs (a sum per page below size), hands out pcs and csum as
	 * the writer's sums, reading nothing.
	 */
	int (*obj_adopt)(void *arg, struct kvb_obj *o, uint64_t size, const uint64_t *pcs,
			 uint64_t csum);

	/* Read committed (or viewed) bytes; short at the end of the object. */
	ssize_t (*read)(void *arg, const struct kvb_map *m, void *buf, size_t len, uint64_t off);
	/*
	 * May be NULL.  The file descriptor and position holding byte off of
	 * m, for zero-copy replies of len bytes; -EOPNOTSUPP when the backend
	 * has none.
	 */
	int (*read_fd)(void *arg, const struct kvb_map *m, uint64_t off, size_t len, int *fd,
		       off_t *pos);
	/* May be NULL (a put is durable when it returns).  Make the bytes of m durable. */
	int (*sync)(void *arg, const struct kvb_map *m);
	/* Free the pages of a committed object whose record is gone (at the next barrier). */
	int (*remove)(void *arg, const struct kvb_map *m);
	/*
	 * May be NULL.  Called before the record naming m is deleted: make
	 * sure a crash that keeps the deletion can still find m's storage (a
	 * KV backend journals the key durably; the pages backend's rebuild
	 * needs nothing).  The record is deleted only when this returns 0.
	 */
	int (*remove_prepare)(void *arg, const struct kvb_map *m);
	/*
	 * Durability barrier, in three steps around the metadata sync:
	 * barrier_begin returns a mark of the runs freed so far (cheap, no
	 * I/O: the store calls it under its metadata lock, with the sync
	 * generation bump, so that only runs freed by commits of the synced
	 * generations are marked); barrier_sync then makes every byte
	 * written so far durable; once the metadata sync that follows has
	 * returned, release(mark) makes the marked runs reusable and returns
	 * how many pages it gave back.  One barrier at a time.
	 */
	uint64_t (*barrier_begin)(void *arg);
	int (*barrier_sync)(void *arg);
	uint64_t (*release)(void *arg, uint64_t mark);
	/*
	 * Read committed bytes checking every page they touch against the
	 * per-page checksums; -EBADMSG with *bad_page set on a mismatch.  On
	 * an error buf holds no meaning (it may hold the unchecked bytes).
	 */
	ssize_t (*read_verified)(void *arg, const struct kvb_map *m, const uint64_t *pcsums,
				 void *buf, size_t len, uint64_t off, uint64_t *bad_page);
	/*
	 * May be NULL.  read (pcsums NULL) or read_verified past the backend's
	 * cache, for a reader that asked for uncached I/O (O_DIRECT): the
	 * bytes go from the device into buf, none are kept.  -EOPNOTSUPP
	 * (buf, off or len not aligned to the page size, a device without
	 * it): use read or read_verified.
	 */
	ssize_t (*read_uncached)(void *arg, const struct kvb_map *m, const uint64_t *pcsums,
				 void *buf, size_t len, uint64_t off, uint64_t *bad_page);
	/*
	 * May be NULL.  A read without a copy: *ptr gets up to len committed
	 * bytes at off of m, in the backend's own buffer, valid until
	 * read_unref(*ref) (*ref NULL: nothing to release); with pcsums every
	 * page they touch is checked first (-EBADMSG, *bad_page set).
	 * -EOPNOTSUPP: use read.
	 */
	ssize_t (*read_ref)(void *arg, const struct kvb_map *m, const uint64_t *pcsums, size_t len,
			    uint64_t off, const void **ptr, void **ref, uint64_t *bad_page);
	void (*read_unref)(void *arg, void *ref);
};

struct kvb_admin_ops {
	const char *name;
	/*
	 * Mount: load the allocation state (the clean snapshot when clean is
	 * set, else a rebuild from the committed mappings).  msg gets one
	 * line for the log.
	 */
	int (*start)(void *arg, struct meta *m, int clean, char *msg, size_t msglen);
	/* Clean unmount: sync data and save the allocation state. */
	int (*stop)(void *arg, struct meta *m);
	int (*statfs)(void *arg, struct kvb_statfs *st);
	/* The external descriptor of a committed object (see DESIGN.md). */
	int (*describe)(void *arg, const struct kvb_map *m, char *buf, size_t len);
	/* XXH3-64 of the object's bytes as stored. */
	int (*checksum)(void *arg, const struct kvb_map *m, uint64_t *csum);
	/*
	 * May be NULL (the backend's commits give the bytes' sum only).  Both
	 * kinds of checksum of the bytes as stored, in one read (kvb_hash.h).
	 */
	int (*checksums)(void *arg, const struct kvb_map *m, uint64_t *whole, uint64_t *bypage);
	/* A snapshot of the counters. */
	void (*stats)(void *arg, struct kvb_stats *st);
	/*
	 * May be NULL (no buckets).  Pages used, free and the longest free
	 * run of bucket b; -ENOENT past the last.
	 */
	int (*bucket_usage)(void *arg, uint32_t b, uint64_t *used, uint64_t *free_pages,
			    uint64_t *largest_free);
	/*
	 * For fsck (may be NULL): whether each committed value is present in
	 * the store with its recorded length.  res[i] gets 0, -ENOENT
	 * (missing), -EBADMSG (another length) or another negative errno
	 * (could not tell).  Returns 0 or the error that stopped the check.
	 */
	int (*probe)(void *arg, const struct kvb_map *maps, size_t n, int *res);
	/*
	 * May be NULL.  Housekeeping the daemon runs every tick of its
	 * group-commit thread, busy or idle (pages: punching freed runs that
	 * have stayed free).
	 */
	void (*tick)(void *arg);
	/* Release everything: the last call on arg. */
	void (*free)(void *arg);
};

struct kvb {
	const struct kvb_ops *ops;
	const struct kvb_admin_ops *admin;
	void *arg;
};

/*
 * Make kvb a backend over arg (a backend's init calls it); the methods
 * that may not be NULL are asserted present in debug builds.
 */
void kvb_init(struct kvb *kvb, const struct kvb_ops *ops, const struct kvb_admin_ops *admin,
	      void *arg);

/*
 * Callers go through these wrappers, never through the ops table: an
 * optional method that a backend leaves NULL is answered here, in one
 * place (sqlite's os.c over its pMethods).
 */
static inline int kvb_start(const struct kvb *k, struct meta *m, int clean, char *msg, size_t msglen)
{
	return k->admin->start(k->arg, m, clean, msg, msglen);
}

static inline int kvb_stop(const struct kvb *k, struct meta *m)
{
	return k->admin->stop(k->arg, m);
}

static inline int kvb_obj_open(const struct kvb *k, const struct kvb_map *c, const char *key,
			       size_t klen, struct kvb_obj **out)
{
	return k->ops->obj_open(k->arg, c, key, klen, out);
}

static inline ssize_t kvb_obj_write(const struct kvb *k, struct kvb_obj *o, const void *buf, size_t len,
				    uint64_t off)
{
	return k->ops->obj_write(k->arg, o, buf, len, off);
}

static inline ssize_t kvb_obj_copy(const struct kvb *k, struct kvb_obj *o, const struct kvb_map *from,
				   uint64_t from_off, size_t len, uint64_t off)
{
	if (!k->ops->obj_copy)
		return -EOPNOTSUPP;
	return k->ops->obj_copy(k->arg, o, from, from_off, len, off);
}

static inline int kvb_obj_truncate(const struct kvb *k, struct kvb_obj *o, uint64_t size)
{
	return k->ops->obj_truncate(k->arg, o, size);
}

/* A backend without reservations has nothing to reserve: its writes find room or fail then. */
static inline int kvb_obj_reserve(const struct kvb *k, struct kvb_obj *o, uint64_t size)
{
	return k->ops->obj_reserve ? k->ops->obj_reserve(k->arg, o, size) : 0;
}

static inline int kvb_reserve_begin(const struct kvb *k)
{
	return k->ops->reserve_begin ? k->ops->reserve_begin(k->arg) : 0;
}

static inline void kvb_reserve_end(const struct kvb *k, struct kvb_obj *const *objs, size_t n,
				   int *errs)
{
	size_t i;

	if (k->ops->reserve_end) {
		k->ops->reserve_end(k->arg, objs, n, errs);
		return;
	}
	for (i = 0; i < n; i++)
		errs[i] = 0;
}

static inline int kvb_obj_adopt(const struct kvb *k, struct kvb_obj *o, uint64_t size,
				const uint64_t *pcs, uint64_t csum)
{
	return k->ops->obj_adopt ? k->ops->obj_adopt(k->arg, o, size, pcs, csum) : -EOPNOTSUPP;
}

static inline void kvb_obj_view(const struct kvb *k, struct kvb_obj *o, struct kvb_map *view)
{
	k->ops->obj_view(k->arg, o, view);
}

static inline uint64_t kvb_obj_sums_wanted(const struct kvb *k, struct kvb_obj *o)
{
	return k->ops->obj_sums_wanted ? k->ops->obj_sums_wanted(k->arg, o) : 0;
}

static inline void kvb_obj_sums_known(const struct kvb *k, struct kvb_obj *o,
				      const struct kvb_map *of, const uint64_t *pcs, uint64_t n)
{
	if (k->ops->obj_sums_known)
		k->ops->obj_sums_known(k->arg, o, of, pcs, n);
}

static inline int kvb_obj_dirty(const struct kvb *k, struct kvb_obj *o)
{
	return k->ops->obj_dirty(k->arg, o);
}

/* Nothing to settle for a backend without lazy copies. */
static inline int kvb_obj_settle(const struct kvb *k, struct kvb_obj *o, uint64_t off, uint64_t len)
{
	return k->ops->obj_settle ? k->ops->obj_settle(k->arg, o, off, len) : 0;
}

static inline int kvb_obj_commit_prepare(const struct kvb *k, struct kvb_obj *o, int sync,
					 struct kvb_map *map, uint64_t *csum,
					 const uint64_t **pcsums)
{
	return k->ops->obj_commit_prepare(k->arg, o, sync, map, csum, pcsums);
}

static inline void kvb_obj_commit_done(const struct kvb *k, struct kvb_obj *o, int ok)
{
	k->ops->obj_commit_done(k->arg, o, ok);
}

/* NULL is no working state (one that could not be opened again): nothing to close. */
static inline void kvb_obj_close(const struct kvb *k, struct kvb_obj *o)
{
	if (o)
		k->ops->obj_close(k->arg, o);
}

static inline int kvb_obj_stage(const struct kvb *k, struct kvb_obj *o)
{
	return k->ops->obj_stage ? k->ops->obj_stage(k->arg, o) : -EOPNOTSUPP;
}

/* Whether a writer's bytes can leave memory before the commit (kvb_obj_stage). */
static inline int kvb_has_stage(const struct kvb *k)
{
	return k->ops->obj_stage != NULL;
}

static inline ssize_t kvb_read(const struct kvb *k, const struct kvb_map *m, void *buf, size_t len,
			       uint64_t off)
{
	return k->ops->read(k->arg, m, buf, len, off);
}

/* -EOPNOTSUPP from a backend whose bytes are in no file: use kvb_read. */
static inline int kvb_read_fd(const struct kvb *k, const struct kvb_map *m, uint64_t off, size_t len,
			      int *fd, off_t *pos)
{
	if (!k->ops->read_fd)
		return -EOPNOTSUPP;
	return k->ops->read_fd(k->arg, m, off, len, fd, pos);
}

/* Nothing to sync for a backend whose writes are durable when they return. */
static inline int kvb_sync(const struct kvb *k, const struct kvb_map *m)
{
	return k->ops->sync ? k->ops->sync(k->arg, m) : 0;
}

static inline int kvb_remove(const struct kvb *k, const struct kvb_map *m)
{
	return k->ops->remove(k->arg, m);
}

/* Nothing to prepare for a backend whose recovery finds the storage by itself. */
static inline int kvb_remove_prepare(const struct kvb *k, const struct kvb_map *m)
{
	return k->ops->remove_prepare ? k->ops->remove_prepare(k->arg, m) : 0;
}

/* 0 when a reserve (fallocate KEEP_SIZE) takes no room: kvb_obj_reserve does nothing. */
static inline int kvb_has_reserve(const struct kvb *k)
{
	return k->ops->obj_reserve != NULL;
}

/* Whether removes need preparing (the work can then be done before taking a lock). */
static inline int kvb_has_remove_prepare(const struct kvb *k)
{
	return k->ops->remove_prepare != NULL;
}

static inline uint64_t kvb_barrier_begin(const struct kvb *k)
{
	return k->ops->barrier_begin(k->arg);
}

static inline int kvb_barrier_sync(const struct kvb *k)
{
	return k->ops->barrier_sync(k->arg);
}

/* Both steps, for a caller with no commits racing it (tests, single-threaded tools). */
static inline int kvb_barrier(const struct kvb *k, uint64_t *mark)
{
	*mark = kvb_barrier_begin(k);
	return kvb_barrier_sync(k);
}

static inline uint64_t kvb_release_freed(const struct kvb *k, uint64_t mark)
{
	return k->ops->release(k->arg, mark);
}

static inline ssize_t kvb_read_verified(const struct kvb *k, const struct kvb_map *m,
					const uint64_t *pcsums, void *buf, size_t len,
					uint64_t off, uint64_t *bad_page)
{
	return k->ops->read_verified(k->arg, m, pcsums, buf, len, off, bad_page);
}

static inline ssize_t kvb_read_uncached(const struct kvb *k, const struct kvb_map *m,
					const uint64_t *pcsums, void *buf, size_t len,
					uint64_t off, uint64_t *bad_page)
{
	if (!k->ops->read_uncached)
		return -EOPNOTSUPP;
	return k->ops->read_uncached(k->arg, m, pcsums, buf, len, off, bad_page);
}

/* -EOPNOTSUPP from a backend that has no buffers of its own: use kvb_read. */
static inline ssize_t kvb_read_ref(const struct kvb *k, const struct kvb_map *m, const uint64_t *pcsums,
				   size_t len, uint64_t off, const void **ptr, void **ref,
				   uint64_t *bad_page)
{
	if (!k->ops->read_ref) {
		*ptr = NULL;
		*ref = NULL;
		return -EOPNOTSUPP;
	}
	return k->ops->read_ref(k->arg, m, pcsums, len, off, ptr, ref, bad_page);
}

static inline void kvb_read_unref(const struct kvb *k, void *ref)
{
	if (ref && k->ops->read_unref)
		k->ops->read_unref(k->arg, ref);
}

static inline int kvb_statfs(const struct kvb *k, struct kvb_statfs *st)
{
	return k->admin->statfs(k->arg, st);
}

static inline void kvb_tick(const struct kvb *k)
{
	if (k->admin->tick)
		k->admin->tick(k->arg);
}

static inline int kvb_describe(const struct kvb *k, const struct kvb_map *m, char *buf, size_t len)
{
	return k->admin->describe(k->arg, m, buf, len);
}

static inline int kvb_checksum(const struct kvb *k, const struct kvb_map *m, uint64_t *csum)
{
	return k->admin->checksum(k->arg, m, csum);
}

/*
 * Whether the object's bytes as stored match csum, of either kind: 1, 0,
 * or a negative errno when they cannot be read.  *whole gets the bytes'
 * own sum (a message may show it).
 */
static inline int kvb_checksum_ok(const struct kvb *k, const struct kvb_map *m, uint64_t csum,
				  uint64_t *whole)
{
	uint64_t w = 0, bp;
	int ret;

	if (k->admin->checksums) {
		ret = k->admin->checksums(k->arg, m, &w, &bp);
	} else {
		ret = k->admin->checksum(k->arg, m, &w);
		bp = w;
	}
	if (whole)
		*whole = w;
	return ret ? ret : (w == csum || bp == csum);
}

static inline void kvb_stats(const struct kvb *k, struct kvb_stats *st)
{
	k->admin->stats(k->arg, st);
}

/* -ENOENT from a backend without buckets: there is no bucket b. */
static inline int kvb_bucket_usage(const struct kvb *k, uint32_t b, uint64_t *used,
				   uint64_t *free_pages, uint64_t *largest_free)
{
	if (!k->admin->bucket_usage)
		return -ENOENT;
	return k->admin->bucket_usage(k->arg, b, used, free_pages, largest_free);
}

/* -EOPNOTSUPP from a backend whose objects cannot go missing. */
static inline int kvb_probe(const struct kvb *k, const struct kvb_map *maps, size_t n, int *res)
{
	return k->admin->probe ? k->admin->probe(k->arg, maps, n, res) : -EOPNOTSUPP;
}

static inline int kvb_has_probe(const struct kvb *k)
{
	return k->admin->probe != NULL;
}

static inline const char *kvb_name(const struct kvb *k)
{
	return k->admin->name;
}

/*
 * The pages backend: bucket files under root.  Opens (creating when create
 * is set, else requiring) every bucket file and extends it to bucket_size.
 * err gets a message on failure.
 */
struct kvb_pages_geom {
	uint64_t page_size;
	uint64_t bucket_size;
	uint32_t bucket_count;
	/*
	 * Bytes of the buckets' filesystem that allocations leave free (the
	 * metadata's reserve when it shares the filesystem); 0: none.
	 */
	uint64_t keep_free;
};
int kvb_pages_init(struct kvb *kvb, const char *root, const struct kvb_pages_geom *g,
		   int create, char *err, size_t errlen);

/*
 * The KV backend over Huawei's UBSIO KV-cache client library, loaded with
 * dlopen at init (see kvbackend/ubsio/ and README.md).  Its journal of
 * values that may need deleting lives in root; m is the store's metadata,
 * read at init and start only, single-threaded.
 */
struct kvb_ubsio_config {
	const char *lib;        /* NULL: "libubsio_kvc.so" via the search path */
	int32_t device_id;      /* -1: no Ascend device */
	int new_init;           /* >0: Init(deviceId, ssdSize); 0: Init(deviceId); <0: not chosen */
	uint64_t ssd_size;
	uint64_t max_bytes, max_keys; /* capacity limits; 0: none */
	uint64_t buffer_max;    /* bytes of writers' data held in memory, all files */
	uint64_t cache_max;     /* bytes of fetched values kept for readers */
	uint64_t page_size;     /* checksum granularity */
	uint32_t key_max;       /* longest store key; longer paths are shortened with a hash */
	int readonly;           /* fsck: read the records and the store, write nothing */
};
#define KVB_UBSIO_LIB_DEFAULT "libubsio_kvc.so"
#define KVB_UBSIO_DEVICE_UNSET INT32_MIN /* not chosen: the store's recorded one, else -1 */
#define KVB_UBSIO_KEY_MAX 255 /* the library's longest key */
/*
 * The longest value every release and mode of the library takes, and so
 * a new ubsio store's extent_size (each extent is one value).  In cluster
 * mode a put copies the value into one 4 MiB data-message block and fails
 * past it (ubsio-boostio/src/sdk/mirror_client.cpp: PrepareFromClient,
 * DEFAULT_DATA_MESSAGE_BLOCK_SIZE), a batched fetch takes one such block
 * (AllocDataMessageBuffer), older releases' BatchGet one 4 MiB pool block,
 * and a read-cache load reads BIO_IO_MAX_LEN, 4 MiB (src/cache/cache.cpp,
 * Cache::Load); a put through the server is at most 16 slices
 * (src/server/mirror_server.cpp, SLICE_ADDR_MAX_SIZE: "64M").
 */
#define KVB_UBSIO_VALUE_MAX (4ULL << 20)
#define KVB_UBSIO_JOURNAL "ubsio.journal"
int kvb_ubsio_init(struct kvb *kvb, const char *root, const struct kvb_ubsio_config *c,
		   struct meta *m, char *err, size_t errlen);
/* Whether a store (or client) has the library initialised now. */
int kvb_ubsio_lib_in_use(void);

/*
 * A plain client of the same library, outside any store (offloadctl scrub
 * reads values by the key a descriptor gives, as another node would):
 * open loads and initialises it, get returns the value under key in a
 * malloc'd buffer (-ENOENT when missing), close unloads it.
 */
int kvb_ubsio_client_open(const struct kvb_ubsio_config *c, char *err, size_t errlen);
ssize_t kvb_ubsio_client_get(const char *key, unsigned char **buf);
void kvb_ubsio_client_close(void);

/* Home bucket of a key: XXH64(key, len, seed 0) % bucket_count. */
uint32_t kvb_home_bucket(const char *key, size_t len, uint32_t bucket_count);

/* Bucket file name, "bucket_%02x.data". */
void kvb_bucket_name(uint32_t bucket, char *buf, size_t len);

/*
 * A descriptor value (a path, a store key) as it appears after "name=":
 * '%', the control bytes (below 0x20, so a newline) and 0x7f become %XX
 * (upper-case hex), so no name or path can add a line.  Returns the length
 * of the whole encoding; out (outlen bytes, NUL-terminated) holds it when
 * that is below outlen.  kvb_desc_unescape decodes in place (-EINVAL on a
 * malformed %).
 */
size_t kvb_desc_escape(char *out, size_t outlen, const char *v);
int kvb_desc_unescape(char *s);

static inline void kvb_release(struct kvb *kvb)
{
	if (kvb->admin)
		kvb->admin->free(kvb->arg);
	kvb->ops = NULL;
	kvb->admin = NULL;
	kvb->arg = NULL;
}

#endif
