/*
 * Unit tests for meta/: the metadata store, on the sqlite engine, and with
 * OFS_TEST_PG_URI set (tests/meta-pg.sh starts a server with scripts/pg)
 * the same cases on the PostgreSQL engine, each on a fresh schema, with
 * that engine's refusals.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#include "meta.h"

static char dir[256], dbpath[512];
/* The PostgreSQL database the cases run on, or NULL: sqlite. */
static const char *pg_uri;

/* Run sql on the test's PostgreSQL database as its owner; the first value or "". */
static void pg_sql(const char *sql, char *out, size_t len)
{
	PGconn *c = PQconnectdb(pg_uri);
	PGresult *r;

	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK,
		      "%s: %s", sql, PQresultErrorMessage(r));
	if (out)
		snprintf(out, len, "%s",
			 PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) ? PQgetvalue(r, 0, 0)
									   : "");
	PQclear(r);
	PQfinish(c);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/ofs-test-meta-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(dbpath, sizeof(dbpath), "%s/offloadfs.db", dir);
	if (pg_uri) {
		snprintf(dbpath, sizeof(dbpath), "%s", pg_uri);
		pg_sql("DROP SCHEMA IF EXISTS offloadfs CASCADE", NULL, 0);
	}
}

static void teardown(void)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static struct meta *open_new(void)
{
	struct meta_geom g = { 65536, 1 << 20, 4 };
	struct meta *m;
	char err[256];

	err[0] = '\0';
	ck_assert_msg(meta_open(dbpath, 1, &m, err, sizeof(err)) == 1, "%s", err);
	ck_assert_int_eq(meta_format(m, &g, "pages", 040755, 0, 0), 0);
	return m;
}

static struct meta_inode file_in(uint64_t parent, int state)
{
	struct meta_inode in = { 0 };

	in.parent = parent;
	in.mode = 0100644;
	in.bucket = -1;
	in.state = state;
	in.mtime = 123456789012345LL;
	return in;
}

START_TEST(test_format_and_reopen)
{
	struct meta_geom g;
	struct meta *m = open_new();
	struct meta_inode root;
	char err[256], backend[16];
	int clean;

	ck_assert_int_eq(meta_geom_get(m, &g, backend, sizeof(backend)), 0);
	ck_assert_uint_eq(g.page_size, 65536);
	ck_assert_uint_eq(g.bucket_size, 1 << 20);
	ck_assert_uint_eq(g.bucket_count, 4);
	ck_assert_str_eq(backend, "pages");
	ck_assert_int_eq(meta_get(m, META_ROOT_INO, &root), 0);
	ck_assert_uint_eq(root.mode, 040755);
	ck_assert_int_eq(meta_clean_get(m, &clean), 0);
	ck_assert_int_eq(clean, 0);
	ck_assert_int_eq(meta_clean_set(m, 1), 0);
	meta_close(m);

	ck_assert_int_eq(meta_open(dbpath, 0, &m, err, sizeof(err)), 0);
	ck_assert_int_eq(meta_clean_get(m, &clean), 0);
	ck_assert_int_eq(clean, 1);
	ck_assert_int_eq(meta_geom_get(m, &g, NULL, 0), 0);
	ck_assert_uint_eq(g.bucket_count, 4);
	meta_close(m);
}
END_TEST

START_TEST(test_open_missing_without_create)
{
	struct meta *m;
	char err[256];

	ck_assert_int_eq(meta_open(dbpath, 0, &m, err, sizeof(err)), -ENOENT);
	if (pg_uri) {
		char n[16];

		pg_sql("SELECT count(*) FROM pg_namespace WHERE nspname = 'offloadfs'", n, sizeof(n));
		ck_assert_str_eq(n, "0");
	} else {
		ck_assert_int_ne(access(dbpath, F_OK), 0);
	}
}
END_TEST

static void file_bytes(const char *path, char **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");

	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	rewind(f);
	*buf = malloc(*len + 1);
	ck_assert_uint_eq(fread(*buf, 1, *len, f), *len);
	fclose(f);
}

START_TEST(test_foreign_db_untouched)
{
	struct meta *m;
	sqlite3 *db;
	char err[256], *before, *after;
	size_t lb, la;

	ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "CREATE TABLE users(name TEXT); "
					  "INSERT INTO users VALUES('alice')",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	file_bytes(dbpath, &before, &lb);
	ck_assert_int_eq(meta_open(dbpath, 1, &m, err, sizeof(err)), -EUCLEAN);
	ck_assert_ptr_nonnull(strstr(err, "not an offloadfs database"));
	file_bytes(dbpath, &after, &la);
	ck_assert_uint_eq(la, lb);
	ck_assert_mem_eq(before, after, lb);
	ck_assert_int_ne(access("/nonexistent", F_OK), 0);
	free(before);
	free(after);
}
END_TEST

START_TEST(test_not_a_database)
{
	struct meta *m;
	char err[256];
	FILE *f = fopen(dbpath, "w");

	fputs("this is a text file, not sqlite\n", f);
	fclose(f);
	ck_assert_int_lt(meta_open(dbpath, 1, &m, err, sizeof(err)), 0);
	f = fopen(dbpath, "w");
	fclose(f);
	ck_assert_int_eq(meta_open(dbpath, 1, &m, err, sizeof(err)), -EUCLEAN);
	ck_assert_ptr_nonnull(strstr(err, "empty file"));
}
END_TEST

START_TEST(test_newer_schema_refused)
{
	struct meta *m = open_new();
	sqlite3 *db;
	char err[256], *before, *after;
	size_t lb, la;

	meta_close(m);
	ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "PRAGMA user_version = 7", NULL, NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL,
						   NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	file_bytes(dbpath, &before, &lb);
	ck_assert_int_eq(meta_open(dbpath, 1, &m, err, sizeof(err)), -EPROTONOSUPPORT);
	ck_assert_str_eq(err, "unsupported schema version: found 7, expected 4");
	file_bytes(dbpath, &after, &la);
	ck_assert_uint_eq(la, lb);
	ck_assert_mem_eq(before, after, lb);
	free(before);
	free(after);
}
END_TEST

/* What schema 4 added: dropped, a database is as schema 3 made it. */
#define SCHEMA_4_DOWN "DROP TRIGGER inodes_extents; DROP TABLE extents;"

/* What schema 3 added: dropped, a database is as schema 2 made it. */
#define SCHEMA_3_DOWN                                                                    \
	SCHEMA_4_DOWN                                                                    \
	"DROP TRIGGER inodes_nlink_insert; DROP TRIGGER inodes_nlink_delete;"            \
	"DROP TRIGGER inodes_nlink_move; DROP TRIGGER inodes_xattrs; DROP TABLE xattrs;" \
	"ALTER TABLE inodes DROP COLUMN nlink;"

static struct meta_inode dir_in(uint64_t parent)
{
	struct meta_inode in = file_in(parent, META_COMMITTED);

	in.mode = 040755;
	return in;
}

static uint32_t nlink_of(struct meta *m, uint64_t ino)
{
	struct meta_inode in;

	ck_assert_int_eq(meta_get(m, ino, &in), 0);
	return in.nlink;
}

