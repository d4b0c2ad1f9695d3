/*
 * meta: the metadata store.  The only code that speaks SQL.
 *
 * This header is the seam between the store and a metadata engine.
 * meta_open chooses the engine by the value it is given; every other
 * function calls that engine's method (meta.c, over the table of
 * engine.h).  The engine is sqlite, one database file next to the data
 * (meta/sqlite/); another, such as a networked database shared by
 * several nodes, fills the same table.  An engine keeps:
 *   - the store's settings: geometry, backend, named settings;
 *   - the namespace: one row per file or directory, found by (parent,
 *     name), with directory link counts and user xattrs;
 *   - each object's versions: the current one's mapping (bucket, first
 *     page, page count, size, checksum, per-page checksums, value key,
 *     state) and the last durable one that recovery falls back to;
 *   - the clean-unmount state (flag and bitmap snapshot), and the
 *     promotion tasks of the DRAM tier.
 *
 * What an engine must provide:
 *   - every function returns 0 (or the documented count) or a negative
 *     errno: -ENOENT no such row, -EEXIST a name taken, -ENOSPC its disk
 *     full, -EUCLEAN a record or database that is not what it should be,
 *     -EIO anything else that failed;
 *   - one struct meta used by one thread at a time (the caller
 *     serialises), except meta_sync_end, which runs beside the others
 *     (see there);
 *   - each write atomic by itself, and the calls between meta_begin and
 *     meta_commit atomic together; a commit visible to every later call
 *     and surviving a crash of the process; every commit surviving power
 *     loss once a later meta_sync (or meta_sync_end) returns;
 *   - inode numbers given by meta_insert, increasing and never reused
 *     (META_ROOT_INO is the root's): readdir resumes after an ino, and
 *     the kernel may still hold a deleted file's;
 *   - directory link counts kept as rows come and go, and an inode's
 *     xattrs deleted with it, whoever changes the rows;
 *   - its own format version: a store of a version it does not know is
 *     refused without a write, an older one migrated in whole steps.
 * Nothing here knows about FUSE.
 */
#ifndef OFFLOADFS_META_H
#define OFFLOADFS_META_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define META_SCHEMA_VERSION 4
#define META_ROOT_INO 1
#define META_NAME_MAX 255
/*
 * The longest key: the path of a file or directory below its tenant
 * directory, "a/b/c" (PATH_MAX less its NUL, so that any key is a valid
 * relative path from its tenant).  With the tenant, a path below the root
 * is at most META_NAME_MAX + 1 + META_KEY_MAX bytes.
 */
#define META_KEY_MAX 4095

struct meta;

struct meta_geom {
	uint64_t page_size;
	uint64_t bucket_size;
	uint32_t bucket_count;
};

enum meta_state {
	META_COMMITTED = 0, /* content was closed or fsynced at least once */
	META_NEW = 1,       /* created, never committed: dropped by recovery */
	META_QUARANTINED = 2, /* failed its checksum; moved to lost+found by fsck --repair */
};

struct meta_inode {
	uint64_t ino;
	uint64_t parent;    /* 0 for the root and for unlinked-but-open files */
	int64_t atime, mtime, ctime; /* nanoseconds since the epoch */
	uint64_t size;
	uint64_t page, npages;
	uint64_t csum;      /* XXH3-64 of [0, size) when committed */
	uint64_t gen;       /* sync generation of the last commit (meta_sync) */
	/*
	 * The last version known durable, while the current one may not be:
	 * recovery after a power cut falls back to it when the current
	 * version's pages do not match its checksum.  prev_bucket -1: none,
	 * -2: an empty version.
	 */
	uint64_t prev_page, prev_npages, prev_size, prev_csum;
	uint32_t mode, uid, gid;
	/*
	 * Directories: 2 + subdirectories, kept by the store itself as rows
	 * come and go (read only; meta_update never writes it).
	 */
	uint32_t nlink;
	int32_t bucket;     /* -1: no pages; META_EXTENTS: the data is in extents */
	int32_t prev_bucket;
	int state;          /* enum meta_state */
	/*
	 * 0 for the file's own row.  In a record of one extent (the walks
	 * over mappings, meta_extents): its index + 1, the mapping and version
	 * fields being the extent's, the others its file's.
	 */
	uint64_t ext;
};

