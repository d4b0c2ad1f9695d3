/*
 * open.c: the PostgreSQL engine behind meta.h: connecting to the database
 * a libpq URI names, the schema "offloadfs" (version META_SCHEMA_VERSION,
 * in its store table's schema_version row) and its checks, the exclusive
 * use of a store, the store's settings and the statement array.
 *
 * The schema is the sqlite engine's (DESIGN.md), in PostgreSQL's types:
 * every integer a bigint, names, keys and checksums bytea, settings text.
 */
#include "pg_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PQ_MAGIC "offloadfs"
/* The advisory lock that makes one daemon (or fsck) the store's only user: "ofs" */
#define PQ_LOCK_KEY 7300723

#define S PQ_SCHEMA "."

const char *const pq_sql[PQ_N] = {
	[PQ_GET] = "SELECT " PQ_INODE_COLS " FROM " S "inodes WHERE ino = $1",
	[PQ_LOOKUP] = "SELECT " PQ_INODE_COLS " FROM " S "inodes WHERE parent = $1 AND name = $2",
	[PQ_LOOKUP_BRIEF] = "SELECT ino, mode, state, size, bucket, page, npages, csum FROM " S
			    "inodes WHERE parent = $1 AND name = $2",
	[PQ_NAME] = "SELECT parent, name FROM " S "inodes WHERE ino = $1",
	/* A taken name inserts nothing: the caller's transaction stays usable, as sqlite's. */
	[PQ_INSERT] = "INSERT INTO " S "inodes (parent, name, mode, uid, gid, atime, mtime, "
		      "ctime, size, bucket, page, npages, csum, state, nlink) VALUES "
		      "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, "
		      "CASE WHEN ($3::bigint & 61440) = 16384 THEN 2 ELSE 1 END) "
		      "ON CONFLICT (parent, name) DO NOTHING RETURNING ino",
	[PQ_UPDATE] = "UPDATE " S "inodes SET mode = $2, uid = $3, gid = $4, atime = $5, "
		      "mtime = $6, ctime = $7, size = $8, bucket = $9, page = $10, "
		      "npages = $11, csum = $12, state = $13, gen = $14, prev_bucket = $15, "
		      "prev_page = $16, prev_npages = $17, prev_size = $18, prev_csum = $19 "
		      "WHERE ino = $1",
	[PQ_COMMIT_OBJECT] = "UPDATE " S "inodes SET mode = $2, uid = $3, gid = $4, atime = $5, "
			     "mtime = $6, ctime = $7, size = $8, bucket = $9, page = $10, "
			     "npages = $11, csum = $12, state = $13, gen = $14, "
			     "prev_bucket = $15, prev_page = $16, prev_npages = $17, "
			     "prev_size = $18, prev_csum = $19, pcsums = $20, "
			     /* The right-hand sides see the old row: prev_skey takes the old skey. */
			     "skey = CASE $22::bigint WHEN 2 THEN prev_skey ELSE $21::bytea END, "
			     "prev_skey = CASE $22::bigint WHEN 1 THEN skey WHEN 2 THEN NULL "
			     "ELSE prev_skey END WHERE ino = $1",
	[PQ_INSERT_OBJECT] = "INSERT INTO " S "inodes (parent, name, mode, uid, gid, atime, "
			     "mtime, ctime, size, bucket, page, npages, csum, state, gen, pcsums, "
			     "nlink) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, "
			     "$13, $14, $15, $16, 1) ON CONFLICT (parent, name) DO NOTHING "
			     "RETURNING ino",
	[PQ_PCSUMS_GET] = "SELECT pcsums FROM " S "inodes WHERE ino = $1",
	[PQ_UNSYNCED] = "SELECT " PQ_INODE_COLS ", 0::bigint FROM " S "inodes WHERE gen > $1 "
			"AND state = 0 AND parent IS NOT NULL AND npages > 0 AND bucket <> -3 "
			"UNION ALL SELECT " PQ_EXTENT_COLS " FROM " S "extents e JOIN " S
			"inodes i ON i.ino = e.ino WHERE e.gen > $1 AND i.state = 0 "
			"AND i.parent IS NOT NULL AND e.npages > 0",
	[PQ_VALUES] = "SELECT " PQ_INODE_COLS ", 0::bigint, skey, prev_skey FROM " S "inodes "
		      "WHERE skey IS NOT NULL OR prev_skey IS NOT NULL UNION ALL "
		      "SELECT " PQ_EXTENT_COLS ", e.skey, e.prev_skey FROM " S "extents e "
		      "JOIN " S "inodes i ON i.ino = e.ino "
		      "WHERE e.skey IS NOT NULL OR e.prev_skey IS NOT NULL ORDER BY 1, 22",
	[PQ_DELETE] = "DELETE FROM " S "inodes WHERE ino = $1",
	[PQ_DETACH] = "UPDATE " S "inodes SET parent = NULL, name = NULL WHERE ino = $1",
	/* A taken name moves nothing (PQ_MOVE_TAKEN tells it from a missing ino). */
	[PQ_MOVE] = "UPDATE " S "inodes SET parent = $2, name = $3 WHERE ino = $1 AND NOT EXISTS "
		    "(SELECT 1 FROM " S "inodes WHERE parent = $2 AND name = $3 AND ino <> $1)",
	[PQ_MOVE_TAKEN] = "SELECT 1 FROM " S "inodes WHERE parent = $1 AND name = $2",
	[PQ_HAS_CHILDREN] = "SELECT 1 FROM " S "inodes WHERE parent = $1 LIMIT 1",
	/* In pages: a directory of a million entries is not read whole for each reply. */
	[PQ_READDIR] = "SELECT " PQ_INODE_COLS ", name FROM " S "inodes WHERE parent = $1 "
		       "AND ino > $2 ORDER BY ino LIMIT 512",
	[PQ_MAPPINGS] = "SELECT " PQ_INODE_COLS ", 0::bigint FROM " S "inodes WHERE npages > 0 "
			"AND bucket <> -3 AND state IN (0, 2) AND parent IS NOT NULL UNION ALL "
			"SELECT " PQ_EXTENT_COLS " FROM " S "extents e JOIN " S
			"inodes i ON i.ino = e.ino WHERE e.npages > 0 AND i.state IN (0, 2) "
			"AND i.parent IS NOT NULL ORDER BY 1, 22",
	[PQ_COUNT_MAPPINGS] = "SELECT (SELECT count(*) FROM " S "inodes WHERE npages > 0 "
			      "AND bucket <> -3 AND state IN (0, 2) AND parent IS NOT NULL) + "
			      "(SELECT count(*) FROM " S "extents e JOIN " S "inodes i "
			      "ON i.ino = e.ino WHERE e.npages > 0 AND i.state IN (0, 2) "
			      "AND i.parent IS NOT NULL)",
	[PQ_COUNT_FILES] = "SELECT count(*) FROM " S "inodes WHERE (mode & 61440) = 32768 "
			   "AND parent IS NOT NULL",
	[PQ_KV_GET] = "SELECT v FROM " S "store WHERE k = $1",
	[PQ_KV_SET] = "INSERT INTO " S "store (k, v) VALUES ($1, $2) "
		      "ON CONFLICT (k) DO UPDATE SET v = excluded.v",
	[PQ_BITMAP_SAVE] = "INSERT INTO " S "bitmaps (bucket, npages, words) VALUES ($1, $2, $3) "
			   "ON CONFLICT (bucket) DO UPDATE SET npages = excluded.npages, "
			   "words = excluded.words",
	[PQ_BITMAP_LOAD] = "SELECT npages, words FROM " S "bitmaps WHERE bucket = $1",
	[PQ_TASK_ADD] = "INSERT INTO " S "tasks (ino, key, reason, size, bucket, page, csum, "
			"state, created) VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8) RETURNING id",
	/* The oldest queued task, marked running, in one statement. */
	[PQ_TASK_CLAIM] = "UPDATE " S "tasks SET state = 1, started = $1 WHERE id = "
			  "(SELECT id FROM " S "tasks WHERE state = 0 ORDER BY id LIMIT 1) "
			  "RETURNING id, ino, key, reason, size, bucket, page, csum, created",
	[PQ_TASK_FINISH] = "UPDATE " S "tasks SET state = $2, finished = $3, error = $4 "
			   "WHERE id = $1",
	[PQ_TASK_PENDING] = "SELECT 1 FROM " S "tasks WHERE ino = $1 AND state IN (0, 1) LIMIT 1",
	[PQ_DIR_CHANGED] = "UPDATE " S "inodes SET mtime = $2, ctime = $2 WHERE ino = $1 "
			   "RETURNING nlink",
	[PQ_XATTR_GET] = "SELECT value FROM " S "xattrs WHERE ino = $1 AND name = $2",
	[PQ_XATTR_INSERT] = "INSERT INTO " S "xattrs (ino, name, value) VALUES ($1, $2, $3)",
	[PQ_XATTR_UPDATE] = "UPDATE " S "xattrs SET value = $3 WHERE ino = $1 AND name = $2",
	[PQ_XATTR_REMOVE] = "DELETE FROM " S "xattrs WHERE ino = $1 AND name = $2",
	[PQ_XATTR_LIST] = "SELECT name FROM " S "xattrs WHERE ino = $1 ORDER BY name",
	/* What the others take, name $2 left out (the one being replaced). */
	[PQ_XATTR_TOTAL] = "SELECT coalesce(sum(length(name) + 1 + length(value)), 0)::bigint "
			   "FROM " S "xattrs WHERE ino = $1 AND name <> $2",
	[PQ_EXTENT_COMMIT] = "INSERT INTO " S "extents AS x (ino, idx, size, bucket, page, npages, "
			     "csum, gen, prev_bucket, prev_page, prev_npages, prev_size, "
			     "prev_csum, pcsums, skey) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
			     "$10, $11, $12, $13, $14, CASE $16::bigint WHEN 2 THEN NULL ELSE $15::bytea END) "
			     "ON CONFLICT (ino, idx) DO UPDATE SET size = $3, bucket = $4, "
			     "page = $5, npages = $6, csum = $7, gen = $8, prev_bucket = $9, "
			     "prev_page = $10, prev_npages = $11, prev_size = $12, prev_csum = $13, "
			     "pcsums = $14, "
			     "skey = CASE $16::bigint WHEN 2 THEN x.prev_skey ELSE $15::bytea END, "
			     "prev_skey = CASE $16::bigint WHEN 1 THEN x.skey WHEN 2 THEN NULL "
			     "ELSE x.prev_skey END",
	[PQ_EXTENT_DELETE] = "DELETE FROM " S "extents WHERE ino = $1 AND idx = $2",
	[PQ_EXTENTS] = "SELECT " PQ_EXTENT_COLS " FROM " S "extents e JOIN " S "inodes i "
		       "ON i.ino = e.ino WHERE e.ino = $1 ORDER BY e.idx",
	[PQ_EXTENT_PCSUMS] = "SELECT pcsums FROM " S "extents WHERE ino = $1 AND idx = $2",
};