/* Directory link counts follow mkdir, rmdir and renames of directories. */
START_TEST(test_dir_nlink)
{
	struct meta *m = open_new();
	struct meta_inode t = dir_in(META_ROOT_INO), a, b, f;
	uint32_t n = 0;

	ck_assert_uint_eq(nlink_of(m, META_ROOT_INO), 2);
	ck_assert_int_eq(meta_insert(m, &t, "t", 1), 0);
	ck_assert_uint_eq(nlink_of(m, META_ROOT_INO), 3);
	ck_assert_uint_eq(nlink_of(m, t.ino), 2);
	a = dir_in(t.ino);
	b = dir_in(t.ino);
	f = file_in(t.ino, META_COMMITTED);
	ck_assert_int_eq(meta_insert(m, &a, "a", 1), 0);
	ck_assert_int_eq(meta_insert(m, &b, "b", 1), 0);
	ck_assert_int_eq(meta_insert(m, &f, "f", 1), 0);
	ck_assert_uint_eq(nlink_of(m, t.ino), 4); /* files do not count */
	ck_assert_int_eq(meta_move(m, b.ino, a.ino, "b", 1), 0);
	ck_assert_uint_eq(nlink_of(m, t.ino), 3);
	ck_assert_uint_eq(nlink_of(m, a.ino), 3);
	ck_assert_int_eq(meta_move(m, b.ino, a.ino, "c", 1), 0); /* same parent */
	ck_assert_uint_eq(nlink_of(m, a.ino), 3);
	ck_assert_int_eq(meta_move(m, f.ino, a.ino, "f", 1), 0);
	ck_assert_uint_eq(nlink_of(m, a.ino), 3);
	ck_assert_int_eq(meta_delete(m, b.ino), 0);
	ck_assert_uint_eq(nlink_of(m, a.ino), 2);
	ck_assert_int_eq(meta_dir_changed(m, a.ino, 42, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(meta_get(m, a.ino, &b), 0);
	ck_assert_int_eq(b.mtime, 42);
	ck_assert_int_eq(b.ctime, 42);
	ck_assert_int_eq(meta_dir_changed(m, 999, 42, NULL), -ENOENT);
	meta_close(m);
}
END_TEST

/*
 * A brief lookup gives a full one's descriptor fields, inside a read
 * transaction as outside; ending that transaction lets a write begin.
 */
START_TEST(test_lookup_brief_in_read_txn)
{
	struct meta *m = open_new();
	struct meta_inode f = file_in(META_ROOT_INO, META_COMMITTED), full, brief;

	f.size = 300000;
	f.bucket = 3;
	f.page = 17;
	f.npages = 5;
	f.csum = 0xfedcba9876543210ULL;
	f.uid = 7;
	ck_assert_int_eq(meta_insert(m, &f, "f", 1), 0);
	ck_assert_int_eq(meta_read_begin(m), 0);
	ck_assert_int_eq(meta_lookup(m, META_ROOT_INO, "f", 1, &full), 0);
	memset(&brief, 0xff, sizeof(brief));
	ck_assert_int_eq(meta_lookup_brief(m, META_ROOT_INO, "f", 1, &brief), 0);
	ck_assert_int_eq(meta_lookup_brief(m, META_ROOT_INO, "g", 1, &brief), -ENOENT);
	meta_read_end(m);
	ck_assert_uint_eq(brief.ino, full.ino);
	ck_assert_uint_eq(brief.mode, full.mode);
	ck_assert_int_eq(brief.state, full.state);
	ck_assert_uint_eq(brief.size, 300000);
	ck_assert_int_eq(brief.bucket, 3);
	ck_assert_uint_eq(brief.page, 17);
	ck_assert_uint_eq(brief.npages, 5);
	ck_assert_uint_eq(brief.csum, 0xfedcba9876543210ULL);
	ck_assert_uint_eq(brief.uid, 0);
	ck_assert_int_eq(brief.prev_bucket, -1);
	/* The read is over: a write transaction begins, and sees and changes the row. */
	ck_assert_int_eq(meta_begin(m), 0);
	ck_assert_int_eq(meta_delete(m, f.ino), 0);
	ck_assert_int_eq(meta_commit(m), 0);
	ck_assert_int_eq(meta_lookup_brief(m, META_ROOT_INO, "f", 1, &brief), -ENOENT);
	meta_close(m);
}
END_TEST

/* Key lengths below the tenant, and the deepest path below a directory. */
START_TEST(test_key_len)
{
	struct meta *m = open_new();
	struct meta_inode t = dir_in(META_ROOT_INO), a, b, f;
	char name[256];
	size_t len = 1;

	ck_assert_int_eq(meta_insert(m, &t, "tenant", 6), 0);
	a = dir_in(t.ino);
	ck_assert_int_eq(meta_insert(m, &a, "abc", 3), 0);
	b = dir_in(a.ino);
	ck_assert_int_eq(meta_insert(m, &b, "de", 2), 0);
	f = file_in(b.ino, META_COMMITTED);
	ck_assert_int_eq(meta_insert(m, &f, "f", 1), 0);
	ck_assert_int_eq(meta_key_len(m, t.ino, &len), 0);
	ck_assert_uint_eq(len, 0);
	ck_assert_int_eq(meta_key_len(m, f.ino, &len), 0);
	ck_assert_uint_eq(len, strlen("abc/de/f"));
	ck_assert_int_eq(meta_subtree_depth(m, a.ino, &len), 0);
	ck_assert_uint_eq(len, strlen("de/f"));
	ck_assert_int_eq(meta_subtree_depth(m, f.ino, &len), 0);
	ck_assert_uint_eq(len, 0);
	/* Past META_KEY_MAX: too long, whatever the buffer. */
	memset(name, 'x', 255);
	for (int i = 0; i < 17; i++) {
		struct meta_inode d = dir_in(b.ino);

		ck_assert_int_eq(meta_insert(m, &d, name, 255), 0);
		b = d;
	}
	ck_assert_int_eq(meta_key_len(m, b.ino, &len), -ENAMETOOLONG);
	meta_close(m);
}
END_TEST

/* User xattrs: set, replace, list, remove, the flags and limits; gone with their inode. */
START_TEST(test_xattrs)
{
	struct meta *m = open_new();
	struct meta_inode f = file_in(META_ROOT_INO, META_COMMITTED);
	char buf[128], *big;
	char err[256];

	ck_assert_int_eq(meta_insert(m, &f, "f", 1), 0);
	ck_assert_int_eq(meta_xattr_get(m, f.ino, "user.a", buf, sizeof(buf)), -ENODATA);
	ck_assert_int_eq(meta_xattr_set(m, f.ino, "user.a", "one", 3, META_XATTR_REPLACE),
			 -ENODATA);
	ck_assert_int_eq(meta_xattr_set(m, f.ino, "user.a", "one", 3, 0), 0);
	ck_assert_int_eq(meta_xattr_set(m, f.ino, "user.a", "two", 3, META_XATTR_CREATE), -EEXIST);
	ck_assert_int_eq(meta_xattr_set(m, f.ino, "user.a", "three", 5, META_XATTR_REPLACE), 0);
	ck_assert_int_eq(meta_xattr_set(m, f.ino, "user.empty", "", 0, 0), 0);
	ck_assert_int_eq(meta_xattr_get(m, f.ino, "user.a", NULL, 0), 5);
	ck_assert_int_eq(meta_xattr_get(m, f.ino, "user.a", buf, 4), -ERANGE);
	ck_assert_int_eq(meta_xattr_get(m, f.ino, "user.a", buf, sizeof(buf)), 5);
	ck_assert_mem_eq(buf, "three", 5);
	ck_assert_int_eq(meta_xattr_get(m, f.ino, "user.empty", buf, sizeof(buf)), 0);
	ck_assert_int_eq(meta_xattr_list(m, f.ino, NULL, 0), 18);
	ck_assert_int_eq(meta_xattr_list(m, f.ino, buf, 17), -ERANGE);
	ck_assert_int_eq(meta_xattr_list(m, f.ino, buf, sizeof(buf)), 18);
	ck_assert_mem_eq(buf, "user.a\0user.empty\0", 18);
	ck_assert_int_eq(meta_xattr_remove(m, f.ino, "user.empty"), 0);
	ck_assert_int_eq(meta_xattr_remove(m, f.ino, "user.empty"), -ENODATA);
	/* Limits: one value, and all of an inode's together. */
	big = calloc(1, META_XATTR_SIZE_MAX + 1);
	ck_assert_ptr_nonnull(big);
	ck_assert_int_eq(meta_xattr_set(m, f.ino, "user.big", big, META_XATTR_SIZE_MAX + 1, 0),
			 -E2BIG);
	ck_assert_int_eq(meta_xattr_set(m, f.ino, "user.big", big, 40000, 0), 0);
	ck_assert_int_eq(meta_xattr_set(m, f.ino, "user.big2", big, 40000, 0), -ENOSPC);
	ck_assert_int_eq(meta_xattr_set(m, f.ino, "user.big", big, 50000, 0), 0); /* replaces */
	free(big);
	/* Kept across a reopen; deleted with the inode. */
	meta_close(m);
	ck_assert_int_eq(meta_open(dbpath, 0, &m, err, sizeof(err)), 0);
	ck_assert_int_eq(meta_xattr_get(m, f.ino, "user.a", buf, sizeof(buf)), 5);
	ck_assert_int_eq(meta_delete(m, f.ino), 0);
	ck_assert_int_eq(meta_xattr_list(m, f.ino, NULL, 0), 0);
	meta_close(m);
}
END_TEST

/*
 * A schema-2 database is migrated: directory link counts counted once,
 * then kept; xattrs work.
 */
START_TEST(test_migrate_v2)
{
	struct meta *m = open_new();
	struct meta_inode t = dir_in(META_ROOT_INO), a, b, f;
	sqlite3 *db;
	char err[256];

	ck_assert_int_eq(meta_insert(m, &t, "t", 1), 0);
	a = dir_in(t.ino);
	b = dir_in(t.ino);
	f = file_in(t.ino, META_COMMITTED);
	ck_assert_int_eq(meta_insert(m, &a, "a", 1), 0);
	ck_assert_int_eq(meta_insert(m, &b, "b", 1), 0);
	ck_assert_int_eq(meta_insert(m, &f, "f", 1), 0);
	meta_close(m);
	ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, SCHEMA_3_DOWN "PRAGMA user_version = 2", NULL, NULL,
				      NULL),
			 SQLITE_OK);
	sqlite3_close(db);

	ck_assert_int_eq(meta_open(dbpath, META_OPEN_NO_MIGRATE, &m, err, sizeof(err)),
			 -EPROTONOSUPPORT);
	ck_assert_int_eq(meta_open(dbpath, 0, &m, err, sizeof(err)), 0);
	ck_assert_uint_eq(nlink_of(m, META_ROOT_INO), 3);
	ck_assert_uint_eq(nlink_of(m, t.ino), 4);
	ck_assert_uint_eq(nlink_of(m, a.ino), 2);
	ck_assert_int_eq(meta_move(m, b.ino, a.ino, "b", 1), 0);
	ck_assert_uint_eq(nlink_of(m, a.ino), 3);
	ck_assert_int_eq(meta_xattr_set(m, f.ino, "user.x", "y", 1, 0), 0);
	ck_assert_int_eq(meta_xattr_get(m, f.ino, "user.x", NULL, 0), 1);
	meta_close(m);
}
END_TEST

static int collect_ext(void *ctx, const struct meta_inode *in)
{
	struct meta_inode *v = ctx;
	size_t i = 0;

	while (v[i].ino)
		i++;
	ck_assert_uint_lt(i, 7);
	v[i] = *in;
	return 0;
}

/*
 * A file of extents: each extent's mapping and checksums kept apart, the
 * walks over mappings give one record per extent (not the file's row),
 * and the extents go with their file.
 */
