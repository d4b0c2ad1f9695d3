/*
 * meta.c: the sqlite engine behind meta.h: opening a database, its schema
 * (version META_SCHEMA_VERSION, kept in PRAGMA user_version) and the
 * migrations from each older one, the store's settings and the statement
 * array.
 *
 * The schema is described in DESIGN.md; keep the two in step.
 */
#include "sqlite_int.h"

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

static const char *const meta_sql[ST_N] = {
	[ST_GET] = "SELECT " INODE_COLS " FROM inodes WHERE ino = ?1",
	[ST_LOOKUP] = "SELECT " INODE_COLS " FROM inodes WHERE parent = ?1 AND name = ?2",
	[ST_LOOKUP_BRIEF] = "SELECT ino, mode, state, size, bucket, page, npages, csum FROM inodes "
			    "WHERE parent = ?1 AND name = ?2",
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
	/* A committed regular file in one row: what ST_INSERT then ST_COMMIT_OBJECT leave. */
	[ST_INSERT_OBJECT] = "INSERT INTO inodes (parent, name, mode, uid, gid, atime, mtime, "
			     "ctime, size, bucket, page, npages, csum, state, gen, pcsums, "
			     "nlink) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
			     "?13, ?14, ?15, ?16, 1)",
	[ST_PCSUMS_GET] = "SELECT pcsums FROM inodes WHERE ino = ?1",
	[ST_UNSYNCED] = "SELECT " INODE_COLS ", 0 FROM inodes WHERE gen > ?1 AND state = 0 "
			"AND parent IS NOT NULL AND npages > 0 AND bucket <> -3 UNION ALL "
			"SELECT " EXTENT_COLS " FROM extents e JOIN inodes i ON i.ino = e.ino "
			"WHERE e.gen > ?1 AND i.state = 0 AND i.parent IS NOT NULL "
			"AND e.npages > 0",
	[ST_VALUES] = "SELECT " INODE_COLS ", 0, skey, prev_skey FROM inodes "
		      "WHERE skey IS NOT NULL OR prev_skey IS NOT NULL UNION ALL "
		      "SELECT " EXTENT_COLS ", e.skey, e.prev_skey FROM extents e "
		      "JOIN inodes i ON i.ino = e.ino "
		      "WHERE e.skey IS NOT NULL OR e.prev_skey IS NOT NULL ORDER BY 1, 22",
	[ST_DELETE] = "DELETE FROM inodes WHERE ino = ?1",
	[ST_DETACH] = "UPDATE inodes SET parent = NULL, name = NULL WHERE ino = ?1",
	[ST_MOVE] = "UPDATE inodes SET parent = ?2, name = ?3 WHERE ino = ?1",
	[ST_HAS_CHILDREN] = "SELECT 1 FROM inodes WHERE parent = ?1 LIMIT 1",
	[ST_READDIR] = "SELECT " INODE_COLS ", name FROM inodes WHERE parent = ?1 "
		       "AND ino > ?2 ORDER BY ino",
	[ST_MAPPINGS] = "SELECT " INODE_COLS ", 0 FROM inodes WHERE npages > 0 "
			"AND bucket <> -3 AND state IN (0, 2) AND parent IS NOT NULL UNION ALL "
			"SELECT " EXTENT_COLS " FROM extents e JOIN inodes i ON i.ino = e.ino "
			"WHERE e.npages > 0 AND i.state IN (0, 2) AND i.parent IS NOT NULL "
			"ORDER BY 1, 22",
	[ST_COUNT_MAPPINGS] = "SELECT (SELECT count(*) FROM inodes WHERE npages > 0 "
			      "AND bucket <> -3 AND state IN (0, 2) AND parent IS NOT NULL) + "
			      "(SELECT count(*) FROM extents e JOIN inodes i ON i.ino = e.ino "
			      "WHERE e.npages > 0 AND i.state IN (0, 2) AND i.parent IS NOT NULL)",
	[ST_EXTENT_COMMIT] = "INSERT INTO extents (ino, idx, size, bucket, page, npages, csum, "
			     "gen, prev_bucket, prev_page, prev_npages, prev_size, prev_csum, "
			     "pcsums, skey) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
			     "?12, ?13, ?14, CASE ?16 WHEN 2 THEN NULL ELSE ?15 END) "
			     "ON CONFLICT (ino, idx) DO UPDATE SET size = ?3, bucket = ?4, "
			     "page = ?5, npages = ?6, csum = ?7, gen = ?8, prev_bucket = ?9, "
			     "prev_page = ?10, prev_npages = ?11, prev_size = ?12, prev_csum = ?13, "
			     "pcsums = ?14, "
			     /* As ST_COMMIT_OBJECT: the RHS sees the old row. */
			     "skey = CASE ?16 WHEN 2 THEN prev_skey ELSE ?15 END, "
			     "prev_skey = CASE ?16 WHEN 1 THEN skey WHEN 2 THEN NULL "
			     "ELSE prev_skey END",
	[ST_EXTENT_DELETE] = "DELETE FROM extents WHERE ino = ?1 AND idx = ?2",
	[ST_EXTENTS] = "SELECT " EXTENT_COLS " FROM extents e JOIN inodes i ON i.ino = e.ino "
		       "WHERE e.ino = ?1 ORDER BY e.idx",
	[ST_EXTENT_PCSUMS] = "SELECT pcsums FROM extents WHERE ino = ?1 AND idx = ?2",
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
	/*
	 * Not RETURNING nlink: that buffers the row in an ephemeral table, whose
	 * page cache (some 85 KiB) is allocated and freed by every run.
	 */
	[ST_DIR_CHANGED] = "UPDATE inodes SET mtime = ?2, ctime = ?2 WHERE ino = ?1",
	[ST_NLINK] = "SELECT nlink FROM inodes WHERE ino = ?1",
	[ST_XATTR_GET] = "SELECT value FROM xattrs WHERE ino = ?1 AND name = ?2",
	[ST_XATTR_INSERT] = "INSERT INTO xattrs (ino, name, value) VALUES (?1, ?2, ?3)",
	[ST_XATTR_UPDATE] = "UPDATE xattrs SET value = ?3 WHERE ino = ?1 AND name = ?2",
	[ST_XATTR_REMOVE] = "DELETE FROM xattrs WHERE ino = ?1 AND name = ?2",
	[ST_XATTR_LIST] = "SELECT name FROM xattrs WHERE ino = ?1 ORDER BY name",
	/* What the others take, name ?2 left out (the one being replaced). */
	[ST_XATTR_TOTAL] = "SELECT total(length(name) + 1 + length(value)) FROM xattrs "
			   "WHERE ino = ?1 AND name <> ?2",
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_BEGIN_READ] = "BEGIN",
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
 * Schema 4: the extents of files larger than one extent (the store's
 * extent_size), whose row has bucket -3 (META_EXTENTS): extent idx holds
 * the file's bytes [idx * extent_size, idx * extent_size + size), with the
 * mapping and version columns of an inode row.  They go with their inode.
 */