/*
 * Link counts and the rows that go with an inode, kept by the server
 * whoever changes the rows (the daemon, fsck, recovery), as the sqlite
 * schema's triggers keep them.
 */
static const char pq_schema[] =
	"CREATE TABLE " S "store (k text COLLATE \"C\" PRIMARY KEY, v text);"
	"CREATE TABLE " S "inodes ("
	" ino bigserial PRIMARY KEY, parent bigint, name bytea,"
	" mode bigint NOT NULL, uid bigint NOT NULL, gid bigint NOT NULL,"
	" atime bigint NOT NULL, mtime bigint NOT NULL, ctime bigint NOT NULL,"
	" size bigint NOT NULL DEFAULT 0, bucket bigint NOT NULL DEFAULT -1,"
	" page bigint NOT NULL DEFAULT 0, npages bigint NOT NULL DEFAULT 0,"
	" csum bigint NOT NULL DEFAULT 0, state bigint NOT NULL DEFAULT 0,"
	" gen bigint NOT NULL DEFAULT 0, prev_bucket bigint NOT NULL DEFAULT -1,"
	" prev_page bigint NOT NULL DEFAULT 0, prev_npages bigint NOT NULL DEFAULT 0,"
	" prev_size bigint NOT NULL DEFAULT 0, prev_csum bigint NOT NULL DEFAULT 0,"
	" pcsums bytea, skey bytea, prev_skey bytea, nlink bigint NOT NULL DEFAULT 1);"
	"CREATE UNIQUE INDEX inodes_dentry ON " S "inodes (parent, name);"
	"CREATE INDEX inodes_children ON " S "inodes (parent, ino);"
	"CREATE INDEX inodes_unsettled ON " S "inodes (state) WHERE state <> 0 OR parent IS NULL;"
	"CREATE TABLE " S "xattrs (ino bigint NOT NULL, name bytea NOT NULL,"
	" value bytea NOT NULL, PRIMARY KEY (ino, name));"
	"CREATE TABLE " S "extents (ino bigint NOT NULL, idx bigint NOT NULL,"
	" size bigint NOT NULL, bucket bigint NOT NULL, page bigint NOT NULL,"
	" npages bigint NOT NULL, csum bigint NOT NULL, gen bigint NOT NULL,"
	" prev_bucket bigint NOT NULL DEFAULT -1, prev_page bigint NOT NULL DEFAULT 0,"
	" prev_npages bigint NOT NULL DEFAULT 0, prev_size bigint NOT NULL DEFAULT 0,"
	" prev_csum bigint NOT NULL DEFAULT 0, pcsums bytea, skey bytea, prev_skey bytea,"
	" PRIMARY KEY (ino, idx));"
	"CREATE TABLE " S "bitmaps (bucket bigint PRIMARY KEY, npages bigint NOT NULL,"
	" words bytea NOT NULL);"
	"CREATE TABLE " S "tasks (id bigserial PRIMARY KEY, ino bigint NOT NULL, key text,"
	" reason text, size bigint, bucket bigint, page bigint, csum bigint,"
	" state bigint NOT NULL, created bigint, started bigint, finished bigint, error text);"
	"CREATE INDEX tasks_state ON " S "tasks (state, id);"
	"CREATE INDEX tasks_ino ON " S "tasks (ino) WHERE state IN (0, 1);"
	"CREATE FUNCTION " S "inodes_rows() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN"
	" IF TG_OP = 'DELETE' THEN"
	"  DELETE FROM " S "xattrs WHERE ino = OLD.ino;"
	"  DELETE FROM " S "extents WHERE ino = OLD.ino;"
	" END IF;"
	" IF TG_OP <> 'INSERT' AND (OLD.mode & 61440) = 16384 AND"
	"    (TG_OP = 'DELETE' OR OLD.parent IS DISTINCT FROM NEW.parent) THEN"
	"  UPDATE " S "inodes SET nlink = nlink - 1 WHERE ino = OLD.parent;"
	" END IF;"
	" IF TG_OP <> 'DELETE' AND (NEW.mode & 61440) = 16384 AND"
	"    (TG_OP = 'INSERT' OR OLD.parent IS DISTINCT FROM NEW.parent) THEN"
	"  UPDATE " S "inodes SET nlink = nlink + 1 WHERE ino = NEW.parent;"
	" END IF;"
	" RETURN NULL; END $f$;"
	"CREATE TRIGGER inodes_rows AFTER INSERT OR DELETE OR UPDATE OF parent ON " S "inodes"
	" FOR EACH ROW EXECUTE FUNCTION " S "inodes_rows();";