/*
 * The bucket of a file larger than one extent (the store's extent_size):
 * its row keeps the size, npages (the pages of all its extents) and the
 * attributes; each extent idx, the bytes [idx * extent_size, + size) with
 * zeros past them, has a mapping and versions of its own.
 */
#define META_EXTENTS (-3)

/* ---- opening, settings ---- */

/*
 * Open (and with create set, create) the store path names: a libpq
 * connection URI (postgresql://... or postgres://...: the schema
 * "offloadfs" of that database; a password in it is refused, libpq's
 * ~/.pgpass, PGPASSFILE, PGPASSWORD or a service file give one), or else
 * the path of a sqlite database.  A file that is not
 * an offloadfs database, or has another schema version, is refused and never
 * written: err gets a message such as "schema version: found 7, expected 3".
 * A database of an older schema is migrated to this one.
 * Returns 1 when the database was created by this call, 0 when it existed.
 */
int meta_open(const char *path, int create, struct meta **out, char *err, size_t errlen);
/*
 * 1 when path is a libpq connection URI (postgresql:// or postgres://):
 * a store in PostgreSQL, with no file of its own next to the data.
 */
int meta_is_remote(const char *path);
/* path as messages and logs show it: a URI without its password. */
void meta_target_show(const char *path, char *buf, size_t len);
/*
 * Or'ed into create: refuse (-EPROTONOSUPPORT, unwritten) a database of an
 * older schema rather than migrate it (a read-only check).
 */
#define META_OPEN_NO_MIGRATE 2
void meta_close(struct meta *m);
/*
 * In the child of a fork (the daemon detaching), after the parent is gone:
 * take again what the engine held for the process and a fork does not
 * carry (sqlite: its lock on the database file, without which another
 * process could take the database and delete its log).  -EBUSY when
 * another process holds it now.
 */
int meta_forked(struct meta *m);
/* The engine's last error text, for logs. */
const char *meta_errmsg(struct meta *m);

/* Record the geometry and the root directory of a new store. */
int meta_format(struct meta *m, const struct meta_geom *g, const char *backend,
		uint32_t root_mode, uint32_t uid, uint32_t gid);
/* Geometry and backend name of a formatted store; -ENOENT when unformatted. */
int meta_geom_get(struct meta *m, struct meta_geom *g, char *backend, size_t blen);

/*
 * A named setting of the store (text), such as how its backend was last
 * reached; -ENOENT when never set.  Names other than the geometry's.
 */
int meta_setting_get(struct meta *m, const char *name, char *buf, size_t len);
int meta_setting_set(struct meta *m, const char *name, const char *value);

/* ---- transactions and durability ---- */

/* Explicit transactions around several calls (no other writer meanwhile). */
int meta_begin(struct meta *m);
/* On failure the transaction is rolled back. */
int meta_commit(struct meta *m);
void meta_rollback(struct meta *m);
/*
 * Many reads in one read transaction (meta_read_end ends it): each
 * statement then starts and ends no read of the log of its own.  Reads
 * only; nothing may be begun inside.
 */
int meta_read_begin(struct meta *m);
void meta_read_end(struct meta *m);
/*
 * Make every committed transaction durable against power loss, recording
 * that every commit of generation <= synced_gen is durable.
 */
int meta_sync(struct meta *m, uint64_t synced_gen);
/*
 * The same in two halves, so that the wait for the disk runs without the
 * caller's lock: meta_sync_begin records synced_gen in a commit that does
 * not wait for the disk (called as any other write, under the caller's
 * lock); meta_sync_end then makes it and every commit before it durable.
 * meta_sync_end may run while other threads use m (the daemon relies on
 * this); calls to it must not overlap one another.
 */
int meta_sync_begin(struct meta *m, uint64_t synced_gen);
int meta_sync_end(struct meta *m);
/*
 * Ask the kernel to read back, in the background, the pages of the log
 * (up to one lap of it) it no longer caches: evicted, or dropped.  A log
 * frame is a page and a header, so frames straddle the file's pages: a
 * commit that writes into a page the kernel evicted first reads that
 * page from the disk, and waits for it while the caller holds its lock
 * (commits also ask for the frames just ahead of them).  Runs no
 * statement: it may run while other threads use m; calls to it must not
 * overlap one another.
 */
