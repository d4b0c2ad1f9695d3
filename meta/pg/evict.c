/*
 * evict.c: what eviction asks of the metadata: objects in order of last
 * use, a batch of atimes written at once, the pinned count, and the
 * per-tenant eviction counts.  Rare statements, run as text.
 */
#include "pg_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pq_lru(struct meta *mb, int64_t after_atime, uint64_t after_ino, int64_t before,
	   unsigned limit, meta_ino_fn fn, void *ctx)
{
	struct pq_params p = { 0 };
	PGresult *r;
	int ret;

	pq_int(&p, after_atime);
	pq_int(&p, (int64_t)after_ino);
	pq_int(&p, limit);
	pq_int(&p, before);
	/* As sqlite's: the young are left out here (atime, mtime, ctime before $4). */
	r = pq_query(pq(mb),
		     "SELECT " PQ_INODE_COLS " FROM " PQ_SCHEMA ".inodes WHERE parent IS NOT NULL "
		     "AND state = 0 AND (mode & 61440) = 32768 AND (atime, ino) > ($1::bigint, "
		     "$2::bigint) AND atime < $4::bigint AND mtime < $4::bigint "
		     "AND ctime < $4::bigint ORDER BY atime, ino LIMIT $3::bigint",
		     &p, &ret);
	if (!r)
		return ret;
	ret = pq_each_inode(r, 0, fn, ctx);
	PQclear(r);
	return ret;
}

/* A text array of n integers, "{1,2,3}", for one statement's unnest. */
static char *pq_array(const void *v, size_t n, int is_signed)
{
	size_t i, cap = 2 + n * 21, pos = 0;
	char *s = malloc(cap + 1);

	if (!s)
		return NULL;
	s[pos++] = '{';
	for (i = 0; i < n; i++)
		pos += (size_t)snprintf(s + pos, cap - pos, "%s%" PRId64, i ? "," : "",
					is_signed ? ((const int64_t *)v)[i]
						  : (int64_t)((const uint64_t *)v)[i]);
	snprintf(s + pos, cap + 1 - pos, "}");
	return s;
}

int pq_set_atimes(struct meta *mb, const uint64_t *inos, const int64_t *atimes, size_t n)
{
	struct pq_params p = { 0 };
	char *a, *b;
	PGresult *r;
	int ret;

	if (n == 0)
		return 0;
	a = pq_array(inos, n, 0);
	b = pq_array(atimes, n, 1);
	if (!a || !b) {
		free(a);
		free(b);
		return -ENOMEM;
	}
	/* One statement for the batch: text arrays (format 0). */
	p.n = 2;
	p.val[0] = a;
	p.val[1] = b;
	r = pq_query(pq(mb),
		     "UPDATE " PQ_SCHEMA ".inodes SET atime = u.a FROM unnest($1::bigint[], "
		     "$2::bigint[]) AS u(i, a) WHERE ino = u.i",
		     &p, &ret);
	PQclear(r);
	free(a);
	free(b);
	return ret;
}

static int pq_count_of(struct meta *mb, const char *sql, struct pq_params *p, uint64_t *n)
{
	int ret;
	PGresult *r = pq_query(pq(mb), sql, p, &ret);

	*n = 0;
	if (!r)
		return ret;
	*n = (uint64_t)pq_get_int(r, 0, 0);
	PQclear(r);
	return 0;
}

int pq_xattr_count(struct meta *mb, const char *name, uint64_t *n)
{
	struct pq_params p = { 0 };

	pq_text(&p, name);
	return pq_count_of(mb, "SELECT count(*) FROM " PQ_SCHEMA ".xattrs WHERE name = $1::bytea",
			   &p, n);
}

