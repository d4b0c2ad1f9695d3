/*
 * ofs: the FUSE daemon's state.  Only fuse/ includes this.
 */
#ifndef OFFLOADFS_OFS_H
#define OFFLOADFS_OFS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "kvb.h"
#include "meta.h"
#include "metrics.h"
#include "ns.h"
#include "object.h"
#include "promote.h"
#include "store.h"

#define OFS_VERSION "0.1.0"
#define OFS_MAX_REQUEST (1u << 20) /* bytes of one READ or WRITE */
#define OFS_INVAL_MAX 64       /* inodes queued for invalidation */
#define OFS_INVAL_ENTRY_MAX 256 /* names queued for invalidation (evictions come in batches) */
#define OFS_STORE_MAX 2        /* releases storing a put's bytes at once; more skip it */

/* A file handle's fh: a writer's, and a write-only create's writing around the kernel's cache. */
#define OFS_FH_WRITER 1u
#define OFS_FH_DIRECT 2u

/*
 * An inode the kernel knows (nlookup > 0) or that has open handles: the
 * kernel's counts and the store's object (o: the committed record with
 * in-memory times, the working state while writers are open).
 */
struct ofs_inode {
	uint64_t nlookup;     /* under store.lock */
	uint32_t busy;        /* requests using the struct now (ofs_iget..ofs_iput); store.lock */
	/*
	 * 1 from the lookup that gave the kernel this inode until its first
	 * open: the kernel caches none of its pages yet; 2 while that open,
	 * or the release of a put's handle, fills them (ofs_prefill); 3 while its creator's write-only handle,
	 * whose writes bypass the kernel's cache, is its only open since the
	 * create (1 again at that handle's release).  Under store.lock.
	 */
	unsigned char kfresh;
	/*
	 * kstale: a handle that bypasses the kernel's cache was open beside
	 * others, so pages the kernel caches may be older than the store's;
	 * the next plain open drops them (no keep_cache).  ndirect: such
	 * handles open now; while there is one, every open of the inode
	 * bypasses the cache too.  Under store.lock.
	 */
	unsigned char kstale;
	uint32_t ndirect;
	struct ofs_object o;
	uint32_t read_opens;  /* opens for reading in the current promotion window (store.lock) */
	int64_t window_start;
};

/*
 * The daemon.  Lock order: an inode's stripe of store.rw, then store.lock
 * (the metadata, the inode table), then slock; never the
 * other way round.
 */
struct ofs {
	struct ofs_store store;
	double timeout;        /* entry and attr cache timeout, seconds */
	int foreground;
	uint64_t prefill_max;  /* largest object ofs_prefill puts in the kernel's cache; 0: off */
	pthread_cond_t kcond;  /* an open waiting for another one's prefill; with store.lock */
	unsigned nstoring;     /* put's bytes being stored at its release (OFS_STORE_MAX); store.lock */
	unsigned sync_ms;      /* group-commit interval; 0: only fsync makes durable */
	pthread_t syncer;
	int syncer_running, stopping;
	pthread_mutex_t slock; /* stopping, with scond */
	pthread_cond_t scond;
	char *metrics_path;    /* -o metrics=PATH, written every few seconds */
	/* The promotion worker, which fills the store's DRAM tier. */
	unsigned promote_after; /* the Nth open for read within the window queues a promotion */
	unsigned promote_window; /* seconds */
	pthread_t promoter;
	int promoter_running;
	pthread_t evictor;     /* runs store.evict's passes (ofs_evict_worker) */
	int evictor_running;
	int evict_in_syncer;   /* atomic; the evictor could not start: the group commit evicts */
	pthread_cond_t pcond;  /* wakes the promoter; with slock */
	/*
	 * Inodes whose cached pages the kernel must drop (a writer's bytes
	 * that never committed); sent by the group-commit thread, outside any
	 * request, as libfuse requires.  Under slock.
	 */
	struct fuse_session *se;
	struct ofs_uring *uring; /* -o uring: uring.c; NULL: /dev/fuse only */
	uint64_t inval[OFS_INVAL_MAX];
	unsigned ninval;
	/* Inodes whose cached attributes only (a moved atime) the kernel must drop.  Under slock. */
	uint64_t inval_attr[OFS_INVAL_MAX];
	unsigned ninval_attr;
	/* Names the kernel must forget (files dropped outside an unlink).  Under slock. */
	struct ofs_inval_entry {
		uint64_t parent;
		size_t len;
		char name[META_NAME_MAX + 1];
	} inval_entry[OFS_INVAL_ENTRY_MAX];
	unsigned ninval_entry;
	/* -o evict=, evict_high=, evict_low= (percent), evict_min_age= (s): store/evict.h. */
	unsigned evict_on, evict_high, evict_low, evict_min_age;
};

