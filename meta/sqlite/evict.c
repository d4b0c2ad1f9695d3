/*
 * evict.c: what eviction asks of the metadata: objects in order of last
 * use (atime), a batch of atimes written at once, the pinned count, and
 * the per-tenant eviction counts.  Rare statements (one per eviction pass
 * or group-commit tick), prepared when run.
 */
#include "sqlite_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sq_lru(struct meta *mb, int64_t after_atime, uint64_t after_ino, int64_t before,
	   unsigned limit, meta_ino_fn fn, void *ctx)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s;
	int rc, ret;

	/*
	 * Closed, committed regular files in the namespace; (atime, ino) pages
	 * the order.  The young are left out here rather than skipped by the
	 * caller: a pass over a store of young objects ends after one query.
	 */
	rc = sqlite3_prepare_v2(m->db,
				"SELECT " INODE_COLS " FROM inodes WHERE parent IS NOT NULL "
				"AND state = 0 AND (mode & 61440) = 32768 "
				"AND (atime, ino) > (?1, ?2) AND atime < ?4 AND mtime < ?4 "
				"AND ctime < ?4 ORDER BY atime, ino LIMIT ?3",
				-1, &s, NULL);
	if (rc != SQLITE_OK)
		return sq_errno(rc);
	sqlite3_bind_int64(s, 1, after_atime);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)after_ino);
	sqlite3_bind_int64(s, 3, limit);
	sqlite3_bind_int64(s, 4, before);
	ret = sq_each_inode(s, fn, ctx);
	sqlite3_finalize(s);
	return ret;
}

int sq_set_atimes(struct meta *mb, const uint64_t *inos, const int64_t *atimes, size_t n)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s;
	size_t i;
	int rc, ret = 0;

	rc = sqlite3_prepare_v2(m->db, "UPDATE inodes SET atime = ?2 WHERE ino = ?1", -1, &s,
				NULL);
	if (rc != SQLITE_OK)
		return sq_errno(rc);
	for (i = 0; i < n && !ret; i++) {
		sqlite3_bind_int64(s, 1, (sqlite3_int64)inos[i]);
		sqlite3_bind_int64(s, 2, atimes[i]);
		ret = sq_step_done(m, s);
	}
	sqlite3_finalize(s);
	return ret;
}

int sq_xattr_count(struct meta *mb, const char *name, uint64_t *n)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s;
	int rc;

	rc = sqlite3_prepare_v2(m->db, "SELECT count(*) FROM xattrs WHERE name = ?1", -1, &s,
				NULL);
	if (rc != SQLITE_OK)
		return sq_errno(rc);
	sqlite3_bind_blob(s, 1, name, (int)strlen(name), SQLITE_STATIC);
	rc = sqlite3_step(s);
	*n = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(s, 0) : 0;
	sqlite3_finalize(s);
	return rc == SQLITE_ROW ? 0 : sq_errno(rc);
}

int sq_tenant_pages(struct meta *mb, uint64_t tenant, uint64_t *pages)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s;
	int rc;

	/* Every entry below the tenant, through the (parent, name) index. */
	rc = sqlite3_prepare_v2(m->db,
				"WITH RECURSIVE sub(ino) AS (SELECT ?1 UNION ALL "
				"SELECT i.ino FROM inodes i JOIN sub ON i.parent = sub.ino) "
				"SELECT total(npages) FROM inodes WHERE ino IN sub "
				"AND (mode & 61440) = 32768",
				-1, &s, NULL);
	if (rc != SQLITE_OK)
		return sq_errno(rc);
	sqlite3_bind_int64(s, 1, (sqlite3_int64)tenant);
	rc = sqlite3_step(s);
	*pages = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_double(s, 0) : 0;
	sqlite3_finalize(s);
	return rc == SQLITE_ROW ? 0 : sq_errno(rc);
}

int sq_tenant_xattrs(struct meta *mb, const char *name, meta_tenant_fn fn, void *ctx)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s;
	int rc, ret = 0;

	rc = sqlite3_prepare_v2(m->db,
				"SELECT i.ino, i.name, x.value FROM xattrs x JOIN inodes i "
				"ON i.ino = x.ino WHERE x.name = ?1 AND i.parent = ?2 ORDER BY i.ino",
				-1, &s, NULL);
	if (rc != SQLITE_OK)
		return sq_errno(rc);
	sqlite3_bind_blob(s, 1, name, (int)strlen(name), SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, META_ROOT_INO);
	while (!ret && (rc = sqlite3_step(s)) == SQLITE_ROW)
		ret = fn(ctx, (uint64_t)sqlite3_column_int64(s, 0),
			 (const char *)sqlite3_column_blob(s, 1), (size_t)sqlite3_column_bytes(s, 1),
			 (const char *)sqlite3_column_blob(s, 2), (size_t)sqlite3_column_bytes(s, 2));
	if (!ret && rc != SQLITE_DONE)
		ret = sq_errno(rc);
	sqlite3_finalize(s);
	return ret;
}

/*
 * The counts live in the store table, one row per tenant: no schema
 * change, and an older build that mounts the store keeps them untouched.
 */
#define TEV_PREFIX "tenant_evictions."

int sq_tenant_evictions_set(struct meta *mb, uint64_t tenant, uint64_t count, uint64_t bytes)
{
	struct meta_sq *m = sq(mb);
	char k[64], v[64];

	snprintf(k, sizeof(k), TEV_PREFIX "%" PRIu64, tenant);
	snprintf(v, sizeof(v), "%" PRIu64 " %" PRIu64, count, bytes);
	return sq_kv_set_text(m, k, v);
}

int sq_tenant_evictions_drop(struct meta *mb, uint64_t tenant)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s;
	char k[64];
	int rc, ret;

	snprintf(k, sizeof(k), TEV_PREFIX "%" PRIu64, tenant);
	rc = sqlite3_prepare_v2(m->db, "DELETE FROM store WHERE k = ?1", -1, &s, NULL);
	if (rc != SQLITE_OK)
		return sq_errno(rc);
	sqlite3_bind_text(s, 1, k, -1, SQLITE_STATIC);
	ret = sq_step_done(m, s);
	sqlite3_finalize(s);
	return ret;
}

int sq_tenant_evictions(struct meta *mb, meta_evictions_fn fn, void *ctx)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s;
	int rc, ret = 0;

	/* The prefix as a key range ('/' follows '.'): the primary key's order. */
	rc = sqlite3_prepare_v2(m->db,
				"SELECT k, v FROM store WHERE k >= '" TEV_PREFIX "' "
				"AND k < 'tenant_evictions/' ORDER BY k",
				-1, &s, NULL);
	if (rc != SQLITE_OK)
		return sq_errno(rc);
	while (!ret && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *k = (const char *)sqlite3_column_text(s, 0);
		const char *v = (const char *)sqlite3_column_text(s, 1);
		uint64_t tenant, count, bytes;
		char *end;

		if (!k || !v)
			continue;
		tenant = strtoull(k + strlen(TEV_PREFIX), &end, 10);
		if (*end || sscanf(v, "%" SCNu64 " %" SCNu64, &count, &bytes) != 2)
			continue; /* not ours: left alone */
		ret = fn(ctx, tenant, count, bytes);
	}
	if (!ret && rc != SQLITE_DONE)
		ret = sq_errno(rc);
	sqlite3_finalize(s);
	return ret;
}