int pq_tenant_pages(struct meta *mb, uint64_t tenant, uint64_t *pages)
{
	struct pq_params p = { 0 };

	pq_int(&p, (int64_t)tenant);
	return pq_count_of(mb,
			   "WITH RECURSIVE sub(ino) AS (SELECT $1::bigint UNION ALL "
			   "SELECT i.ino FROM " PQ_SCHEMA ".inodes i JOIN sub ON i.parent = sub.ino) "
			   "SELECT coalesce(sum(npages), 0)::bigint FROM " PQ_SCHEMA ".inodes "
			   "WHERE ino IN (SELECT ino FROM sub) AND (mode & 61440) = 32768",
			   &p, pages);
}

int pq_tenant_xattrs(struct meta *mb, const char *name, meta_tenant_fn fn, void *ctx)
{
	struct pq_params p = { 0 };
	PGresult *r;
	int i, ret;

	pq_text(&p, name);
	pq_int(&p, META_ROOT_INO);
	r = pq_query(pq(mb),
		     "SELECT i.ino, i.name, x.value FROM " PQ_SCHEMA ".xattrs x JOIN " PQ_SCHEMA
		     ".inodes i ON i.ino = x.ino WHERE x.name = $1::bytea AND i.parent = $2::bigint "
		     "ORDER BY i.ino",
		     &p, &ret);
	if (!r)
		return ret;
	for (i = 0; i < PQntuples(r) && !ret; i++) {
		size_t nl, vl;
		const char *n = pq_get_blob(r, i, 1, &nl), *v = pq_get_blob(r, i, 2, &vl);

		ret = fn(ctx, (uint64_t)pq_get_int(r, i, 0), n ? n : "", nl, v ? v : "", vl);
	}
	PQclear(r);
	return ret;
}

/* The counts live in the store table, one row per tenant, as in the sqlite engine. */
#define TEV_PREFIX "tenant_evictions."

int pq_tenant_evictions_set(struct meta *mb, uint64_t tenant, uint64_t count, uint64_t bytes)
{
	char k[64], v[64];

	snprintf(k, sizeof(k), TEV_PREFIX "%" PRIu64, tenant);
	snprintf(v, sizeof(v), "%" PRIu64 " %" PRIu64, count, bytes);
	return pq_kv_set_text(pq(mb), k, v);
}

int pq_tenant_evictions_drop(struct meta *mb, uint64_t tenant)
{
	struct pq_params p = { 0 };
	char k[64];
	PGresult *r;
	int ret;

	snprintf(k, sizeof(k), TEV_PREFIX "%" PRIu64, tenant);
	pq_text(&p, k);
	r = pq_query(pq(mb), "DELETE FROM " PQ_SCHEMA ".store WHERE k = $1::text", &p, &ret);
	PQclear(r);
	return ret;
}

int pq_tenant_evictions(struct meta *mb, meta_evictions_fn fn, void *ctx)
{
	struct pq_params p = { 0 };
	PGresult *r;
	int i, ret;

	/* The prefix as a key range ('/' follows '.'): k is in the "C" collation. */
	r = pq_query(pq(mb),
		     "SELECT k, v FROM " PQ_SCHEMA ".store WHERE k >= '" TEV_PREFIX "' "
		     "AND k < 'tenant_evictions/' ORDER BY k",
		     &p, &ret);
	if (!r)
		return ret;
	for (i = 0; i < PQntuples(r) && !ret; i++) {
		char k[128], v[128], *end;
		uint64_t tenant, count, bytes;
		size_t kl, vl;
		const char *kp = pq_get_blob(r, i, 0, &kl), *vp = pq_get_blob(r, i, 1, &vl);

		if (!kp || !vp)
			continue;
		snprintf(k, sizeof(k), "%.*s", (int)kl, kp);
		snprintf(v, sizeof(v), "%.*s", (int)vl, vp);
		tenant = strtoull(k + strlen(TEV_PREFIX), &end, 10);
		if (*end || sscanf(v, "%" SCNu64 " %" SCNu64, &count, &bytes) != 2)
			continue; /* not ours: left alone */
		ret = fn(ctx, tenant, count, bytes);
	}
	PQclear(r);
	return ret;
}
