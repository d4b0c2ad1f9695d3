/*
 * meta.c: the sqlite metadata store (schema version 3).
 *
 * Statements are prepared once in meta_open, kept in an array indexed by
 * the ST_ constants, reset after each use and finalized in meta_close.
 * The schema is described in DESIGN.md; keep the two in step.
 */
#include "meta.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#define META_MAGIC "offloadfs"

enum {
	ST_GET,
	ST_LOOKUP,
	ST_NAME,
	ST_INSERT,
	ST_UPDATE,
	ST_DELETE,
	ST_DETACH,
	ST_MOVE,
	ST_HAS_CHILDREN,
	ST_READDIR,
	ST_MAPPINGS,
	ST_COUNT_FILES,
	ST_KV_GET,
	ST_KV_SET,
	ST_BITMAP_SAVE,
	ST_BITMAP_LOAD,
	ST_BITMAP_CLEAR,
	ST_COMMIT_OBJECT,
	ST_PCSUMS_GET,
	ST_UNSYNCED,
	ST_VALUES,
	ST_TASK_ADD,
	ST_TASK_NEXT,
	ST_TASK_START,
	ST_TASK_FINISH,
	ST_TASK_PENDING,
	ST_DIR_CHANGED,
	ST_XATTR_GET,
	ST_XATTR_INSERT,
	ST_XATTR_UPDATE,
	ST_XATTR_REMOVE,
	ST_XATTR_LIST,
	ST_XATTR_TOTAL,
	ST_BEGIN,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_N
};

#define INODE_COLS "ino, parent, mode, uid, gid, atime, mtime, ctime, size, " \
		   "bucket, page, npages, csum, state, gen, prev_bucket, prev_page, " \
		   "prev_npages, prev_size, prev_csum, nlink"
#define INODE_NCOLS 21

static const char *const meta_sql[ST_N] = {
	[ST_GET] = "SELECT " INODE_COLS " FROM inodes WHERE ino = ?1",
	[ST_LOOKUP] = "SELECT " INODE_COLS " FROM inodes WHERE parent = ?1 AND name = ?2",
	[ST_NAME] = "SELECT parent, name FROM inodes WHERE ino = ?1",
	[ST_INSERT] = "INSERT INTO inodes (parent, name, mode, uid, gid, atime, mtime, "
		      "ctime, size, bucket, page, npages, csum, state, nlink) VALUES "
		      "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
		      "CASE WHEN (?3 & 61440) = 16384 THEN 2 ELSE 1 END)",
	[ST_UPDATE] = "UPDATE inodes SET mode = ?2, uid = ?3, gid = ?4, atime = ?5, "
		      "mtime = ?6, ctime = ?7, size = ?8, bucket = ?9, page = ?10, "
		      "npages = ?11, csum = ?12, state = ?13, gen = ?14, prev_bucket = ?15, "
		      "prev_page = ?16, prev_npages = ?17, prev_size = ?18, prev_csum = ?19 "
		      "WHERE ino = ?1",
	[ST_COMMIT_OBJECT] = "UPDATE inodes SET mode = ?2, uid = ?3, gid = ?4, atime = ?5, "
			     "mtime = ?6, ctime = ?7, size = ?8, bucket = ?9, page = ?10, "
			     "npages = ?11, csum = ?12, state = ?13, gen = ?14, "
			     "prev_bucket = ?15, prev_page = ?16, prev_npages = ?17, "
			     "prev_size = ?18, prev_csum = ?19, pcsums = ?20, "
			     /* The RHS sees the old row: prev_skey takes the old skey. */
			     "skey = CASE ?22 WHEN 2 THEN prev_skey ELSE ?21 END, "
			     "prev_skey = CASE ?22 WHEN 1 THEN skey WHEN 2 THEN NULL "
			     "ELSE prev_skey END WHERE ino = ?1",
	[ST_PCSUMS_GET] = "SELECT pcsums FROM inodes WHERE ino = ?1",
	[ST_UNSYNCED] = "SELECT " INODE_COLS " FROM inodes WHERE gen > ?1 AND state = 0 "
			"AND parent IS NOT NULL AND npages > 0",
	[ST_VALUES] = "SELECT " INODE_COLS ", skey, prev_skey FROM inodes "
		      "WHERE skey IS NOT NULL OR prev_skey IS NOT NULL ORDER BY ino",
	[ST_DELETE] = "DELETE FROM inodes WHERE ino = ?1",
	[ST_DETACH] = "UPDATE inodes SET parent = NULL, name = NULL WHERE ino = ?1",
	[ST_MOVE] = "UPDATE inodes SET parent = ?2, name = ?3 WHERE ino = ?1",
	[ST_HAS_CHILDREN] = "SELECT 1 FROM inodes WHERE parent = ?1 LIMIT 1",
	[ST_READDIR] = "SELECT " INODE_COLS ", name FROM inodes WHERE parent = ?1 "
		       "AND ino > ?2 ORDER BY ino",
	[ST_MAPPINGS] = "SELECT " INODE_COLS " FROM inodes "
			"WHERE npages > 0 AND state IN (0, 2) AND parent IS NOT NULL ORDER BY ino",
	[ST_COUNT_FILES] = "SELECT count(*) FROM inodes WHERE (mode & 61440) = 32768 "
			   "AND parent IS NOT NULL",
	[ST_KV_GET] = "SELECT v FROM store WHERE k = ?1",
	[ST_KV_SET] = "INSERT OR REPLACE INTO store (k, v) VALUES (?1, ?2)",
	[ST_BITMAP_SAVE] = "INSERT OR REPLACE INTO bitmaps (bucket, npages, words) "
			   "VALUES (?1, ?2, ?3)",
	[ST_BITMAP_LOAD] = "SELECT npages, words FROM bitmaps WHERE bucket = ?1",
	[ST_BITMAP_CLEAR] = "DELETE FROM bitmaps",
	[ST_TASK_ADD] = "INSERT INTO tasks (ino, key, reason, size, bucket, page, csum, state, "
			"created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0, ?8)",
	[ST_TASK_NEXT] = "SELECT id, ino, key, reason, size, bucket, page, csum, created FROM tasks "
			 "WHERE state = 0 ORDER BY id LIMIT 1",
	[ST_TASK_START] = "UPDATE tasks SET state = 1, started = ?2 WHERE id = ?1",
	[ST_TASK_FINISH] = "UPDATE tasks SET state = ?2, finished = ?3, error = ?4 WHERE id = ?1",
	[ST_TASK_PENDING] = "SELECT 1 FROM tasks WHERE ino = ?1 AND state IN (0, 1) LIMIT 1",
	[ST_DIR_CHANGED] = "UPDATE inodes SET mtime = ?2, ctime = ?2 WHERE ino = ?1 RETURNING nlink",
	[ST_XATTR_GET] = "SELECT value FROM xattrs WHERE ino = ?1 AND name = ?2",
	[ST_XATTR_INSERT] = "INSERT INTO xattrs (ino, name, value) VALUES (?1, ?2, ?3)",
	[ST_XATTR_UPDATE] = "UPDATE xattrs SET value = ?3 WHERE ino = ?1 AND name = ?2",
	[ST_XATTR_REMOVE] = "DELETE FROM xattrs WHERE ino = ?1 AND name = ?2",
	[ST_XATTR_LIST] = "SELECT name FROM xattrs WHERE ino = ?1 ORDER BY name",
	/* What the others take, name ?2 left out (the one being replaced). */
	[ST_XATTR_TOTAL] = "SELECT total(length(name) + 1 + length(value)) FROM xattrs "
			   "WHERE ino = ?1 AND name <> ?2",
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
};

/*
 * Schema 3: directory link counts, kept by triggers whatever changes the
 * rows (the daemon, fsck's lost+found, recovery), and user xattrs, which
 * go with their inode.
 */