START_TEST(test_extents)
{
	struct meta *m = open_new();
	struct meta_inode f = file_in(META_ROOT_INO, META_COMMITTED), e = { 0 }, got[8];
	uint64_t pcs[2] = { 11, 22 }, back[2], n;
	char err[256];
	int i;

	f.bucket = META_EXTENTS;
	f.size = 5ULL << 30;
	f.npages = 3;
	ck_assert_int_eq(meta_insert(m, &f, "big", 3), 0);
	ck_assert_int_eq(meta_update(m, &f), 0);
	e.ino = f.ino;
	e.prev_bucket = -1;
	for (i = 0; i < 2; i++) {
		e.ext = i == 0 ? 1 : 80; /* extents 0 and 79: a hole between */
		e.bucket = i;
		e.page = 10 * i;
		e.npages = i + 1;
		e.size = 65536 * (i + 1) - 3;
		e.csum = 100 + i;
		e.gen = 5;
		ck_assert_int_eq(meta_extent_commit(m, &e, pcs, i + 1, NULL, META_SKEY_SET), 0);
	}
	/* A new version replaces the old, keeping the durable one as prev. */
	e.prev_bucket = e.bucket;
	e.prev_page = e.page;
	e.prev_npages = e.npages;
	e.page = 40;
	e.gen = 6;
	ck_assert_int_eq(meta_extent_commit(m, &e, pcs, 2, NULL, META_SKEY_SET), 0);

	memset(got, 0, sizeof(got));
	ck_assert_int_eq(meta_extents(m, f.ino, collect_ext, got), 0);
	ck_assert_uint_eq(got[0].ext, 1);
	ck_assert_uint_eq(got[0].size, 65533);
	ck_assert_uint_eq(got[1].ext, 80);
	ck_assert_uint_eq(got[1].page, 40);
	ck_assert_uint_eq(got[1].prev_page, 10);
	ck_assert_uint_eq(got[1].mode, f.mode);
	ck_assert_uint_eq(got[2].ino, 0);
	ck_assert_int_eq(meta_extent_pcsums_get(m, f.ino, 79, back, 2), 0);
	ck_assert_uint_eq(back[1], 22);
	ck_assert_int_eq(meta_extent_pcsums_get(m, f.ino, 79, back, 1), -EUCLEAN);
	ck_assert_int_eq(meta_extent_pcsums_get(m, f.ino, 3, back, 1), -ENOENT);

	/* The walks: the extents, never the file's own row (it maps nothing itself). */
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(meta_foreach_mapping(m, collect_ext, got), 0);
	ck_assert_uint_eq(got[0].ext, 1);
	ck_assert_uint_eq(got[1].ext, 80);
	ck_assert_uint_eq(got[2].ino, 0);
	ck_assert_int_eq(meta_count_mappings(m, &n), 0);
	ck_assert_uint_eq(n, 2);
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(meta_foreach_unsynced(m, 5, collect_ext, got), 0);
	ck_assert_uint_eq(got[0].ext, 80);
	ck_assert_uint_eq(got[1].ino, 0);
	ck_assert_int_eq(meta_prev_clear(m), 0);
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(meta_extents(m, f.ino, collect_ext, got), 0);
	ck_assert_int_eq(got[1].prev_bucket, -1);

	ck_assert_int_eq(meta_extent_delete(m, f.ino, 0), 0);
	ck_assert_int_eq(meta_extent_delete(m, f.ino, 0), -ENOENT);
	ck_assert_int_eq(meta_delete(m, f.ino), 0);
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(meta_extents(m, f.ino, collect_ext, got), 0);
	ck_assert_uint_eq(got[0].ino, 0);
	meta_close(m);
	(void)err;
}
END_TEST

/* A schema-3 database gets the extents table; its files stay one run each. */
START_TEST(test_migrate_v3)
{
	struct meta *m = open_new();
	struct meta_inode a = file_in(META_ROOT_INO, META_COMMITTED), e = { 0 };
	sqlite3 *db;
	char err[256];

	ck_assert_int_eq(meta_insert(m, &a, "kept", 4), 0);
	meta_close(m);
	ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, SCHEMA_4_DOWN "PRAGMA user_version = 3", NULL, NULL,
				      NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	ck_assert_int_eq(meta_open(dbpath, META_OPEN_NO_MIGRATE, &m, err, sizeof(err)),
			 -EPROTONOSUPPORT);
	ck_assert_int_eq(meta_open(dbpath, 0, &m, err, sizeof(err)), 0);
	e.ino = a.ino;
	e.ext = 1;
	e.prev_bucket = -1;
	ck_assert_int_eq(meta_extent_commit(m, &e, NULL, 0, NULL, META_SKEY_SET), 0);
	ck_assert_int_eq(meta_extent_delete(m, a.ino, 0), 0);
	meta_close(m);
}
END_TEST

/* A schema-1 database (no skey columns) is migrated in place, its rows kept. */
START_TEST(test_migrate_v1)
{
	struct meta *m = open_new();
	struct meta_inode a = file_in(META_ROOT_INO, META_COMMITTED), got;
	sqlite3 *db;
	sqlite3_stmt *st;
	char err[256];

	a.size = 5;
	ck_assert_int_eq(meta_insert(m, &a, "kept", 4), 0);
	meta_close(m);
	ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, SCHEMA_3_DOWN "ALTER TABLE inodes DROP COLUMN skey;"
				      "ALTER TABLE inodes DROP COLUMN prev_skey;"
				      "PRAGMA user_version = 1", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);

	ck_assert_int_eq(meta_open(dbpath, 0, &m, err, sizeof(err)), 0);
	ck_assert_int_eq(meta_get(m, a.ino, &got), 0);
	ck_assert_uint_eq(got.size, 5);
	/* The new columns work: commit a value key and read it back. */
	got.bucket = 0;
	got.page = 7;
	ck_assert_int_eq(meta_commit_object(m, &got, NULL, 0, "t/kept#7", META_SKEY_SET), 0);
	meta_close(m);

	ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	ck_assert_int_eq(sqlite3_column_int(st, 0), META_SCHEMA_VERSION);
	sqlite3_finalize(st);
	sqlite3_close(db);
}
END_TEST

struct keys_seen {
	int n;
	char cur[4][64], prev[4][64];
};

static int keys_fn(void *ctx, const struct meta_inode *in, const char *skey, const char *prev)
{
	struct keys_seen *k = ctx;

	(void)in;
	snprintf(k->cur[k->n], sizeof(k->cur[0]), "%s", skey ? skey : "-");
	snprintf(k->prev[k->n], sizeof(k->prev[0]), "%s", prev ? prev : "-");
	k->n++;
	return 0;
}

/* Value keys follow commits: KEEP_PREV moves the old key to prev, REVERT brings it back. */
START_TEST(test_value_keys)
{
	struct meta *m = open_new();
	struct meta_inode a = file_in(META_ROOT_INO, META_COMMITTED);
	struct keys_seen k = { 0 };

	ck_assert_int_eq(meta_insert(m, &a, "v", 1), 0);
	a.bucket = 0;
	a.page = 1;
	ck_assert_int_eq(meta_commit_object(m, &a, NULL, 0, "t/v#1", META_SKEY_SET), 0);
	a.page = 2;
	ck_assert_int_eq(meta_commit_object(m, &a, NULL, 0, "t/v#2", META_SKEY_KEEP_PREV), 0);
	ck_assert_int_eq(meta_foreach_value(m, keys_fn, &k), 0);
	ck_assert_int_eq(k.n, 1);
	ck_assert_str_eq(k.cur[0], "t/v#2");
	ck_assert_str_eq(k.prev[0], "t/v#1");

	a.page = 1;
	ck_assert_int_eq(meta_commit_object(m, &a, NULL, 0, NULL, META_SKEY_REVERT), 0);
	k.n = 0;
	ck_assert_int_eq(meta_foreach_value(m, keys_fn, &k), 0);
	ck_assert_str_eq(k.cur[0], "t/v#1");
	ck_assert_str_eq(k.prev[0], "-");

	/* An empty version has no key; prev_clear forgets previous keys. */
	a.page = 3;
	ck_assert_int_eq(meta_commit_object(m, &a, NULL, 0, "t/v#3", META_SKEY_KEEP_PREV), 0);
	ck_assert_int_eq(meta_prev_clear(m), 0);
	a.bucket = -1;
	ck_assert_int_eq(meta_commit_object(m, &a, NULL, 0, NULL, META_SKEY_SET), 0);
	k.n = 0;
	ck_assert_int_eq(meta_foreach_value(m, keys_fn, &k), 0);
	ck_assert_int_eq(k.n, 0);
	meta_close(m);
}
END_TEST

/*
 * A file of one run becoming a file of extents and back: its version,
 * previous version, checksums and value keys move to extent 0 and return
 * to the row, none left behind on either side.
 */
