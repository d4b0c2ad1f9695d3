/*
 * batch.c: batch requests of a tenant's control file (batch.h,
 * docs/batch.md): parsing, reserve, commit, lookup, delete and abort, each
 * over the whole batch in one hold of store.lock and one metadata
 * transaction or read.  The FUSE side (fuse/batch.c) serves the file and
 * tells the kernel what changed.
 */
#include "batch.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "epoch.h"
#include "evict.h"
#include "ns.h"
#include "object.h"
#include "offloadfs_batch_proto.h"
#include "store.h"

struct batch_resv {
	char *key;            /* below the tenant */
	uint32_t klen;
	uint64_t size;
	struct kvb_obj *obj;  /* the working state holding the reserved run */
	int done;             /* committed or refused by the current commit */
};

struct ofs_batch {
	pthread_mutex_t lock; /* one request at a time; guards what follows */
	uint64_t tenant;
	char tname[META_NAME_MAX + 1];
	struct batch_resv *resv;
	size_t nresv, cap;
	char *reply;
	size_t rlen;
};

static void batch_resv_drop(struct ofs_store *s, struct ofs_batch *b, size_t i)
{
	kvb_obj_close(&s->kvb, b->resv[i].obj);
	free(b->resv[i].key);
	b->resv[i] = b->resv[--b->nresv];
}

struct batch_req {
	const struct ofs_batch_hdr *hdr;
	const struct ofs_batch_ent **ent;
	const char **key;
	const uint64_t **pcs;
};

/* Split the request into entries; -EINVAL when it is malformed. */
static int batch_parse(const char *buf, size_t size, struct batch_req *r)
{
	const struct ofs_batch_hdr *hdr = (const void *)buf;
	size_t pos = sizeof(*hdr);
	uint32_t i;

	if (size < sizeof(*hdr) || hdr->magic != OFS_BATCH_MAGIC || hdr->len != size ||
	    hdr->n > OFS_BATCH_KEYS_MAX)
		return -EINVAL;
	r->hdr = hdr;
	r->ent = calloc(hdr->n + 1, sizeof(*r->ent));
	r->key = calloc(hdr->n + 1, sizeof(*r->key));
	r->pcs = calloc(hdr->n + 1, sizeof(*r->pcs));
	if (!r->ent || !r->key || !r->pcs)
		return -ENOMEM;
	for (i = 0; i < hdr->n; i++) {
		const struct ofs_batch_ent *e = (const void *)(buf + pos);

		if (size - pos < sizeof(*e))
			return -EINVAL;
		pos += sizeof(*e);
		/* A key too long or empty is that key's error (batch_resolve), not the batch's. */
		if (e->klen > OFS_BATCH_REQ_MAX || size - pos < ofs_batch_pad8(e->klen))
			return -EINVAL;
		r->ent[i] = e;
		r->key[i] = buf + pos;
		pos += ofs_batch_pad8(e->klen);
		if (e->npcs > (size - pos) / 8)
			return -EINVAL;
		r->pcs[i] = (const void *)(buf + pos);
		pos += (size_t)e->npcs * 8;
	}
	return pos == size ? 0 : -EINVAL;
}

static int batch_key_cmp(const void *a, const void *b, void *arg)
{
	const struct batch_req *r = arg;
	uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
	uint32_t li = r->ent[i]->klen, lj = r->ent[j]->klen;
	int c = memcmp(r->key[i], r->key[j], li < lj ? li : lj);

	return c ? c : (li > lj) - (li < lj);
}

/* 1 when a key appears twice. */
static int batch_has_dup(const struct batch_req *r)
{
	uint32_t n = r->hdr->n, i, *idx = malloc((n + 1) * sizeof(*idx));
	int dup = 0;

	if (!idx)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		idx[i] = i;
	/* qsort_r: requests of other descriptions are checked at the same time. */
	qsort_r(idx, n, sizeof(*idx), batch_key_cmp, (void *)r);
	for (i = 1; i < n && !dup; i++)
		dup = batch_key_cmp(&idx[i - 1], &idx[i], (void *)r) == 0;
	free(idx);
	return dup;
}