#define META_SCHEMA_3                                                                       \
	"CREATE TRIGGER inodes_nlink_insert AFTER INSERT ON inodes"                          \
	" WHEN (new.mode & 61440) = 16384 BEGIN"                                             \
	" UPDATE inodes SET nlink = nlink + 1 WHERE ino = new.parent; END;"                  \
	"CREATE TRIGGER inodes_nlink_delete AFTER DELETE ON inodes"                          \
	" WHEN (old.mode & 61440) = 16384 BEGIN"                                             \
	" UPDATE inodes SET nlink = nlink - 1 WHERE ino = old.parent; END;"                  \
	"CREATE TRIGGER inodes_nlink_move AFTER UPDATE OF parent ON inodes"                  \
	" WHEN (new.mode & 61440) = 16384 AND old.parent IS NOT new.parent BEGIN"            \
	" UPDATE inodes SET nlink = nlink - 1 WHERE ino = old.parent;"                       \
	" UPDATE inodes SET nlink = nlink + 1 WHERE ino = new.parent; END;"                  \
	"CREATE TABLE xattrs (ino INTEGER NOT NULL, name BLOB NOT NULL, value BLOB NOT NULL," \
	" PRIMARY KEY (ino, name)) WITHOUT ROWID;"                                            \
	"CREATE TRIGGER inodes_xattrs AFTER DELETE ON inodes BEGIN"                          \
	" DELETE FROM xattrs WHERE ino = old.ino; END;"

/*
 * The root has parent 0 (no such row) rather than NULL: NULL parent marks a
 * file unlinked while still open, which recovery deletes.
 */
static const char meta_schema[] =
	"CREATE TABLE store (k TEXT PRIMARY KEY, v) WITHOUT ROWID;"
	"CREATE TABLE inodes ("
	" ino INTEGER PRIMARY KEY AUTOINCREMENT,"
	" parent INTEGER,"
	" name BLOB,"
	" mode INTEGER NOT NULL, uid INTEGER NOT NULL, gid INTEGER NOT NULL,"
	" atime INTEGER NOT NULL, mtime INTEGER NOT NULL, ctime INTEGER NOT NULL,"
	" size INTEGER NOT NULL DEFAULT 0,"
	" bucket INTEGER NOT NULL DEFAULT -1,"
	" page INTEGER NOT NULL DEFAULT 0,"
	" npages INTEGER NOT NULL DEFAULT 0,"
	" csum INTEGER NOT NULL DEFAULT 0,"
	" state INTEGER NOT NULL DEFAULT 0,"
	" gen INTEGER NOT NULL DEFAULT 0,"
	" prev_bucket INTEGER NOT NULL DEFAULT -1,"
	" prev_page INTEGER NOT NULL DEFAULT 0,"
	" prev_npages INTEGER NOT NULL DEFAULT 0,"
	" prev_size INTEGER NOT NULL DEFAULT 0,"
	" prev_csum INTEGER NOT NULL DEFAULT 0,"
	" pcsums BLOB,"
	/* Schema 2: the key of the value in a KV backend, current and previous. */
	" skey BLOB, prev_skey BLOB,"
	/* Schema 3: a directory's 2 + subdirectories (1 for files: not used). */
	" nlink INTEGER NOT NULL DEFAULT 1);"
	"CREATE UNIQUE INDEX inodes_dentry ON inodes (parent, name);"
	/* readdir walks a directory in ino order: without this, every reply sorts it all. */
	"CREATE INDEX inodes_children ON inodes (parent, ino);"
	"CREATE INDEX inodes_unsettled ON inodes (state) WHERE state <> 0 OR parent IS NULL;"
	"CREATE TABLE bitmaps (bucket INTEGER PRIMARY KEY, npages INTEGER NOT NULL,"
	" words BLOB NOT NULL);"
	"CREATE TABLE tasks ("
	" id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" ino INTEGER NOT NULL, key TEXT, reason TEXT,"
	" size INTEGER, bucket INTEGER, page INTEGER, csum INTEGER,"
	" state INTEGER NOT NULL,"
	" created INTEGER, started INTEGER, finished INTEGER, error TEXT);"
	"CREATE INDEX tasks_state ON tasks (state, id);"
	"CREATE INDEX tasks_ino ON tasks (ino) WHERE state IN (0, 1);" META_SCHEMA_3;

struct meta {
	sqlite3 *db;
	sqlite3_stmt *st[ST_N];
	unsigned long fault_at, writes; /* meta_inject_fault */
	int found_version;             /* of an existing database, before migration */
	uint64_t changes;               /* namespace and object writes, for group commit */
	sqlite3_file *wal;              /* the log file, once meta_sync_begin found it */
	int log_failed;                 /* a sync of the log failed (atomic): see meta_sync_begin */
	int (*full_hook)(void *);       /* a write found the disk full: see meta_set_full_hook */
	void *full_arg;
};

/* Pages of log before sqlite's checkpoint (16 MiB at 4 KiB pages). */
#define META_CKPT_PAGES 4096

/*
 * sqlite's automatic checkpoint, as sqlite runs it, but with its errors
 * kept: sqlite drops them, and a failed sync there may be the only report
 * of lost log pages (the kernel reports a writeback error once per open
 * file, and this is the handle our own sync uses).  Runs inside whichever
 * commit filled the log, on its thread.
 */
static int meta_wal_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
	struct meta *m = arg;
	int rc;

	/*
	 * Not after a failure: a passive checkpoint leaves the damaged log in
	 * place, whose replay after a crash would lay its older pages over the
	 * newer ones copied out; meta_sync_begin's truncating one comes next.
	 */
	if (pages < META_CKPT_PAGES || __atomic_load_n(&m->log_failed, __ATOMIC_RELAXED))
		return SQLITE_OK;
	rc = sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
	/* Not run (busy, or a statement of ours still reading) is not a failure. */
	if (rc != SQLITE_OK && rc != SQLITE_BUSY && rc != SQLITE_LOCKED)
		__atomic_store_n(&m->log_failed, 1, __ATOMIC_RELAXED);
	return SQLITE_OK;
}

void meta_set_full_hook(struct meta *m, int (*hook)(void *), void *arg)
{
	m->full_hook = hook;
	m->full_arg = arg;
}

uint64_t meta_changes(struct meta *m)
{
	return m->changes;
}

void meta_inject_fault(struct meta *m, unsigned long nth_write)
{
	m->fault_at = nth_write;
	m->writes = 0;
}

/* Count a write statement; -EIO when it is the one chosen to fail. */
static int meta_fault(struct meta *m)
{
	m->changes++;
	if (!m->fault_at)
		return 0;
	if (++m->writes == m->fault_at) {
		m->fault_at = 0;
		return -EIO;
	}
	return 0;
}

static int meta_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return 0;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_NOTADB:
	case SQLITE_CORRUPT:
		return -EUCLEAN;
	default:
		return -EIO;
	}
}

const char *meta_errmsg(struct meta *m)
{
	return m && m->db ? sqlite3_errmsg(m->db) : "no database";
}

/* Reset after use so the statement holds no read lock between calls. */
static int meta_step_done(struct meta *m, sqlite3_stmt *s)
{
	int own = sqlite3_get_autocommit(m->db);
	int rc = sqlite3_step(s);

	sqlite3_reset(s);
	/*
	 * The disk is full: the hook gives space back, and the write is tried
	 * once more when that is safe: a statement that was its own
	 * transaction (sqlite rolled it back; the log is emptied first, its
	 * blocks returned), or a COMMIT that left its transaction open.
	 */
	if ((rc & 0xff) == SQLITE_FULL && m->full_hook &&
	    (own || (s == m->st[ST_COMMIT] && !sqlite3_get_autocommit(m->db)))) {
		m->full_hook(m->full_arg);
		if (own && !__atomic_load_n(&m->log_failed, __ATOMIC_RELAXED))
			sqlite3_wal_checkpoint_v2(m->db, "main", SQLITE_CHECKPOINT_TRUNCATE, NULL,
						  NULL);
		rc = sqlite3_step(s);
		sqlite3_reset(s);
	}
	sqlite3_clear_bindings(s);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
		(void)m;
		return meta_errno(rc);
	}
	return 0;
}

static void meta_finish(sqlite3_stmt *s)
{
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
}

static int meta_exec(struct meta *m, const char *sql)
{
	return meta_errno(sqlite3_exec(m->db, sql, NULL, NULL, NULL));
}