static inline pthread_rwlock_t *ofs_rw(struct ofs *ofs, const struct ofs_inode *in)
{
	return ofs_store_rw(&ofs->store, in->o.m.ino);
}

static inline struct ofs *ofs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* ino is there for the ops' shape; some bodies only use the inode struct. */
#define OFS_UNUSED __attribute__((unused))

/* inode.c: the inode table, with the root pinned in it for the whole mount. */
int ofs_table_init(struct ofs *ofs);
/*
 * Empty it as an unmount does: working states dropped uncommitted, records
 * of unlinked files deleted, every inode freed.
 */
void ofs_table_release(struct ofs *ofs);
/* Under store.lock. */
struct ofs_inode *ofs_ifind(struct ofs *ofs, uint64_t ino);
/* 1 when it was a create's handle that leaves the kernel no page cached (kfresh 1 again). */
int ofs_direct_close(struct ofs_inode *in, int direct);
/* A request's inode, held until ofs_iput (takes store.lock). */
struct ofs_inode *ofs_iget(struct ofs *ofs, fuse_ino_t ino);
void ofs_iput(struct ofs *ofs, struct ofs_inode *in);
/* One open (or hold) of in ended: ofs_isettle.  Under store.lock. */
void ofs_iclose(struct ofs *ofs, struct ofs_inode *in);
/* Free what an unlinked inode holds, forget one nobody uses.  Under store.lock. */
void ofs_isettle(struct ofs *ofs, struct ofs_inode *in);
void ofs_fill_stat(const struct ofs *ofs, const struct ofs_inode *in,
		   const struct meta_inode *m, struct stat *st);
/* Count a kernel lookup of m and fill its entry.  Under store.lock. */
int ofs_entry(struct ofs *ofs, const struct meta_inode *m, struct fuse_entry_param *e);
/* The kernel forgot n lookups of ino.  Under store.lock. */
void ofs_forget_one(struct ofs *ofs, fuse_ino_t ino, uint64_t n);

/* workers.c: the group-commit thread, its invalidation queues, the promotion worker. */
int ofs_syncer_start(struct ofs *ofs);
void ofs_syncer_stop(struct ofs *ofs);
/* Start/stop the promotion worker; at stop, resident objects are queued to warm the next mount. */
int ofs_promoter_start(struct ofs *ofs);
void ofs_promoter_stop(struct ofs *ofs);
/* Start/stop the eviction worker: the watermark and quota passes, and writers' waits for room. */
int ofs_evictor_start(struct ofs *ofs);
void ofs_evictor_stop(struct ofs *ofs);
/* Ask the group-commit thread to drop the kernel's cached pages of ino, or a name. */
void ofs_queue_inval(struct ofs *ofs, uint64_t ino);
void ofs_queue_inval_entry(struct ofs *ofs, uint64_t parent, const char *name, size_t len);
/* The kernel's cached attributes of ino are stale (its atime moved); sent at the next tick. */
void ofs_queue_inval_attr(struct ofs *ofs, uint64_t ino);
/* The store evicted parent/name: the kernel forgets it (store.evict.gone). */
void ofs_evicted(void *arg, uint64_t parent, const char *name, size_t len);
/* A write of atimes moved ino's: its cached attributes are dropped (store.evict.moved). */
void ofs_atime_moved(void *arg, uint64_t ino);
/* Under store.lock. */
int ofs_queue_promotion(struct ofs *ofs, struct ofs_inode *in, const char *reason);
void ofs_promotion_policy(struct ofs *ofs, struct ofs_inode *in);

/*
 * read.c: ofs_object_pread; a value the backend has lost drops its file before
 * -ENOENT is returned.  uncached: the READ came from an O_DIRECT descriptor.
 * Under in's stripe (read).
 */
ssize_t ofs_read(struct ofs *ofs, struct ofs_inode *in, size_t size, uint64_t off, int uncached,
		 struct ofs_bytes *b);
struct fuse_bufvec ofs_bytes_vec(const struct ofs_bytes *b, size_t n);
/* 1 when it stored the object, 0 when not, -ENOENT when its value is lost. */
int ofs_prefill(struct ofs *ofs, struct ofs_inode *in);

/* ll.c: the one table of FUSE operations. */
extern const struct fuse_lowlevel_ops ofs_ll_ops;

#endif
