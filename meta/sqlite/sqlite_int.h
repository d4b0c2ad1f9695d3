/*
 * sqlite_int.h: what the files of the sqlite engine share, and nothing
 * else includes.  meta.h is the interface and engine.h the table the
 * engine fills (ops.c); this is how the sqlite engine keeps its state
 * behind it.
 *
 * Every statement the engine runs more than rarely is prepared once in
 * sq_open (open.c, where their SQL text is), kept in struct meta_sq's
 * array at its ST_ index, reset after each use and finalized in
 * sq_close.  The files: stmt.c (the helpers below, transactions among
 * them, which every other file uses), open.c (open, schema and its
 * migrations, settings, the statement array), sync.c (the durability
 * barrier, the log), ns.c (the namespace), xattr.c, object.c (objects'
 * versions and mappings, recovery), extent.c (the extents of large
 * files), snapshot.c (the clean-unmount
 * state), task.c (promotion tasks) and evict.c (what eviction asks).
 * Each method of the table is the sq_ function of its name.
 */
#ifndef OFFLOADFS_META_SQLITE_INT_H
#define OFFLOADFS_META_SQLITE_INT_H

#include <stdint.h>

#include <sqlite3.h>

#include "engine.h"

/* The prepared statements, by index; their SQL text is meta_sql[] in open.c. */
enum {
	ST_GET,
	ST_LOOKUP,
	ST_LOOKUP_BRIEF,
	ST_NAME,
	ST_INSERT,
	ST_UPDATE,
	ST_DELETE,
	ST_DETACH,
	ST_MOVE,
	ST_HAS_CHILDREN,
	ST_READDIR,
	ST_MAPPINGS,
	ST_COUNT_MAPPINGS,
	ST_COUNT_FILES,
	ST_KV_GET,
	ST_KV_SET,
	ST_BITMAP_SAVE,
	ST_BITMAP_LOAD,
	ST_BITMAP_CLEAR,
	ST_COMMIT_OBJECT,
	ST_INSERT_OBJECT,
	ST_PCSUMS_GET,
	ST_UNSYNCED,
	ST_VALUES,
	ST_TASK_ADD,
	ST_TASK_NEXT,
	ST_TASK_START,
	ST_TASK_FINISH,
	ST_TASK_PENDING,
	ST_DIR_CHANGED,
	ST_NLINK,
	ST_XATTR_GET,
	ST_XATTR_INSERT,
	ST_XATTR_UPDATE,
	ST_XATTR_REMOVE,
	ST_XATTR_LIST,
	ST_XATTR_TOTAL,
	ST_EXTENT_COMMIT,
	ST_EXTENT_DELETE,
	ST_EXTENTS,
	ST_EXTENT_PCSUMS,
	ST_BEGIN,
	ST_BEGIN_READ,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_N
};

/* The columns of struct meta_inode, in meta_row_inode's order. */
#define INODE_COLS "ino, parent, mode, uid, gid, atime, mtime, ctime, size, " \
		   "bucket, page, npages, csum, state, gen, prev_bucket, prev_page, " \
		   "prev_npages, prev_size, prev_csum, nlink"
#define INODE_NCOLS 21
/*
 * An extent's row as an inode's (its owner's columns where it has none of
 * its own), and its index + 1 as column 22 (sq_row_mapping); the walks
 * over mappings give inode rows with a 0 there.
 */
#define EXTENT_COLS "e.ino, i.parent, i.mode, i.uid, i.gid, i.atime, i.mtime, i.ctime, " \
		    "e.size, e.bucket, e.page, e.npages, e.csum, i.state, e.gen, " \
		    "e.prev_bucket, e.prev_page, e.prev_npages, e.prev_size, e.prev_csum, " \
		    "i.nlink, e.idx + 1"

/* One connection to one database; used by one thread at a time (meta.h). */
struct meta_sq {
	struct meta base;               /* first: what meta.c and the callers hold */
	sqlite3 *db;
	sqlite3_stmt *st[ST_N];
	int found_version;             /* of an existing database, before migration */
	sqlite3_file *wal;              /* the log file, once meta_sync_begin found it */
	char *wal_path;                 /* the log file's name; NULL if out of memory */
	int wal_fd;                     /* the prefetches' own descriptor of it, or -1 (atomic) */
	int db_page;                    /* the database's page size: a log frame is 24 bytes more */
	int log_last;                   /* frames in the log after the last commit */
	long log_asked;                 /* frames of log asked for so far in this lap */
	int log_failed;                 /* a sync of the log failed (atomic): see meta_sync_begin */
};

static inline struct meta_sq *sq(struct meta *m)
{
	return (struct meta_sq *)m;
}