START_TEST(test_extent_from_to_row)
{
	struct meta *m = open_new();
	struct meta_inode a = file_in(META_ROOT_INO, META_COMMITTED), empty, got[8], row;
	struct keys_seen k = { 0 };
	uint64_t pcs[3] = { 7, 8, 9 }, back[3], n;

	ck_assert_int_eq(meta_insert(m, &a, "grows", 5), 0);
	a.bucket = 2;
	a.page = 30;
	a.npages = 3;
	a.size = 3 * 65536 - 1;
	a.csum = 77;
	a.gen = 4;
	ck_assert_int_eq(meta_commit_object(m, &a, pcs, 3, "t/g#1", META_SKEY_SET), 0);
	a.prev_bucket = 2;
	a.prev_page = 30;
	a.prev_npages = 3;
	a.prev_size = a.size;
	a.prev_csum = 77;
	a.page = 60;
	a.gen = 5;
	ck_assert_int_eq(meta_commit_object(m, &a, pcs, 3, "t/g#2", META_SKEY_KEEP_PREV), 0);

	ck_assert_int_eq(meta_begin(m), 0);
	ck_assert_int_eq(meta_extent_from_row(m, a.ino), 0);
	row = a;
	row.bucket = META_EXTENTS;
	row.page = 0;
	row.prev_bucket = -1;
	ck_assert_int_eq(meta_update(m, &row), 0);
	ck_assert_int_eq(meta_commit(m), 0);
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(meta_extents(m, a.ino, collect_ext, got), 0);
	ck_assert_uint_eq(got[0].ext, 1);
	ck_assert_int_eq(got[0].bucket, 2);
	ck_assert_uint_eq(got[0].page, 60);
	ck_assert_uint_eq(got[0].npages, 3);
	ck_assert_uint_eq(got[0].size, 3 * 65536 - 1);
	ck_assert_uint_eq(got[0].csum, 77);
	ck_assert_uint_eq(got[0].gen, 5);
	ck_assert_int_eq(got[0].prev_bucket, 2);
	ck_assert_uint_eq(got[0].prev_page, 30);
	ck_assert_uint_eq(got[1].ino, 0);
	ck_assert_int_eq(meta_extent_pcsums_get(m, a.ino, 0, back, 3), 0);
	ck_assert_uint_eq(back[2], 9);
	ck_assert_int_eq(meta_pcsums_get(m, a.ino, back, 3), -ENOENT);
	ck_assert_int_eq(meta_foreach_value(m, keys_fn, &k), 0);
	ck_assert_int_eq(k.n, 1);
	ck_assert_str_eq(k.cur[0], "t/g#2");
	ck_assert_str_eq(k.prev[0], "t/g#1");
	ck_assert_int_eq(meta_count_mappings(m, &n), 0);
	ck_assert_uint_eq(n, 1);

	/* Back to one run: extent 0 into the row, no extent left. */
	ck_assert_int_eq(meta_begin(m), 0);
	ck_assert_int_eq(meta_extent_to_row(m, a.ino), 0);
	ck_assert_int_eq(meta_update(m, &a), 0);
	ck_assert_int_eq(meta_commit(m), 0);
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(meta_extents(m, a.ino, collect_ext, got), 0);
	ck_assert_uint_eq(got[0].ino, 0);
	ck_assert_int_eq(meta_pcsums_get(m, a.ino, back, 3), 0);
	ck_assert_uint_eq(back[0], 7);
	k.n = 0;
	ck_assert_int_eq(meta_foreach_value(m, keys_fn, &k), 0);
	ck_assert_int_eq(k.n, 1);
	ck_assert_str_eq(k.cur[0], "t/g#2");
	ck_assert_str_eq(k.prev[0], "t/g#1");
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(meta_foreach_mapping(m, collect_ext, got), 0);
	ck_assert_uint_eq(got[0].ino, a.ino);
	ck_assert_uint_eq(got[0].ext, 0);
	ck_assert_uint_eq(got[0].page, 60);
	ck_assert_uint_eq(got[1].ino, 0);

	/* A file without pages has no extent 0 to make, and none to bring back. */
	empty = file_in(META_ROOT_INO, META_COMMITTED);
	ck_assert_int_eq(meta_insert(m, &empty, "empty", 5), 0);
	ck_assert_int_eq(meta_extent_from_row(m, empty.ino), 0);
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(meta_extents(m, empty.ino, collect_ext, got), 0);
	ck_assert_uint_eq(got[0].ino, 0);
	ck_assert_int_eq(meta_extent_to_row(m, empty.ino), 0);
	ck_assert_int_eq(meta_get(m, empty.ino, &row), 0);
	ck_assert_int_eq(row.bucket, -1);
	meta_close(m);
}
END_TEST

START_TEST(test_insert_lookup_update_delete)
{
	struct meta *m = open_new();
	struct meta_inode a = file_in(META_ROOT_INO, META_COMMITTED), b, got;
	const char bin[] = { 'x', 1, (char)0xff, '\n', ' ', (char)0x80 };

	ck_assert_int_eq(meta_insert(m, &a, "alpha", 5), 0);
	ck_assert_uint_gt(a.ino, META_ROOT_INO);
	ck_assert_int_eq(meta_lookup(m, META_ROOT_INO, "alpha", 5, &got), 0);
	ck_assert_uint_eq(got.ino, a.ino);
	ck_assert_int_eq(got.mtime, 123456789012345LL);
	ck_assert_int_eq(got.bucket, -1);
	b = a;
	ck_assert_int_eq(meta_insert(m, &b, "alpha", 5), -EEXIST);
	ck_assert_int_eq(meta_lookup(m, META_ROOT_INO, "alph", 4, &got), -ENOENT);

	/* Names are bytes: anything but '/' and NUL, compared exactly. */
	b = file_in(META_ROOT_INO, META_COMMITTED);
	ck_assert_int_eq(meta_insert(m, &b, bin, sizeof(bin)), 0);
	ck_assert_int_eq(meta_lookup(m, META_ROOT_INO, bin, sizeof(bin), &got), 0);
	ck_assert_uint_eq(got.ino, b.ino);

	a.size = 70000;
	a.bucket = 3;
	a.page = 12;
	a.npages = 2;
	a.csum = 0xfedcba9876543210ULL;
	a.uid = 1000;
	ck_assert_int_eq(meta_update(m, &a), 0);
	ck_assert_int_eq(meta_get(m, a.ino, &got), 0);
	ck_assert_uint_eq(got.size, 70000);
	ck_assert_int_eq(got.bucket, 3);
	ck_assert_uint_eq(got.page, 12);
	ck_assert_uint_eq(got.npages, 2);
	ck_assert_uint_eq(got.csum, 0xfedcba9876543210ULL);
	ck_assert_uint_eq(got.uid, 1000);

	ck_assert_int_eq(meta_delete(m, a.ino), 0);
	ck_assert_int_eq(meta_get(m, a.ino, &got), -ENOENT);
	ck_assert_int_eq(meta_delete(m, a.ino), -ENOENT);
	meta_close(m);
}
END_TEST

/* meta_insert_object leaves the row meta_insert then meta_commit_object would. */
START_TEST(test_insert_object)
{
	struct meta *m = open_new();
	struct meta_inode a = file_in(META_ROOT_INO, META_NEW), b, ga, gb;
	const uint64_t pcs[2] = { 0x1111222233334444ULL, 0x5555666677778888ULL };
	uint64_t got[2];

	ck_assert_int_eq(meta_insert(m, &a, "two", 3), 0);
	a.size = 70000;
	a.bucket = 3;
	a.page = 12;
	a.npages = 2;
	a.csum = 0xfedcba9876543210ULL;
	a.uid = 1000;
	a.gid = 100;
	a.atime = a.ctime = 42;
	a.state = META_COMMITTED;
	a.gen = 7;
	a.prev_bucket = -1;
	ck_assert_int_eq(meta_commit_object(m, &a, pcs, 2, NULL, META_SKEY_SET), 0);
	b = a;
	b.ino = 0;
	ck_assert_int_eq(meta_insert_object(m, &b, "one", 3, pcs, 2), 0);
	ck_assert_uint_gt(b.ino, a.ino);
	ck_assert_int_eq(meta_get(m, a.ino, &ga), 0);
	ck_assert_int_eq(meta_lookup(m, META_ROOT_INO, "one", 3, &gb), 0);
	ck_assert_uint_eq(gb.ino, b.ino);
#define SAME(f) ck_assert_int_eq((int64_t)ga.f, (int64_t)gb.f)
	SAME(parent); SAME(atime); SAME(mtime); SAME(ctime); SAME(size); SAME(page);
	SAME(npages); SAME(csum); SAME(gen); SAME(prev_page); SAME(prev_npages);
	SAME(prev_size); SAME(prev_csum); SAME(mode); SAME(uid); SAME(gid); SAME(nlink);
	SAME(bucket); SAME(prev_bucket); SAME(state);
#undef SAME
	ck_assert_int_eq(meta_pcsums_get(m, b.ino, got, 2), 0);
	ck_assert_int_eq(memcmp(got, pcs, sizeof(pcs)), 0);
	/* A taken name, and no directories. */
	ck_assert_int_eq(meta_insert_object(m, &b, "two", 3, pcs, 2), -EEXIST);
	b.mode = 040755;
	ck_assert_int_eq(meta_insert_object(m, &b, "dir", 3, NULL, 0), -EINVAL);
	meta_close(m);
}
END_TEST

START_TEST(test_name_limits)
{
	struct meta *m = open_new();
	struct meta_inode a = file_in(META_ROOT_INO, META_COMMITTED);
	char name[300];
	uint64_t parent;
	size_t len;

	memset(name, 'n', sizeof(name));
	ck_assert_int_eq(meta_insert(m, &a, name, 255), 0);
	ck_assert_int_eq(meta_name(m, a.ino, &parent, name, &len), 0);
	ck_assert_uint_eq(len, 255);
	ck_assert_uint_eq(parent, META_ROOT_INO);
	ck_assert_int_eq(meta_insert(m, &a, name, 256), -ENAMETOOLONG);
	ck_assert_int_eq(meta_insert(m, &a, name, 0), -EINVAL);
	meta_close(m);
}
END_TEST

struct collect {
	uint64_t inos[16];
	int n, stop_at;
};

static int collect_fn(void *ctx, const struct meta_inode *in, const char *name, size_t len)
{
	struct collect *c = ctx;

	(void)name;
	(void)len;
	c->inos[c->n++] = in->ino;
	return c->n == c->stop_at ? 42 : 0;
}