/*
 * The directory of the last key resolved: keys of a batch usually share
 * theirs, which is then walked once per batch rather than a lookup per
 * component per key.  Valid for one hold of store.lock (directories do not
 * change under it): zero it when taking the lock.
 */
struct batch_dircache {
	const char *key; /* the key whose first len bytes name directory ino */
	uint32_t len;
	uint64_t ino;
};

/*
 * The whole key before any of it is walked, so that a missing directory
 * does not hide what is wrong further on.  As through the mount: a key
 * past 4,095 bytes or a name past 255 is ENAMETOOLONG; an empty name, "."
 * or "..", or a NUL: EINVAL.
 */
static int batch_key_check(const char *key, uint32_t klen)
{
	uint32_t pos = 0;

	if (klen > META_KEY_MAX)
		return -ENAMETOOLONG;
	for (;;) {
		const char *slash = memchr(key + pos, '/', klen - pos);
		uint32_t len = slash ? (uint32_t)(slash - (key + pos)) : klen - pos;

		if (len > META_NAME_MAX)
			return -ENAMETOOLONG;
		if (len == 0 || memchr(key + pos, '\0', len) || (len == 1 && key[pos] == '.') ||
		    (len == 2 && key[pos] == '.' && key[pos + 1] == '.'))
			return -EINVAL;
		if (!slash)
			return 0;
		pos += len + 1;
	}
}

/*
 * Walk key's directories below the tenant: *dir the last one, *name its
 * last component (NUL-terminated, in namebuf), *m the entry when it exists
 * (0; the fields meta_lookup_brief fills) or -ENOENT.  Other errors: the key cannot name a file.  With m
 * NULL, the name is not looked up: 0 when its directory is there.  Under
 * store.lock; dc may be NULL.
 */
static int batch_resolve(struct ofs_store *s, uint64_t tenant, const char *key, uint32_t klen,
			 uint64_t *dir, char *namebuf, struct meta_inode *m,
			 struct batch_dircache *dc)
{
	const char *last = klen ? memrchr(key, '/', klen) : NULL;
	uint32_t dlen = last ? (uint32_t)(last - key) : 0, pos = 0;
	uint64_t cur = tenant;
	struct meta_inode d;
	int ret;

	/* Its directory checked and found for an earlier key: only the name is left. */
	if (last && dc && dc->key && dc->len == dlen && !memcmp(dc->key, key, dlen)) {
		cur = dc->ino;
		pos = dlen + 1;
	}
	ret = batch_key_check(key, klen);
	if (ret)
		return ret;
	for (;;) {
		const char *slash = memchr(key + pos, '/', klen - pos);
		uint32_t len = slash ? (uint32_t)(slash - (key + pos)) : klen - pos;

		if (!slash) {
			memcpy(namebuf, key + pos, len);
			namebuf[len] = '\0';
			*dir = cur;
			if (dc && last) {
				dc->key = key;
				dc->len = dlen;
				dc->ino = cur;
			}
			if (cur == tenant && strcmp(namebuf, OFS_BATCH_NAME) == 0)
				return -EINVAL;
			return m ? meta_lookup_brief(s->meta, cur, key + pos, len, m) : 0;
		}
		ret = meta_lookup_brief(s->meta, cur, key + pos, len, &d);
		if (ret)
			return ret;
		if (!S_ISDIR(d.mode))
			return -ENOTDIR;
		cur = d.ino;
		pos += len + 1;
	}
}

static ssize_t batch_find_resv(struct ofs_batch *b, const char *key, uint32_t klen,
			       size_t hint)
{
	size_t i, k;

	/* Commits usually come in the order of their reserve: start where the last one matched. */
	for (k = 0; k < b->nresv; k++) {
		i = (hint + k) % b->nresv;
		if (b->resv[i].klen == klen && !memcmp(b->resv[i].key, key, klen))
			return (ssize_t)i;
	}
	return -1;
}