/* Our tables: any other in the schema is someone else's, and the store is refused. */
static const char *const pq_tables[] = { "store", "inodes", "xattrs", "extents", "bitmaps",
					 "tasks", NULL };

int pq_setting_get(struct meta *mb, const char *name, char *buf, size_t len)
{
	return pq_kv_get(pq(mb), name, NULL, buf, len);
}

int pq_setting_set(struct meta *mb, const char *name, const char *value)
{
	return pq_kv_set_text(pq(mb), name, value);
}

/*
 * One value of a query of no parameters on c: 0, -ENOENT for no row, or
 * the error (its message in msg).
 */
static int pq_query_text(struct meta_pg *m, PGconn *c, const char *sql, char *buf, size_t len,
			 char *msg, size_t msglen)
{
	PGresult *r = pq_send_wait(m, c, -1, sql, NULL);
	int ret = 0;

	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		pq_one_line(msg, msglen, r ? PQresultErrorMessage(r) : PQerrorMessage(c));
		ret = -EIO;
	} else if (PQntuples(r) == 0) {
		ret = -ENOENT;
	} else {
		snprintf(buf, len, "%s", PQgetvalue(r, 0, 0));
	}
	PQclear(r);
	return ret;
}

/*
 * What the schema holds, read before any write: 1 when it is ours at
 * this version, 0 when there is no schema or an empty one (ours to make),
 * or the refusal in err: someone else's tables in it, another magic, a
 * version this build does not know (-EIO: it could not be read).
 */