static int meta_kv_get(struct meta *m, const char *k, sqlite3_int64 *iv, char *sv, size_t slen)
{
	sqlite3_stmt *s = m->st[ST_KV_GET];
	int rc, ret = -ENOENT;

	sqlite3_bind_text(s, 1, k, -1, SQLITE_STATIC);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		if (iv)
			*iv = sqlite3_column_int64(s, 0);
		if (sv) {
			const unsigned char *t = sqlite3_column_text(s, 0);
			snprintf(sv, slen, "%s", t ? (const char *)t : "");
		}
		ret = 0;
	} else if (rc != SQLITE_DONE) {
		ret = meta_errno(rc);
	}
	meta_finish(s);
	return ret;
}

static int meta_kv_set_int(struct meta *m, const char *k, sqlite3_int64 v)
{
	sqlite3_stmt *s = m->st[ST_KV_SET];

	sqlite3_bind_text(s, 1, k, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, v);
	return meta_step_done(m, s);
}

static int meta_kv_set_text(struct meta *m, const char *k, const char *v)
{
	sqlite3_stmt *s = m->st[ST_KV_SET];

	sqlite3_bind_text(s, 1, k, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, v, -1, SQLITE_STATIC);
	return meta_step_done(m, s);
}

int meta_setting_get(struct meta *m, const char *name, char *buf, size_t len)
{
	return meta_kv_get(m, name, NULL, buf, len);
}

int meta_setting_set(struct meta *m, const char *name, const char *value)
{
	return meta_kv_set_text(m, name, value);
}

/*
 * Decide whether an existing database is ours before any write: a foreign
 * or newer database must be left exactly as it was found.
 */
static int meta_check_ours(struct meta *m, char *err, size_t errlen)
{
	sqlite3_stmt *s = NULL;
	int rc, version, ret;
	char magic[32] = "";

	rc = sqlite3_prepare_v2(m->db, "PRAGMA user_version", -1, &s, NULL);
	if (rc != SQLITE_OK || sqlite3_step(s) != SQLITE_ROW) {
		int code = sqlite3_errcode(m->db) & 0xff;
		const char *fn = sqlite3_db_filename(m->db, "main");
		struct statvfs vfs;

		/* Only what sqlite found in the file says the file is bad. */
		if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT) {
			snprintf(err, errlen, "not a readable sqlite database: %s",
				 sqlite3_errmsg(m->db));
			sqlite3_finalize(s);
			return -EUCLEAN;
		}
		snprintf(err, errlen, "cannot read the database: %s%s", sqlite3_errmsg(m->db),
			 fn && !statvfs(fn, &vfs) && vfs.f_bavail == 0
				 ? " (its filesystem is full: sqlite needs room for its log)"
				 : "");
		sqlite3_finalize(s);
		return meta_errno(code ? code : SQLITE_IOERR);
	}
	version = sqlite3_column_int(s, 0);
	sqlite3_finalize(s);

	rc = sqlite3_prepare_v2(m->db, "SELECT v FROM store WHERE k = 'magic'", -1, &s, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "not an offloadfs database (no store table)");
		return -EUCLEAN;
	}
	if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0))
		snprintf(magic, sizeof(magic), "%s", (const char *)sqlite3_column_text(s, 0));
	sqlite3_finalize(s);
	if (strcmp(magic, META_MAGIC) != 0) {
		snprintf(err, errlen, "not an offloadfs database (magic '%s')", magic);
		return -EUCLEAN;
	}
	/* Older versions we know how to upgrade are migrated once the WAL is set. */
	if (version < 1 || version > META_SCHEMA_VERSION) {
		snprintf(err, errlen, "unsupported schema version: found %d, expected %d",
			 version, META_SCHEMA_VERSION);
		return -EPROTONOSUPPORT;
	}
	m->found_version = version;
	ret = 0;
	return ret;
}

/*
 * Upgrade a database of an older schema, one step per version, each in one
 * transaction with the version bump: a crash leaves the old or the new
 * schema, never half of one.
 */
static int meta_migrate(struct meta *m, char *err, size_t errlen)
{
	static const char *const steps[META_SCHEMA_VERSION + 1] = {
		/* 1 -> 2: value keys for KV backends (NULL for the pages backend). */
		[1] = "ALTER TABLE inodes ADD COLUMN skey BLOB;"
		      "ALTER TABLE inodes ADD COLUMN prev_skey BLOB;"
		      "PRAGMA user_version = 2;",
		/* 2 -> 3: directory link counts, counted once here, and user xattrs. */
		[2] = "ALTER TABLE inodes ADD COLUMN nlink INTEGER NOT NULL DEFAULT 1;"
		      "UPDATE inodes SET nlink = 2 + (SELECT count(*) FROM inodes c "
		      "WHERE c.parent = inodes.ino AND (c.mode & 61440) = 16384) "
		      "WHERE (mode & 61440) = 16384;" META_SCHEMA_3
		      "PRAGMA user_version = 3;",
	};
	int v, ret = 0;

	for (v = m->found_version; !ret && v < META_SCHEMA_VERSION; v++) {
		ret = meta_exec(m, "BEGIN IMMEDIATE");
		if (!ret)
			ret = meta_exec(m, steps[v]);
		if (!ret)
			ret = meta_exec(m, "COMMIT");
		if (ret) {
			snprintf(err, errlen, "cannot migrate schema %d to %d: %s", v, v + 1,
				 sqlite3_errmsg(m->db));
			meta_exec(m, "ROLLBACK");
		}
	}
	return ret;
}

static int meta_create_schema(struct meta *m, char *err, size_t errlen)
{
	char sql[64];
	int ret;

	ret = meta_exec(m, "BEGIN IMMEDIATE");
	if (!ret)
		ret = meta_exec(m, meta_schema);
	if (!ret) {
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", META_SCHEMA_VERSION);
		ret = meta_exec(m, sql);
	}
	if (!ret)
		ret = meta_exec(m, "INSERT INTO store (k, v) VALUES ('magic', '" META_MAGIC "')");
	if (!ret)
		ret = meta_exec(m, "COMMIT");
	if (ret) {
		snprintf(err, errlen, "cannot create schema: %s", sqlite3_errmsg(m->db));
		meta_exec(m, "ROLLBACK");
	}
	return ret;
}

