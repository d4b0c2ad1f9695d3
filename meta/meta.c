/*
 * meta.c: the interface of meta.h over the engines of engine.h: meta_open
 * chooses one by the value it is given, and every other function is a
 * wrapper that calls the store's engine, or what all engines share (the
 * write count and fault injection, the full-disk hook, building a path
 * from names).
 */
#include "engine.h"
#include "meta_test.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* A libpq connection URI names a PostgreSQL store; anything else is a sqlite path. */
static int meta_is_uri(const char *target)
{
	return !strncmp(target, "postgresql://", 13) || !strncmp(target, "postgres://", 11);
}

/*
 * Every method of the table is set but the two engine.h lets an engine
 * leave NULL: a method added to the table and missed by an engine would
 * otherwise crash at its first call, far from the cause.  The methods are
 * all function pointers after .engine, so the table is walked as an array.
 */
static void meta_ops_check(const struct meta_ops *o)
{
	typedef int (*method)(void);
	size_t off;

	_Static_assert((sizeof(*o) - offsetof(struct meta_ops, open)) % sizeof(method) == 0,
		       "the table after .engine is methods only");
	for (off = offsetof(struct meta_ops, open); off < sizeof(*o); off += sizeof(method)) {
		method f;

		if (off == offsetof(struct meta_ops, log_prefetch) ||
		    off == offsetof(struct meta_ops, log_failed))
			continue;
		memcpy(&f, (const char *)o + off, sizeof(f));
		assert(f != NULL && "a method of the engine's table is NULL (engine.h)");
	}
}

int meta_open(const char *target, int create, struct meta **out, char *err, size_t errlen)
{
	const struct meta_ops *o = meta_is_uri(target) ? &meta_pg_ops : &meta_sqlite_ops;

	meta_ops_check(o);
	*out = NULL;
	return o->open(target, create, out, err, errlen);
}

int meta_is_remote(const char *target)
{
	return target && meta_is_uri(target);
}

void meta_target_show(const char *target, char *buf, size_t len)
{
	const char *p = target, *auth, *end, *at, *colon;
	size_t n = 0;

	if (!len)
		return;
	buf[0] = '\0';
#define PUT(s, l) do { size_t l_ = (l); if (n + l_ >= len) l_ = len - 1 - n; \
		memcpy(buf + n, (s), l_); n += l_; buf[n] = '\0'; } while (0)
	if (!meta_is_uri(target)) {
		PUT(target, strlen(target));
		return;
	}
	/* scheme://[user[:password]@]host/db?params: the password left out of both places. */
	auth = strstr(p, "://") + 3;
	PUT(p, (size_t)(auth - p));
	end = auth + strcspn(auth, "/?");
	at = memrchr(auth, '@', (size_t)(end - auth));
	if (at) {
		colon = memchr(auth, ':', (size_t)(at - auth));
		PUT(auth, (size_t)((colon ? colon : at) - auth));
		auth = at;
	}
	p = auth;
	end = p + strcspn(p, "?");
	PUT(p, (size_t)(end - p));
	if (!*end)
		return;
	p = end + 1;
	{
		int first = 1;

		while (*p) {
			size_t l = strcspn(p, "&");

			if (strncmp(p, "password=", 9) != 0) {
				PUT(first ? "?" : "&", 1);
				PUT(p, l);
				first = 0;
			}
			p += l + (p[l] == '&');
		}
	}
#undef PUT
}

int meta_fault(struct meta *m)
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

void meta_inject_fault(struct meta *m, unsigned long nth_write)
{
	m->fault_at = nth_write;
	m->writes = 0;
}

uint64_t meta_changes(struct meta *m)
{
	return m->changes;
}

void meta_set_full_hook(struct meta *m, int (*hook)(void *), void *arg)
{
	m->full_hook = hook;
	m->full_arg = arg;
}

void meta_set_timeout(struct meta *m, unsigned seconds)
{
	m->timeout_ms = seconds * 1000U;
}