static void *batch_reply_alloc(struct ofs_batch *b, const struct batch_req *r, size_t entsize)
{
	size_t len = sizeof(struct ofs_batch_hdr) + (size_t)r->hdr->n * entsize;
	struct ofs_batch_hdr *hdr;

	free(b->reply);
	b->rlen = 0;
	b->reply = calloc(1, len);
	if (!b->reply)
		return NULL;
	hdr = (void *)b->reply;
	hdr->magic = OFS_BATCH_MAGIC;
	hdr->op = r->hdr->op;
	hdr->n = r->hdr->n;
	hdr->len = (uint32_t)len;
	b->rlen = len;
	return b->reply + sizeof(*hdr);
}

static void batch_status(struct ofs_batch *b, int status)
{
	((struct ofs_batch_hdr *)(void *)b->reply)->status = status;
}

/*
 * before: reservations made by earlier requests (this one's keys are
 * distinct); found: what batch_resolve said of the key.
 */
static int batch_reserve_one(struct ofs_store *s, struct ofs_batch *b, size_t before,
			     const char *key, uint32_t klen, uint64_t size, int found,
			     struct ofs_batch_desc *d)
{
	char full[OFS_KEY_MAX];
	struct kvb_map w;
	struct kvb_obj *obj;
	struct batch_resv *nr;
	size_t flen, k;
	int ret = found;

	for (k = 0; k < before; k++)
		if (b->resv[k].klen == klen && !memcmp(b->resv[k].key, key, klen))
			return -EBUSY;
	if (ret == 0)
		return -EEXIST;
	if (ret != -ENOENT)
		return ret;
	/* A create, as through the mount: refused in a tenant at its quota (evict=off). */
	pthread_mutex_lock(&s->lock);
	if (ofs_evict_quota_check(s, b->tenant))
		ret = -EDQUOT;
	pthread_mutex_unlock(&s->lock);
	if (ret != -ENOENT)
		return ret;
	if (ofs_store_meta_low(s))
		return -ENOSPC;
	if (b->nresv == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 64;

		nr = realloc(b->resv, cap * sizeof(*nr));
		if (!nr)
			return -ENOMEM;
		b->resv = nr;
		b->cap = cap;
	}
	flen = (size_t)snprintf(full, sizeof(full), "%s/%.*s", b->tname, (int)klen, key);
	if (flen >= sizeof(full))
		return -ENAMETOOLONG;
	/* Its growth, charged as a writer's (evict=off; a refused key leaves the others be). */
	ret = ofs_evict_quota_reserve(s, b->tenant, size);
	if (ret)
		return ret;
	ret = kvb_obj_open(&s->kvb, &KVB_MAP_EMPTY, full, flen, &obj);
	if (ret)
		return ret;
	ret = kvb_obj_reserve(&s->kvb, obj, size);
	if (ret == -ENOSPC && ofs_store_reclaim(s, b->tenant, size))
		ret = kvb_obj_reserve(&s->kvb, obj, size);
	nr = &b->resv[b->nresv];
	nr->key = ret ? NULL : malloc(klen);
	if (!ret && !nr->key)
		ret = -ENOMEM;
	if (ret) {
		kvb_obj_close(&s->kvb, obj);
		return ret;
	}
	memcpy(nr->key, key, klen);
	nr->klen = klen;
	nr->size = size;
	nr->obj = obj;
	nr->done = 0;
	b->nresv++;
	kvb_obj_view(&s->kvb, obj, &w);
	d->bucket = size ? w.bucket : -1;
	d->offset = size ? w.page * s->geom.page_size : 0;
	d->size = size;
	return 0;
}