void meta_log_prefetch(struct meta *m);
/*
 * A sync of the log failed and no checkpoint has recovered from it yet
 * (the next meta_sync_begin tries): until then no barrier succeeds.  Set
 * also by a checkpoint inside a commit, which may take the error
 * meta_sync_end's own sync would have seen: ask under the lock that
 * serialises commits, after meta_sync_end.
 */
int meta_log_failed(struct meta *m);
/* The generation recorded by the last meta_sync (0 if none). */
int meta_synced_gen(struct meta *m, uint64_t *gen);
/* Copy the log into the database and empty it. */
int meta_checkpoint(struct meta *m);
/* Count of namespace and object writes so far (not syncs or snapshots): group commit. */
uint64_t meta_changes(struct meta *m);
/*
 * Called (under the caller's lock on m) when a write finds the disk full,
 * before it is tried once more: the store gives back its reserve there.
 */
void meta_set_full_hook(struct meta *m, int (*hook)(void *), void *arg);
/*
 * A store in a database server (meta_is_remote): how long a call waits
 * for the server when it is unreachable or restarting (reconnecting
 * meanwhile) before it fails with -EIO, and how long a statement may go
 * without an answer; 0: META_TIMEOUT_DEFAULT.  A sqlite store ignores it.
 */
#define META_TIMEOUT_DEFAULT 30
#define META_TIMEOUT_MAX 86400
void meta_set_timeout(struct meta *m, unsigned seconds);
/*
 * For the calling thread from now on: a database server that is
 * unreachable fails its calls at once (one attempt to connect) rather
 * than after meta_timeout.  For background work that holds the caller's
 * lock on m, which requests of cached objects need too.
 */
void meta_thread_nowait(int on);
/* Where the engine's own messages go (a lost connection, a reconnect); NULL: stderr. */
void meta_set_log(struct meta *m, void (*log)(const char *fmt, ...));
/*
 * A transaction of several statements found the disk full and was rolled
 * back (the log cannot be emptied while one is open): give back the
 * reserve and empty the log, so that the caller may run it once more.
 * With no transaction open.  0 when room was made.
 */
int meta_make_room(struct meta *m);

/* ---- the namespace ---- */

int meta_get(struct meta *m, uint64_t ino, struct meta_inode *out);
int meta_lookup(struct meta *m, uint64_t parent, const char *name, size_t len,
		struct meta_inode *out);
/*
 * meta_lookup of what a descriptor needs: ino, mode, state, size, bucket,
 * page, npages and csum; the other fields of *out are zero (and
 * prev_bucket -1).  A third of the columns: for lookups of many keys.
 */
int meta_lookup_brief(struct meta *m, uint64_t parent, const char *name, size_t len,
		      struct meta_inode *out);
/* Insert in->parent/name; sets in->ino.  -EEXIST when the name is taken. */
int meta_insert(struct meta *m, struct meta_inode *in, const char *name, size_t len);
/* Move ino to newparent/name.  -EEXIST when the target name is taken. */
int meta_move(struct meta *m, uint64_t ino, uint64_t newparent, const char *name, size_t len);
/* Detach ino from the namespace, keeping its row (unlinked while open). */
int meta_detach(struct meta *m, uint64_t ino);
/* Delete ino's row, its xattrs with it. */
int meta_delete(struct meta *m, uint64_t ino);
/*
 * An entry of directory dir was made, removed or renamed: its mtime and
 * ctime become now; *nlink (may be NULL) gets its link count.
 */
int meta_dir_changed(struct meta *m, uint64_t dir, int64_t now, uint32_t *nlink);
/* 1 when dir has entries, 0 when empty. */
int meta_has_children(struct meta *m, uint64_t dir);
/*
 * Call fn for each entry of dir with ino > after, in ino order, until fn
 * returns non-zero (that value is returned) or the entries run out (0).
 */
typedef int (*meta_dirent_fn)(void *ctx, const struct meta_inode *in,
			      const char *name, size_t len);