#define META_SCHEMA_4                                                                       \
	"CREATE TABLE extents (ino INTEGER NOT NULL, idx INTEGER NOT NULL,"                  \
	" size INTEGER NOT NULL, bucket INTEGER NOT NULL, page INTEGER NOT NULL,"            \
	" npages INTEGER NOT NULL, csum INTEGER NOT NULL, gen INTEGER NOT NULL,"             \
	" prev_bucket INTEGER NOT NULL DEFAULT -1, prev_page INTEGER NOT NULL DEFAULT 0,"    \
	" prev_npages INTEGER NOT NULL DEFAULT 0, prev_size INTEGER NOT NULL DEFAULT 0,"     \
	" prev_csum INTEGER NOT NULL DEFAULT 0, pcsums BLOB, skey BLOB, prev_skey BLOB,"     \
	" PRIMARY KEY (ino, idx)) WITHOUT ROWID;"                                             \
	"CREATE TRIGGER inodes_extents AFTER DELETE ON inodes BEGIN"                         \
	" DELETE FROM extents WHERE ino = old.ino; END;"

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
	"CREATE INDEX tasks_ino ON tasks (ino) WHERE state IN (0, 1);" META_SCHEMA_3
	META_SCHEMA_4;

const char *sq_errmsg(struct meta *mb)
{
	struct meta_sq *m = sq(mb);

	return m && m->db ? sqlite3_errmsg(m->db) : "no database";
}

int sq_setting_get(struct meta *mb, const char *name, char *buf, size_t len)
{
	struct meta_sq *m = sq(mb);

	return sq_kv_get(m, name, NULL, buf, len);
}

int sq_setting_set(struct meta *mb, const char *name, const char *value)
{
	struct meta_sq *m = sq(mb);

	return sq_kv_set_text(m, name, value);
}

/*
 * Decide whether an existing database is ours before any write: a foreign
 * or newer database must be left exactly as it was found.
 */
