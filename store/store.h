/*
 * store: an offloadfs store (ROOT + metadata + backend), the FUSE-free core
 * that the daemon and offloadctl share.
 *
 * Opening takes an exclusive lock on ROOT, refuses foreign files, checks or
 * records the geometry, recovers after an unclean stop and starts the
 * backend.  Closing saves the clean snapshot.  An object's life (working
 * state, write, commit, read) is in object.h; the barrier and the commit
 * record are here.
 */
#ifndef OFFLOADFS_STORE_H
#define OFFLOADFS_STORE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "dram.h"
#include "evict.h"
#include "kvb.h"
#include "log.h"
#include "meta.h"
#include "stats.h"

#define OFS_DEFAULT_PAGE_SIZE 65536ULL
#define OFS_DEFAULT_BUCKET_SIZE (4ULL << 30)
#define OFS_DEFAULT_BUCKET_COUNT 256U
#define OFS_DB_NAME "offloadfs.db"
/* In ROOT: the store's id, which its database records too (identity.c). */
#define OFS_ID_NAME "offloadfs.id"
/* A path below the root with its NUL: a tenant, a slash, a key (meta.h). */
#define OFS_KEY_MAX (META_NAME_MAX + 1 + META_KEY_MAX + 1)

struct ofs_config {
	const char *root;
	const char *meta_path;   /* NULL: ROOT/offloadfs.db */
	unsigned meta_timeout;   /* a database server's: seconds (meta_set_timeout); 0: default */
	struct meta_geom geom;
	/* A new store's extent size (extent.h); 0: the default.  An existing store keeps its own. */
	uint64_t extent_size;
	/* Which geometry values the user chose (option or environment). */
	unsigned set_page_size : 1, set_bucket_size : 1, set_bucket_count : 1;
	/* Of those, the ones from the environment (MOONCAKE_DISTRIBUTED_*): messages name it. */
	unsigned env_page_size : 1, env_bucket_size : 1, env_bucket_count : 1;
	/*
	 * data_group: ROOT 0750 and the bucket files 0640, owned by this group,
	 * so its members can read objects straight from the bucket files.
	 * Otherwise ROOT is 0700 and everything in it 0600.
	 */
	int has_data_gid;
	gid_t data_gid;
	/* "pages" or "ubsio"; NULL: what the store records ("pages" for a new one). */
	const char *backend;
	struct kvb_ubsio_config ubsio; /* page_size is taken from the geometry */
	/* Reading: check every byte read against its page checksum; the DRAM tier's size (0: off). */
	int verify;
	uint64_t dram_capacity;
	/* Keep the epoch table batch clients check their descriptors with (the daemon). */
	int epochs;
};

/* Defaults of the ubsio backend's options. */
#define OFS_UBSIO_BUFFER_MAX (1ULL << 30)
#define OFS_UBSIO_CACHE_MAX (256ULL << 20)
#define OFS_UBSIO_KEY_MAX KVB_UBSIO_KEY_MAX

/*
 * Data locks, striped by inode number: readers shared, writers and commits
 * exclusive.  Striped rather than one per object to keep an object in
 * memory small (a million looked-up objects must fit in 300 MB).
 */
#define OFS_NLOCKS 1024

struct htab;
struct ofs_ext_taken;

/*
 * Lock order: an object's stripe of rw, then sync_lock, then lock, then
 * the backend's own locks (a removal's kvb calls and the barrier's
 * kvb_barrier_begin run under lock; a backend never calls back into the
 * store); never the other way round.  Two stripes (a copy between
 * files): the lower first.
 */
struct ofs_store {
	pthread_rwlock_t rw[OFS_NLOCKS];
	/*
	 * The metadata connection (meta) and what the caller keeps with it
	 * (the daemon: its inode table); objects, the klen fields, nfiles,
	 * gen, synced_gen.
	 */
	pthread_mutex_t lock;
	struct meta *meta;
	struct htab *objects;  /* struct ofs_object in memory, by inode number (object.h) */
	/*
	 * The key length of the directory the last name was made in, valid
	 * while dir_renames (directories renamed so far) is klen_renames
	 * (ns.c).  Under lock.
	 */
	uint64_t klen_dir, klen_renames, dir_renames;
	size_t klen;
	struct kvb kvb;
	struct meta_geom geom;
	/* Files larger than this are cut into extents of this size (extent.h). */
	uint64_t esize;
	/*
	 * The extents of files whose records a transaction is deleting
	 * (ofs_extents_take), freed once it commits.  Under lock.
	 */
	struct ofs_ext_taken *xtaken;
	size_t nxtaken, capxtaken;
	char *root;
	char *meta_path;
	char *meta_shown;      /* meta_path for messages: a URI without its password */
	int meta_remote;       /* a database server's (a URI), not a sqlite file beside us */
	int lock_fd;
	uint64_t nfiles;
	int created;           /* this open made a new store */
	int was_clean;
	uint64_t dropped_new;  /* recovery counts */
	uint64_t dropped_orphans;
	uint64_t reverted;     /* unsynced versions that failed their checksum */
	uint64_t dropped_corrupt;
	uint64_t dropped_missing; /* values a KV store no longer had after an unclean stop */
	char start_msg[512];
	char backend[32];
	/* How a ubsio store's library was reached (after the recorded defaults). */
	struct kvb_ubsio_config ubsio;
	char ubsio_lib[4096];
	/*
	 * Sync generations: commits record gen; a barrier makes every commit
	 * of gen <= synced_gen durable.  Both under lock (the caller's meta_lock
	 * where a function takes one).
	 */
	uint64_t gen, synced_gen;
	pthread_mutex_t sync_lock; /* one barrier at a time */
	/*
	 * Space the metadata's filesystem keeps for the log, the snapshot and
	 * checkpoints, so that deletes and unmount work on a full disk: a
	 * file of reserve_size bytes next to the database (DB-reserve) that
	 * ofs_store_space gives back when the disk runs short; taken again
	 * under sync_lock, given back from any thread (reserve_held atomic).
	 */
	int reserve_fd;
	uint64_t reserve_size;
	int reserve_held;
	int verify;             /* check every byte read against its page checksum */
	struct ofs_dram dram;   /* the DRAM tier, when dram_capacity > 0; its own lock */
	uint64_t dram_capacity;
	struct ofs_metrics metrics; /* atomics */
	unsigned long promote_claims; /* the promotion worker's own (promote.c) */
	struct ofs_evict evict;       /* recency and eviction (evict.h) */
	struct ofs_batch_epochs *epochs; /* epoch.h; NULL: none kept */
};