static int pq_check_ours(struct meta_pg *m, PGconn *c, char *err, size_t errlen)
{
	char buf[256], msg[400];
	PGresult *r;
	int i, k, ret, ntables;
	long version;
	char *end;

	ret = pq_query_text(m, c, "SELECT 1 FROM pg_namespace WHERE nspname = '" PQ_SCHEMA "'",
			    buf, sizeof(buf), msg, sizeof(msg));
	if (ret == -ENOENT)
		return 0;
	if (ret) {
		snprintf(err, errlen, "cannot read the database: %s", msg);
		return ret;
	}
	r = pq_send_wait(m, c, -1,
			 "SELECT c.relname FROM pg_class c JOIN pg_namespace n "
			 "ON n.oid = c.relnamespace WHERE n.nspname = '" PQ_SCHEMA "' "
			 "AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY 1",
			 NULL);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		pq_one_line(msg, sizeof(msg), r ? PQresultErrorMessage(r) : PQerrorMessage(c));
		PQclear(r);
		snprintf(err, errlen, "cannot read the database: %s", msg);
		return -EIO;
	}
	ntables = PQntuples(r);
	for (i = 0; i < ntables; i++) {
		const char *t = PQgetvalue(r, i, 0);

		for (k = 0; pq_tables[k] && strcmp(pq_tables[k], t); k++)
			;
		if (!pq_tables[k]) {
			snprintf(err, errlen,
				 "not an offloadfs database: schema " PQ_SCHEMA
				 " holds a table that is not ours (%s)",
				 t);
			PQclear(r);
			return -EUCLEAN;
		}
	}
	PQclear(r);
	if (ntables == 0)
		return 0;
	ret = pq_query_text(m, c, "SELECT v FROM " S "store WHERE k = 'magic'", buf, sizeof(buf),
			    msg, sizeof(msg));
	if (ret && ret != -ENOENT) {
		snprintf(err, errlen, "not an offloadfs database (%s)", msg);
		return -EUCLEAN;
	}
	if (ret == -ENOENT || strcmp(buf, PQ_MAGIC) != 0) {
		snprintf(err, errlen, "not an offloadfs database (magic '%s')", ret ? "" : buf);
		return -EUCLEAN;
	}
	ret = pq_query_text(m, c, "SELECT v FROM " S "store WHERE k = 'schema_version'", buf,
			    sizeof(buf), msg, sizeof(msg));
	version = ret ? -1 : strtol(buf, &end, 10);
	if (ret || *end) {
		snprintf(err, errlen, "not an offloadfs database (no schema version)");
		return -EUCLEAN;
	}
	/* This engine began at version 4: any other is not one it knows. */
	if (version != META_SCHEMA_VERSION) {
		snprintf(err, errlen, "unsupported schema version: found %ld, expected %d", version,
			 META_SCHEMA_VERSION);
		return -EPROTONOSUPPORT;
	}
	return 1;
}