int meta_open(const char *path, int create, struct meta **out, char *err, size_t errlen)
{
	struct meta *m;
	struct stat st;
	int exists, rc, ret, i;

	*out = NULL;
	/* Never through a symbolic link: a dangling one would make us create its target. */
	exists = lstat(path, &st) == 0;
	if (exists && !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s is not a regular file%s", path,
			 S_ISLNK(st.st_mode) ? " (a symbolic link, refused)" : "");
		return -EINVAL;
	}
	if (!exists && !(create & 1)) {
		snprintf(err, errlen, "%s does not exist", path);
		return -ENOENT;
	}
	/* An empty file is not a database we made; sqlite would adopt it. */
	if (exists && st.st_size == 0) {
		snprintf(err, errlen, "%s is an empty file, not an offloadfs database", path);
		return -EUCLEAN;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	{
		/*
		 * sqlite's NOFOLLOW refuses a link anywhere in the path: the
		 * directories are resolved here, only the file itself may not be one.
		 */
		char dir[PATH_MAX], real[PATH_MAX], *full = NULL;
		const char *slash = strrchr(path, '/');

		if (!slash)
			snprintf(dir, sizeof(dir), ".");
		else if (slash == path)
			snprintf(dir, sizeof(dir), "/");
		else
			snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
		if (realpath(dir, real) &&
		    asprintf(&full, "%s/%s", strcmp(real, "/") ? real : "",
			     slash ? slash + 1 : path) < 0)
			full = NULL;
		rc = sqlite3_open_v2(full ? full : path, &m->db,
				     SQLITE_OPEN_READWRITE | (exists ? 0 : SQLITE_OPEN_CREATE) |
					     SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
				     NULL);
		free(full);
	}
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "cannot open %s: %s", path,
			 m->db ? sqlite3_errmsg(m->db) : sqlite3_errstr(rc));
		ret = meta_errno(rc);
		goto out_close;
	}
	sqlite3_busy_timeout(m->db, 5000);
	sqlite3_extended_result_codes(m->db, 0);
	/*
	 * The store has one user at a time (the ROOT lock): holding sqlite's
	 * lock for the whole session saves the fcntl calls of every
	 * transaction and the shared-memory WAL index.  Set before the first
	 * read: a read in shared mode would map DB-shm, whose pages, on a
	 * full disk, fault with SIGBUS when they are holes.
	 */
	ret = meta_exec(m, "PRAGMA locking_mode=EXCLUSIVE");
	if (ret) {
		snprintf(err, errlen, "cannot lock %s: %s", path, sqlite3_errmsg(m->db));
		goto out_close;
	}
	if (exists) {
		ret = meta_check_ours(m, err, errlen);
		if (ret)
			goto out_close;
	}
	/*
	 * WAL with synchronous=NORMAL: a commit reaches the OS before it
	 * returns (it survives a daemon kill -9) without an fsync; meta_sync
	 * is the point of durability against power loss.
	 */
	ret = meta_exec(m, "PRAGMA journal_mode=WAL");
	if (!ret)
		ret = meta_exec(m, "PRAGMA synchronous=NORMAL");
	/*
	 * sqlite checkpoints inside the commit that fills the log past
	 * META_CKPT_PAGES, and the checkpoint fsyncs the log and the database:
	 * under the caller's lock, so every metadata request waits for two
	 * fsyncs.  At sqlite's default of 1,000 pages (4 MiB) that was every
	 * few hundred commits; with each fsync 20 ms slower (a network ROOT),
	 * puts and deletes ran at 1,310 and 3,600/s (scripts/bench-slowsync).
	 * At 4,096 pages they ran at 2,230-2,390 and 7,150-7,640/s, no slower
	 * on a local disk.  16,384 pages did no better and doubled the slowest
	 * put on a local disk (26-30 -> 59-67 ms: a larger checkpoint); 4,096
	 * kept it at 25-31 ms.  The hook replaces sqlite's own automatic
	 * checkpoint (meta_wal_hook).
	 */
	if (!ret)
		sqlite3_wal_hook(m->db, meta_wal_hook, m);
	if (ret) {
		snprintf(err, errlen, "cannot set WAL mode on %s: %s", path, sqlite3_errmsg(m->db));
		goto out_close;
	}
	if (!exists) {
		ret = meta_create_schema(m, err, errlen);
		if (ret)
			goto out_close;
	} else if (m->found_version < META_SCHEMA_VERSION && (create & META_OPEN_NO_MIGRATE)) {
		snprintf(err, errlen,
			 "schema version %d, older than this build's %d: the next mount (or "
			 "offloadctl fsck --repair) upgrades it",
			 m->found_version, META_SCHEMA_VERSION);
		ret = -EPROTONOSUPPORT;
		goto out_close;
	} else if (m->found_version < META_SCHEMA_VERSION) {
		ret = meta_migrate(m, err, errlen);
		if (ret)
			goto out_close;
	}
	for (i = 0; i < ST_N; i++) {
		rc = sqlite3_prepare_v3(m->db, meta_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					&m->st[i], NULL);
		if (rc != SQLITE_OK) {
			snprintf(err, errlen, "%s: cannot prepare statement %d: %s", path, i,
				 sqlite3_errmsg(m->db));
			ret = -EUCLEAN;
			goto out_close;
		}
	}
	*out = m;
	return exists ? 0 : 1;

out_close:
	meta_close(m);
	/* Never leave behind a half-made database we created ourselves. */
	if (!exists) {
		char aux[4096];

		unlink(path);
		snprintf(aux, sizeof(aux), "%s-wal", path);
		unlink(aux);
		snprintf(aux, sizeof(aux), "%s-shm", path);
		unlink(aux);
	}
	return ret;
}

void meta_close(struct meta *m)
{
	int i;

	if (!m)
		return;
	for (i = 0; i < ST_N; i++)
		sqlite3_finalize(m->st[i]);
	sqlite3_close(m->db);
	free(m);
}