static int batch_reserve(struct ofs_store *s, struct ofs_batch *b, const struct batch_req *r)
{
	struct ofs_batch_desc *d = batch_reply_alloc(b, r, sizeof(*d));
	const struct kvb *kvb = &s->kvb;
	struct batch_dircache dc = { 0 };
	char name[META_NAME_MAX + 1];
	size_t before = b->nresv, k;
	struct kvb_obj **objs;
	uint32_t i, n = r->hdr->n;
	struct meta_inode m;
	int dup, defer, rd, *errs;
	uint64_t dir;

	if (!d)
		return -ENOMEM;
	dup = batch_has_dup(r);
	if (dup) {
		batch_status(b, dup < 0 ? dup : -EINVAL);
		return 0;
	}
	objs = calloc(n + 1, sizeof(*objs));
	errs = calloc(n + 1, sizeof(*errs));
	if (!objs || !errs) {
		free(objs);
		free(errs);
		return -ENOMEM;
	}
	/* Every key's directory and name first, in one hold of the lock and one read. */
	pthread_mutex_lock(&s->lock);
	rd = meta_read_begin(s->meta) == 0;
	for (i = 0; i < n; i++)
		d[i].err = batch_resolve(s, b->tenant, r->key[i], r->ent[i]->klen, &dir, name, &m,
					 &dc);
	if (rd)
		meta_read_end(s->meta);
	pthread_mutex_unlock(&s->lock);
	/* The runs' blocks at the end, adjacent runs of a bucket with one fallocate. */
	defer = kvb_reserve_begin(kvb) == 0;
	for (i = 0; i < n; i++) {
		size_t had = b->nresv;

		if (r->ent[i]->size > s->esize)
			d[i].err = -EFBIG;
		else
			d[i].err = batch_reserve_one(s, b, before, r->key[i], r->ent[i]->klen,
						     r->ent[i]->size, d[i].err, &d[i]);
		if (!d[i].err && b->nresv > had)
			objs[i] = b->resv[b->nresv - 1].obj;
	}
	if (defer)
		kvb_reserve_end(kvb, objs, n, errs);
	for (i = 0; defer && i < n; i++) {
		struct kvb_map w;
		int e;

		if (!errs[i])
			continue;
		/* No room where it was: once more on its own, every bucket tried. */
		e = kvb_obj_reserve(kvb, objs[i], r->ent[i]->size);
		if (e == -ENOSPC && ofs_store_reclaim(s, b->tenant, r->ent[i]->size))
			e = kvb_obj_reserve(kvb, objs[i], r->ent[i]->size);
		if (e) {
			for (k = 0; k < b->nresv && b->resv[k].obj != objs[i]; k++)
				;
			if (k < b->nresv)
				batch_resv_drop(s, b, k);
			memset(&d[i], 0, sizeof(d[i]));
			d[i].err = e;
			continue;
		}
		kvb_obj_view(kvb, objs[i], &w);
		d[i].bucket = w.bucket;
		d[i].offset = w.page * s->geom.page_size;
	}
	free(objs);
	free(errs);
	return 0;
}

/* A committed file's descriptor, with what a client checks it by.  Under store.lock. */
static void batch_desc_of(const struct ofs_store *s, struct ofs_batch_desc *d, uint64_t ino,
			  const struct kvb_map *map, uint64_t csum)
{
	d->bucket = map->bucket;
	d->offset = map->bucket >= 0 ? map->page * s->geom.page_size : 0;
	d->size = map->size;
	d->csum = csum;
	d->ino = ino;
	ofs_epochs_get(s, ino, &d->gen, &d->epoch);
}

struct batch_commit_ent {
	ssize_t resv;
	struct kvb_map map;
	uint64_t csum;
	const uint64_t *pcs;
	int prepared, done;
	uint64_t dir, ino;
	char name[META_NAME_MAX + 1];
};