static int pq_create_schema(struct meta_pg *m, char *err, size_t errlen)
{
	char sql[256];
	int ret;

	ret = pq_begin(&m->base);
	if (!ret)
		ret = pq_exec(m, "CREATE SCHEMA IF NOT EXISTS " PQ_SCHEMA, NULL);
	if (!ret)
		ret = pq_exec(m, pq_schema, NULL);
	if (!ret) {
		snprintf(sql, sizeof(sql),
			 "INSERT INTO " S "store (k, v) VALUES ('magic', '" PQ_MAGIC "'), "
			 "('schema_version', '%d')",
			 META_SCHEMA_VERSION);
		ret = pq_exec(m, sql, NULL);
	}
	if (!ret)
		ret = pq_commit(&m->base);
	else
		pq_rollback(&m->base);
	if (ret)
		snprintf(err, errlen, "cannot create schema " PQ_SCHEMA ": %s", m->err);
	return ret;
}

/* Connect with libpq's own means for the password; *c is set even on failure. */
static int pq_connect(const char *uri, const char *shown, PGconn **c, char *err, size_t errlen)
{
	char msg[400];

	*c = PQconnectdb(uri);
	if (*c && PQstatus(*c) == CONNECTION_OK)
		return 0;
	pq_one_line(msg, sizeof(msg), *c ? PQerrorMessage(*c) : "out of memory");
	snprintf(err, errlen, "cannot connect to %s: %s", shown, msg);
	return -EIO;
}