int meta_format(struct meta *m, const struct meta_geom *g, const char *backend,
		uint32_t root_mode, uint32_t uid, uint32_t gid)
{
	struct meta_inode root = { 0 };
	struct timespec ts;
	sqlite3_stmt *s;
	int ret;

	clock_gettime(CLOCK_REALTIME, &ts);
	ret = meta_begin(m);
	if (ret)
		return ret;
	ret = meta_kv_set_int(m, "page_size", (sqlite3_int64)g->page_size);
	if (!ret)
		ret = meta_kv_set_int(m, "bucket_size", (sqlite3_int64)g->bucket_size);
	if (!ret)
		ret = meta_kv_set_int(m, "bucket_count", g->bucket_count);
	if (!ret)
		ret = meta_kv_set_text(m, "backend", backend);
	if (!ret)
		ret = meta_kv_set_int(m, "clean", 0);
	if (!ret)
		ret = meta_kv_set_int(m, "created", ts.tv_sec);
	if (!ret) {
		/* The root row gets ino 1 by being first; insist on it. */
		root.mode = root_mode;
		root.uid = uid;
		root.gid = gid;
		root.atime = root.mtime = root.ctime =
			(int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
		root.bucket = -1;
		s = m->st[ST_INSERT];
		sqlite3_bind_int64(s, 1, 0);
		sqlite3_bind_blob(s, 2, "", 0, SQLITE_STATIC);
		sqlite3_bind_int(s, 3, (int)root.mode);
		sqlite3_bind_int64(s, 4, root.uid);
		sqlite3_bind_int64(s, 5, root.gid);
		sqlite3_bind_int64(s, 6, root.atime);
		sqlite3_bind_int64(s, 7, root.mtime);
		sqlite3_bind_int64(s, 8, root.ctime);
		sqlite3_bind_int64(s, 9, 0);
		sqlite3_bind_int(s, 10, -1);
		sqlite3_bind_int64(s, 11, 0);
		sqlite3_bind_int64(s, 12, 0);
		sqlite3_bind_int64(s, 13, 0);
		sqlite3_bind_int(s, 14, META_COMMITTED);
		ret = meta_step_done(m, s);
		if (!ret && sqlite3_last_insert_rowid(m->db) != META_ROOT_INO)
			ret = -EUCLEAN;
	}
	if (ret) {
		meta_rollback(m);
		return ret;
	}
	return meta_commit(m);
}

int meta_geom_get(struct meta *m, struct meta_geom *g, char *backend, size_t blen)
{
	sqlite3_int64 ps, bs, bc;
	int ret;

	ret = meta_kv_get(m, "page_size", &ps, NULL, 0);
	if (!ret)
		ret = meta_kv_get(m, "bucket_size", &bs, NULL, 0);
	if (!ret)
		ret = meta_kv_get(m, "bucket_count", &bc, NULL, 0);
	if (!ret && backend)
		ret = meta_kv_get(m, "backend", NULL, backend, blen);
	if (ret)
		return ret;
	if (ps <= 0 || bs <= 0 || bc <= 0 || bc > 256)
		return -EUCLEAN;
	g->page_size = (uint64_t)ps;
	g->bucket_size = (uint64_t)bs;
	g->bucket_count = (uint32_t)bc;
	return 0;
}

int meta_clean_get(struct meta *m, int *clean)
{
	sqlite3_int64 v = 0;
	int ret = meta_kv_get(m, "clean", &v, NULL, 0);

	*clean = ret == 0 && v == 1;
	return ret == -ENOENT ? 0 : ret;
}

int meta_clean_set(struct meta *m, int clean)
{
	return meta_kv_set_int(m, "clean", clean ? 1 : 0);
}

int meta_begin(struct meta *m)
{
	return meta_step_done(m, m->st[ST_BEGIN]);
}

int meta_commit(struct meta *m)
{
	int ret = meta_step_done(m, m->st[ST_COMMIT]);

	if (ret)
		meta_rollback(m);
	return ret;
}

void meta_rollback(struct meta *m)
{
	if (!sqlite3_get_autocommit(m->db))
		meta_step_done(m, m->st[ST_ROLLBACK]);
}

/* The synced_gen row, in a transaction of its own. */
static int meta_record_synced_gen(struct meta *m, uint64_t synced_gen)
{
	int ret = meta_begin(m);

	if (!ret) {
		ret = meta_kv_set_int(m, "synced_gen", (sqlite3_int64)synced_gen);
		if (!ret)
			ret = meta_commit(m);
		else
			meta_rollback(m);
	}
	return ret;
}

int meta_sync_begin(struct meta *m, uint64_t synced_gen)
{
	int ret = meta_record_synced_gen(m, synced_gen);

	if (!ret) {
		/* The log's file, kept for meta_sync_end: it stays open as long as the connection. */
		sqlite3_file *wal = NULL;

		if (sqlite3_file_control(m->db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal) !=
			    SQLITE_OK ||
		    !wal || !wal->pMethods)
			ret = -EIO;
		else
			m->wal = wal;
	}
	/*
	 * After a failed sync of the log, a later sync that succeeds says
	 * nothing of the pages the failed one lost, and replay stops at the
	 * first bad frame: every commit since could be gone.  Until a
	 * checkpoint has copied every frame into the database, synced it, and
	 * emptied the log (a synced truncation: a log left in place would be
	 * replayed after a crash over the newer pages), the barrier fails, so
	 * nothing is released.  The frames are read back through the page
	 * cache; one the failed write lost and the kernel has since evicted
	 * would come back from the disk stale, which this cannot detect.
	 */
	if (!ret && __atomic_load_n(&m->log_failed, __ATOMIC_RELAXED)) {
		/* Exclusive locking: it runs to the end or fails, never busy. */
		if (sqlite3_wal_checkpoint_v2(m->db, "main", SQLITE_CHECKPOINT_TRUNCATE, NULL,
					      NULL) != SQLITE_OK ||
		    m->wal->pMethods->xSync(m->wal, SQLITE_SYNC_NORMAL) != SQLITE_OK)
			ret = -EIO;
		else
			__atomic_store_n(&m->log_failed, 0, __ATOMIC_RELAXED);
	}
	return ret;
}

int meta_log_failed(struct meta *m)
{
	return __atomic_load_n(&m->log_failed, __ATOMIC_RELAXED);
}

int meta_sync_end(struct meta *m)
{
	/*
	 * sqlite's own sync of the log file, as a commit under
	 * synchronous=FULL would run it (it also syncs the directory the
	 * first time, after the log was created).  It covers every frame
	 * written before it, the synced_gen commit's among them; a checkpoint
	 * meanwhile syncs the log before it copies frames out.
	 */
	if (!m->wal)
		return -EINVAL;
	if (m->wal->pMethods->xSync(m->wal, SQLITE_SYNC_NORMAL) == SQLITE_OK)
		return 0;
	__atomic_store_n(&m->log_failed, 1, __ATOMIC_RELAXED);
	return -EIO;
}

int meta_sync(struct meta *m, uint64_t synced_gen)
{
	int ret;

	/*
	 * A commit under synchronous=FULL fsyncs the WAL, and with it every
	 * transaction committed before it: one fsync covers them all.
	 */
	ret = meta_exec(m, "PRAGMA synchronous=FULL");
	if (ret)
		return ret;
	ret = meta_record_synced_gen(m, synced_gen);
	meta_exec(m, "PRAGMA synchronous=NORMAL");
	return ret;
}

int meta_synced_gen(struct meta *m, uint64_t *gen)
{
	sqlite3_int64 v = 0;
	int ret = meta_kv_get(m, "synced_gen", &v, NULL, 0);

	*gen = ret ? 0 : (uint64_t)v;
	return ret == -ENOENT ? 0 : ret;
}

int meta_make_room(struct meta *m)
{
	if (!sqlite3_get_autocommit(m->db))
		return -EBUSY;
	if (m->full_hook)
		m->full_hook(m->full_arg);
	/* After a failed sync of the log only a barrier's checkpoint may run. */
	if (__atomic_load_n(&m->log_failed, __ATOMIC_RELAXED))
		return -EIO;
	return meta_checkpoint(m);
}

int meta_checkpoint(struct meta *m)
{
	int rc = sqlite3_wal_checkpoint_v2(m->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);

	return meta_errno(rc);
}

static void meta_row_inode(sqlite3_stmt *s, struct meta_inode *in)
{
	in->ino = (uint64_t)sqlite3_column_int64(s, 0);
	in->parent = (uint64_t)sqlite3_column_int64(s, 1);
	in->mode = (uint32_t)sqlite3_column_int64(s, 2);
	in->uid = (uint32_t)sqlite3_column_int64(s, 3);
	in->gid = (uint32_t)sqlite3_column_int64(s, 4);
	in->atime = sqlite3_column_int64(s, 5);
	in->mtime = sqlite3_column_int64(s, 6);
	in->ctime = sqlite3_column_int64(s, 7);
	in->size = (uint64_t)sqlite3_column_int64(s, 8);
	in->bucket = sqlite3_column_int(s, 9);
	in->page = (uint64_t)sqlite3_column_int64(s, 10);
	in->npages = (uint64_t)sqlite3_column_int64(s, 11);
	in->csum = (uint64_t)sqlite3_column_int64(s, 12);
	in->state = sqlite3_column_int(s, 13);
	in->gen = (uint64_t)sqlite3_column_int64(s, 14);
	in->prev_bucket = sqlite3_column_int(s, 15);
	in->prev_page = (uint64_t)sqlite3_column_int64(s, 16);
	in->prev_npages = (uint64_t)sqlite3_column_int64(s, 17);
	in->prev_size = (uint64_t)sqlite3_column_int64(s, 18);
	in->prev_csum = (uint64_t)sqlite3_column_int64(s, 19);
	in->nlink = (uint32_t)sqlite3_column_int64(s, 20);
}

static int meta_one_inode(sqlite3_stmt *s, struct meta_inode *out)
{
	int rc = sqlite3_step(s), ret;

	if (rc == SQLITE_ROW) {
		meta_row_inode(s, out);
		ret = 0;
	} else {
		ret = rc == SQLITE_DONE ? -ENOENT : meta_errno(rc);
	}
	meta_finish(s);
	return ret;
}

int meta_get(struct meta *m, uint64_t ino, struct meta_inode *out)
{
	sqlite3_stmt *s = m->st[ST_GET];

	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	return meta_one_inode(s, out);
}

int meta_lookup(struct meta *m, uint64_t parent, const char *name, size_t len,
		struct meta_inode *out)
{
	sqlite3_stmt *s = m->st[ST_LOOKUP];

	if (len > META_NAME_MAX)
		return -ENAMETOOLONG;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)parent);
	sqlite3_bind_blob(s, 2, name, (int)len, SQLITE_STATIC);
	return meta_one_inode(s, out);
}

int meta_name(struct meta *m, uint64_t ino, uint64_t *parent, char *name, size_t *len)
{
	sqlite3_stmt *s = m->st[ST_NAME];
	int rc, ret = 0;

	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL) {
		int n = sqlite3_column_bytes(s, 1);
		const void *p = sqlite3_column_blob(s, 1);

		*parent = (uint64_t)sqlite3_column_int64(s, 0);
		if (n > META_NAME_MAX) {
			ret = -EUCLEAN;
		} else {
			if (n)
				memcpy(name, p, (size_t)n);
			*len = (size_t)n;
		}
	} else {
		ret = rc == SQLITE_ROW || rc == SQLITE_DONE ? -ENOENT : meta_errno(rc);
	}
	meta_finish(s);
	return ret;
}

