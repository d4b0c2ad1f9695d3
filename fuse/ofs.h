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

#include "dram.h"
#include "kvb.h"
#include "meta.h"
#include "metrics.h"
#include "store.h"

#define OFS_VERSION "0.1.0"
/* A path below the root with its NUL: a tenant, a slash, a key (meta.h). */
#define OFS_KEY_MAX (META_NAME_MAX + 1 + META_KEY_MAX + 1)
#define OFS_INVAL_MAX 64       /* inodes queued for invalidation */
#define OFS_INVAL_ENTRY_MAX 16 /* names queued for invalidation */

/*
 * An inode the kernel knows (nlookup > 0) or that has open handles.  m holds
 * the committed state as recorded in the metadata store plus in-memory
 * times; obj the working state while writers are open.
 */
struct ofs_inode {
	uint64_t ino;
	uint64_t nlookup;     /* under ofs.lock */
	uint32_t nopen;       /* under ofs.lock */
	uint32_t nwriters;    /* under rw (write) */
	uint32_t busy;        /* requests using the struct now (ofs_iget..ofs_iput); ofs.lock */
	signed char unlinked; /* detached from the namespace; under ofs.lock */
	/*
	 * 1 from the lookup that gave the kernel this inode until its first
	 * open: the kernel caches none of its pages yet; 2 while that open
	 * fills them (ofs_prefill).  Under ofs.lock.
	 */
	unsigned char kfresh;
	struct meta_inode m;
	struct kvb_obj *obj;
	/*
	 * The first WRITE into obj that failed (negative errno), 0: none.  Bytes
	 * the kernel acknowledged to a writer (a write-back of mmap or cached
	 * pages) may be lost with it, so nothing of obj may commit: flush,
	 * fsync and release fail with it until the working state is dropped.
	 * Under rw (write).
	 */
	int werr;
	uint64_t *pcs;        /* per-page checksums of the committed version, loaded for verify */
	uint32_t read_opens;  /* opens for reading in the current promotion window (ofs.lock) */
	int64_t window_start;
	struct ofs_inode *next;
};

/*
 * Data locks, striped by inode number: readers shared, writers and commits
 * exclusive.  Striped rather than one per inode to keep an inode the kernel
 * knows small (a million looked-up objects must fit in 300 MB).
 */
#define OFS_NLOCKS 1024

struct ofs {
	struct ofs_store store;
	pthread_rwlock_t rw[OFS_NLOCKS];
	pthread_mutex_t lock;  /* the metadata store, the inode table, nfiles, the klen fields */
	/*
	 * The key length of the directory the last name was made in, valid
	 * while dir_renames (directories renamed so far) is klen_renames.
	 */
	uint64_t klen_dir, klen_renames, dir_renames;
	size_t klen;
	struct ofs_inode **tab;
	size_t tabsize, tabcount;
	double timeout;        /* entry and attr cache timeout, seconds */
	int foreground;
	int verify;            /* check every byte read against its page checksum */
	uint64_t prefill_max;  /* largest object ofs_prefill puts in the kernel's cache; 0: off */
	pthread_cond_t kcond;  /* an open waiting for another one's prefill; with lock */
	unsigned sync_ms;      /* group-commit interval; 0: only fsync makes durable */
	pthread_t syncer;
	int syncer_running, stopping;
	pthread_mutex_t slock; /* stopping, with scond */
	pthread_cond_t scond;
	struct ofs_metrics metrics;
	char *metrics_path;    /* -o metrics=PATH, written every few seconds */
	/* The DRAM tier and its promotion worker. */
	struct ofs_dram dram;
	uint64_t dram_capacity; /* 0: off */
	unsigned promote_after; /* the Nth open for read within the window queues a promotion */
	unsigned promote_window; /* seconds */
	pthread_t promoter;
	int promoter_running;
	pthread_cond_t pcond;  /* wakes the promoter; with slock */
	/*
	 * Inodes whose cached pages the kernel must drop (a writer's bytes
	 * that never committed); sent by the group-commit thread, outside any
	 * request, as libfuse requires.  Under slock.
	 */
	struct fuse_session *se;
	uint64_t inval[OFS_INVAL_MAX];
	unsigned ninval;
	/* Names the kernel must forget (files dropped outside an unlink).  Under slock. */
	struct ofs_inval_entry {
		uint64_t parent;
		size_t len;
		char name[META_NAME_MAX + 1];
	} inval_entry[OFS_INVAL_ENTRY_MAX];
	unsigned ninval_entry;
};

static inline pthread_rwlock_t *ofs_rw(struct ofs *ofs, const struct ofs_inode *in)
{
	return &ofs->rw[in->ino & (OFS_NLOCKS - 1)];
}

static inline struct ofs *ofs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

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