unsigned meta_timeout_ms(const struct meta *m)
{
	return m->timeout_ms ? m->timeout_ms : META_TIMEOUT_DEFAULT * 1000U;
}

static __thread int meta_nowait;

void meta_thread_nowait(int on)
{
	meta_nowait = on;
}

int meta_thread_waits(void)
{
	return !meta_nowait;
}

void meta_set_log(struct meta *m, void (*log)(const char *fmt, ...))
{
	m->log = log;
}

void meta_log(struct meta *m, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (m->log)
		m->log("%s", line);
	else
		fprintf(stderr, "offloadfs: %s\n", line);
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

/* ---- the engine's own: each through its table ---- */

void meta_close(struct meta *m)
{
	if (m)
		m->ops->close(m);
}

int meta_forked(struct meta *m)
{
	return m->ops->forked(m);
}

const char *meta_errmsg(struct meta *m)
{
	return m ? m->ops->errmsg(m) : "no database";
}

int meta_format(struct meta *m, const struct meta_geom *g, const char *backend, uint32_t root_mode,
		uint32_t uid, uint32_t gid)
{
	return m->ops->format(m, g, backend, root_mode, uid, gid);
}

int meta_geom_get(struct meta *m, struct meta_geom *g, char *backend, size_t blen)
{
	return m->ops->geom_get(m, g, backend, blen);
}

int meta_setting_get(struct meta *m, const char *name, char *buf, size_t len)
{
	return m->ops->setting_get(m, name, buf, len);
}

int meta_setting_set(struct meta *m, const char *name, const char *value)
{
	return m->ops->setting_set(m, name, value);
}

int meta_begin(struct meta *m)
{
	return m->ops->begin(m);
}

int meta_commit(struct meta *m)
{
	return m->ops->commit(m);
}

void meta_rollback(struct meta *m)
{
	m->ops->rollback(m);
}

int meta_read_begin(struct meta *m)
{
	return m->ops->read_begin(m);
}

void meta_read_end(struct meta *m)
{
	m->ops->read_end(m);
}

int meta_sync(struct meta *m, uint64_t synced_gen)
{
	return m->ops->sync(m, synced_gen);
}

int meta_sync_begin(struct meta *m, uint64_t synced_gen)
{
	return m->ops->sync_begin(m, synced_gen);
}

int meta_sync_end(struct meta *m)
{
	return m->ops->sync_end(m);
}

void meta_log_prefetch(struct meta *m)
{
	if (m->ops->log_prefetch)
		m->ops->log_prefetch(m);
}

int meta_log_failed(struct meta *m)
{
	return m->ops->log_failed ? m->ops->log_failed(m) : 0;
}

int meta_synced_gen(struct meta *m, uint64_t *gen)
{
	return m->ops->synced_gen(m, gen);
}

int meta_checkpoint(struct meta *m)
{
	return m->ops->checkpoint(m);
}

int meta_make_room(struct meta *m)
{
	return m->ops->make_room(m);
}

int meta_get(struct meta *m, uint64_t ino, struct meta_inode *out)
{
	return m->ops->get(m, ino, out);
}

int meta_lookup(struct meta *m, uint64_t parent, const char *name, size_t len,
		struct meta_inode *out)
{
	return m->ops->lookup(m, parent, name, len, out);
}

int meta_lookup_brief(struct meta *m, uint64_t parent, const char *name, size_t len,
		      struct meta_inode *out)
{
	return m->ops->lookup_brief(m, parent, name, len, out);
}

int meta_insert(struct meta *m, struct meta_inode *in, const char *name, size_t len)
{
	return m->ops->insert(m, in, name, len);
}

int meta_move(struct meta *m, uint64_t ino, uint64_t newparent, const char *name, size_t len)
{
	return m->ops->move(m, ino, newparent, name, len);
}

int meta_detach(struct meta *m, uint64_t ino)
{
	return m->ops->detach(m, ino);
}

int meta_delete(struct meta *m, uint64_t ino)
{
	return m->ops->delete(m, ino);
}

int meta_dir_changed(struct meta *m, uint64_t dir, int64_t now, uint32_t *nlink)
{
	return m->ops->dir_changed(m, dir, now, nlink);
}

int meta_has_children(struct meta *m, uint64_t dir)
{
	return m->ops->has_children(m, dir);
}

int meta_readdir(struct meta *m, uint64_t dir, uint64_t after, meta_dirent_fn fn, void *ctx)
{
	return m->ops->readdir(m, dir, after, fn, ctx);
}

int meta_name(struct meta *m, uint64_t ino, uint64_t *parent, char *name, size_t *len)
{
	return m->ops->name(m, ino, parent, name, len);
}

int meta_key_len(struct meta *m, uint64_t ino, size_t *len)
{
	return m->ops->key_len(m, ino, len);
}

int meta_subtree_depth(struct meta *m, uint64_t dir, size_t *len)
{
	return m->ops->subtree_depth(m, dir, len);
}

ssize_t meta_xattr_get(struct meta *m, uint64_t ino, const char *name, void *buf, size_t cap)
{
	return m->ops->xattr_get(m, ino, name, buf, cap);
}

int meta_xattr_set(struct meta *m, uint64_t ino, const char *name, const void *value, size_t len,
		   int flags)
{
	return m->ops->xattr_set(m, ino, name, value, len, flags);
}

int meta_xattr_remove(struct meta *m, uint64_t ino, const char *name)
{
	return m->ops->xattr_remove(m, ino, name);
}

ssize_t meta_xattr_list(struct meta *m, uint64_t ino, char *buf, size_t cap)
{
	return m->ops->xattr_list(m, ino, buf, cap);
}

int meta_update(struct meta *m, const struct meta_inode *in)
{
	return m->ops->update(m, in);
}

int meta_commit_object(struct meta *m, const struct meta_inode *in, const uint64_t *pcsums,
		       uint64_t n, const char *skey, enum meta_skey_op op)
{
	return m->ops->commit_object(m, in, pcsums, n, skey, op);
}

int meta_insert_object(struct meta *m, struct meta_inode *in, const char *name, size_t len,
		       const uint64_t *pcsums, uint64_t n)
{
	return m->ops->insert_object(m, in, name, len, pcsums, n);
}

int meta_pcsums_get(struct meta *m, uint64_t ino, uint64_t *pcsums, uint64_t n)
{
	return m->ops->pcsums_get(m, ino, pcsums, n);
}

int meta_foreach_mapping(struct meta *m, meta_ino_fn fn, void *ctx)
{
	return m->ops->foreach_mapping(m, fn, ctx);
}

int meta_count_mappings(struct meta *m, uint64_t *n)
{
	return m->ops->count_mappings(m, n);
}

int meta_foreach_value(struct meta *m, meta_value_fn fn, void *ctx)
{
	return m->ops->foreach_value(m, fn, ctx);
}

int meta_count_files(struct meta *m, uint64_t *n)
{
	return m->ops->count_files(m, n);
}

int meta_integrity(struct meta *m, char *first, size_t firstlen)
{
	return m->ops->integrity(m, first, firstlen);
}

int meta_extent_commit(struct meta *m, const struct meta_inode *e, const uint64_t *pcsums,
		       uint64_t n, const char *skey, enum meta_skey_op op)
{
	return m->ops->extent_commit(m, e, pcsums, n, skey, op);
}

int meta_extent_delete(struct meta *m, uint64_t ino, uint64_t idx)
{
	return m->ops->extent_delete(m, ino, idx);
}

int meta_extents(struct meta *m, uint64_t ino, meta_ino_fn fn, void *ctx)
{
	return m->ops->extents(m, ino, fn, ctx);
}

int meta_extent_from_row(struct meta *m, uint64_t ino)
{
	return m->ops->extent_from_row(m, ino);
}

int meta_extent_to_row(struct meta *m, uint64_t ino)
{
	return m->ops->extent_to_row(m, ino);
}

int meta_extents_stray(struct meta *m, int drop, uint64_t *n)
{
	return m->ops->extents_stray(m, drop, n);
}

int meta_extent_pcsums_get(struct meta *m, uint64_t ino, uint64_t idx, uint64_t *pcsums,
			   uint64_t n)
{
	return m->ops->extent_pcsums_get(m, ino, idx, pcsums, n);
}

int meta_count_unsettled(struct meta *m, uint64_t *new_files, uint64_t *orphans)
{
	return m->ops->count_unsettled(m, new_files, orphans);
}

int meta_recover(struct meta *m, uint64_t *dropped_new, uint64_t *dropped_orphans)
{
	return m->ops->recover(m, dropped_new, dropped_orphans);
}

int meta_foreach_unsynced(struct meta *m, uint64_t gen, meta_ino_fn fn, void *ctx)
{
	return m->ops->foreach_unsynced(m, gen, fn, ctx);
}

int meta_prev_clear(struct meta *m)
{
	return m->ops->prev_clear(m);
}

int meta_clean_get(struct meta *m, int *clean)
{
	return m->ops->clean_get(m, clean);
}

int meta_clean_set(struct meta *m, int clean)
{
	return m->ops->clean_set(m, clean);
}

int meta_bitmap_save(struct meta *m, uint32_t bucket, uint64_t npages, const uint64_t *words,
		     uint64_t nwords)
{
	return m->ops->bitmap_save(m, bucket, npages, words, nwords);
}

int meta_bitmap_load(struct meta *m, uint32_t bucket, uint64_t npages, uint64_t *words,
		     uint64_t nwords)
{
	return m->ops->bitmap_load(m, bucket, npages, words, nwords);
}

int meta_bitmap_clear(struct meta *m)
{
	return m->ops->bitmap_clear(m);
}

int meta_task_add(struct meta *m, struct meta_task *t)
{
	return m->ops->task_add(m, t);
}

int meta_task_claim(struct meta *m, struct meta_task *t)
{
	return m->ops->task_claim(m, t);
}

int meta_task_finish(struct meta *m, uint64_t id, int state, const char *error)
{
	return m->ops->task_finish(m, id, state, error);
}

int meta_task_pending(struct meta *m, uint64_t ino)
{
	return m->ops->task_pending(m, ino);
}

int meta_task_requeue(struct meta *m, uint64_t *n)
{
	return m->ops->task_requeue(m, n);
}

int meta_task_count(struct meta *m, int state, uint64_t *n)
{
	return m->ops->task_count(m, state, n);
}

int meta_task_prune(struct meta *m, uint64_t keep)
{
	return m->ops->task_prune(m, keep);
}

int meta_lru(struct meta *m, int64_t after_atime, uint64_t after_ino, int64_t before,
	     unsigned limit, meta_ino_fn fn, void *ctx)
{
	return m->ops->lru(m, after_atime, after_ino, before, limit, fn, ctx);
}

int meta_set_atimes(struct meta *m, const uint64_t *inos, const int64_t *atimes, size_t n)
{
	return m->ops->set_atimes(m, inos, atimes, n);
}

int meta_xattr_count(struct meta *m, const char *name, uint64_t *n)
{
	return m->ops->xattr_count(m, name, n);
}

int meta_tenant_pages(struct meta *m, uint64_t tenant, uint64_t *pages)
{
	return m->ops->tenant_pages(m, tenant, pages);
}

int meta_tenant_xattrs(struct meta *m, const char *name, meta_tenant_fn fn, void *ctx)
{
	return m->ops->tenant_xattrs(m, name, fn, ctx);
}

int meta_tenant_evictions_set(struct meta *m, uint64_t tenant, uint64_t count, uint64_t bytes)
{
	return m->ops->tenant_evictions_set(m, tenant, count, bytes);
}

int meta_tenant_evictions_drop(struct meta *m, uint64_t tenant)
{
	return m->ops->tenant_evictions_drop(m, tenant);
}

int meta_tenant_evictions(struct meta *m, meta_evictions_fn fn, void *ctx)
{
	return m->ops->tenant_evictions(m, fn, ctx);
}
