/*
 * meta_int.h: what the files of the sqlite engine share, and nothing else
 * includes.  meta.h is the interface; this is how the sqlite engine keeps
 * its state behind it.
 *
 * Every statement the engine runs more than rarely is prepared once in
 * meta_open (meta.c, where their SQL text is), kept in struct meta's
 * array at its ST_ index, reset after each use and finalized in
 * meta_close.  The files: stmt.c (the helpers below, transactions among
 * them, which every other file uses), meta.c (open, schema and its
 * migrations, settings, the statement array), sync.c (the durability
 * barrier, the log), ns.c (the namespace),
 * xattr.c, object.c (objects' versions and mappings, recovery),
 * snapshot.c (the clean-unmount state) and task.c (promotion tasks).
 */
#ifndef OFFLOADFS_META_INT_H
#define OFFLOADFS_META_INT_H

#include <stdint.h>

#include <sqlite3.h>

#include "meta.h"

/* The prepared statements, by index; their SQL text is meta_sql[] in meta.c. */
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
 * its own), and its index + 1 as column 22 (meta_row_mapping); the walks
 * over mappings give inode rows with a 0 there.
 */
#define EXTENT_COLS "e.ino, i.parent, i.mode, i.uid, i.gid, i.atime, i.mtime, i.ctime, " \
		    "e.size, e.bucket, e.page, e.npages, e.csum, i.state, e.gen, " \
		    "e.prev_bucket, e.prev_page, e.prev_npages, e.prev_size, e.prev_csum, " \
		    "i.nlink, e.idx + 1"

/* One connection to one database; used by one thread at a time (meta.h). */
struct meta {
	sqlite3 *db;
	sqlite3_stmt *st[ST_N];
	unsigned long fault_at, writes; /* meta_inject_fault */
	int found_version;             /* of an existing database, before migration */
	uint64_t changes;               /* namespace and object writes, for group commit */
	sqlite3_file *wal;              /* the log file, once meta_sync_begin found it */
	char *wal_path;                 /* the log file's name; NULL if out of memory */
	int wal_fd;                     /* the prefetches' own descriptor of it, or -1 (atomic) */
	int db_page;                    /* the database's page size: a log frame is 24 bytes more */
	int log_last;                   /* frames in the log after the last commit */
	long log_asked;                 /* frames of log asked for so far in this lap */
	int log_failed;                 /* a sync of the log failed (atomic): see meta_sync_begin */
	int (*full_hook)(void *);       /* a write found the disk full: see meta_set_full_hook */
	void *full_arg;
};

/*
 * Helpers of every file.  Those that take a prepared statement leave it
 * reset with its bindings cleared, so that it holds no read lock between
 * calls.
 */

/* sqlite's result code as a negative errno (0 for OK, DONE and ROW). */
int meta_errno(int rc);
/*
 * Count a namespace or object write (for meta_changes), and fail it with
 * -EIO when it is the one meta_inject_fault chose.
 */
int meta_fault(struct meta *m);
/*
 * Run a statement that returns no row of interest; a write that finds the
 * disk full is tried once more after the full hook made room.
 */
int meta_step_done(struct meta *m, sqlite3_stmt *s);
/* Reset s and clear its bindings after reading rows from it. */
void meta_finish(sqlite3_stmt *s);
/* Run SQL text once (rare statements: schema, recovery, maintenance). */
int meta_exec(struct meta *m, const char *sql);
/* -ENOENT when the last statement changed no row, else ret. */
int meta_changed_one(struct meta *m, int ret);
/* Run statement st with ?1 = id: 1 when it returns a row, 0 when not. */
int meta_exists(struct meta *m, int st, uint64_t id);

/*
 * Bind ?1..?14 of an insert of a new inode: parent, name, mode, uid, gid,
 * the times, size, bucket, page, npages, csum, state (name stays the
 * caller's until the statement runs).
 */
void meta_bind_new_inode(sqlite3_stmt *s, const struct meta_inode *in, const char *name,
			 size_t len);
/* An inode row of INODE_COLS, from the current row of s. */
void meta_row_inode(sqlite3_stmt *s, struct meta_inode *in);
/* An inode row of INODE_COLS then the extent column (EXTENT_COLS). */
void meta_row_mapping(sqlite3_stmt *s, struct meta_inode *in);
/* meta_each_inode over rows of meta_row_mapping. */
int meta_each_mapping(sqlite3_stmt *s, meta_ino_fn fn, void *ctx);
/* Step s once: its row as *out, -ENOENT when it has none. */
int meta_one_inode(sqlite3_stmt *s, struct meta_inode *out);
/* Step s to the end, calling fn on each row until it returns non-zero. */
int meta_each_inode(sqlite3_stmt *s, meta_ino_fn fn, void *ctx);

/* The store's own settings table (geometry, clean flag, synced_gen, ...). */
int meta_kv_get(struct meta *m, const char *k, sqlite3_int64 *iv, char *sv, size_t slen);
int meta_kv_set_int(struct meta *m, const char *k, sqlite3_int64 v);
int meta_kv_set_text(struct meta *m, const char *k, const char *v);

/* sqlite's WAL hook: the automatic checkpoint, with its errors kept (sync.c). */
int meta_wal_hook(void *arg, sqlite3 *db, const char *name, int pages);

#endif