int meta_readdir(struct meta *m, uint64_t dir, uint64_t after, meta_dirent_fn fn, void *ctx);

/* Name and parent of ino (for building keys); -ENOENT. len gets the length. */
int meta_name(struct meta *m, uint64_t ino, uint64_t *parent, char *name, size_t *len);
/*
 * The path of ino below its tenant directory (its object key), or with
 * with_tenant the path below the root, NUL-terminated in buf; *len gets its
 * length and *tenant (may be NULL) the tenant directory's ino.
 * -ENAMETOOLONG when it does not fit, -ENOENT when ino is not in the
 * namespace (unlinked).
 */
int meta_path(struct meta *m, uint64_t ino, int with_tenant, char *buf, size_t cap,
	      size_t *len, uint64_t *tenant);
/*
 * The length of ino's key (meta_path without the tenant) without building
 * it: 0 for a tenant; -ENAMETOOLONG past META_KEY_MAX.
 */
int meta_key_len(struct meta *m, uint64_t ino, size_t *len);
/*
 * The longest path below dir of any of its descendants ("a/b" for dir/a/b),
 * 0 when it has none: the room a rename of dir must leave for them.
 */
int meta_subtree_depth(struct meta *m, uint64_t dir, size_t *len);

/* ---- extended attributes ---- */

/*
 * Extended attributes of the user namespace ("user.x", stored with their
 * full name).  Names are at most META_XATTR_NAME_MAX bytes, values at most
 * META_XATTR_SIZE_MAX (the kernel's limits); all of one inode's, each name
 * with a NUL and its value, at most META_XATTR_TOTAL_MAX (-ENOSPC past it,
 * as ext4 when an inode's xattr space is full), so that their list always
 * fits the kernel's 64 KiB.  A deleted inode's go with it.
 */
#define META_XATTR_NAME_MAX 255
#define META_XATTR_SIZE_MAX 65536
#define META_XATTR_TOTAL_MAX 65536
#define META_XATTR_CREATE 1  /* fail with -EEXIST when it exists (XATTR_CREATE) */
#define META_XATTR_REPLACE 2 /* fail with -ENODATA when it does not (XATTR_REPLACE) */
/* The value's length, copied to buf when cap > 0; -ENODATA, -ERANGE when cap is short. */
ssize_t meta_xattr_get(struct meta *m, uint64_t ino, const char *name, void *buf, size_t cap);
int meta_xattr_set(struct meta *m, uint64_t ino, const char *name, const void *value,
		   size_t len, int flags);
int meta_xattr_remove(struct meta *m, uint64_t ino, const char *name);
/*
 * The names, each followed by a NUL, in buf; returns their length, or
 * -ERANGE when cap is short (cap 0: only measure).
 */
ssize_t meta_xattr_list(struct meta *m, uint64_t ino, char *buf, size_t cap);

/* ---- objects: versions and mappings ---- */

/* Write every attribute and the mapping of in->ino. */
int meta_update(struct meta *m, const struct meta_inode *in);
/*
 * Record a new committed version: meta_update plus the per-page checksums
 * (XXH3-64 of each page's bytes below size; n = npages).
 *
 * skey is the key of the version's value in a KV backend (NULL: none, as
 * for the pages backend).  op says what happens to the previous key:
 * META_SKEY_KEEP_PREV when in carries the old version as its prev_*
 * mapping (prev_skey takes the old skey), META_SKEY_REVERT when in is the
 * previous version restored (skey takes prev_skey; the skey argument is
 * ignored).
 */
enum meta_skey_op { META_SKEY_SET = 0, META_SKEY_KEEP_PREV = 1, META_SKEY_REVERT = 2 };
#define META_SKEY_MAX 4096
int meta_commit_object(struct meta *m, const struct meta_inode *in, const uint64_t *pcsums,
		       uint64_t n, const char *skey, enum meta_skey_op op);
/*
 * A new regular file committed at once, as meta_insert of a new file then
 * meta_commit_object (no previous version, no KV key) would leave it, in
 * one statement; sets in->ino.  -EEXIST when the name is taken.
 */
int meta_insert_object(struct meta *m, struct meta_inode *in, const char *name, size_t len,
		       const uint64_t *pcsums, uint64_t n);