/* ino is there for the ops' shape; some bodies only use the inode struct. */
#define OFS_UNUSED __attribute__((unused))

/* log.c */
void ofs_log_to_syslog(int on);
void ofs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* inode.c: the inode table, with the root pinned in it for the whole mount. */
int ofs_table_init(struct ofs *ofs);
void ofs_table_release(struct ofs *ofs);
/* Under ofs.lock. */
struct ofs_inode *ofs_ifind(struct ofs *ofs, uint64_t ino);
/* A request's inode, held until ofs_iput (takes ofs.lock). */
struct ofs_inode *ofs_iget(struct ofs *ofs, fuse_ino_t ino);
void ofs_iput(struct ofs *ofs, struct ofs_inode *in);
/* Free what an unlinked inode holds, forget one nobody uses.  Under ofs.lock. */
void ofs_isettle(struct ofs *ofs, struct ofs_inode *in);
void ofs_fill_stat(const struct ofs *ofs, const struct ofs_inode *in,
		   const struct meta_inode *m, struct stat *st);
/* Count a kernel lookup of m and fill its entry.  Under ofs.lock. */
int ofs_entry(struct ofs *ofs, const struct meta_inode *m, struct fuse_entry_param *e);
/* The kernel forgot n lookups of ino.  Under ofs.lock. */
void ofs_forget_one(struct ofs *ofs, fuse_ino_t ino, uint64_t n);

/* object.c: a writer's working state, its commit and the barrier (under in's rw lock). */
int ofs_obj_open(struct ofs *ofs, struct ofs_inode *in);
void ofs_obj_close(struct ofs *ofs, struct ofs_inode *in);
int ofs_durable(struct ofs *ofs, uint64_t *released);
int ofs_reclaim(struct ofs *ofs);
int ofs_commit(struct ofs *ofs, struct ofs_inode *in, int sync);
int ofs_setattr_size(struct ofs *ofs, struct ofs_inode *in, uint64_t size, int from_fd);
int ofs_open_writer(struct ofs *ofs, struct ofs_inode *in, int trunc);
void ofs_poison(struct ofs *ofs, struct ofs_inode *in, int err, uint64_t off, size_t len);
int ofs_zero_range(struct ofs *ofs, struct ofs_inode *in, uint64_t off, uint64_t end);

/* workers.c: the group-commit thread, its invalidation queues, the promotion worker. */
int ofs_syncer_start(struct ofs *ofs);
void ofs_syncer_stop(struct ofs *ofs);
/* Start/stop the promotion worker; at stop, resident objects are queued to warm the next mount. */
int ofs_promoter_start(struct ofs *ofs);
void ofs_promoter_stop(struct ofs *ofs);
/* Ask the group-commit thread to drop the kernel's cached pages of ino, or a name. */
void ofs_queue_inval(struct ofs *ofs, uint64_t ino);
void ofs_queue_inval_entry(struct ofs *ofs, uint64_t parent, const char *name, size_t len);
/* Under ofs.lock. */
int ofs_queue_promotion(struct ofs *ofs, struct ofs_inode *in, const char *reason);
void ofs_promotion_policy(struct ofs *ofs, struct ofs_inode *in);
/* Bytes in the DRAM tier (0 when off). */
uint64_t ofs_dram_bytes(struct ofs *ofs);

/* read.c: where a read's bytes come from. */
/*
 * The bytes of a read, wherever they are: a buffer of ours (own), the
 * backend's own buffer (ref, given back by ofs_bytes_release), or a range
 * of a bucket file (fd >= 0), which the reply splices without a copy.
 */
struct ofs_bytes {
	const void *ptr;
	char *own;
	void *ref;
	int fd;
	off_t pos;
};
void ofs_bytes_release(struct ofs *ofs, struct ofs_bytes *b);
ssize_t ofs_fetch(struct ofs *ofs, struct ofs_inode *in, const struct kvb_map *map, size_t size,
		  uint64_t off, int quiet, struct ofs_bytes *b);
struct fuse_bufvec ofs_bytes_vec(const struct ofs_bytes *b, size_t n);
int ofs_prefill(struct ofs *ofs, struct ofs_inode *in);

/* ns.c: names, keys and the namespace transactions. */
int ofs_check_name(const char *name);
/* The object key of ino (its path below its tenant).  Under ofs.lock. */
int ofs_key(struct ofs *ofs, uint64_t ino, char *key, size_t *klen);
/* Drop m's name (detached while open).  Under ofs.lock. */
int ofs_drop_name(struct ofs *ofs, const struct meta_inode *m, struct kvb_map *to_free);

/* ll.c: the one table of FUSE operations. */
extern const struct fuse_lowlevel_ops ofs_ll_ops;

#endif