/* The store's id and creation time, as the database holds them now (empty: none). */
static int pq_identity(struct meta_pg *m, PGconn *c, char *id, size_t idlen, char *created,
		       size_t clen, char *err, size_t errlen)
{
	char msg[400];
	int ret;

	ret = pq_query_text(m, c, "SELECT v FROM " S "store WHERE k = 'store_id'", id, idlen, msg,
			    sizeof(msg));
	if (ret == -ENOENT)
		id[0] = '\0';
	if (!ret || ret == -ENOENT)
		ret = pq_query_text(m, c, "SELECT v FROM " S "store WHERE k = 'created'", created,
				    clen, msg, sizeof(msg));
	if (ret == -ENOENT) {
		created[0] = '\0';
		ret = 0;
	}
	if (ret)
		snprintf(err, errlen, "cannot read the store's identity: %s", msg);
	return ret;
}

/*
 * Commits wait for no disk: meta_sync is the point of durability
 * (sync.c).  Then, on the main connection, the store's lock; on a
 * connection made again (!first), the checks that the database still
 * holds our store, the statements, and whether the server crashed since
 * the last connection (crash_mark) with commits no barrier covered.
 * -ESTALE: never ours again (another store answers); any other error
 * may pass (the old backend still holding the lock, the server starting).
 */