/* The verified entries as new files, in one transaction.  Under store.lock. */
static int batch_commit_records(struct ofs_store *s, struct ofs_batch *b, const struct batch_req *r,
				struct batch_commit_ent *ce, struct ofs_batch_desc *st,
				const struct ofs_batch_caller *c, uint64_t *ncommitted)
{
	int64_t now = ofs_now();
	struct batch_dircache dc = { 0 };
	struct meta_inode m;
	uint64_t last_dir = 0;
	uint32_t i;
	int ret = meta_begin(s->meta);

	for (i = 0; !ret && i < r->hdr->n; i++) {
		/* The name is not looked up: the insert finds it taken (EEXIST). */
		int e = batch_resolve(s, b->tenant, r->key[i], r->ent[i]->klen, &ce[i].dir,
				      ce[i].name, NULL, &dc);

		if (e == -ENOENT) {
			ret = e; /* a directory removed since the reserve */
			break;
		}
		if (e) {
			st[i].err = e;
			continue;
		}
		memset(&m, 0, sizeof(m));
		m.parent = ce[i].dir;
		m.mode = S_IFREG | (0666 & ~c->umask);
		m.uid = c->uid;
		m.gid = c->gid;
		m.atime = m.mtime = m.ctime = now;
		m.nlink = 1;
		m.prev_bucket = -1;
		m.size = ce[i].map.size;
		m.bucket = ce[i].map.bucket;
		m.page = ce[i].map.page;
		m.npages = ce[i].map.bucket >= 0 ? ce[i].map.npages : 0;
		m.csum = ce[i].csum;
		m.state = META_COMMITTED;
		m.gen = s->gen;
		/* Created committed: one row, one statement. */
		ret = meta_insert_object(s->meta, &m, ce[i].name, strlen(ce[i].name), ce[i].pcs,
					 m.npages);
		if (ret == -EEXIST) {
			/* Taken since the reserve: this entry only (its statement undone). */
			st[i].err = ret;
			ret = 0;
			continue;
		}
		/*
		 * A batch's keys usually share a directory: its times once
		 * per run of them.  This also refuses a directory removed
		 * since the reserve (ENOENT): no row names a dead parent.
		 */
		if (!ret && ce[i].dir != last_dir)
			ret = meta_dir_changed(s->meta, ce[i].dir, now, NULL);
		if (ret)
			break;
		last_dir = ce[i].dir;
		ce[i].ino = m.ino;
		ce[i].done = 1;
	}
	if (!ret)
		ret = meta_commit(s->meta);
	else
		meta_rollback(s->meta);
	*ncommitted = 0;
	for (i = 0; i < r->hdr->n; i++) {
		struct ofs_object *d;

		if (ret)
			ce[i].done = 0;
		if (!ce[i].done)
			continue;
		(*ncommitted)++;
		/* The new file's descriptor, which the client may keep. */
		batch_desc_of(s, &st[i], ce[i].ino, &ce[i].map, ce[i].csum);
		d = ofs_object_find(s, ce[i].dir);
		if (d)
			d->m.mtime = d->m.ctime = now;
	}
	s->nfiles += *ncommitted;
	return ret;
}