/* The methods of meta_sqlite_ops (meta.h says what each does). */
int sq_open(const char *path, int create, struct meta **out, char *err, size_t errlen);
void sq_close(struct meta *m);
int sq_forked(struct meta *m);
const char *sq_errmsg(struct meta *m);
int sq_format(struct meta *m, const struct meta_geom *g, const char *backend, uint32_t root_mode,
	      uint32_t uid, uint32_t gid);
int sq_geom_get(struct meta *m, struct meta_geom *g, char *backend, size_t blen);
int sq_setting_get(struct meta *m, const char *name, char *buf, size_t len);
int sq_setting_set(struct meta *m, const char *name, const char *value);
int sq_begin(struct meta *m);
int sq_commit(struct meta *m);
void sq_rollback(struct meta *m);
int sq_read_begin(struct meta *m);
void sq_read_end(struct meta *m);
int sq_sync(struct meta *m, uint64_t synced_gen);
int sq_sync_begin(struct meta *m, uint64_t synced_gen);
int sq_sync_end(struct meta *m);
void sq_log_prefetch(struct meta *m);
int sq_log_failed(struct meta *m);
int sq_synced_gen(struct meta *m, uint64_t *gen);
int sq_checkpoint(struct meta *m);
int sq_make_room(struct meta *m);
int sq_get(struct meta *m, uint64_t ino, struct meta_inode *out);
int sq_lookup(struct meta *m, uint64_t parent, const char *name, size_t len,
	      struct meta_inode *out);
int sq_lookup_brief(struct meta *m, uint64_t parent, const char *name, size_t len,
		    struct meta_inode *out);
int sq_insert(struct meta *m, struct meta_inode *in, const char *name, size_t len);
int sq_move(struct meta *m, uint64_t ino, uint64_t newparent, const char *name, size_t len);
int sq_detach(struct meta *m, uint64_t ino);
int sq_delete(struct meta *m, uint64_t ino);
int sq_dir_changed(struct meta *m, uint64_t dir, int64_t now, uint32_t *nlink);
int sq_has_children(struct meta *m, uint64_t dir);
int sq_readdir(struct meta *m, uint64_t dir, uint64_t after, meta_dirent_fn fn, void *ctx);
int sq_name(struct meta *m, uint64_t ino, uint64_t *parent, char *name, size_t *len);
int sq_key_len(struct meta *m, uint64_t ino, size_t *len);
int sq_subtree_depth(struct meta *m, uint64_t dir, size_t *len);
ssize_t sq_xattr_get(struct meta *m, uint64_t ino, const char *name, void *buf, size_t cap);
int sq_xattr_set(struct meta *m, uint64_t ino, const char *name, const void *value, size_t len,
		 int flags);
int sq_xattr_remove(struct meta *m, uint64_t ino, const char *name);
ssize_t sq_xattr_list(struct meta *m, uint64_t ino, char *buf, size_t cap);
int sq_update(struct meta *m, const struct meta_inode *in);
int sq_commit_object(struct meta *m, const struct meta_inode *in, const uint64_t *pcsums,
		     uint64_t n, const char *skey, enum meta_skey_op op);
int sq_insert_object(struct meta *m, struct meta_inode *in, const char *name, size_t len,
		     const uint64_t *pcsums, uint64_t n);
int sq_pcsums_get(struct meta *m, uint64_t ino, uint64_t *pcsums, uint64_t n);
int sq_foreach_mapping(struct meta *m, meta_ino_fn fn, void *ctx);
int sq_count_mappings(struct meta *m, uint64_t *n);
int sq_foreach_value(struct meta *m, meta_value_fn fn, void *ctx);
int sq_count_files(struct meta *m, uint64_t *n);
int sq_integrity(struct meta *m, char *first, size_t firstlen);
int sq_extent_commit(struct meta *m, const struct meta_inode *e, const uint64_t *pcsums,
		     uint64_t n, const char *skey, enum meta_skey_op op);
int sq_extent_delete(struct meta *m, uint64_t ino, uint64_t idx);
int sq_extents(struct meta *m, uint64_t ino, meta_ino_fn fn, void *ctx);
int sq_extent_pcsums_get(struct meta *m, uint64_t ino, uint64_t idx, uint64_t *pcsums, uint64_t n);
int sq_extent_from_row(struct meta *m, uint64_t ino);
/* Step s once: its column 0, a blob of n page checksums, into pcsums (-ENOENT, -EUCLEAN). */
int sq_pcsums_read(sqlite3_stmt *s, uint64_t *pcsums, uint64_t n);
int sq_extent_to_row(struct meta *m, uint64_t ino);
int sq_extents_stray(struct meta *m, int drop, uint64_t *n);
int sq_count_unsettled(struct meta *m, uint64_t *new_files, uint64_t *orphans);
int sq_recover(struct meta *m, uint64_t *dropped_new, uint64_t *dropped_orphans);
int sq_foreach_unsynced(struct meta *m, uint64_t gen, meta_ino_fn fn, void *ctx);
int sq_prev_clear(struct meta *m);
int sq_clean_get(struct meta *m, int *clean);
int sq_clean_set(struct meta *m, int clean);
int sq_bitmap_save(struct meta *m, uint32_t bucket, uint64_t npages, const uint64_t *words,
		   uint64_t nwords);