static int sq_check_ours(struct meta_sq *m, char *err, size_t errlen)
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
		return sq_errno(code ? code : SQLITE_IOERR);
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
static int sq_migrate(struct meta_sq *m, char *err, size_t errlen)
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
		/* 3 -> 4: extents (none yet: every file is one run). */
		[3] = META_SCHEMA_4 "PRAGMA user_version = 4;",
	};
	int v, ret = 0;

	for (v = m->found_version; !ret && v < META_SCHEMA_VERSION; v++) {
		ret = sq_exec(m, "BEGIN IMMEDIATE");
		if (!ret)
			ret = sq_exec(m, steps[v]);
		if (!ret)
			ret = sq_exec(m, "COMMIT");
		if (ret) {
			snprintf(err, errlen, "cannot migrate schema %d to %d: %s", v, v + 1,
				 sqlite3_errmsg(m->db));
			sq_exec(m, "ROLLBACK");
		}
	}
	return ret;
}

static int sq_create_schema(struct meta_sq *m, char *err, size_t errlen)
{
	char sql[64];
	int ret;

	ret = sq_exec(m, "BEGIN IMMEDIATE");
	if (!ret)
		ret = sq_exec(m, meta_schema);
	if (!ret) {
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", META_SCHEMA_VERSION);
		ret = sq_exec(m, sql);
	}
	if (!ret)
		ret = sq_exec(m, "INSERT INTO store (k, v) VALUES ('magic', '" META_MAGIC "')");
	if (!ret)
		ret = sq_exec(m, "COMMIT");
	if (ret) {
		snprintf(err, errlen, "cannot create schema: %s", sqlite3_errmsg(m->db));
		sq_exec(m, "ROLLBACK");
	}
	return ret;
}

/* The database's page size (sqlite's default when it cannot say). */
static int sq_page_size(struct meta_sq *m)
{
	sqlite3_stmt *s;
	int size = 4096;

	if (sqlite3_prepare_v2(m->db, "PRAGMA page_size", -1, &s, NULL) != SQLITE_OK)
		return size;
	if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_int(s, 0) > 0)
		size = sqlite3_column_int(s, 0);
	sqlite3_finalize(s);
	return size;
}

int sq_open(const char *path, int create, struct meta **out, char *err, size_t errlen)
{
	struct meta_sq *m;
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
	m->base.ops = &meta_sqlite_ops;
	m->wal_fd = -1;
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
		/* sqlite's name for the log: the prefetches open it (sync.c). */
		if (asprintf(&m->wal_path, "%s-wal", full ? full : path) < 0)
			m->wal_path = NULL;
		free(full);
	}
	if (rc != SQLITE_OK) {
		/* sqlite's "unable to open database file" alone does not say why. */
		int sys = m->db ? sqlite3_system_errno(m->db) : 0;

		snprintf(err, errlen, "cannot open %s: %s%s%s%s", path,
			 m->db ? sqlite3_errmsg(m->db) : sqlite3_errstr(rc), sys ? " (" : "",
			 sys ? strerror(sys) : "", sys ? ")" : "");
		ret = sq_errno(rc);
		goto out_close;
	}
	sqlite3_busy_timeout(m->db, 5000);
	sqlite3_extended_result_codes(m->db, 0);
	/*
	 * The store has one user at a time (the ROOT lock): holding sqlite's
	 * lock for as long as the store is open saves the fcntl calls of every
	 * transaction and the shared-memory WAL index.  Set before the first
	 * read: a read in shared mode would map DB-shm, whose pages, on a
	 * full disk, fault with SIGBUS when they are holes.
	 */
	ret = sq_exec(m, "PRAGMA locking_mode=EXCLUSIVE");
	if (ret) {
		snprintf(err, errlen, "cannot lock %s: %s", path, sqlite3_errmsg(m->db));
		goto out_close;
	}
	if (exists) {
		ret = sq_check_ours(m, err, errlen);
		if (ret)
			goto out_close;
	}
	/*
	 * WAL with synchronous=NORMAL: a commit reaches the OS before it
	 * returns (it survives a daemon kill -9) without an fsync; meta_sync
	 * is the point of durability against power loss.
	 */
	ret = sq_exec(m, "PRAGMA journal_mode=WAL");
	if (!ret)
		ret = sq_exec(m, "PRAGMA synchronous=NORMAL");
	/* Our own automatic checkpoint in place of sqlite's (sync.c, sq_wal_hook). */
	if (!ret)
		sqlite3_wal_hook(m->db, sq_wal_hook, m);
	if (!ret)
		m->db_page = sq_page_size(m);
	if (ret) {
		snprintf(err, errlen, "cannot set WAL mode on %s: %s", path, sqlite3_errmsg(m->db));
		goto out_close;
	}
	if (!exists) {
		ret = sq_create_schema(m, err, errlen);
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
		ret = sq_migrate(m, err, errlen);
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
	*out = &m->base;
	return exists ? 0 : 1;

out_close:
	sq_close(&m->base);
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

void sq_close(struct meta *mb)
{
	struct meta_sq *m = sq(mb);
	int i;

	if (!m)
		return;
	for (i = 0; i < ST_N; i++)
		sqlite3_finalize(m->st[i]);
	sqlite3_close(m->db);
	if (m->wal_fd >= 0)
		close(m->wal_fd);
	free(m->wal_path);
	free(m);
}

/*
 * A fork carries no POSIX lock, and locking_mode=EXCLUSIVE holds sqlite's
 * for the whole mount: the child holds none of what sqlite believes it
 * holds.  Through the VFS, the lock is let go in sqlite's books (the
 * unlock itself finds nothing to release) and taken again, up to
 * EXCLUSIVE, which a connection in this mode holds once it has written.
 */
int sq_forked(struct meta *mb)
{
	struct meta_sq *m = sq(mb);
	const int steps[] = { SQLITE_LOCK_SHARED, SQLITE_LOCK_RESERVED, SQLITE_LOCK_EXCLUSIVE };
	sqlite3_file *f = NULL;
	int rc = SQLITE_OK, tries;
	unsigned i;

	if (sqlite3_file_control(m->db, "main", SQLITE_FCNTL_FILE_POINTER, &f) != SQLITE_OK ||
	    !f || !f->pMethods)
		return -EIO;
	f->pMethods->xUnlock(f, SQLITE_LOCK_NONE);
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		/* A reader that came in while no lock was held: it goes within its query. */
		for (tries = 0; (rc = f->pMethods->xLock(f, steps[i])) == SQLITE_BUSY && tries < 500;
		     tries++)
			usleep(10000);
		if (rc != SQLITE_OK)
			break;
	}
	return rc == SQLITE_OK ? 0 : rc == SQLITE_BUSY ? -EBUSY : -EIO;
}

