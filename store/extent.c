/*
 * extent.c: files larger than one extent (extent.h): their extents in
 * memory, a writer's working state per extent, reads across extents and
 * holes, the commit of the extents that changed, removal.
 */
#include "extent.h"
#include "store_int.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the extents in memory ---- */

static size_t ext_pos(const struct ofs_extents *x, uint64_t idx)
{
	size_t lo = 0, hi = x->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (x->v[mid].idx < idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct ofs_ext *ext_find(struct ofs_extents *x, uint64_t idx)
{
	size_t i = ext_pos(x, idx);

	return i < x->n && x->v[i].idx == idx ? &x->v[i] : NULL;
}

/* Extent idx, made (no version, no working state) when missing; NULL: no memory. */
static struct ofs_ext *ext_get(struct ofs_extents *x, uint64_t idx)
{
	size_t i = ext_pos(x, idx);

	if (i < x->n && x->v[i].idx == idx)
		return &x->v[i];
	if (x->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 8;
		struct ofs_ext *v = realloc(x->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		x->v = v;
		x->cap = cap;
	}
	memmove(&x->v[i + 1], &x->v[i], (x->n - i) * sizeof(*x->v));
	x->n++;
	memset(&x->v[i], 0, sizeof(x->v[i]));
	x->v[i].idx = idx;
	x->v[i].v.ino = x->ino;
	x->v[i].v.bucket = -1;
	x->v[i].v.prev_bucket = -1;
	x->v[i].v.ext = idx + 1;
	return &x->v[i];
}

static struct kvb_map ext_committed(const struct ofs_ext *e)
{
	if (!e->has)
		return KVB_MAP_EMPTY;
	return (struct kvb_map){ .bucket = e->v.bucket, .page = e->v.page, .npages = e->v.npages,
				 .size = e->v.size };
}

void ofs_extents_free(struct ofs_extents *x)
{
	size_t i;

	if (!x)
		return;
	for (i = 0; i < x->n; i++)
		free(x->v[i].pcs);
	free(x->v);
	free(x);
}

static int ext_collect(void *ctx, const struct meta_inode *in)
{
	struct ofs_extents *x = ctx;
	struct ofs_ext *e = ext_get(x, in->ext - 1);

	if (!e)
		return -ENOMEM;
	e->v = *in;
	e->has = 1;
	return 0;
}

int ofs_extents_load(struct ofs_store *s, struct ofs_object *o)
{
	struct ofs_extents *x;
	int ret = 0;

	if (o->x || o->m.bucket != META_EXTENTS)
		return 0;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->ino = o->m.ino;
	pthread_mutex_lock(&s->lock);
	/* Readers load under the shared stripe: the first one's is kept. */
	if (!o->x) {
		ret = meta_extents(s->meta, o->m.ino, ext_collect, x);
		x->wsize = o->m.size;
		if (!ret) {
			o->x = x;
			x = NULL;
		}
	}
	pthread_mutex_unlock(&s->lock);
	ofs_extents_free(x);
	return ret;
}

/* ---- working states ---- */

/* The object's key as kvb_obj_open takes it (every extent of a file has its file's). */
static int ext_key(struct ofs_store *s, struct ofs_object *o, char *key, size_t *klen)
{
	int ret;

	pthread_mutex_lock(&s->lock);
	ret = meta_path(s->meta, o->m.ino, 1, key, OFS_KEY_MAX, klen, NULL);
	pthread_mutex_unlock(&s->lock);
	if (ret == -ENOENT) {
		*klen = 0;
		ret = 0;
	}
	return ret;
}

/* Extent idx's working state, opened from its committed version when it has none yet. */
static int ext_obj(struct ofs_store *s, struct ofs_object *o, uint64_t idx, struct kvb_obj **out)
{
	char key[OFS_KEY_MAX];
	struct ofs_ext *e = ext_get(o->x, idx);
	struct kvb_map c;
	size_t klen = 0;
	int ret;

	if (!e)
		return -ENOMEM;
	if (!e->obj) {
		c = ext_committed(e);
		ret = ext_key(s, o, key, &klen);
		if (!ret)
			ret = kvb_obj_open(&s->kvb, &c, key, klen, &e->obj);
		if (ret)
			return ret;
	}
	*out = e->obj;
	return 0;
}

int ofs_extents_open(struct ofs_store *s, struct ofs_object *o, const char *key, size_t klen)
{
	struct ofs_ext *e;
	struct kvb_map c;
	int ret = ofs_extents_load(s, o);

	if (ret)
		return ret;
	e = ext_get(o->x, 0);
	if (!e)
		return -ENOMEM;
	c = ext_committed(e);
	ret = kvb_obj_open(&s->kvb, &c, key, klen, &e->obj);
	if (ret)
		return ret;
	o->x->wsize = o->m.size;
	o->x->resized = 0;
	pthread_mutex_lock(&s->lock);
	o->obj = e->obj;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void ofs_extents_close(struct ofs_store *s, struct ofs_object *o)
{
	struct ofs_extents *x = o->x;
	size_t i, j = 0;

	if (!x)
		return;
	for (i = 0; i < x->n; i++) {
		struct ofs_ext *e = &x->v[i];

		if (e->obj && e->idx != 0)
			kvb_obj_close(&s->kvb, e->obj);
		e->obj = NULL;
		e->reserved = 0;
		/* What has no committed version goes with the working state. */
		if (e->has)
			x->v[j++] = *e;
		else
			free(e->pcs);
	}
	x->n = j;
	x->wsize = o->m.size;
	x->resized = 0;
	/* A file that is one run again (or never was more) keeps no extents. */
	if (o->m.bucket != META_EXTENTS) {
		pthread_mutex_lock(&s->lock);
		o->x = NULL;
		pthread_mutex_unlock(&s->lock);
		ofs_extents_free(x);
	}
}

int ofs_extents_convert(struct ofs_store *s, struct ofs_object *o)
{
	struct ofs_extents *x;
	struct ofs_ext *e;
	struct kvb_map view;

	if (o->x)
		return 0;
	assert(o->obj && o->m.bucket != META_EXTENTS);
	x = calloc(1, sizeof(*x));
	if (x)
		x->ino = o->m.ino;
	e = x ? ext_get(x, 0) : NULL;
	if (!e) {
		free(x);
		return -ENOMEM;
	}
	/* Extent 0's committed version is the record's own. */
	e->has = o->m.bucket >= 0;
	e->v.ino = o->m.ino;
	e->v.bucket = o->m.bucket;
	e->v.page = o->m.page;
	e->v.npages = o->m.npages;
	e->v.size = o->m.size;
	e->v.csum = o->m.csum;
	e->v.gen = o->m.gen;
	e->v.prev_bucket = o->m.prev_bucket;
	e->v.prev_page = o->m.prev_page;
	e->v.prev_npages = o->m.prev_npages;
	e->v.prev_size = o->m.prev_size;
	e->v.prev_csum = o->m.prev_csum;
	e->v.ext = 1;
	e->obj = o->obj;
	kvb_obj_view(&s->kvb, o->obj, &view);
	x->wsize = view.size;
	x->from_row = 1;
	pthread_mutex_lock(&s->lock);
	o->x = x;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* ---- writing ---- */

/*
 * A backend that holds a working state's bytes in memory until the commit
 * (ubsio's buffers, bounded by kv_buffer_max) stages them before it
 * (kvb_obj_stage).  An extent that a write in order fills to its end is
 * staged at once: a file written in order holds one extent in memory.
 * When the bound is reached, the file's other extents are (an unchanged
 * one's copy of its committed bytes is let go), and the write that found
 * it is tried again.  Returns whether there was any.
 */
static int ext_stage_others(struct ofs_store *s, struct ofs_object *o, const struct kvb_obj *busy)
{
	size_t i;
	int n = 0;

	for (i = 0; i < o->x->n; i++) {
		struct kvb_obj *obj = o->x->v[i].obj;

		if (obj && obj != busy) {
			(void)kvb_obj_stage(&s->kvb, obj);
			n++;
		}
	}
	return n;
}

ssize_t ofs_extents_write(struct ofs_store *s, struct ofs_object *o, const void *buf, size_t len,
			  uint64_t off)
{
	uint64_t es = s->esize;
	size_t done = 0;

	while (done < len) {
		uint64_t at = off + done, idx = at / es, rel = at - idx * es;
		size_t n = len - done < es - rel ? len - done : (size_t)(es - rel);
		struct kvb_obj *obj;
		struct kvb_map view;
		struct ofs_ext *e;
		ssize_t w;
		int ret = ext_obj(s, o, idx, &obj);

		if (ret)
			return done ? (ssize_t)done : ret;
		/*
		 * The first write past an extent's end in this working state
		 * reserves the extent whole (as far as the file reaches): writes
		 * at scattered offsets of a pool then grow it in place, rather
		 * than moving it to a larger run at each.  The commit keeps
		 * only the pages its size needs.  No room for that: it grows as
		 * a one-run file does.
		 */
		e = ext_find(o->x, idx);
		kvb_obj_view(&s->kvb, obj, &view);
		if (!e->reserved && rel + n > view.size && kvb_has_reserve(&s->kvb)) {
			uint64_t reach = o->x->wsize > off + len ? o->x->wsize : off + len;
			uint64_t want = reach - idx * es < es ? reach - idx * es : es;

			e->reserved = 1;
			(void)kvb_obj_reserve(&s->kvb, obj, want);
		}
		w = kvb_obj_write(&s->kvb, obj, (const char *)buf + done, n, rel);
		if (w == -ENOMEM && kvb_has_stage(&s->kvb) && ext_stage_others(s, o, obj))
			w = kvb_obj_write(&s->kvb, obj, (const char *)buf + done, n, rel);
		if (w < 0)
			return w;
		if (rel + (uint64_t)w == es && off == o->x->wnext && kvb_has_stage(&s->kvb))
			(void)kvb_obj_stage(&s->kvb, obj); /* a failure keeps the bytes in memory */
		done += (size_t)w;
		if (o->x->wsize < off + done) {
			o->x->wsize = off + done;
			o->x->resized = 1;
		}
		if ((size_t)w < n)
			break;
	}
	o->x->wnext = off + done;
	return (ssize_t)done;
}

int ofs_extents_truncate(struct ofs_store *s, struct ofs_object *o, uint64_t size)
{
	struct ofs_extents *x = o->x;
	uint64_t es = s->esize;
	size_t i;
	int ret = 0;

	/* Shrinking: the extents past the end emptied, the last one cut. */
	for (i = 0; !ret && i < x->n; i++) {
		struct ofs_ext *e = &x->v[i];
		uint64_t start = e->idx * es, keep = size > start ? size - start : 0;
		struct kvb_obj *obj = e->obj;
		struct kvb_map view;

		if (keep >= es)
			continue;
		if (!obj && !e->has)
			continue;
		if (!obj && (ret = ext_obj(s, o, e->idx, &obj)))
			break;
		e = &x->v[i]; /* ext_obj may have moved the array */
		kvb_obj_view(&s->kvb, obj, &view);
		if (view.size > keep)
			ret = kvb_obj_truncate(&s->kvb, obj, keep);
	}
	if (!ret && x->wsize != size) {
		/* Growing costs nothing: the bytes past every extent are zeros. */
		x->wsize = size;
		x->resized = 1;
	}
	return ret;
}

int ofs_extents_reserve(struct ofs_store *s, struct ofs_object *o, uint64_t off, uint64_t end,
			int keep)
{
	uint64_t es = s->esize, idx;
	int ret = 0;

	if (!keep && end > o->x->wsize)
		ret = ofs_extents_truncate(s, o, end);
	for (idx = off / es; !ret && idx * es < end; idx++) {
		uint64_t start = idx * es, want = end - start < es ? end - start : es;
		uint64_t size_in = o->x->wsize > start ? o->x->wsize - start : 0;
		struct kvb_obj *obj;
		struct kvb_map view;

		ret = ext_obj(s, o, idx, &obj);
		if (ret)
			break;
		kvb_obj_view(&s->kvb, obj, &view);
		/* Below the file's size the zeros are content: the extent grows to hold them. */
		if (size_in > view.size) {
			uint64_t grow = want < size_in ? want : size_in;

			if (grow > view.size)
				ret = kvb_obj_truncate(&s->kvb, obj, grow);
			if (ret == -ENOMEM && kvb_has_stage(&s->kvb) && ext_stage_others(s, o, obj))
				ret = kvb_obj_truncate(&s->kvb, obj, grow);
		}
		if (!ret && want > size_in && kvb_has_reserve(&s->kvb))
			ret = kvb_obj_reserve(&s->kvb, obj, want);
	}
	return ret;
}

int ofs_extents_punch(struct ofs_store *s, struct ofs_object *o, uint64_t off, uint64_t end)
{
	uint64_t es = s->esize, idx;
	int ret = 0;

	for (idx = (off + es - 1) / es; !ret && (idx + 1) * es <= end; idx++) {
		struct ofs_ext *e = ext_find(o->x, idx);
		struct kvb_obj *obj;

		if (!e || (!e->obj && !e->has))
			continue; /* a hole already */
		ret = ext_obj(s, o, idx, &obj);
		if (!ret)
			ret = kvb_obj_truncate(&s->kvb, obj, 0);
	}
	return ret;
}

void ofs_extents_view(struct ofs_store *s, struct ofs_object *o, uint64_t *size,
		      uint64_t *npages)
{
	struct ofs_extents *x = o->x;
	uint64_t n = 0;
	size_t i;

	for (i = 0; i < x->n; i++) {
		struct kvb_map view;

		if (x->v[i].obj)
			kvb_obj_view(&s->kvb, x->v[i].obj, &view);
		else
			view = ext_committed(&x->v[i]);
		if (view.bucket >= 0)
			n += view.npages;
	}
	*size = o->obj ? x->wsize : o->m.size;
	*npages = n;
}

int ofs_extents_dirty(struct ofs_store *s, struct ofs_object *o)
{
	struct ofs_extents *x = o->x;
	size_t i;

	if (x->resized || x->from_row)
		return 1;
	for (i = 0; i < x->n; i++)
		if (x->v[i].obj && kvb_obj_dirty(&s->kvb, x->v[i].obj))
			return 1;
	return 0;
}

/* ---- the commit ---- */

struct ext_prep {
	size_t i;                /* in x->v */
	struct kvb_map map;
	uint64_t csum;
	const uint64_t *pcs;
	struct meta_inode v;     /* the version recorded */
	int done;                /* commit_prepare succeeded: commit_done owed */
};

/* The record of extent e's new version map (gen now), keeping the durable one. */
static void ext_version(struct ofs_store *s, const struct ofs_ext *e, const struct kvb_map *map,
			uint64_t csum, struct meta_inode *v, enum meta_skey_op *op)
{
	*v = e->v;
	*op = META_SKEY_SET;
	if (e->has && e->v.gen <= s->synced_gen) {
		*op = META_SKEY_KEEP_PREV;
		v->prev_bucket = e->v.bucket;
		v->prev_page = e->v.page;
		v->prev_npages = e->v.npages;
		v->prev_size = e->v.size;
		v->prev_csum = e->v.csum;
	} else if (!e->has) {
		v->prev_bucket = -1;
	}
	v->bucket = map->bucket;
	v->page = map->page;
	v->npages = map->npages;
	v->size = map->size;
	v->csum = csum;
	v->gen = s->gen;
}

/* What extent e will hold after the commit: its working view, else its committed version. */
static struct kvb_map ext_after(struct ofs_store *s, const struct ofs_ext *e)
{
	struct kvb_map view;

	if (!e->obj)
		return ext_committed(e);
	kvb_obj_view(&s->kvb, e->obj, &view);
	return view;
}

/*
 * Whether the file is one run after this commit: nothing past extent 0
 * holds bytes and extent 0 holds the whole size (a one-run record keeps
 * its size in its run).
 */
static int ext_single(struct ofs_store *s, struct ofs_extents *x)
{
	size_t i;

	if (x->wsize > s->esize)
		return 0;
	for (i = 0; i < x->n; i++) {
		struct kvb_map after = ext_after(s, &x->v[i]);

		if (x->v[i].idx > 0 && after.size > 0)
			return 0;
		if (x->v[i].idx == 0 && after.size != x->wsize)
			return 0;
	}
	return x->n > 0 || x->wsize == 0;
}

int ofs_extents_commit(struct ofs_store *s, struct ofs_object *o)
{
	struct ofs_extents *x = o->x;
	struct ext_prep *p;
	struct meta_inode m;
	uint64_t npages = 0;
	size_t i, np = 0;
	int ret = 0, single = ext_single(s, x);

	/* Still one run, its record its own: the one-run commit does it all. */
	if (single && x->from_row)
		return -EAGAIN;
	p = calloc(x->n ? x->n : 1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	for (i = 0; !ret && i < x->n; i++) {
		struct ofs_ext *e = &x->v[i];

		if (!e->obj || !kvb_obj_dirty(&s->kvb, e->obj))
			continue;
		if (e->has) {
			/* Its sums, for a commit that reads only the pages changed. */
			struct meta_inode cur = e->v;

			if (x->from_row && e->idx == 0)
				cur.ext = 0; /* the record's own run, its sums in the file's row */
			ofs_store_seed_sums(s, &s->lock, &cur, e->obj);
		}
		p[np].i = i;
		ret = kvb_obj_commit_prepare(&s->kvb, e->obj, 0, &p[np].map, &p[np].csum,
					     &p[np].pcs);
		if (!ret)
			p[np++].done = 1;
	}
	if (ret)
		goto out;

	pthread_mutex_lock(&s->lock);
	m = o->m;
	ret = meta_begin(s->meta);
	/* The record's run becomes extent 0 (the commit below may replace it). */
	if (!ret && x->from_row && o->m.bucket >= 0)
		ret = meta_extent_from_row(s->meta, o->m.ino);
	for (i = 0; !ret && i < np; i++) {
		struct ofs_ext *e = &x->v[p[i].i];
		enum meta_skey_op op;

		ext_version(s, e, &p[i].map, p[i].csum, &p[i].v, &op);
		if (p[i].map.bucket < 0 || p[i].map.size == 0) {
			ret = meta_extent_delete(s->meta, o->m.ino, e->idx);
			if (ret == -ENOENT)
				ret = 0;
		} else {
			ret = meta_extent_commit(s->meta, &p[i].v, p[i].pcs, p[i].map.npages,
						 p[i].map.skey, op);
		}
	}
	for (i = 0; i < x->n; i++) {
		struct kvb_map after = ext_committed(&x->v[i]);
		size_t k;

		for (k = 0; k < np; k++)
			if (p[k].i == i)
				after = p[k].map;
		if (after.bucket >= 0 && after.size > 0)
			npages += after.npages;
	}
	m.size = x->wsize;
	m.state = META_COMMITTED;
	m.gen = s->gen;
	m.bucket = META_EXTENTS;
	m.page = 0;
	m.npages = npages;
	m.csum = 0;
	m.prev_bucket = -1;
	if (!ret && single) {
		/* Back to one run: extent 0's version (if any) into the record. */
		struct ofs_ext *e0 = ext_find(x, 0);
		struct meta_inode v0 = { .bucket = -1, .prev_bucket = -1 };

		if (e0 && e0->has)
			v0 = e0->v;
		for (i = 0; i < np; i++)
			if (x->v[p[i].i].idx == 0)
				v0 = p[i].v;
		if (v0.size == 0)
			v0.bucket = -1;
		m.bucket = v0.bucket;
		m.page = v0.page;
		m.npages = v0.bucket >= 0 ? v0.npages : 0;
		m.csum = v0.csum;
		m.gen = v0.bucket >= 0 ? v0.gen : s->gen;
		m.prev_bucket = v0.prev_bucket;
		m.prev_page = v0.prev_page;
		m.prev_npages = v0.prev_npages;
		m.prev_size = v0.prev_size;
		m.prev_csum = v0.prev_csum;
		ret = meta_extent_to_row(s->meta, o->m.ino);
	}
	if (!ret)
		ret = meta_update(s->meta, &m);
	if (!ret)
		ret = meta_commit(s->meta);
	else
		meta_rollback(s->meta);
	if (!ret) {
		o->m = m;
		ofs_epochs_bump(s, m.ino);
		for (i = 0; i < np; i++) {
			struct ofs_ext *e = &x->v[p[i].i];

			e->v = p[i].v;
			e->has = p[i].map.bucket >= 0 && p[i].map.size > 0;
			e->reserved = 0; /* the commit kept only the pages its size needs */
			free(e->pcs);
			e->pcs = NULL;
		}
		if (single) {
			/* Extent 0 is the record's again; the others are gone with their rows. */
			for (i = 0; i < x->n; i++)
				if (x->v[i].idx > 0)
					x->v[i].has = 0;
		}
		x->from_row = single;
		x->resized = 0;
		free(o->pcs);
		o->pcs = NULL;
	}
	pthread_mutex_unlock(&s->lock);
out:
	for (i = 0; i < np; i++)
		if (p[i].done)
			kvb_obj_commit_done(&s->kvb, x->v[p[i].i].obj, ret == 0);
	free(p);
	return ret;
}

/* ---- reading ---- */

static int ext_load_pcs(struct ofs_store *s, struct ofs_object *o, struct ofs_ext *e)
{
	uint64_t *pcs;
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	if (!e->pcs) {
		pcs = malloc((e->v.npages ? e->v.npages : 1) * sizeof(*pcs));
		ret = pcs ? meta_extent_pcsums_get(s->meta, o->m.ino, e->idx, pcs, e->v.npages)
			  : -ENOMEM;
		if (ret)
			free(pcs);
		else
			e->pcs = pcs;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/* Bytes [rel, rel + n) of extent e as a reader sees it now into buf: zeros past its size. */
static int ext_read(struct ofs_store *s, struct ofs_object *o, struct ofs_ext *e, char *buf,
		    size_t n, uint64_t rel, int uncached)
{
	struct kvb_map map;
	uint64_t bad = 0;
	size_t have = 0;
	ssize_t r = 0;

	if (e && e->obj)
		kvb_obj_view(&s->kvb, e->obj, &map);
	else
		map = e ? ext_committed(e) : KVB_MAP_EMPTY;
	if (map.bucket >= 0 && rel < map.size)
		have = map.size - rel < n ? (size_t)(map.size - rel) : n;
	if (have && e->obj) {
		r = kvb_obj_settle(&s->kvb, e->obj, rel, have);
		if (!r && (!uncached ||
			   (r = kvb_read_uncached(&s->kvb, &map, NULL, buf, have, rel, &bad)) ==
				   -EOPNOTSUPP))
			r = kvb_read(&s->kvb, &map, buf, have, rel);
	} else if (have && s->verify && ext_load_pcs(s, o, e) == 0) {
		r = uncached ? kvb_read_uncached(&s->kvb, &map, e->pcs, buf, have, rel, &bad)
			     : -EOPNOTSUPP;
		if (r == -EOPNOTSUPP)
			r = kvb_read_verified(&s->kvb, &map, e->pcs, buf, have, rel, &bad);
	} else if (have) {
		/* A version recovery restored keeps no page checksums: read as it is. */
		r = uncached ? kvb_read_uncached(&s->kvb, &map, NULL, buf, have, rel, &bad)
			     : -EOPNOTSUPP;
		if (r == -EOPNOTSUPP)
			r = kvb_read(&s->kvb, &map, buf, have, rel);
	}
	if (r == -EBADMSG) {
		OFS_COUNT(s->metrics.checksum_failures, 1);
		ofs_log("checksum mismatch: inode %llu extent %llu bucket %d page %llu: returning "
			"EIO",
			(unsigned long long)o->m.ino, (unsigned long long)e->idx, map.bucket,
			(unsigned long long)(map.page + bad));
		return -EIO;
	}
	if (r < 0)
		return (int)r;
	if ((size_t)r < have)
		return -EIO; /* the backend lost bytes it holds for us */
	memset(buf + have, 0, n - have);
	return 0;
}

ssize_t ofs_extents_pread(struct ofs_store *s, struct ofs_object *o, size_t size, uint64_t off,
			  int uncached, struct ofs_bytes *b)
{
	uint64_t es = s->esize, fsize;
	size_t done = 0;
	int ret = ofs_extents_load(s, o);

	memset(b, 0, sizeof(*b));
	b->fd = -1;
	if (ret)
		return ret;
	fsize = o->obj ? o->x->wsize : o->m.size;
	if (off >= fsize)
		return 0;
	if (size > fsize - off)
		size = (size_t)(fsize - off);
	/* Page-aligned for an uncached read: the device writes into it directly. */
	if (uncached ? ofs_bytes_alloc_aligned(s, b, size) : !(b->own = malloc(size ? size : 1)))
		return -ENOMEM;
	b->ptr = b->own;
	while (done < size) {
		uint64_t at = off + done, idx = at / es, rel = at - idx * es;
		size_t n = size - done < es - rel ? size - done : (size_t)(es - rel);

		ret = ext_read(s, o, ext_find(o->x, idx), b->own + done, n, rel, uncached);
		if (ret)
			return ret;
		done += n;
	}
	return (ssize_t)size;
}

/* ---- removal ---- */

/* A mapping taken from a record being deleted, until its transaction ends (s->xtaken). */
struct ofs_ext_taken {
	uint64_t ino;
	struct kvb_map map;
};

struct ext_take_ctx {
	struct ofs_store *s;
	int ret;
};

static int ext_take_one(void *ctx, const struct meta_inode *in)
{
	struct ext_take_ctx *t = ctx;
	struct kvb_map map = { in->bucket, in->page, in->npages, in->size, NULL };

	if (in->bucket < 0)
		return 0;
	struct ofs_store *s = t->s;

	if (s->nxtaken == s->capxtaken) {
		size_t cap = s->capxtaken ? s->capxtaken * 2 : 64;
		struct ofs_ext_taken *v = realloc(s->xtaken, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->xtaken = v;
		s->capxtaken = cap;
	}
	s->xtaken[s->nxtaken].ino = in->ino;
	s->xtaken[s->nxtaken++].map = map;
	return kvb_remove_prepare(&s->kvb, &map);
}

int ofs_extents_take(struct ofs_store *s, uint64_t ino, struct kvb_map *to_free)
{
	struct ext_take_ctx t = { s, 0 };
	int ret = meta_extents(s->meta, ino, ext_take_one, &t);

	if (ret) {
		struct kvb_map m = { META_EXTENTS, ino, 0, 0, NULL };

		ofs_extents_untake(s, &m);
		return ret;
	}
	*to_free = (struct kvb_map){ .bucket = META_EXTENTS, .page = ino };
	return 0;
}

void ofs_extents_untake(struct ofs_store *s, const struct kvb_map *to_free)
{
	size_t i, j = 0;

	if (to_free->bucket != META_EXTENTS)
		return;
	for (i = 0; i < s->nxtaken; i++)
		if (s->xtaken[i].ino != to_free->page)
			s->xtaken[j++] = s->xtaken[i];
	s->nxtaken = j;
}

void ofs_store_remove(struct ofs_store *s, const struct kvb_map *to_free)
{
	size_t i, j = 0;

	if (to_free->bucket >= 0) {
		kvb_remove(&s->kvb, to_free);
		return;
	}
	if (to_free->bucket != META_EXTENTS)
		return;
	for (i = 0; i < s->nxtaken; i++) {
		if (s->xtaken[i].ino == to_free->page)
			kvb_remove(&s->kvb, &s->xtaken[i].map);
		else
			s->xtaken[j++] = s->xtaken[i];
	}
	s->nxtaken = j;
}

/* ---- the descriptor ---- */

int ofs_extents_describe(struct ofs_store *s, struct ofs_object *o, char *buf, size_t len)
{
	struct ofs_extents *x = o->x;
	size_t i, at;
	int n, cnt = 0;

	for (i = 0; i < x->n; i++)
		cnt += x->v[i].has && x->v[i].v.bucket >= 0;
	/* page_size: what an extent's checksum may be a sum of page sums over (kvb_hash.h). */
	n = snprintf(buf, len, "object_size=%llu\nextent_size=%llu\npage_size=%llu\nextents=%d\n",
		     (unsigned long long)o->m.size, (unsigned long long)s->esize,
		     (unsigned long long)s->geom.page_size, cnt);
	if (n < 0 || (size_t)n >= len)
		return -E2BIG;
	at = (size_t)n;
	for (i = 0; i < x->n; i++) {
		struct kvb_map map = ext_committed(&x->v[i]);

		if (map.bucket < 0)
			continue;
		n = snprintf(buf + at, len - at, "extent_offset=%llu\nchecksum=%016llx\n",
			     (unsigned long long)(x->v[i].idx * s->esize),
			     (unsigned long long)x->v[i].v.csum);
		if (n < 0 || (size_t)n >= len - at)
			return -E2BIG;
		at += (size_t)n;
		n = kvb_describe(&s->kvb, &map, buf + at, len - at);
		if (n == -ERANGE)
			return -E2BIG;
		if (n < 0)
			return n;
		at += (size_t)n;
	}
	return (int)at;
}