/* The per-page checksums of ino: -ENOENT when none are recorded. */
int meta_pcsums_get(struct meta *m, uint64_t ino, uint64_t *pcsums, uint64_t n);

typedef int (*meta_ino_fn)(void *ctx, const struct meta_inode *in);
/*
 * Call fn for every object in the namespace that holds pages (committed or
 * quarantined), in ino order, until fn returns non-zero (returned); a file
 * of extents is one call per extent that holds pages (ext set), in index
 * order.  meta_count_mappings counts those calls; meta_foreach_value and
 * meta_foreach_unsynced give extents the same way.
 */
int meta_foreach_mapping(struct meta *m, meta_ino_fn fn, void *ctx);
/* How many objects meta_foreach_mapping calls fn for. */
int meta_count_mappings(struct meta *m, uint64_t *n);
/*
 * Call fn for every object with a value in a KV backend, in ino order, with
 * the keys of its current and previous versions (either may be NULL), until
 * fn returns non-zero (returned).  -EUCLEAN for a key that is not one.
 */
typedef int (*meta_value_fn)(void *ctx, const struct meta_inode *in, const char *skey,
			     const char *prev_skey);
int meta_foreach_value(struct meta *m, meta_value_fn fn, void *ctx);
/* Regular files (objects) in the store. */
int meta_count_files(struct meta *m, uint64_t *n);
/*
 * sqlite's integrity_check of the whole database: 0 when it is sound,
 * else the number of problems it listed (at most 100), the first in
 * first; -errno when it could not run (a damaged page may be that too).
 */
int meta_integrity(struct meta *m, char *first, size_t firstlen);

/* ---- extents of files larger than one extent ---- */

/*
 * Record a new committed version of extent e->ext - 1 of file e->ino
 * (its mapping, csum, gen and prev_* fields; pcsums as for
 * meta_commit_object; skey and op too), creating the extent or
 * replacing it.
 */
int meta_extent_commit(struct meta *m, const struct meta_inode *e, const uint64_t *pcsums,
		       uint64_t n, const char *skey, enum meta_skey_op op);
/* Delete extent idx of ino: -ENOENT when it has none. */
int meta_extent_delete(struct meta *m, uint64_t ino, uint64_t idx);
/* Call fn for each extent of ino in index order (records as the walks give them). */
int meta_extents(struct meta *m, uint64_t ino, meta_ino_fn fn, void *ctx);
/* The per-page checksums of extent idx of ino: -ENOENT when none are recorded. */
int meta_extent_pcsums_get(struct meta *m, uint64_t ino, uint64_t idx, uint64_t *pcsums,
			   uint64_t n);

/*
 * A file of one run becoming a file of extents: its row's version (the
 * mapping, checksums, value keys and previous version, when it has pages)
 * becomes extent 0, the row keeping none of them.  meta_extent_to_row is
 * the way back: extent 0's version (if any) into the row, whose other
 * extents must be gone, and no extents left.  In the caller's transaction,
 * with meta_update of the row.
 */
int meta_extent_from_row(struct meta *m, uint64_t ino);
int meta_extent_to_row(struct meta *m, uint64_t ino);
/*
 * Extent rows whose file is gone (a damaged database: the cascade from
 * the file's row did not run): their count in *n, and with drop their
 * deletion.  Their pages are already out of the walks over mappings.
 */
int meta_extents_stray(struct meta *m, int drop, uint64_t *n);

/* ---- recovery after an unclean stop ---- */

/* Rows left by an unclean stop: never committed, and unlinked while open. */
int meta_count_unsettled(struct meta *m, uint64_t *new_files, uint64_t *orphans);
/*
 * Drop files that were never committed and files that were unlinked while
 * open.  Counts of each are returned.
 */
int meta_recover(struct meta *m, uint64_t *dropped_new, uint64_t *dropped_orphans);
/*
 * Call fn for each committed object whose last commit is newer than gen
 * (not known durable).  fn may not change the store; collect and act after.
 */
int meta_foreach_unsynced(struct meta *m, uint64_t gen, meta_ino_fn fn, void *ctx);
/* Forget every previous version (all current versions are durable now). */
int meta_prev_clear(struct meta *m);