int meta_path(struct meta *m, uint64_t ino, int with_tenant, char *buf, size_t cap,
	      size_t *len, uint64_t *tenant)
{
	char name[META_NAME_MAX + 1];
	size_t pos = cap, n;
	uint64_t parent;
	int ret, depth = 0;

	if (cap == 0)
		return -ENAMETOOLONG;
	/* Built from the end backwards, one component per level. */
	buf[--pos] = '\0';
	if (tenant)
		*tenant = 0;
	for (;;) {
		if (depth++ > 4096)
			return -ELOOP;
		ret = meta_name(m, ino, &parent, name, &n);
		if (ret)
			return ret;
		if (parent == META_ROOT_INO && tenant)
			*tenant = ino;
		if (parent == META_ROOT_INO && !with_tenant)
			break;
		if (n + (pos < cap - 1) > pos)
			return -ENAMETOOLONG;
		if (pos < cap - 1)
			buf[--pos] = '/';
		pos -= n;
		memcpy(buf + pos, name, n);
		ino = parent;
		if (ino == META_ROOT_INO)
			break;
	}
	*len = cap - 1 - pos;
	memmove(buf, buf + pos, *len + 1);
	return 0;
}

int meta_key_len(struct meta *m, uint64_t ino, size_t *len)
{
	sqlite3_stmt *s = m->st[ST_NAME];
	size_t total = 0;
	int rc, depth = 0;

	/* Only the lengths, from ino up to its tenant (not counted): nothing copied. */
	while (ino != META_ROOT_INO) {
		uint64_t parent;
		size_t n;

		if (depth++ > META_KEY_MAX)
			return -ELOOP;
		sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
		rc = sqlite3_step(s);
		if (rc != SQLITE_ROW || sqlite3_column_type(s, 0) == SQLITE_NULL) {
			meta_finish(s);
			return rc == SQLITE_ROW || rc == SQLITE_DONE ? -ENOENT : meta_errno(rc);
		}
		parent = (uint64_t)sqlite3_column_int64(s, 0);
		n = (size_t)sqlite3_column_bytes(s, 1);
		meta_finish(s);
		if (parent == META_ROOT_INO)
			break;
		total += (total ? 1 : 0) + n;
		if (total > META_KEY_MAX)
			return -ENAMETOOLONG;
		ino = parent;
	}
	*len = total;
	return 0;
}

int meta_subtree_depth(struct meta *m, uint64_t dir, size_t *len)
{
	sqlite3_stmt *s = NULL;
	int rc;

	*len = 0;
	/* Walks the whole subtree: only a rename of a directory to a longer key asks. */
	rc = sqlite3_prepare_v2(m->db,
				"WITH RECURSIVE sub(ino, len) AS ("
				" SELECT ino, length(name) FROM inodes WHERE parent = ?1"
				" UNION ALL SELECT i.ino, sub.len + 1 + length(i.name)"
				" FROM inodes i JOIN sub ON i.parent = sub.ino)"
				" SELECT coalesce(max(len), 0) FROM sub",
				-1, &s, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(s, 1, (sqlite3_int64)dir);
		rc = sqlite3_step(s);
		if (rc == SQLITE_ROW) {
			*len = (size_t)sqlite3_column_int64(s, 0);
			rc = SQLITE_OK;
		}
	}
	sqlite3_finalize(s);
	return meta_errno(rc);
}

int meta_dir_changed(struct meta *m, uint64_t dir, int64_t now, uint32_t *nlink)
{
	sqlite3_stmt *s = m->st[ST_DIR_CHANGED];
	int rc, ret;

	if (meta_fault(m))
		return -EIO;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)dir);
	sqlite3_bind_int64(s, 2, now);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		if (nlink)
			*nlink = (uint32_t)sqlite3_column_int64(s, 0);
		/* RETURNING: the change is made once the statement runs to its end. */
		rc = sqlite3_step(s);
	}
	ret = rc == SQLITE_DONE ? 0 : meta_errno(rc);
	if (!ret && sqlite3_changes(m->db) == 0)
		ret = -ENOENT;
	meta_finish(s);
	return ret;
}

int meta_insert(struct meta *m, struct meta_inode *in, const char *name, size_t len)
{
	sqlite3_stmt *s = m->st[ST_INSERT];
	int ret;

	if (meta_fault(m))
		return -EIO;

	if (len == 0 || len > META_NAME_MAX)
		return len ? -ENAMETOOLONG : -EINVAL;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)in->parent);
	sqlite3_bind_blob(s, 2, name, (int)len, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, in->mode);
	sqlite3_bind_int64(s, 4, in->uid);
	sqlite3_bind_int64(s, 5, in->gid);
	sqlite3_bind_int64(s, 6, in->atime);
	sqlite3_bind_int64(s, 7, in->mtime);
	sqlite3_bind_int64(s, 8, in->ctime);
	sqlite3_bind_int64(s, 9, (sqlite3_int64)in->size);
	sqlite3_bind_int(s, 10, in->bucket);
	sqlite3_bind_int64(s, 11, (sqlite3_int64)in->page);
	sqlite3_bind_int64(s, 12, (sqlite3_int64)in->npages);
	sqlite3_bind_int64(s, 13, (sqlite3_int64)in->csum);
	sqlite3_bind_int(s, 14, in->state);
	ret = meta_step_done(m, s);
	if (!ret)
		in->ino = (uint64_t)sqlite3_last_insert_rowid(m->db);
	return ret;
}

static int meta_changed_one(struct meta *m, int ret)
{
	if (!ret && sqlite3_changes(m->db) == 0)
		return -ENOENT;
	return ret;
}

static void meta_bind_update(sqlite3_stmt *s, const struct meta_inode *in)
{
	sqlite3_bind_int64(s, 1, (sqlite3_int64)in->ino);
	sqlite3_bind_int64(s, 2, in->mode);
	sqlite3_bind_int64(s, 3, in->uid);
	sqlite3_bind_int64(s, 4, in->gid);
	sqlite3_bind_int64(s, 5, in->atime);
	sqlite3_bind_int64(s, 6, in->mtime);
	sqlite3_bind_int64(s, 7, in->ctime);
	sqlite3_bind_int64(s, 8, (sqlite3_int64)in->size);
	sqlite3_bind_int(s, 9, in->bucket);
	sqlite3_bind_int64(s, 10, (sqlite3_int64)in->page);
	sqlite3_bind_int64(s, 11, (sqlite3_int64)in->npages);
	sqlite3_bind_int64(s, 12, (sqlite3_int64)in->csum);
	sqlite3_bind_int(s, 13, in->state);
	sqlite3_bind_int64(s, 14, (sqlite3_int64)in->gen);
	sqlite3_bind_int(s, 15, in->prev_bucket);
	sqlite3_bind_int64(s, 16, (sqlite3_int64)in->prev_page);
	sqlite3_bind_int64(s, 17, (sqlite3_int64)in->prev_npages);
	sqlite3_bind_int64(s, 18, (sqlite3_int64)in->prev_size);
	sqlite3_bind_int64(s, 19, (sqlite3_int64)in->prev_csum);
}

int meta_update(struct meta *m, const struct meta_inode *in)
{
	sqlite3_stmt *s = m->st[ST_UPDATE];

	if (meta_fault(m))
		return -EIO;

	meta_bind_update(s, in);
	return meta_changed_one(m, meta_step_done(m, s));
}

int meta_commit_object(struct meta *m, const struct meta_inode *in, const uint64_t *pcsums,
		       uint64_t n, const char *skey, enum meta_skey_op op)
{
	sqlite3_stmt *s = m->st[ST_COMMIT_OBJECT];

	if (meta_fault(m))
		return -EIO;

	meta_bind_update(s, in);
	if (n)
		sqlite3_bind_blob64(s, 20, pcsums, n * sizeof(uint64_t), SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 20);
	if (skey)
		sqlite3_bind_blob64(s, 21, skey, strlen(skey), SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 21);
	sqlite3_bind_int(s, 22, (int)op);
	return meta_changed_one(m, meta_step_done(m, s));
}

/* Column c of s as a NUL-terminated key in buf, or NULL; -EUCLEAN when it cannot be one. */
static int meta_col_key(sqlite3_stmt *s, int c, char *buf, const char **out)
{
	int len = sqlite3_column_bytes(s, c);

	*out = NULL;
	if (sqlite3_column_type(s, c) == SQLITE_NULL)
		return 0;
	if (len <= 0 || len > META_SKEY_MAX || memchr(sqlite3_column_blob(s, c), 0, (size_t)len))
		return -EUCLEAN;
	memcpy(buf, sqlite3_column_blob(s, c), (size_t)len);
	buf[len] = '\0';
	*out = buf;
	return 0;
}