START_TEST(test_readdir_move_children)
{
	struct meta *m = open_new();
	struct meta_inode d = file_in(META_ROOT_INO, META_COMMITTED), f[3];
	struct collect c = { .stop_at = -1 };
	int i;

	d.mode = 040755;
	ck_assert_int_eq(meta_insert(m, &d, "tenant", 6), 0);
	ck_assert_int_eq(meta_has_children(m, d.ino), 0);
	for (i = 0; i < 3; i++) {
		char n[8];

		snprintf(n, sizeof(n), "f%d", i);
		f[i] = file_in(d.ino, META_COMMITTED);
		ck_assert_int_eq(meta_insert(m, &f[i], n, strlen(n)), 0);
	}
	ck_assert_int_eq(meta_has_children(m, d.ino), 1);
	ck_assert_int_eq(meta_readdir(m, d.ino, 0, collect_fn, &c), 0);
	ck_assert_int_eq(c.n, 3);
	ck_assert_uint_eq(c.inos[0], f[0].ino);
	ck_assert_uint_eq(c.inos[2], f[2].ino);
	/* Resume after an entry, and stop early with the callback's value. */
	c.n = 0;
	ck_assert_int_eq(meta_readdir(m, d.ino, f[0].ino, collect_fn, &c), 0);
	ck_assert_int_eq(c.n, 2);
	c.n = 0;
	c.stop_at = 1;
	ck_assert_int_eq(meta_readdir(m, d.ino, 0, collect_fn, &c), 42);

	ck_assert_int_eq(meta_move(m, f[0].ino, d.ino, "f1", 2), -EEXIST);
	ck_assert_int_eq(meta_move(m, f[0].ino, META_ROOT_INO, "moved", 5), 0);
	{
		struct meta_inode got;

		ck_assert_int_eq(meta_lookup(m, META_ROOT_INO, "moved", 5, &got), 0);
		ck_assert_uint_eq(got.ino, f[0].ino);
		ck_assert_int_eq(meta_lookup(m, d.ino, "f0", 2, &got), -ENOENT);
	}
	meta_close(m);
}
END_TEST

static int count_map(void *ctx, const struct meta_inode *in)
{
	uint64_t *n = ctx;

	*n += in->npages;
	return 0;
}

START_TEST(test_recover_and_mappings)
{
	struct meta *m = open_new();
	struct meta_inode done = file_in(META_ROOT_INO, META_COMMITTED);
	struct meta_inode fresh = file_in(META_ROOT_INO, META_NEW);
	struct meta_inode gone = file_in(META_ROOT_INO, META_COMMITTED), got;
	uint64_t pages = 0, dn, dor, nfiles;

	done.bucket = 0;
	done.npages = 2;
	fresh.bucket = 1;
	fresh.npages = 4;
	gone.bucket = 2;
	gone.npages = 8;
	ck_assert_int_eq(meta_insert(m, &done, "done", 4), 0);
	ck_assert_int_eq(meta_insert(m, &fresh, "fresh", 5), 0);
	ck_assert_int_eq(meta_insert(m, &gone, "gone", 4), 0);
	ck_assert_int_eq(meta_detach(m, gone.ino), 0);
	ck_assert_int_eq(meta_lookup(m, META_ROOT_INO, "gone", 4, &got), -ENOENT);
	ck_assert_int_eq(meta_count_files(m, &nfiles), 0);
	ck_assert_uint_eq(nfiles, 2);

	/* Only committed, attached objects hold pages after a crash. */
	ck_assert_int_eq(meta_foreach_mapping(m, count_map, &pages), 0);
	ck_assert_uint_eq(pages, 2);

	ck_assert_int_eq(meta_recover(m, &dn, &dor), 0);
	ck_assert_uint_eq(dn, 1);
	ck_assert_uint_eq(dor, 1);
	ck_assert_int_eq(meta_get(m, fresh.ino, &got), -ENOENT);
	ck_assert_int_eq(meta_get(m, gone.ino, &got), -ENOENT);
	ck_assert_int_eq(meta_get(m, done.ino, &got), 0);
	ck_assert_int_eq(meta_get(m, META_ROOT_INO, &got), 0);
	meta_close(m);
}
END_TEST

START_TEST(test_bitmaps)
{
	struct meta *m = open_new();
	uint64_t w[3] = { 0x1, 0xff00ff00ff00ff00ULL, 0x3 }, r[3] = { 0 };

	ck_assert_int_eq(meta_bitmap_load(m, 0, 130, r, 3), -ENOENT);
	ck_assert_int_eq(meta_bitmap_save(m, 0, 130, w, 3), 0);
	ck_assert_int_eq(meta_bitmap_load(m, 0, 130, r, 3), 0);
	ck_assert_mem_eq(w, r, sizeof(w));
	ck_assert_int_eq(meta_bitmap_load(m, 0, 129, r, 3), -EINVAL);
	ck_assert_int_eq(meta_bitmap_load(m, 0, 130, r, 2), -EINVAL);
	ck_assert_int_eq(meta_bitmap_clear(m), 0);
	ck_assert_int_eq(meta_bitmap_load(m, 0, 130, r, 3), -ENOENT);
	meta_close(m);
}
END_TEST

START_TEST(test_transactions_and_sync)
{
	struct meta *m = open_new();
	struct meta_inode a = file_in(META_ROOT_INO, META_COMMITTED), got;
	char err[256];

	ck_assert_int_eq(meta_begin(m), 0);
	ck_assert_int_eq(meta_insert(m, &a, "rolled", 6), 0);
	meta_rollback(m);
	ck_assert_int_eq(meta_lookup(m, META_ROOT_INO, "rolled", 6, &got), -ENOENT);
	ck_assert_int_eq(meta_begin(m), 0);
	ck_assert_int_eq(meta_insert(m, &a, "kept", 4), 0);
	ck_assert_int_eq(meta_commit(m), 0);
	ck_assert_int_eq(meta_sync(m, 5), 0);
	{
		uint64_t g;

		ck_assert_int_eq(meta_synced_gen(m, &g), 0);
		ck_assert_uint_eq(g, 5);
	}
	ck_assert_int_eq(meta_checkpoint(m), 0);
	meta_close(m);
	ck_assert_int_eq(meta_open(dbpath, 0, &m, err, sizeof(err)), 0);
	ck_assert_int_eq(meta_lookup(m, META_ROOT_INO, "kept", 4, &got), 0);
	meta_close(m);
}
END_TEST

START_TEST(test_path)
{
	struct meta *m = open_new();
	struct meta_inode t = file_in(META_ROOT_INO, META_COMMITTED), d, f;
	char buf[64], tiny[8];
	uint64_t tenant;
	size_t len;

	t.mode = 040755;
	ck_assert_int_eq(meta_insert(m, &t, "t1", 2), 0);
	d = file_in(t.ino, META_COMMITTED);
	d.mode = 040755;
	ck_assert_int_eq(meta_insert(m, &d, "Qwen", 4), 0);
	f = file_in(d.ino, META_COMMITTED);
	ck_assert_int_eq(meta_insert(m, &f, "abc_0_k", 7), 0);
	ck_assert_int_eq(meta_path(m, f.ino, 0, buf, sizeof(buf), &len, &tenant), 0);
	ck_assert_str_eq(buf, "Qwen/abc_0_k");
	ck_assert_uint_eq(len, 12);
	ck_assert_uint_eq(tenant, t.ino);
	ck_assert_int_eq(meta_path(m, f.ino, 1, buf, sizeof(buf), &len, NULL), 0);
	ck_assert_str_eq(buf, "t1/Qwen/abc_0_k");
	ck_assert_int_eq(meta_path(m, t.ino, 0, buf, sizeof(buf), &len, &tenant), 0);
	ck_assert_str_eq(buf, "");
	ck_assert_uint_eq(tenant, t.ino);
	ck_assert_int_eq(meta_path(m, f.ino, 0, tiny, sizeof(tiny), &len, NULL), -ENAMETOOLONG);
	ck_assert_int_eq(meta_detach(m, f.ino), 0);
	ck_assert_int_eq(meta_path(m, f.ino, 0, buf, sizeof(buf), &len, NULL), -ENOENT);
	meta_close(m);
}
END_TEST

/* Eviction's queries: candidates oldest first, paged; atimes in a batch; pins counted. */
static int lru_collect(void *ctx, const struct meta_inode *in)
{
	uint64_t *got = ctx;

	got[++got[0]] = in->ino;
	return 0;
}