int sq_bitmap_load(struct meta *m, uint32_t bucket, uint64_t npages, uint64_t *words,
		   uint64_t nwords);
int sq_bitmap_clear(struct meta *m);
int sq_task_add(struct meta *m, struct meta_task *t);
int sq_task_claim(struct meta *m, struct meta_task *t);
int sq_task_finish(struct meta *m, uint64_t id, int state, const char *error);
int sq_task_pending(struct meta *m, uint64_t ino);
int sq_task_requeue(struct meta *m, uint64_t *n);
int sq_task_count(struct meta *m, int state, uint64_t *n);
int sq_task_prune(struct meta *m, uint64_t keep);
int sq_lru(struct meta *m, int64_t after_atime, uint64_t after_ino, int64_t before,
	   unsigned limit, meta_ino_fn fn,
	   void *ctx);
int sq_set_atimes(struct meta *m, const uint64_t *inos, const int64_t *atimes, size_t n);
int sq_xattr_count(struct meta *m, const char *name, uint64_t *n);
int sq_tenant_pages(struct meta *m, uint64_t tenant, uint64_t *pages);
int sq_tenant_xattrs(struct meta *m, const char *name, meta_tenant_fn fn, void *ctx);
int sq_tenant_evictions_set(struct meta *m, uint64_t tenant, uint64_t count, uint64_t bytes);
int sq_tenant_evictions_drop(struct meta *m, uint64_t tenant);
int sq_tenant_evictions(struct meta *m, meta_evictions_fn fn, void *ctx);

/*
 * Helpers of every file.  Those that take a prepared statement leave it
 * reset with its bindings cleared, so that it holds no read lock between
 * calls.
 */

/* sqlite's result code as a negative errno (0 for OK, DONE and ROW). */
int sq_errno(int rc);
/*
 * Run a statement that returns no row of interest; a write that finds the
 * disk full is tried once more after the full hook made room.
 */
int sq_step_done(struct meta_sq *m, sqlite3_stmt *s);
/* Reset s and clear its bindings after reading rows from it. */
void sq_finish(sqlite3_stmt *s);
/* Run SQL text once (rare statements: schema, recovery, maintenance). */
int sq_exec(struct meta_sq *m, const char *sql);
/* -ENOENT when the last statement changed no row, else ret. */
int sq_changed_one(struct meta_sq *m, int ret);
/* Run statement st with ?1 = id: 1 when it returns a row, 0 when not. */
int sq_exists(struct meta_sq *m, int st, uint64_t id);

/*
 * Bind ?1..?14 of an insert of a new inode: parent, name, mode, uid, gid,
 * the times, size, bucket, page, npages, csum, state (name stays the
 * caller's until the statement runs).
 */
void sq_bind_new_inode(sqlite3_stmt *s, const struct meta_inode *in, const char *name,
			 size_t len);
/* An inode row of INODE_COLS, from the current row of s. */
void sq_row_inode(sqlite3_stmt *s, struct meta_inode *in);
/* An inode row of INODE_COLS then the extent column (EXTENT_COLS). */
void sq_row_mapping(sqlite3_stmt *s, struct meta_inode *in);
/* sq_each_inode over rows of sq_row_mapping. */
int sq_each_mapping(sqlite3_stmt *s, meta_ino_fn fn, void *ctx);
/* Step s once: its row as *out, -ENOENT when it has none. */
int sq_one_inode(sqlite3_stmt *s, struct meta_inode *out);
/* Step s to the end, calling fn on each row until it returns non-zero. */
int sq_each_inode(sqlite3_stmt *s, meta_ino_fn fn, void *ctx);

/* The store's own settings table (geometry, clean flag, synced_gen, ...). */
int sq_kv_get(struct meta_sq *m, const char *k, sqlite3_int64 *iv, char *sv, size_t slen);
int sq_kv_set_int(struct meta_sq *m, const char *k, sqlite3_int64 v);
int sq_kv_set_text(struct meta_sq *m, const char *k, const char *v);

/* sqlite's WAL hook: the automatic checkpoint, with its errors kept (sync.c). */
int sq_wal_hook(void *arg, sqlite3 *db, const char *name, int pages);

#endif