#define OFS_RESERVE_SUFFIX "-reserve"
/* At most this, and an eighth of the metadata's filesystem. */
#define OFS_RESERVE_MAX (24ULL << 20)
#define OFS_PAGE_SIZE_MIN 4096ULL
#define OFS_PAGE_SIZE_MAX (1ULL << 30)

/*
 * The one geometry check, for options and for what a store records: page
 * size a power of two from 4096 to 1G, bucket size a multiple of it,
 * 1..256 buckets.  -EINVAL with a message naming the value.
 */
int ofs_geom_valid(const struct meta_geom *g, char *err, size_t errlen);

/* Parse "4G", "64K", "1048576"; -EINVAL on anything else or overflow. */
int ofs_parse_size(const char *s, uint64_t *out);

int ofs_store_open(struct ofs_store *s, const struct ofs_config *cfg, char *err, size_t errlen);

/*
 * The exclusive lock on ROOT that one daemon or fsck holds: *lock_fd, a
 * descriptor of ROOT.  Waits up to 3 s for a holder that is letting go
 * (an unmounted daemon saving its snapshot); -EBUSY after that.  Also
 * refuses a ROOT this process cannot read and write, saying so.
 */
int ofs_store_lock(const char *root, int *lock_fd, char *err, size_t errlen);

/*
 * How a ubsio store was last reached (library, Init variant, device) is kept
 * in its settings.  ofs_ubsio_defaults fills what uc leaves unset (lib NULL,
 * new_init -1, device_id -1) from them, libbuf holding a recorded path;
 * ofs_ubsio_record saves uc after a successful mount.  So a later mount or
 * offloadctl fsck loads the same library the same way without repeating the
 * options (the two Init signatures must not be confused).
 */
void ofs_ubsio_defaults(struct meta *m, struct kvb_ubsio_config *uc, char *libbuf,
			size_t liblen);
int ofs_ubsio_record(struct meta *m, const struct kvb_ubsio_config *uc);
/*
 * lib as it is recorded and loaded: a path with a '/' made absolute (a
 * relative one would be looked up again in the working directory of every
 * later mount or fsck), a bare name as given (dlopen's search path).
 */
int ofs_ubsio_lib_abs(const char *lib, char *out, size_t outlen, char *err, size_t errlen);
/*
 * The durability barrier: every commit recorded before it, data and
 * metadata, survives a power cut once it returns; pages freed before it
 * become reusable.  meta_lock serialises the metadata connection (the
 * daemon's lock; NULL when single-threaded).  Returns pages released.
 */
int ofs_store_sync(struct ofs_store *s, pthread_mutex_t *meta_lock, uint64_t *released);

/*
 * Give obj the page sums of its committed version cur (a file's record, or
 * an extent's: cur->ext) when its next commit can use them to hash only
 * the pages changed (kvb_obj_sums_wanted); meta_lock as ofs_store_commit's.
 */
void ofs_store_seed_sums(struct ofs_store *s, pthread_mutex_t *meta_lock,
			 const struct meta_inode *cur, struct kvb_obj *obj);
/*
 * Commit obj, the working state of the object whose record is *m: its
 * data checksummed, then one metadata update (size, run, checksums, sync
 * generation, and the last durable version for recovery), then the pages
 * the old version held freed at the next barrier.  *m is updated, under
 * meta_lock, only when the record was written; on failure the committed
 * version stays as it was.
 */
int ofs_store_commit(struct ofs_store *s, pthread_mutex_t *meta_lock, struct meta_inode *m,
		     struct kvb_obj *obj);

/*
 * Keep the metadata's filesystem usable: when it is short of space (less
 * than the reserve available) or full is set (a metadata write just got
 * ENOSPC), give the reserve back and checkpoint the log into the
 * database, truncating it; when space has come back, take the reserve
 * again.  Returns OFS_SPACE_* flags saying what it did.
 */
#define OFS_SPACE_RELEASED 1
#define OFS_SPACE_CHECKPOINTED 2
#define OFS_SPACE_ARMED 4
int ofs_store_space(struct ofs_store *s, pthread_mutex_t *meta_lock, int full);
/*
 * 1 when the metadata's disk is short (its reserve given back and less
 * than half of it left): new files and new data then get ENOSPC, and what
 * is left is for deletes, renames, truncates and the unmount.
 */
int ofs_store_meta_low(struct ofs_store *s);
/* For offloadctl: empty DB-reserve when the disk has less than it available. */
void ofs_reserve_give_back(const char *meta_path);

/* Let go of everything as a daemon kill would: no sync, no snapshot (tests). */
void ofs_store_crash(struct ofs_store *s);

/* Save the clean snapshot and close.  Returns the first error met. */
int ofs_store_close(struct ofs_store *s);

#endif