START_TEST(test_lru)
{
	struct meta *m = open_new();
	struct meta_inode f[4], d = file_in(META_ROOT_INO, META_COMMITTED), n;
	uint64_t got[8] = { 0 }, inos[2], pinned;
	int64_t at[2];
	int i;

	d.mode = 040755;
	ck_assert_int_eq(meta_insert(m, &d, "dir", 3), 0);
	for (i = 0; i < 4; i++) {
		char name[2] = { (char)('a' + i), 0 };

		f[i] = file_in(META_ROOT_INO, META_COMMITTED);
		f[i].atime = 1000 - i; /* d is the oldest, a the newest */
		ck_assert_int_eq(meta_insert(m, &f[i], name, 1), 0);
	}
	n = file_in(META_ROOT_INO, META_NEW); /* never committed: not a candidate */
	ck_assert_int_eq(meta_insert(m, &n, "n", 1), 0);
	ck_assert_int_eq(meta_lru(m, INT64_MIN, 0, INT64_MAX, 3, lru_collect, got), 0);
	ck_assert_uint_eq(got[0], 3);
	ck_assert_uint_eq(got[1], f[3].ino);
	ck_assert_uint_eq(got[2], f[2].ino);
	ck_assert_uint_eq(got[3], f[1].ino);
	/* Paged after the last one seen. */
	got[0] = 0;
	ck_assert_int_eq(meta_lru(m, 999, f[1].ino, INT64_MAX, 3, lru_collect, got), 0);
	ck_assert_uint_eq(got[0], 1);
	ck_assert_uint_eq(got[1], f[0].ino);
	/* Last uses written in one batch reorder them: b and c are now the newest. */
	inos[0] = f[1].ino;
	inos[1] = f[2].ino;
	at[0] = 5000;
	at[1] = 4000;
	ck_assert_int_eq(meta_begin(m), 0);
	ck_assert_int_eq(meta_set_atimes(m, inos, at, 2), 0);
	ck_assert_int_eq(meta_commit(m), 0);
	got[0] = 0;
	ck_assert_int_eq(meta_lru(m, INT64_MIN, 0, INT64_MAX, 8, lru_collect, got), 0);
	ck_assert_uint_eq(got[0], 4);
	ck_assert_uint_eq(got[1], f[3].ino);
	ck_assert_uint_eq(got[2], f[0].ino);
	ck_assert_uint_eq(got[3], f[2].ino);
	ck_assert_uint_eq(got[4], f[1].ino);
	/* Only those whose every time is before the bound: here their mtime. */
	got[0] = 0;
	ck_assert_int_eq(meta_lru(m, INT64_MIN, 0, f[0].mtime + 1, 8, lru_collect, got), 0);
	ck_assert_uint_eq(got[0], 4);
	got[0] = 0;
	ck_assert_int_eq(meta_lru(m, INT64_MIN, 0, f[0].mtime, 8, lru_collect, got), 0);
	ck_assert_uint_eq(got[0], 0);
	ck_assert_int_eq(meta_xattr_count(m, "user.offload.pin", &pinned), 0);
	ck_assert_uint_eq(pinned, 0);
	ck_assert_int_eq(meta_xattr_set(m, f[0].ino, "user.offload.pin", "1", 1, 0), 0);
	ck_assert_int_eq(meta_xattr_set(m, f[1].ino, "user.offload.pin", "", 0, 0), 0);
	ck_assert_int_eq(meta_xattr_count(m, "user.offload.pin", &pinned), 0);
	ck_assert_uint_eq(pinned, 2);
	meta_close(m);
}
END_TEST

struct tev_seen {
	int n;
	uint64_t tenant[4], count[4], bytes[4];
};

static int tev_collect(void *ctx, uint64_t tenant, uint64_t count, uint64_t bytes)
{
	struct tev_seen *t = ctx;

	ck_assert_int_lt(t->n, 4);
	t->tenant[t->n] = tenant;
	t->count[t->n] = count;
	t->bytes[t->n++] = bytes;
	return 0;
}

/*
 * Per-tenant eviction counts: written in a transaction, replaced, kept
 * across a reopen and dropped; the store table's other rows are not
 * taken for counts.
 */
START_TEST(test_tenant_evictions)
{
	struct meta *m = open_new();
	struct tev_seen t = { 0 };
	char err[256];

	ck_assert_int_eq(meta_begin(m), 0);
	ck_assert_int_eq(meta_tenant_evictions_set(m, 12, 3, 196608), 0);
	ck_assert_int_eq(meta_tenant_evictions_set(m, 7, 1, 65536), 0);
	ck_assert_int_eq(meta_commit(m), 0);
	ck_assert_int_eq(meta_begin(m), 0);
	ck_assert_int_eq(meta_tenant_evictions_set(m, 7, 5, 5ULL << 40), 0); /* replaced */
	ck_assert_int_eq(meta_tenant_evictions_set(m, 9, 1, 1), 0);
	meta_rollback(m); /* nothing of it */
	ck_assert_int_eq(meta_setting_set(m, "tenant_evictionsX", "1 2"), 0);
	meta_close(m);
	ck_assert_int_eq(meta_open(dbpath, 0, &m, err, sizeof(err)), 0);
	ck_assert_int_eq(meta_begin(m), 0);
	ck_assert_int_eq(meta_tenant_evictions_set(m, 7, 5, 5ULL << 40), 0);
	ck_assert_int_eq(meta_commit(m), 0);
	ck_assert_int_eq(meta_tenant_evictions(m, tev_collect, &t), 0);
	ck_assert_int_eq(t.n, 2);
	/* Keys in text order: "…12" before "…7". */
	ck_assert_uint_eq(t.tenant[0], 12);
	ck_assert_uint_eq(t.count[0], 3);
	ck_assert_uint_eq(t.bytes[0], 196608);
	ck_assert_uint_eq(t.tenant[1], 7);
	ck_assert_uint_eq(t.count[1], 5);
	ck_assert_uint_eq(t.bytes[1], 5ULL << 40);
	ck_assert_int_eq(meta_tenant_evictions_drop(m, 12), 0);
	t.n = 0;
	ck_assert_int_eq(meta_tenant_evictions(m, tev_collect, &t), 0);
	ck_assert_int_eq(t.n, 1);
	ck_assert_uint_eq(t.tenant[0], 7);
	meta_close(m);
}
END_TEST

/* Pages of fd's file the kernel caches, out of *total. */
static size_t resident_pages(int fd, size_t *total)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n, i, in = 0;
	struct stat st;
	unsigned char *vec;
	void *map;

	ck_assert_int_eq(fstat(fd, &st), 0);
	n = ((size_t)st.st_size + page - 1) / page;
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	vec = malloc(n);
	ck_assert_ptr_nonnull(vec);
	ck_assert_int_eq(mincore(map, (size_t)st.st_size, vec), 0);
	for (i = 0; i < n; i++)
		in += vec[i] & 1;
	free(vec);
	munmap(map, (size_t)st.st_size);
	*total = n;
	return in;
}