int pq_attach(struct meta_pg *m, PGconn *c, int main, int first, char *err, size_t errlen)
{
	char buf[64], msg[400], id[64], created[32];
	PGresult *r;
	int ret, crashed = 0;

	r = pq_send_wait(m, c, -1,
			 "SET synchronous_commit = off; SET search_path = pg_catalog; "
			 "SET client_min_messages = warning",
			 NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		pq_one_line(msg, sizeof(msg), r ? PQresultErrorMessage(r) : PQerrorMessage(c));
		snprintf(err, errlen, "%s: %s", m->shown, msg);
		PQclear(r);
		return -EIO;
	}
	PQclear(r);
	/* Held for the life of the connection, and dropped with it by the server. */
	if (main) {
		ret = pq_query_text(m, c, "SELECT pg_try_advisory_lock(" PQ_STR(PQ_LOCK_KEY) ")",
				    buf, sizeof(buf), msg, sizeof(msg));
		if (ret || strcmp(buf, "t") != 0) {
			snprintf(err, errlen, "%s: %s", m->shown,
				 ret ? msg : "the store is in use by another offloadfs daemon or fsck");
			return ret ? ret : -EBUSY;
		}
	}
	if (!first) {
		ret = pq_check_ours(m, c, msg, sizeof(msg));
		if (ret == 0) {
			snprintf(err, errlen, "the database no longer holds the store");
			return -ESTALE;
		}
		if (ret < 0) {
			snprintf(err, errlen, "%s", msg);
			return ret == -EIO ? -EIO : -ESTALE;
		}
		ret = pq_identity(m, c, id, sizeof(id), created, sizeof(created), err, errlen);
		if (ret)
			return ret;
		pthread_mutex_lock(&m->mu);
		ret = strcmp(id, m->store_id) || strcmp(created, m->created);
		pthread_mutex_unlock(&m->mu);
		if (ret) {
			snprintf(err, errlen,
				 "another store answers there now (store id '%s', created %s; "
				 "ours: '%s', created %s)",
				 id, created, m->store_id, m->created);
			return -ESTALE;
		}
		if (main) {
			ret = pq_prepare_on(m, c, err, errlen);
			if (ret)
				return ret == -EUCLEAN ? -ESTALE : ret;
		}
	}
	ret = pq_query_text(m, c, "SELECT coalesce(stats_reset::text, '') FROM pg_stat_bgwriter",
			    buf, sizeof(buf), msg, sizeof(msg));
	if (ret) {
		snprintf(err, errlen, "%s: %s", m->shown, msg);
		return -EIO;
	}
	pthread_mutex_lock(&m->mu);
	if (!first && strcmp(buf, m->crash_mark)) {
		__atomic_add_fetch(&m->crashes, 1, __ATOMIC_SEQ_CST);
		crashed = __atomic_load_n(&m->wseq, __ATOMIC_SEQ_CST) >
			  __atomic_load_n(&m->durable, __ATOMIC_SEQ_CST);
	}
	snprintf(m->crash_mark, sizeof(m->crash_mark), "%s", buf);
	pthread_mutex_unlock(&m->mu);
	if (crashed)
		pq_set_lost(m, "the server restarted after a crash");
	return 0;
}