int sq_format(struct meta *mb, const struct meta_geom *g, const char *backend,
		uint32_t root_mode, uint32_t uid, uint32_t gid)
{
	struct meta_sq *m = sq(mb);
	struct meta_inode root = { 0 };
	struct timespec ts;
	sqlite3_stmt *s;
	int ret;

	clock_gettime(CLOCK_REALTIME, &ts);
	ret = sq_begin(&m->base);
	if (ret)
		return ret;
	ret = sq_kv_set_int(m, "page_size", (sqlite3_int64)g->page_size);
	if (!ret)
		ret = sq_kv_set_int(m, "bucket_size", (sqlite3_int64)g->bucket_size);
	if (!ret)
		ret = sq_kv_set_int(m, "bucket_count", g->bucket_count);
	if (!ret)
		ret = sq_kv_set_text(m, "backend", backend);
	if (!ret)
		ret = sq_kv_set_int(m, "clean", 0);
	if (!ret)
		ret = sq_kv_set_int(m, "created", ts.tv_sec);
	if (!ret) {
		/* The root row gets ino 1 by being first; insist on it. */
		root.mode = root_mode;
		root.uid = uid;
		root.gid = gid;
		root.atime = root.mtime = root.ctime =
			(int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
		root.bucket = -1;
		root.state = META_COMMITTED;
		s = m->st[ST_INSERT];
		sq_bind_new_inode(s, &root, "", 0);
		ret = sq_step_done(m, s);
		if (!ret && sqlite3_last_insert_rowid(m->db) != META_ROOT_INO)
			ret = -EUCLEAN;
	}
	if (ret) {
		sq_rollback(&m->base);
		return ret;
	}
	return sq_commit(&m->base);
}

int sq_geom_get(struct meta *mb, struct meta_geom *g, char *backend, size_t blen)
{
	struct meta_sq *m = sq(mb);
	sqlite3_int64 ps, bs, bc;
	int ret;

	ret = sq_kv_get(m, "page_size", &ps, NULL, 0);
	if (!ret)
		ret = sq_kv_get(m, "bucket_size", &bs, NULL, 0);
	if (!ret)
		ret = sq_kv_get(m, "bucket_count", &bc, NULL, 0);
	if (!ret && backend)
		ret = sq_kv_get(m, "backend", NULL, backend, blen);
	if (ret)
		return ret;
	if (ps <= 0 || bs <= 0 || bc <= 0 || bc > 256)
		return -EUCLEAN;
	g->page_size = (uint64_t)ps;
	g->bucket_size = (uint64_t)bs;
	g->bucket_count = (uint32_t)bc;
	return 0;
}