int meta_foreach_value(struct meta *m, meta_value_fn fn, void *ctx)
{
	sqlite3_stmt *s = m->st[ST_VALUES];
	static __thread char key[META_SKEY_MAX + 1], prev[META_SKEY_MAX + 1];
	const char *k, *p;
	struct meta_inode in;
	int rc, ret = 0;

	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		meta_row_inode(s, &in);
		ret = meta_col_key(s, INODE_NCOLS, key, &k);
		if (!ret)
			ret = meta_col_key(s, INODE_NCOLS + 1, prev, &p);
		if (!ret)
			ret = fn(ctx, &in, k, p);
		if (ret)
			break;
	}
	if (!ret && rc != SQLITE_ROW && rc != SQLITE_DONE)
		ret = meta_errno(rc);
	meta_finish(s);
	return ret;
}

int meta_pcsums_get(struct meta *m, uint64_t ino, uint64_t *pcsums, uint64_t n)
{
	sqlite3_stmt *s = m->st[ST_PCSUMS_GET];
	int rc, ret = -ENOENT;

	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) == SQLITE_BLOB) {
		if ((uint64_t)sqlite3_column_bytes(s, 0) == n * sizeof(uint64_t)) {
			memcpy(pcsums, sqlite3_column_blob(s, 0), n * sizeof(uint64_t));
			ret = 0;
		} else {
			ret = -EUCLEAN;
		}
	} else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		ret = meta_errno(rc);
	}
	meta_finish(s);
	return ret;
}

/* Step s to the end, calling fn on each row until it returns non-zero. */
static int meta_each_inode(sqlite3_stmt *s, meta_ino_fn fn, void *ctx)
{
	struct meta_inode in;
	int rc, ret = 0;

	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		meta_row_inode(s, &in);
		ret = fn(ctx, &in);
		if (ret)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = meta_errno(rc);
	meta_finish(s);
	return ret;
}

int meta_foreach_unsynced(struct meta *m, uint64_t gen, meta_ino_fn fn, void *ctx)
{
	sqlite3_stmt *s = m->st[ST_UNSYNCED];

	sqlite3_bind_int64(s, 1, (sqlite3_int64)gen);
	return meta_each_inode(s, fn, ctx);
}

int meta_prev_clear(struct meta *m)
{
	return meta_exec(m, "UPDATE inodes SET prev_bucket = -1, prev_npages = 0, "
			    "prev_skey = NULL WHERE prev_bucket <> -1 OR prev_skey IS NOT NULL");
}

int meta_delete(struct meta *m, uint64_t ino)
{
	sqlite3_stmt *s = m->st[ST_DELETE];

	if (meta_fault(m))
		return -EIO;

	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	return meta_changed_one(m, meta_step_done(m, s));
}

int meta_detach(struct meta *m, uint64_t ino)
{
	sqlite3_stmt *s = m->st[ST_DETACH];

	if (meta_fault(m))
		return -EIO;

	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	return meta_changed_one(m, meta_step_done(m, s));
}

int meta_move(struct meta *m, uint64_t ino, uint64_t newparent, const char *name, size_t len)
{
	sqlite3_stmt *s = m->st[ST_MOVE];

	if (meta_fault(m))
		return -EIO;

	if (len == 0 || len > META_NAME_MAX)
		return len ? -ENAMETOOLONG : -EINVAL;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)newparent);
	sqlite3_bind_blob(s, 3, name, (int)len, SQLITE_STATIC);
	return meta_changed_one(m, meta_step_done(m, s));
}

/* Run statement st with ?1 = id: 1 when it returns a row, 0 when not. */
static int meta_exists(struct meta *m, int st, uint64_t id)
{
	sqlite3_stmt *s = m->st[st];
	int rc;

	sqlite3_bind_int64(s, 1, (sqlite3_int64)id);
	rc = sqlite3_step(s);
	meta_finish(s);
	if (rc == SQLITE_ROW)
		return 1;
	return rc == SQLITE_DONE ? 0 : meta_errno(rc);
}

ssize_t meta_xattr_get(struct meta *m, uint64_t ino, const char *name, void *buf, size_t cap)
{
	sqlite3_stmt *s = m->st[ST_XATTR_GET];
	ssize_t ret;
	int rc;

	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	sqlite3_bind_blob(s, 2, name, (int)strlen(name), SQLITE_STATIC);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		size_t n = (size_t)sqlite3_column_bytes(s, 0);

		ret = (ssize_t)n;
		if (cap && n > cap)
			ret = -ERANGE;
		else if (cap && n)
			memcpy(buf, sqlite3_column_blob(s, 0), n);
	} else {
		ret = rc == SQLITE_DONE ? -ENODATA : meta_errno(rc);
	}
	meta_finish(s);
	return ret;
}

int meta_xattr_set(struct meta *m, uint64_t ino, const char *name, const void *value,
		   size_t len, int flags)
{
	size_t nlen = strlen(name);
	sqlite3_stmt *s;
	ssize_t have;
	int rc, ret;

	if (nlen == 0 || nlen > META_XATTR_NAME_MAX)
		return nlen ? -ERANGE : -EINVAL;
	if (len > META_XATTR_SIZE_MAX)
		return -E2BIG;
	have = meta_xattr_get(m, ino, name, NULL, 0);
	if (have < 0 && have != -ENODATA)
		return (int)have;
	if (have >= 0 && (flags & META_XATTR_CREATE))
		return -EEXIST;
	if (have < 0 && (flags & META_XATTR_REPLACE))
		return -ENODATA;
	s = m->st[ST_XATTR_TOTAL];
	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	sqlite3_bind_blob(s, 2, name, (int)nlen, SQLITE_STATIC);
	rc = sqlite3_step(s);
	ret = rc == SQLITE_ROW ? 0 : meta_errno(rc);
	if (!ret && (uint64_t)sqlite3_column_double(s, 0) + nlen + 1 + len > META_XATTR_TOTAL_MAX)
		ret = -ENOSPC;
	meta_finish(s);
	if (ret)
		return ret;
	if (meta_fault(m))
		return -EIO;
	s = m->st[have >= 0 ? ST_XATTR_UPDATE : ST_XATTR_INSERT];
	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	sqlite3_bind_blob(s, 2, name, (int)nlen, SQLITE_STATIC);
	/* A zero-length blob, never NULL (the column is NOT NULL). */
	sqlite3_bind_blob(s, 3, len ? value : "", (int)len, SQLITE_STATIC);
	return meta_step_done(m, s);
}

int meta_xattr_remove(struct meta *m, uint64_t ino, const char *name)
{
	sqlite3_stmt *s = m->st[ST_XATTR_REMOVE];
	int ret;

	if (meta_fault(m))
		return -EIO;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	sqlite3_bind_blob(s, 2, name, (int)strlen(name), SQLITE_STATIC);
	ret = meta_step_done(m, s);
	if (!ret && sqlite3_changes(m->db) == 0)
		ret = -ENODATA;
	return ret;
}

ssize_t meta_xattr_list(struct meta *m, uint64_t ino, char *buf, size_t cap)
{
	sqlite3_stmt *s = m->st[ST_XATTR_LIST];
	size_t used = 0;
	int rc;

	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		size_t n = (size_t)sqlite3_column_bytes(s, 0);

		if (cap && used + n + 1 > cap) {
			meta_finish(s);
			return -ERANGE;
		}
		if (cap) {
			memcpy(buf + used, sqlite3_column_blob(s, 0), n);
			buf[used + n] = '\0';
		}
		used += n + 1;
	}
	meta_finish(s);
	return rc == SQLITE_DONE ? (ssize_t)used : meta_errno(rc);
}

int meta_has_children(struct meta *m, uint64_t dir)
{
	return meta_exists(m, ST_HAS_CHILDREN, dir);
}