static int batch_commit(struct ofs_store *s, struct ofs_batch *b, const struct batch_req *r,
			const struct ofs_batch_caller *c)
{
	struct ofs_batch_desc *st = batch_reply_alloc(b, r, sizeof(*st));
	struct batch_commit_ent *ce;
	uint32_t i, n = r->hdr->n;
	int sync = (r->hdr->flags & OFS_BATCH_SYNC) != 0, bad = 0, ret = 0, dup;
	/*
	 * With the whole sums given, the client's sums are recorded as they
	 * are: what the pages hold is checked when they are read (verify,
	 * get_many, scrub).  Without them, or when asked, the pages are read
	 * back and hashed.
	 */
	int given = (r->hdr->flags & OFS_BATCH_CSUM) != 0;
	int check = !given || (r->hdr->flags & OFS_BATCH_VERIFY);
	uint64_t ncommitted = 0;
	size_t hint = 0;

	if (!st)
		return -ENOMEM;
	dup = batch_has_dup(r);
	if (dup) {
		batch_status(b, dup < 0 ? dup : -EINVAL);
		return 0;
	}
	ce = calloc(n + 1, sizeof(*ce));
	if (!ce)
		return -ENOMEM;
	/* Verify: the pages as they are now against the client's sums, outside every lock. */
	for (i = 0; i < n; i++) {
		uint64_t size = r->ent[i]->size, ps = s->geom.page_size;
		uint64_t np = (size + ps - 1) / ps;
		struct kvb_obj *obj;
		int e;

		ce[i].resv = batch_find_resv(b, r->key[i], r->ent[i]->klen, hint);
		if (ce[i].resv < 0) {
			st[i].err = -ENOENT; /* not reserved on this description */
			bad = bad ? bad : -ENOENT;
			continue;
		}
		hint = (size_t)ce[i].resv + 1;
		obj = b->resv[ce[i].resv].obj;
		if (size > b->resv[ce[i].resv].size)
			e = -EINVAL;
		else if (r->ent[i]->npcs != np + (given ? 1 : 0))
			e = -EBADMSG;
		else
			e = kvb_obj_adopt(&s->kvb, obj, size, check ? NULL : r->pcs[i],
					  given ? r->pcs[i][np] : 0);
		/* With sync, the barrier below syncs every bucket adopt marked: once, not per key. */
		if (!e)
			e = kvb_obj_commit_prepare(&s->kvb, obj, 0, &ce[i].map, &ce[i].csum,
						   &ce[i].pcs);
		if (!e) {
			ce[i].prepared = 1;
			if (check && (memcmp(r->pcs[i], ce[i].pcs, np * sizeof(uint64_t)) ||
				      (given && r->pcs[i][np] != ce[i].csum)))
				e = -EBADMSG;
		}
		st[i].err = e;
		if (e && !bad)
			bad = e;
	}
	if (!bad) {
		pthread_mutex_lock(&s->lock);
		ret = batch_commit_records(s, b, r, ce, st, c, &ncommitted);
		pthread_mutex_unlock(&s->lock);
	}
	for (i = 0; i < n; i++) {
		if (ce[i].prepared)
			kvb_obj_commit_done(&s->kvb, b->resv[ce[i].resv].obj, ce[i].done);
		if (ret)
			st[i].err = ret;
	}
	if (bad || ret) {
		/* Nothing is visible; the reservations stay for a retry or an abort. */
		batch_status(b, bad ? bad : ret);
		free(ce);
		OFS_COUNT(s->metrics.commit_failures, 1);
		return 0;
	}
	OFS_COUNT(s->metrics.objects_committed, ncommitted);
	/*
	 * Committed pages now belong to their records (the working state
	 * shares them: closing frees nothing); an entry that was refused
	 * (its name taken meanwhile) gives its run back.  Every entry's
	 * reservation goes, in one pass over the description's.
	 */
	for (i = 0; i < n; i++)
		if (ce[i].resv >= 0)
			b->resv[ce[i].resv].done = 1;
	{
		size_t j, k = 0;

		for (j = 0; j < b->nresv; j++) {
			if (b->resv[j].done) {
				kvb_obj_close(&s->kvb, b->resv[j].obj);
				free(b->resv[j].key);
			} else {
				b->resv[k++] = b->resv[j];
			}
		}
		b->nresv = k;
	}
	if (sync)
		batch_status(b, ofs_store_barrier(s, NULL));
	/* The kernel may remember some of these names as missing (a stat before the put). */
	for (i = 0; i < n; i++)
		if (ce[i].done)
			c->added(c->arg, ce[i].dir, ce[i].name, strlen(ce[i].name));
	free(ce);
	return 0;
}