int pq_open(const char *uri, int create, struct meta **out, char *err, size_t errlen)
{
	PQconninfoOption *opts, *o;
	struct meta_pg *m;
	char *perr = NULL;
	int ret, i, ours;

	*out = NULL;
	m = calloc(1, sizeof(*m));
	if (!m || !(m->shown = malloc(strlen(uri) + 1)) || !(m->uri = strdup(uri))) {
		if (m)
			free(m->shown);
		free(m);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	m->base.ops = &meta_pg_ops;
	pthread_mutex_init(&m->mu, NULL);
	meta_target_show(uri, m->shown, strlen(uri) + 1);
	opts = PQconninfoParse(uri, &perr);
	if (!opts) {
		snprintf(err, errlen, "%s: not a connection URI: %s", m->shown,
			 perr ? perr : "out of memory");
		PQfreemem(perr);
		ret = -EINVAL;
		goto fail;
	}
	for (o = opts; o->keyword && strcmp(o->keyword, "password"); o++)
		;
	i = o->keyword && o->val && *o->val;
	PQconninfoFree(opts);
	/* A URI is on the command line, which every user of the machine can read. */
	if (i) {
		snprintf(err, errlen,
			 "%s: a password in the URI is refused (it would be on the command line): "
			 "use ~/.pgpass, PGPASSFILE, PGPASSWORD or a service file",
			 m->shown);
		ret = -EINVAL;
		goto fail;
	}
	/* At mount, an unreachable server is a refusal, not a wait. */
	ret = pq_connect(uri, m->shown, &m->conn, err, errlen);
	if (!ret)
		ret = pq_connect(uri, m->shown, &m->sync_conn, err, errlen);
	if (ret)
		goto fail;
	ret = pq_attach(m, m->conn, 1, 1, err, errlen);
	if (!ret)
		ret = pq_attach(m, m->sync_conn, 0, 1, err, errlen);
	if (ret)
		goto fail;
	ours = pq_check_ours(m, m->conn, err, errlen);
	if (ours < 0) {
		ret = ours;
		goto fail;
	}
	if (!ours && !(create & 1)) {
		snprintf(err, errlen, "%s holds no offloadfs store (schema " PQ_SCHEMA ")", m->shown);
		ret = -ENOENT;
		goto fail;
	}
	if (!ours) {
		ret = pq_create_schema(m, err, errlen);
		if (ret)
			goto fail;
	}
	ret = pq_prepare_on(m, m->conn, err, errlen);
	if (!ret)
		ret = pq_identity(m, m->conn, m->store_id, sizeof(m->store_id), m->created,
				  sizeof(m->created), err, errlen);
	if (ret)
		goto fail;
	*out = &m->base;
	return ours ? 0 : 1;

fail:
	pq_close(&m->base);
	return ret;
}

/* The child shares the connection's socket, and with it the server's backend and its advisory lock. */
int pq_forked(struct meta *mb)
{
	(void)mb;
	return 0;
}

void pq_close(struct meta *mb)
{
	struct meta_pg *m = pq(mb);

	PQfinish(m->conn);
	PQfinish(m->sync_conn);
	pthread_mutex_destroy(&m->mu);
	free(m->uri);
	free(m->shown);
	free(m);
}

int pq_format(struct meta *mb, const struct meta_geom *g, const char *backend,
	      uint32_t root_mode, uint32_t uid, uint32_t gid)
{
	struct meta_pg *m = pq(mb);
	struct meta_inode root = { 0 };
	struct timespec ts;
	int ret;

	clock_gettime(CLOCK_REALTIME, &ts);
	ret = pq_begin(mb);
	if (ret)
		return ret;
	ret = pq_kv_set_int(m, "page_size", (int64_t)g->page_size);
	if (!ret)
		ret = pq_kv_set_int(m, "bucket_size", (int64_t)g->bucket_size);
	if (!ret)
		ret = pq_kv_set_int(m, "bucket_count", g->bucket_count);
	if (!ret)
		ret = pq_kv_set_text(m, "backend", backend);
	if (!ret)
		ret = pq_kv_set_int(m, "clean", 0);
	if (!ret)
		ret = pq_kv_set_int(m, "created", ts.tv_sec);
	if (!ret) {
		/* The root row gets ino 1 by being first; insist on it. */
		root.mode = root_mode;
		root.uid = uid;
		root.gid = gid;
		root.atime = root.mtime = root.ctime =
			(int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
		root.bucket = -1;
		root.state = META_COMMITTED;
		ret = pq_insert_row(m, &root, "", 0);
		if (!ret && root.ino != META_ROOT_INO)
			ret = -EUCLEAN;
	}
	if (ret) {
		pq_rollback(mb);
		return ret;
	}
	return pq_commit(mb);
}

int pq_geom_get(struct meta *mb, struct meta_geom *g, char *backend, size_t blen)
{
	struct meta_pg *m = pq(mb);
	int64_t ps, bs, bc;
	int ret;

	ret = pq_kv_get(m, "page_size", &ps, NULL, 0);
	if (!ret)
		ret = pq_kv_get(m, "bucket_size", &bs, NULL, 0);
	if (!ret)
		ret = pq_kv_get(m, "bucket_count", &bc, NULL, 0);
	if (!ret && backend)
		ret = pq_kv_get(m, "backend", NULL, backend, blen);
	if (ret)
		return ret;
	if (ps <= 0 || bs <= 0 || bc <= 0 || bc > 256)
		return -EUCLEAN;
	g->page_size = (uint64_t)ps;
	g->bucket_size = (uint64_t)bs;
	g->bucket_count = (uint32_t)bc;
	return 0;
}