/* The log's pages the kernel dropped are read back, so that no commit waits for them. */
START_TEST(test_log_prefetch)
{
	struct meta *m = open_new();
	char wal[600], name[32];
	size_t total, in;
	int fd, i, len;

	for (i = 0; i < 300; i++) {
		struct meta_inode a = file_in(META_ROOT_INO, META_COMMITTED);

		len = snprintf(name, sizeof(name), "f%d", i);
		ck_assert_int_eq(meta_insert(m, &a, name, (size_t)len), 0);
	}
	ck_assert_int_eq(meta_sync(m, 1), 0); /* clean pages: the kernel may drop them */
	snprintf(wal, sizeof(wal), "%s-wal", dbpath);
	fd = open(wal, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	in = resident_pages(fd, &total);
	ck_assert_uint_gt(total, 256);
	if (in * 2 > total) {
		/* A filesystem that keeps them (tmpfs): nothing to read back. */
		fprintf(stderr, "test_log_prefetch: the log's pages stay cached here (%zu of %zu)\n",
			in, total);
	} else {
		struct timespec ts = { 0, 20 * 1000 * 1000 };

		/*
		 * Asked again at each look, as the group-commit thread does at
		 * each tick: another process's drop_caches meanwhile (the
		 * mount tests') is read back too.  Without the prefetch
		 * nothing reads them.
		 */
		for (i = 0; i < 250 && (in = resident_pages(fd, &total)) * 4 < total * 3; i++) {
			meta_log_prefetch(m);
			nanosleep(&ts, NULL);
		}
		/* All of them, but for any the kernel took again meanwhile (none without). */
		ck_assert_uint_ge(in * 4, total * 3);
	}
	close(fd);
	meta_close(m);
}
END_TEST

/* Frames of the log's current lap (their salts are the header's): where the next commit writes. */
static long log_frames(int fd, long page)
{
	unsigned char h[32], f[24];
	long i;

	ck_assert_int_eq(pread(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	for (i = 0; pread(fd, f, sizeof(f), 32 + i * (page + 24)) == (ssize_t)sizeof(f); i++)
		if (memcmp(f + 8, h + 16, 8))
			break;
	return i;
}

/*
 * Pages [first, first + 64) of fd's file past the last page the log's
 * writer wrote (page bytes a page) that were resident when the caller
 * looked, in vec; the log's frames read only after that look, since
 * reading them brings their pages (and those the kernel reads ahead) in.
 */
static size_t resident_past_writer(int fd, long page, const unsigned char *vec, size_t total)
{
	long frames = log_frames(fd, 4096), first, last, i;
	size_t in = 0;

	ck_assert_int_lt(frames, 4096); /* the lap started again */
	first = (32 + frames * (4096 + 24)) / page + 1; /* past the last page written */
	last = first + 64;
	ck_assert_int_le(last, (long)total);
	for (i = first; i < last; i++)
		in += vec[i] & 1;
	return in;
}

/* Commits ask for the log's pages ahead of them, so that a lap after an eviction reads ahead. */
START_TEST(test_log_read_ahead)
{
	struct meta *m = open_new();
	long page = (long)sysconf(_SC_PAGESIZE), i;
	unsigned char *vec;
	char wal[600], name[32];
	size_t total, in = 0;
	int fd, len, tries;
	void *map;
	struct stat st;

	/* Past a checkpoint (4,096 frames), so the log starts again on pages it has. */
	for (i = 0; i < 1600; i++) {
		struct meta_inode a = file_in(META_ROOT_INO, META_COMMITTED);

		len = snprintf(name, sizeof(name), "f%ld", i);
		ck_assert_int_eq(meta_insert(m, &a, name, (size_t)len), 0);
	}
	ck_assert_int_eq(meta_sync(m, 1), 0);
	snprintf(wal, sizeof(wal), "%s-wal", dbpath);
	fd = open(wal, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	/* Our reads of the frames bring in only the pages they read: no read-ahead of ours. */
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM), 0);
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	in = resident_pages(fd, &total);
	if (in * 2 > total) {
		fprintf(stderr, "test_log_read_ahead: the log's pages stay cached here\n");
		close(fd);
		meta_close(m);
		return;
	}
	/*
	 * Up to three times: another process's drop_caches (the mount tests')
	 * between the reads and the look takes them all; without the read
	 * ahead no try finds them.
	 */
	for (tries = 0; tries < 3; tries++) {
		ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
		for (i = 0; i < 60; i++) {
			struct meta_inode a = file_in(META_ROOT_INO, META_COMMITTED);

			len = snprintf(name, sizeof(name), "g%d.%ld", tries, i);
			ck_assert_int_eq(meta_insert(m, &a, name, (size_t)len), 0);
		}
		usleep(300 * 1000); /* the reads asked for */
		ck_assert_int_eq(fstat(fd, &st), 0);
		total = ((size_t)st.st_size + (size_t)page - 1) / (size_t)page;
		map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		ck_assert_ptr_ne(map, MAP_FAILED);
		vec = malloc(total);
		ck_assert_ptr_nonnull(vec);
		ck_assert_int_eq(mincore(map, (size_t)st.st_size, vec), 0);
		munmap(map, (size_t)st.st_size);
		in = resident_past_writer(fd, page, vec, total);
		free(vec);
		/* All of them, but for any the kernel took again meanwhile (none without). */
		if (in * 4 >= 64 * 3)
			break;
		fprintf(stderr, "test_log_read_ahead: %zu of 64 pages resident, again\n", in);
	}
	ck_assert_uint_ge(in * 4, 64 * 3);
	close(fd);
	meta_close(m);
}
END_TEST

/*
 * Commits write the log's file ahead of its writer, so that a barrier's
 * sync finds its size set (no journal commit for a new size), and a copy
 * of the log taken like a power cut's replays every commit, the zeros past
 * the last one ignored.
 */
START_TEST(test_log_size_set_ahead)
{
	struct meta *m = open_new(), *c;
	struct meta_inode got;
	char wal[600], name[32], cmd[2600], copy[600], err[256];
	struct stat st;
	off_t last = -1;
	long frames;
	int fd, i, len, grew = 0;

	snprintf(wal, sizeof(wal), "%s-wal", dbpath);
	for (i = 0; i < 200; i++) {
		struct meta_inode a = file_in(META_ROOT_INO, META_COMMITTED);

		len = snprintf(name, sizeof(name), "f%d", i);
		ck_assert_int_eq(meta_insert(m, &a, name, (size_t)len), 0);
		ck_assert_int_eq(stat(wal, &st), 0);
		grew += st.st_size != last;
		last = st.st_size;
	}
	/* Without: every commit grows it. */
	ck_assert_int_le(grew * 10, 200);
	fd = open(wal, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	frames = log_frames(fd, 4096);
	close(fd);
	ck_assert_int_gt(frames, 200);
	ck_assert_int_ge(st.st_size, 32 + (frames + 64) * (4096 + 24));

	ck_assert_int_eq(meta_sync(m, 1), 0);
	snprintf(copy, sizeof(copy), "%s/copy.db", dir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && cp '%s' '%s-wal'", dbpath, copy, wal, copy);
	ck_assert_int_eq(system(cmd), 0);
	meta_close(m);
	ck_assert_msg(meta_open(copy, 0, &c, err, sizeof(err)) == 0, "%s", err);
	for (i = 0; i < 200; i++) {
		len = snprintf(name, sizeof(name), "f%d", i);
		ck_assert_int_eq(meta_lookup(c, META_ROOT_INO, name, (size_t)len, &got), 0);
	}
	meta_close(c);
}
END_TEST

/*
 * Descriptors of this process open on the log (its path, or that path
 * " (deleted)"), and how many of them are open read-only; the inode of
 * the last read-only one in *ino.
 */
static int log_fds(const char *wal, int *rdonly, ino_t *ino)
{
	char link[64], target[700], info[64], line[128];
	size_t wl = strlen(wal);
	int fd, n = 0;

	*rdonly = 0;
	for (fd = 0; fd < 1024; fd++) {
		ssize_t len;
		FILE *f;

		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		len = readlink(link, target, sizeof(target) - 1);
		if (len < 0)
			continue;
		target[len] = 0;
		if (strncmp(target, wal, wl) || (target[wl] && strcmp(target + wl, " (deleted)")))
			continue;
		n++;
		snprintf(info, sizeof(info), "/proc/self/fdinfo/%d", fd);
		f = fopen(info, "r");
		ck_assert_ptr_nonnull(f);
		while (fgets(line, sizeof(line), f)) {
			unsigned long flags;
			struct stat st;

			if (sscanf(line, "flags: %lo", &flags) == 1 && (flags & O_ACCMODE) == O_RDONLY &&
			    fstat(fd, &st) == 0) {
				(*rdonly)++;
				*ino = st.st_ino;
			}
		}
		fclose(f);
	}
	return n;
}

/*
 * The prefetches' descriptor of the log is read-only, is the log sqlite
 * writes after a truncating checkpoint (the file is truncated, not
 * replaced), and is closed with the store.
 */
START_TEST(test_log_fd_read_only_and_closed)
{
	struct meta *m = open_new();
	char wal[600], name[32];
	struct stat st;
	int i, len, rdonly;
	ino_t ino = 0;

	snprintf(wal, sizeof(wal), "%s-wal", dbpath);
	for (i = 0; i < 20; i++) {
		struct meta_inode a = file_in(META_ROOT_INO, META_COMMITTED);

		len = snprintf(name, sizeof(name), "f%d", i);
		ck_assert_int_eq(meta_insert(m, &a, name, (size_t)len), 0);
	}
	meta_log_prefetch(m);
	ck_assert_int_eq(log_fds(wal, &rdonly, &ino), 2); /* sqlite's and ours */
	ck_assert_int_eq(rdonly, 1);
	ck_assert_int_eq(meta_make_room(m), 0); /* a truncating checkpoint */
	ck_assert_int_eq(stat(wal, &st), 0);
	ck_assert_int_eq(st.st_size, 0);
	for (i = 0; i < 20; i++) {
		struct meta_inode a = file_in(META_ROOT_INO, META_COMMITTED);

		len = snprintf(name, sizeof(name), "g%d", i);
		ck_assert_int_eq(meta_insert(m, &a, name, (size_t)len), 0);
	}
	meta_log_prefetch(m);
	ck_assert_int_eq(log_fds(wal, &rdonly, &ino), 2);
	ck_assert_int_eq(rdonly, 1);
	ck_assert_int_eq(stat(wal, &st), 0);
	ck_assert_int_gt(st.st_size, 0);
	ck_assert_uint_eq(st.st_ino, ino);
	meta_close(m);
	ck_assert_int_eq(log_fds(wal, &rdonly, &ino), 0);
}
END_TEST

/* ---- the PostgreSQL engine's own ---- */

/* pg_uri with from replaced by to (one place). */
static void pg_uri_with(const char *from, const char *to, char *out, size_t len)
{
	const char *at = strstr(pg_uri, from);

	ck_assert_ptr_nonnull(at);
	snprintf(out, len, "%.*s%s%s", (int)(at - pg_uri), pg_uri, to, at + strlen(from));
}

/* What a refusal must leave as it was: every setting, every row. */
#define PG_STATE "SELECT md5(string_agg(k || '=' || coalesce(v, ''), ',' ORDER BY k)) || " \
		 "(SELECT count(*) FROM offloadfs.inodes) FROM offloadfs.store"

START_TEST(test_pg_newer_schema_refused)
{
	char err[256], before[64], after[64];
	struct meta *m = open_new();

	meta_close(m);
	pg_sql("UPDATE offloadfs.store SET v = '7' WHERE k = 'schema_version'", NULL, 0);
	pg_sql(PG_STATE, before, sizeof(before));
	ck_assert_int_eq(meta_open(dbpath, 1, &m, err, sizeof(err)), -EPROTONOSUPPORT);
	ck_assert_ptr_nonnull(strstr(err, "found 7, expected 4"));
	pg_sql(PG_STATE, after, sizeof(after));
	ck_assert_str_eq(before, after);
}
END_TEST

START_TEST(test_pg_foreign_tables_refused)
{
	char err[256], n[64];
	struct meta *m;

	/* Someone else's table in a schema of our name: never adopted, never written. */
	pg_sql("CREATE SCHEMA offloadfs; CREATE TABLE offloadfs.users (name text);"
	       "INSERT INTO offloadfs.users VALUES ('alice')", NULL, 0);
	ck_assert_int_eq(meta_open(dbpath, 1, &m, err, sizeof(err)), -EUCLEAN);
	ck_assert_ptr_nonnull(strstr(err, "users"));
	pg_sql("SELECT string_agg(tablename, ',') FROM pg_tables WHERE schemaname = 'offloadfs'", n,
	       sizeof(n));
	ck_assert_str_eq(n, "users");
	pg_sql("SELECT count(*) FROM offloadfs.users", n, sizeof(n));
	ck_assert_str_eq(n, "1");

	/* And beside our tables: the store is refused, unwritten. */
	pg_sql("DROP SCHEMA offloadfs CASCADE", NULL, 0);
	m = open_new();
	meta_close(m);
	pg_sql("CREATE TABLE offloadfs.users (name text)", NULL, 0);
	pg_sql(PG_STATE, n, sizeof(n));
	ck_assert_int_eq(meta_open(dbpath, 0, &m, err, sizeof(err)), -EUCLEAN);
	ck_assert_ptr_nonnull(strstr(err, "not ours (users)"));
	{
		char after[64];

		pg_sql(PG_STATE, after, sizeof(after));
		ck_assert_str_eq(n, after);
	}
}
END_TEST

START_TEST(test_pg_refusals_name_the_uri)
{
	char uri[600], err[512], shown[700];
	struct meta *m;

	/* A wrong password: libpq's reason, and the URI. */
	pg_uri_with("user=postgres", "user=ofs_pw", uri, sizeof(uri));
	setenv("PGPASSWORD", "wrong", 1);
	ck_assert_int_lt(meta_open(uri, 1, &m, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "password authentication failed"), "%s", err);
	ck_assert_msg(strstr(err, uri), "%s", err);
	/* The right one from the environment: a store. */
	setenv("PGPASSWORD", "ofs-secret", 1);
	ck_assert_int_eq(meta_open(uri, 1, &m, err, sizeof(err)), 1);
	meta_close(m);
	unsetenv("PGPASSWORD");

	/* A password in the URI (the command line): refused, and never shown. */
	snprintf(shown, sizeof(shown), "%s&password=ofs-secret", uri);
	ck_assert_int_eq(meta_open(shown, 1, &m, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, uri) && !strstr(err, "ofs-secret"), "%s", err);

	/* No server there. */
	snprintf(uri, sizeof(uri), "postgresql:///offloadfs?host=/nonexistent-ofs&user=postgres");
	ck_assert_int_lt(meta_open(uri, 1, &m, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "cannot connect to postgresql:///offloadfs?host=/nonexistent-ofs"),
		      "%s", err);
	ck_assert_msg(strstr(err, "No such file"), "%s", err);

	/* No such database. */
	pg_uri_with("///offloadfs?", "///nosuchdb?", uri, sizeof(uri));
	ck_assert_int_lt(meta_open(uri, 1, &m, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, uri) && strstr(err, "\"nosuchdb\" does not exist"), "%s", err);

	meta_target_show("postgresql://u:pw@h/db?password=x&sslmode=disable", shown, sizeof(shown));
	ck_assert_str_eq(shown, "postgresql://u@h/db?sslmode=disable");
	meta_target_show("/var/lib/x.db", shown, sizeof(shown));
	ck_assert_str_eq(shown, "/var/lib/x.db");
}
END_TEST

START_TEST(test_pg_one_user)
{
	struct meta *m = open_new(), *m2;
	char err[256];

	ck_assert_int_eq(meta_open(dbpath, 1, &m2, err, sizeof(err)), -EBUSY);
	ck_assert_msg(strstr(err, "in use"), "%s", err);
	meta_close(m);
	ck_assert_int_eq(meta_open(dbpath, 0, &m2, err, sizeof(err)), 0);
	meta_close(m2);
}
END_TEST

/* Drop every connection of the engine, as pg_terminate_backend from psql does. */
static void pg_drop_backends(void)
{
	pg_sql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = "
	       "current_database() AND pid <> pg_backend_pid()", NULL, 0);
	usleep(200000);
}

START_TEST(test_pg_reconnect)
{
	struct meta *m = open_new();
	struct meta_inode a = file_in(META_ROOT_INO, META_COMMITTED), b = a, c = a, got;
	char n[16];

	meta_set_timeout(m, 5);
	ck_assert_int_eq(meta_setting_set(m, "store_id", "00112233445566778899aabbccddeeff"), 0);
	ck_assert_int_eq(meta_insert(m, &a, "before", 6), 0);
	ck_assert_int_eq(meta_sync(m, 1), 0);
	/* Idle connections dropped: the next calls make new ones. */
	pg_drop_backends();
	ck_assert_int_eq(meta_get(m, a.ino, &got), 0);
	ck_assert_int_eq(meta_insert(m, &b, "after", 5), 0);
	/* Dropped inside a transaction: the server rolled it back, the call fails. */
	ck_assert_int_eq(meta_begin(m), 0);
	ck_assert_int_eq(meta_insert(m, &c, "in-txn", 6), 0);
	pg_drop_backends();
	c = a;
	ck_assert_int_eq(meta_insert(m, &c, "in-txn2", 7), -EIO);
	meta_rollback(m);
	pg_sql("SELECT count(*) FROM offloadfs.inodes WHERE name IN ('in-txn'::bytea, "
	       "'in-txn2'::bytea)", n, sizeof(n));
	ck_assert_str_eq(n, "0");
	c = a;
	ck_assert_int_eq(meta_begin(m), 0);
	ck_assert_int_eq(meta_insert(m, &c, "again", 5), 0);
	ck_assert_int_eq(meta_commit(m), 0);
	/* No crash of the server: the barrier still makes every commit durable. */
	ck_assert_int_eq(meta_sync_begin(m, 2), 0);
	ck_assert_int_eq(meta_sync_end(m), 0);
	ck_assert_int_eq(meta_lookup(m, META_ROOT_INO, "again", 5, &got), 0);
	/* Another store behind the URI at the next connection: never used again. */
	pg_sql("UPDATE offloadfs.store SET v = 'ffeeddccbbaa99887766554433221100' "
	       "WHERE k = 'store_id'", NULL, 0);
	pg_drop_backends();
	ck_assert_int_eq(meta_get(m, a.ino, &got), -EIO);
	ck_assert_msg(strstr(meta_errmsg(m), "another store answers there now"), "%s",
		      meta_errmsg(m));
	pg_sql("UPDATE offloadfs.store SET v = '00112233445566778899aabbccddeeff' "
	       "WHERE k = 'store_id'", NULL, 0);
	ck_assert_int_eq(meta_get(m, a.ino, &got), -EIO);
	meta_close(m);
}
END_TEST

/* 1 when the server has flushed its WAL through the position it had inserted up to at lsn. */
static int pg_flushed(const char *lsn)
{
	char sql[160], v[8];

	snprintf(sql, sizeof(sql), "SELECT pg_current_wal_flush_lsn() >= '%s'::pg_lsn", lsn);
	pg_sql(sql, v, sizeof(v));
	return !strcmp(v, "t");
}

START_TEST(test_pg_synced_commits)
{
	struct meta *m = open_new();
	struct meta_inode a = file_in(META_ROOT_INO, META_COMMITTED);
	char lsn[64];

	/* The WAL writer's own flushes, rarely: what is flushed then is the engine's doing. */
	pg_sql("ALTER SYSTEM SET wal_writer_delay = '10s'", NULL, 0);
	pg_sql("SELECT pg_reload_conf()", NULL, 0);
	usleep(300000);
	meta_sync(m, 1);
	ck_assert_int_eq(meta_insert(m, &a, "async", 5), 0);
	pg_sql("SELECT pg_current_wal_insert_lsn()", lsn, sizeof(lsn));
	/* An ordinary commit does not wait for the disk... */
	ck_assert_int_eq(pg_flushed(lsn), 0);
	/* ...the barrier's does, through every commit before it. */
	ck_assert_int_eq(meta_sync_begin(m, 2), 0);
	ck_assert_int_eq(pg_flushed(lsn), 0);
	ck_assert_int_eq(meta_sync_end(m), 0);
	ck_assert_int_eq(pg_flushed(lsn), 1);
	ck_assert_int_eq(meta_insert(m, &a, "async2", 6), 0);
	pg_sql("SELECT pg_current_wal_insert_lsn()", lsn, sizeof(lsn));
	ck_assert_int_eq(pg_flushed(lsn), 0);
	ck_assert_int_eq(meta_sync(m, 3), 0);
	ck_assert_int_eq(pg_flushed(lsn), 1);
	meta_close(m);
	pg_sql("ALTER SYSTEM RESET wal_writer_delay", NULL, 0);
	pg_sql("SELECT pg_reload_conf()", NULL, 0);
}
END_TEST


static Suite *meta_suite(void)
{
	Suite *s = suite_create(pg_uri ? "meta-pg" : "meta");
	TCase *tc = tcase_create("core"), *own = tcase_create(pg_uri ? "postgresql" : "sqlite");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_checked_fixture(own, setup, teardown);
	tcase_add_test(tc, test_format_and_reopen);
	tcase_add_test(tc, test_open_missing_without_create);
	tcase_add_test(tc, test_value_keys);
	tcase_add_test(tc, test_insert_lookup_update_delete);
	tcase_add_test(tc, test_insert_object);
	tcase_add_test(tc, test_name_limits);
	tcase_add_test(tc, test_readdir_move_children);
	tcase_add_test(tc, test_recover_and_mappings);
	tcase_add_test(tc, test_bitmaps);
	tcase_add_test(tc, test_transactions_and_sync);
	tcase_add_test(tc, test_path);
	tcase_add_test(tc, test_dir_nlink);
	tcase_add_test(tc, test_lookup_brief_in_read_txn);
	tcase_add_test(tc, test_key_len);
	tcase_add_test(tc, test_xattrs);
	tcase_add_test(tc, test_extents);
	tcase_add_test(tc, test_extent_from_to_row);
	tcase_add_test(tc, test_lru);
	tcase_add_test(tc, test_tenant_evictions);
	if (pg_uri) {
		tcase_add_test(own, test_pg_newer_schema_refused);
		tcase_add_test(own, test_pg_foreign_tables_refused);
		tcase_add_test(own, test_pg_refusals_name_the_uri);
		tcase_add_test(own, test_pg_one_user);
		tcase_add_test(own, test_pg_synced_commits);
		tcase_add_test(own, test_pg_reconnect);
	} else {
		tcase_add_test(own, test_foreign_db_untouched);
		tcase_add_test(own, test_not_a_database);
		tcase_add_test(own, test_newer_schema_refused);
		tcase_add_test(own, test_migrate_v1);
		tcase_add_test(own, test_log_prefetch);
		tcase_add_test(own, test_log_read_ahead);
		tcase_add_test(own, test_log_fd_read_only_and_closed);
		tcase_add_test(own, test_log_size_set_ahead);
		tcase_add_test(own, test_migrate_v2);
		tcase_add_test(own, test_migrate_v3);
	}
	suite_add_tcase(s, tc);
	suite_add_tcase(s, own);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	pg_uri = getenv("OFS_TEST_PG_URI");
	if (pg_uri && !*pg_uri)
		pg_uri = NULL;
	sr = srunner_create(meta_suite());

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