static int batch_lookup(struct ofs_store *s, struct ofs_batch *b, const struct batch_req *r,
			const struct ofs_batch_caller *c)
{
	struct ofs_batch_desc *d = batch_reply_alloc(b, r, sizeof(*d));
	struct batch_dircache dc = { 0 };
	char name[META_NAME_MAX + 1];
	struct meta_inode m;
	struct kvb_map map;
	uint64_t dir;
	uint32_t i;
	int64_t now = ofs_now();
	int rd;

	if (!d)
		return -ENOMEM;
	pthread_mutex_lock(&s->lock);
	/* The keys' lookups in one read of the metadata rather than one each. */
	rd = meta_read_begin(s->meta) == 0;
	for (i = 0; i < r->hdr->n; i++) {
		int e = batch_resolve(s, b->tenant, r->key[i], r->ent[i]->klen, &dir, name, &m,
				      &dc);

		if (!e) {
			struct ofs_object *o = ofs_object_find(s, m.ino);

			if (o)
				m = o->m;
			if (S_ISDIR(m.mode))
				e = -EISDIR;
			else if (m.state != META_COMMITTED)
				e = -ENOENT;
			else if (m.bucket == META_EXTENTS)
				e = -EFBIG; /* no one-run descriptor: read through the mount */
		}
		d[i].err = e;
		if (e)
			continue;
		/* A use, as an OPEN is: batch-read keys are kept by eviction. */
		if (ofs_evict_touch_ino(s, m.ino, now))
			c->used(c->arg, m.ino);
		map = ofs_committed(&m);
		batch_desc_of(s, &d[i], m.ino, &map, m.csum);
	}
	if (rd)
		meta_read_end(s->meta);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static int batch_delete(struct ofs_store *s, struct ofs_batch *b, const struct batch_req *r,
			const struct ofs_batch_caller *c)
{
	struct ofs_batch_status *st = batch_reply_alloc(b, r, sizeof(*st));
	struct batch_dircache dc = { 0 };
	char name[META_NAME_MAX + 1];
	uint32_t i, n = r->hdr->n;
	uint64_t *dirs = calloc(n + 1, sizeof(*dirs));
	const char **names = calloc(n + 1, sizeof(*names));
	size_t *lens = calloc(n + 1, sizeof(*lens));
	int *errs = calloc(n + 1, sizeof(*errs)), ret = -ENOMEM;

	if (!st || !dirs || !names || !lens || !errs)
		goto out;
	/* Every key's directory in one hold of the lock; the names are looked up by the unlink. */
	pthread_mutex_lock(&s->lock);
	for (i = 0; i < n; i++) {
		const char *key = r->key[i], *slash = memrchr(key, '/', r->ent[i]->klen);

		errs[i] = batch_resolve(s, b->tenant, key, r->ent[i]->klen, &dirs[i], name, NULL,
					&dc);
		names[i] = slash ? slash + 1 : key; /* the last component, as resolved */
		lens[i] = r->ent[i]->klen - (size_t)(names[i] - key);
	}
	pthread_mutex_unlock(&s->lock);
	/* One transaction for the batch: each key deleted, or not, with its own result. */
	ret = ofs_ns_unlink_many(s, dirs, names, lens, n, errs);
	for (i = 0; !ret && i < n; i++) {
		st[i].err = errs[i];
		/* The kernel's cached entry names a file that is gone. */
		if (!errs[i])
			c->removed(c->arg, dirs[i], names[i], lens[i]);
	}
out:
	free(dirs);
	free(names);
	free(lens);
	free(errs);
	return ret;
}

static int batch_abort(struct ofs_store *s, struct ofs_batch *b, const struct batch_req *r)
{
	struct ofs_batch_status *st = batch_reply_alloc(b, r, sizeof(*st));
	uint32_t i;

	if (!st)
		return -ENOMEM;
	for (i = 0; i < r->hdr->n; i++) {
		ssize_t k = batch_find_resv(b, r->key[i], r->ent[i]->klen, 0);

		st[i].err = k < 0 ? -ENOENT : 0;
		if (k >= 0)
			batch_resv_drop(s, b, (size_t)k);
	}
	return 0;
}

static int batch_info(struct ofs_store *s, struct ofs_batch *b, const struct batch_req *r)
{
	struct ofs_batch_info *in;
	size_t len = sizeof(struct ofs_batch_hdr) + sizeof(*in);
	struct ofs_batch_hdr *hdr;

	free(b->reply);
	b->rlen = 0;
	b->reply = calloc(1, len);
	if (!b->reply)
		return -ENOMEM;
	hdr = (void *)b->reply;
	hdr->magic = OFS_BATCH_MAGIC;
	hdr->op = r->hdr->op;
	hdr->len = (uint32_t)len;
	in = (void *)(b->reply + sizeof(*hdr));
	in->page_size = s->geom.page_size;
	in->bucket_count = s->geom.bucket_count;
	in->flags = OFS_BATCH_INFO_CSUM | (s->verify ? OFS_BATCH_INFO_VERIFY : 0) |
		    (s->epochs ? OFS_BATCH_INFO_EPOCHS : 0);
	in->rootlen = (uint32_t)strlen(s->root);
	if (in->rootlen >= sizeof(in->root))
		return -ENAMETOOLONG;
	memcpy(in->root, s->root, in->rootlen);
	b->rlen = len;
	/* Batches move data through the bucket files: only the pages backend has them. */
	if (strcmp(kvb_name(&s->kvb), "pages") != 0)
		hdr->status = -EOPNOTSUPP;
	return 0;
}

static int batch_request(struct ofs_store *s, struct ofs_batch *b, const char *buf, size_t size,
			 const struct ofs_batch_caller *c)
{
	struct batch_req r = { 0 };
	int ret = batch_parse(buf, size, &r);

	if (!ret && r.hdr->op != OFS_BATCH_INFO && strcmp(kvb_name(&s->kvb), "pages"))
		ret = -EOPNOTSUPP;
	if (!ret) {
		switch (r.hdr->op) {
		case OFS_BATCH_INFO: ret = batch_info(s, b, &r); break;
		case OFS_BATCH_RESERVE: ret = batch_reserve(s, b, &r); break;
		case OFS_BATCH_COMMIT: ret = batch_commit(s, b, &r, c); break;
		case OFS_BATCH_LOOKUP: ret = batch_lookup(s, b, &r, c); break;
		case OFS_BATCH_DELETE: ret = batch_delete(s, b, &r, c); break;
		case OFS_BATCH_ABORT: ret = batch_abort(s, b, &r); break;
		default: ret = -EINVAL;
		}
	}
	free(r.ent);
	free(r.key);
	free(r.pcs);
	return ret;
}

/* Under store.lock. */
static int batch_tenant_locked(struct ofs_store *s, uint64_t ino, struct meta_inode *m)
{
	int ret = meta_get(s->meta, ino, m);

	if (!ret && (m->parent != 1 || !S_ISDIR(m->mode)))
		ret = -ENOENT;
	return ret;
}

int ofs_batch_tenant(struct ofs_store *s, uint64_t ino, struct meta_inode *m)
{
	int ret;

	pthread_mutex_lock(&s->lock);
	ret = batch_tenant_locked(s, ino, m);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int ofs_batch_open(struct ofs_store *s, uint64_t tenant, struct ofs_batch **out)
{
	struct ofs_batch *b = calloc(1, sizeof(*b));
	size_t len = sizeof(b->tname) - 1;
	struct meta_inode t;
	uint64_t parent;
	int ret;

	if (!b)
		return -ENOMEM;
	pthread_mutex_lock(&s->lock);
	ret = batch_tenant_locked(s, tenant, &t);
	if (!ret)
		ret = meta_name(s->meta, t.ino, &parent, b->tname, &len);
	pthread_mutex_unlock(&s->lock);
	if (ret) {
		free(b);
		return ret;
	}
	b->tname[len] = '\0';
	b->tenant = t.ino;
	pthread_mutex_init(&b->lock, NULL);
	*out = b;
	return 0;
}

void ofs_batch_drop_reserved(struct ofs_store *s, struct ofs_batch *b)
{
	pthread_mutex_lock(&b->lock);
	while (b->nresv)
		batch_resv_drop(s, b, b->nresv - 1);
	pthread_mutex_unlock(&b->lock);
}

void ofs_batch_close(struct ofs_store *s, struct ofs_batch *b)
{
	ofs_batch_drop_reserved(s, b);
	free(b->resv);
	free(b->reply);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

int ofs_batch_request(struct ofs_store *s, struct ofs_batch *b, const char *buf, size_t size,
		      const struct ofs_batch_caller *c)
{
	int ret;

	pthread_mutex_lock(&b->lock);
	free(b->reply);
	b->reply = NULL;
	b->rlen = 0;
	ret = batch_request(s, b, buf, size, c);
	pthread_mutex_unlock(&b->lock);
	return ret;
}

int ofs_batch_reply(struct ofs_batch *b, uint64_t off, size_t size,
		    int (*send)(void *arg, const char *p, size_t len), void *arg)
{
	int ret;

	pthread_mutex_lock(&b->lock);
	if (off >= b->rlen)
		ret = send(arg, NULL, 0);
	else
		ret = send(arg, b->reply + off, size < b->rlen - off ? size : b->rlen - off);
	pthread_mutex_unlock(&b->lock);
	return ret;
}
