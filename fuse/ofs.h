/*
 * ofs: the FUSE daemon's state.  Only fuse/ includes this.
 */
#ifndef OFFLOADFS_OFS_H
#define OFFLOADFS_OFS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdint.h>

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

/* Bytes in the DRAM tier (0 when off). */
uint64_t ofs_dram_bytes(struct ofs *ofs);
/* Start/stop the promotion worker; at stop, resident objects are queued to warm the next mount. */
int ofs_promoter_start(struct ofs *ofs);
void ofs_promoter_stop(struct ofs *ofs);

/* Start and stop the group-commit thread. */
int ofs_syncer_start(struct ofs *ofs);
void ofs_syncer_stop(struct ofs *ofs);

void ofs_init_ops(struct fuse_lowlevel_ops *ops);
/* The inode table, with the root pinned in it for the whole mount. */
int ofs_table_init(struct ofs *ofs);
void ofs_table_release(struct ofs *ofs);
void ofs_log_to_syslog(int on);
void ofs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