int meta_readdir(struct meta *m, uint64_t dir, uint64_t after, meta_dirent_fn fn, void *ctx)
{
	sqlite3_stmt *s = m->st[ST_READDIR];
	struct meta_inode in;
	int rc, ret = 0;

	sqlite3_bind_int64(s, 1, (sqlite3_int64)dir);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)after);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		meta_row_inode(s, &in);
		ret = fn(ctx, &in, sqlite3_column_blob(s, INODE_NCOLS),
			 (size_t)sqlite3_column_bytes(s, INODE_NCOLS));
		if (ret)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = meta_errno(rc);
	meta_finish(s);
	return ret;
}

int meta_foreach_mapping(struct meta *m, meta_ino_fn fn, void *ctx)
{
	return meta_each_inode(m->st[ST_MAPPINGS], fn, ctx);
}

int meta_count_unsettled(struct meta *m, uint64_t *new_files, uint64_t *orphans)
{
	sqlite3_stmt *s = NULL;
	int rc;

	*new_files = *orphans = 0;
	rc = sqlite3_prepare_v2(m->db,
				"SELECT count(*) FILTER (WHERE parent IS NOT NULL AND state = 1), "
				"count(*) FILTER (WHERE parent IS NULL) FROM inodes "
				"WHERE state = 1 OR parent IS NULL",
				-1, &s, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		*new_files = (uint64_t)sqlite3_column_int64(s, 0);
		*orphans = (uint64_t)sqlite3_column_int64(s, 1);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	return meta_errno(rc);
}

int meta_recover(struct meta *m, uint64_t *dropped_new, uint64_t *dropped_orphans)
{
	int ret;

	*dropped_new = *dropped_orphans = 0;
	ret = meta_begin(m);
	if (ret)
		return ret;
	ret = meta_exec(m, "DELETE FROM inodes WHERE parent IS NULL");
	if (!ret) {
		*dropped_orphans = (uint64_t)sqlite3_changes(m->db);
		ret = meta_exec(m, "DELETE FROM inodes WHERE state = 1");
	}
	if (!ret) {
		*dropped_new = (uint64_t)sqlite3_changes(m->db);
		return meta_commit(m);
	}
	meta_rollback(m);
	return ret;
}

int meta_count_files(struct meta *m, uint64_t *n)
{
	sqlite3_stmt *s = m->st[ST_COUNT_FILES];
	int rc = sqlite3_step(s);

	if (rc == SQLITE_ROW)
		*n = (uint64_t)sqlite3_column_int64(s, 0);
	meta_finish(s);
	return rc == SQLITE_ROW ? 0 : meta_errno(rc);
}

int meta_bitmap_save(struct meta *m, uint32_t bucket, uint64_t npages,
		     const uint64_t *words, uint64_t nwords)
{
	sqlite3_stmt *s = m->st[ST_BITMAP_SAVE];

	sqlite3_bind_int64(s, 1, bucket);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)npages);
	sqlite3_bind_blob64(s, 3, words, nwords * sizeof(uint64_t), SQLITE_STATIC);
	return meta_step_done(m, s);
}

int meta_bitmap_load(struct meta *m, uint32_t bucket, uint64_t npages,
		     uint64_t *words, uint64_t nwords)
{
	sqlite3_stmt *s = m->st[ST_BITMAP_LOAD];
	int rc, ret;

	sqlite3_bind_int64(s, 1, bucket);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		if ((uint64_t)sqlite3_column_int64(s, 0) != npages ||
		    (uint64_t)sqlite3_column_bytes(s, 1) != nwords * sizeof(uint64_t)) {
			ret = -EINVAL;
		} else {
			memcpy(words, sqlite3_column_blob(s, 1), nwords * sizeof(uint64_t));
			ret = 0;
		}
	} else {
		ret = rc == SQLITE_DONE ? -ENOENT : meta_errno(rc);
	}
	meta_finish(s);
	return ret;
}

static int64_t meta_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int meta_task_add(struct meta *m, struct meta_task *t)
{
	sqlite3_stmt *s = m->st[ST_TASK_ADD];
	int ret;

	t->created = meta_wall_ns();
	t->state = META_TASK_QUEUED;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)t->ino);
	sqlite3_bind_text(s, 2, t->key, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 3, t->reason, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 4, (sqlite3_int64)t->size);
	sqlite3_bind_int(s, 5, t->bucket);
	sqlite3_bind_int64(s, 6, (sqlite3_int64)t->page);
	sqlite3_bind_int64(s, 7, (sqlite3_int64)t->csum);
	sqlite3_bind_int64(s, 8, t->created);
	ret = meta_step_done(m, s);
	if (!ret)
		t->id = (uint64_t)sqlite3_last_insert_rowid(m->db);
	return ret;
}

int meta_task_claim(struct meta *m, struct meta_task *t)
{
	sqlite3_stmt *s = m->st[ST_TASK_NEXT];
	int rc, ret;

	memset(t, 0, sizeof(*t));
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		const unsigned char *k = sqlite3_column_text(s, 2), *r = sqlite3_column_text(s, 3);

		t->id = (uint64_t)sqlite3_column_int64(s, 0);
		t->ino = (uint64_t)sqlite3_column_int64(s, 1);
		snprintf(t->key, sizeof(t->key), "%s", k ? (const char *)k : "");
		snprintf(t->reason, sizeof(t->reason), "%s", r ? (const char *)r : "");
		t->size = (uint64_t)sqlite3_column_int64(s, 4);
		t->bucket = sqlite3_column_int(s, 5);
		t->page = (uint64_t)sqlite3_column_int64(s, 6);
		t->csum = (uint64_t)sqlite3_column_int64(s, 7);
		t->created = sqlite3_column_int64(s, 8);
		ret = 0;
	} else {
		ret = rc == SQLITE_DONE ? -ENOENT : meta_errno(rc);
	}
	meta_finish(s);
	if (ret)
		return ret;
	s = m->st[ST_TASK_START];
	t->started = meta_wall_ns();
	t->state = META_TASK_RUNNING;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)t->id);
	sqlite3_bind_int64(s, 2, t->started);
	return meta_step_done(m, s);
}

int meta_task_finish(struct meta *m, uint64_t id, int state, const char *error)
{
	sqlite3_stmt *s = m->st[ST_TASK_FINISH];

	sqlite3_bind_int64(s, 1, (sqlite3_int64)id);
	sqlite3_bind_int(s, 2, state);
	sqlite3_bind_int64(s, 3, meta_wall_ns());
	if (error)
		sqlite3_bind_text(s, 4, error, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 4);
	return meta_changed_one(m, meta_step_done(m, s));
}

int meta_task_pending(struct meta *m, uint64_t ino)
{
	return meta_exists(m, ST_TASK_PENDING, ino);
}

int meta_task_requeue(struct meta *m, uint64_t *n)
{
	int ret = meta_exec(m, "UPDATE tasks SET state = 0, started = NULL WHERE state = 1");

	*n = ret ? 0 : (uint64_t)sqlite3_changes(m->db);
	return ret;
}

int meta_task_count(struct meta *m, int state, uint64_t *n)
{
	sqlite3_stmt *s = NULL;
	int rc;

	*n = 0;
	rc = sqlite3_prepare_v2(m->db, "SELECT count(*) FROM tasks WHERE state = ?1", -1, &s, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int(s, 1, state);
		rc = sqlite3_step(s);
		if (rc == SQLITE_ROW) {
			*n = (uint64_t)sqlite3_column_int64(s, 0);
			rc = SQLITE_OK;
		}
	}
	sqlite3_finalize(s);
	return meta_errno(rc);
}

int meta_task_prune(struct meta *m, uint64_t keep)
{
	char sql[200];

	snprintf(sql, sizeof(sql),
		 "DELETE FROM tasks WHERE state >= 2 AND id NOT IN (SELECT id FROM tasks "
		 "WHERE state >= 2 ORDER BY id DESC LIMIT %llu)",
		 (unsigned long long)keep);
	return meta_exec(m, sql);
}

int meta_bitmap_clear(struct meta *m)
{
	return meta_step_done(m, m->st[ST_BITMAP_CLEAR]);
}