/* ---- the clean-unmount state ---- */

int meta_clean_get(struct meta *m, int *clean);
int meta_clean_set(struct meta *m, int clean);
/* The bitmap snapshot, one row per bucket. */
int meta_bitmap_save(struct meta *m, uint32_t bucket, uint64_t npages,
		     const uint64_t *words, uint64_t nwords);
/* -ENOENT when there is no snapshot for bucket, -EINVAL when its size differs. */
int meta_bitmap_load(struct meta *m, uint32_t bucket, uint64_t npages,
		     uint64_t *words, uint64_t nwords);
int meta_bitmap_clear(struct meta *m);

/* ---- promotion tasks (DRAM tier) ---- */

enum meta_task_state {
	META_TASK_QUEUED = 0,
	META_TASK_RUNNING = 1,
	META_TASK_DONE = 2,
	META_TASK_FAILED = 3,
	META_TASK_DROPPED = 4, /* its object was deleted or overwritten first */
};

struct meta_task {
	uint64_t id, ino;
	char key[1024];        /* tenant/key, for operators */
	char reason[16];       /* policy, request, warmup */
	uint64_t size, page, csum;
	int32_t bucket;        /* the version to promote: its source location */
	int state;
	int64_t created, started, finished; /* unix ns; 0 when not yet */
	char error[128];
};

/* Queue a promotion of t's version (t->id is set). */
int meta_task_add(struct meta *m, struct meta_task *t);
/* The oldest queued task, now marked running; -ENOENT when none. */
int meta_task_claim(struct meta *m, struct meta_task *t);
int meta_task_finish(struct meta *m, uint64_t id, int state, const char *error);
/* 1 when a queued or running task exists for ino. */
int meta_task_pending(struct meta *m, uint64_t ino);
/* After a crash: running tasks become queued again.  Returns how many. */
int meta_task_requeue(struct meta *m, uint64_t *n);
int meta_task_count(struct meta *m, int state, uint64_t *n);
/* Keep the newest `keep` finished tasks, delete older ones. */
int meta_task_prune(struct meta *m, uint64_t keep);

/* ---- eviction (evict.c) ---- */

/*
 * Call fn for up to limit closed candidates of eviction (committed regular
 * files in the namespace whose atime, mtime and ctime are all before
 * before; INT64_MAX: any) in order of (atime, ino) after (after_atime,
 * after_ino), oldest first, until fn returns non-zero (returned).
 */
int meta_lru(struct meta *m, int64_t after_atime, uint64_t after_ino, int64_t before,
	     unsigned limit, meta_ino_fn fn, void *ctx);
/* Write the atimes of n inodes (last uses kept in memory), in the caller's transaction. */
int meta_set_atimes(struct meta *m, const uint64_t *inos, const int64_t *atimes, size_t n);
/* How many inodes have the xattr name. */
int meta_xattr_count(struct meta *m, const char *name, uint64_t *n);
/* Pages held by the regular files below the directory tenant. */
int meta_tenant_pages(struct meta *m, uint64_t tenant, uint64_t *pages);
/*
 * Call fn for each tenant directory with the xattr name: its ino, its name
 * and the value (not NUL-terminated), until fn returns non-zero (returned).
 */
typedef int (*meta_tenant_fn)(void *ctx, uint64_t ino, const char *name, size_t len,
			      const char *value, size_t vlen);
int meta_tenant_xattrs(struct meta *m, const char *name, meta_tenant_fn fn, void *ctx);
/*
 * A tenant's eviction counts (files, bytes), kept in the store table under
 * "tenant_evictions.<ino>": set (in the caller's transaction), dropped,
 * and listed (fn for each until it returns non-zero, returned).
 */
int meta_tenant_evictions_set(struct meta *m, uint64_t tenant, uint64_t count, uint64_t bytes);
int meta_tenant_evictions_drop(struct meta *m, uint64_t tenant);
typedef int (*meta_evictions_fn)(void *ctx, uint64_t tenant, uint64_t count, uint64_t bytes);
int meta_tenant_evictions(struct meta *m, meta_evictions_fn fn, void *ctx);

#endif
