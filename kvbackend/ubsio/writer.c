/*
 * writer.c: a writer's working state.  The bytes live in a buffer of the
 * writer's own, counted against the limits and the bound on all buffers;
 * commit puts them as a new value under a key of its own (journalled
 * first), and the value the record pointed at before is doomed once the
 * record change is committed.  A writer done with an object for now (an
 * extent filled, the bound reached) may stage it: the put happens then,
 * the buffer is freed, and the commit records the staged value; a change
 * before the commit fetches the bytes back and dooms that value.
 */
#include "ubsio_int.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvb_hash.h"

int ubs_obj_open(void *arg, const struct kvb_map *c, const char *key, size_t klen,
		 struct kvb_obj **out)
{
	struct ubs *u = arg;
	struct kvb_obj *o = calloc(1, sizeof(*o) + klen + 1);

	if (!o)
		return -ENOMEM;
	memcpy(o->key, key, klen);
	o->klen = klen;
	if (c->bucket >= 0) {
		pthread_mutex_lock(&u->lock);
		o->base = ubs_find(u, c->page);
		pthread_mutex_unlock(&u->lock);
		if (!o->base) {
			free(o);
			return -EIO;
		}
		o->base_size = c->size;
	}
	o->size = o->base_size;
	*out = o;
	return 0;
}

/*
 * Count a dirty object of size bytes against the limits and the buffer
 * bound, or say which one it would break.  Under u->lock.
 */
static int ubs_charge(struct ubs *u, struct kvb_obj *o, uint64_t size, uint64_t cap)
{
	uint64_t bytes = u->stored_bytes + u->working_bytes - o->charged + size;
	uint64_t keys = u->stored_keys + u->working_keys - (uint64_t)o->charged_key + (size > 0);

	if (cap > o->cap && u->buffered - o->cap + cap > u->c.buffer_max)
		return cap > u->c.buffer_max ? -EFBIG : -ENOMEM;
	if (size > o->charged && u->c.max_bytes && bytes > u->c.max_bytes)
		return -ENOSPC;
	if (size > 0 && !o->charged_key && u->c.max_keys && keys > u->c.max_keys)
		return -ENOSPC;
	u->working_bytes = u->working_bytes - o->charged + size;
	u->working_keys = u->working_keys - (uint64_t)o->charged_key + (size > 0);
	o->charged = size;
	o->charged_key = size > 0;
	return 0;
}

static void ubs_uncharge(struct ubs *u, struct kvb_obj *o)
{
	assert(u->working_bytes >= o->charged && u->working_keys >= (uint64_t)o->charged_key);
	u->working_bytes -= o->charged;
	u->working_keys -= (uint64_t)o->charged_key;
	o->charged = 0;
	o->charged_key = 0;
}

/* Give o's buffer and what it charged back: its bytes are stored or dropped.  Under u->lock. */
static void ubs_buf_release(struct ubs *u, struct kvb_obj *o)
{
	ubs_uncharge(u, o);
	assert(u->buffered >= o->cap);
	u->buffered -= o->cap;
	free(o->buf);
	o->buf = NULL;
	o->cap = 0;
}

/* Make room for size bytes in the buffer, charging the limits.  Under u->lock. */
static int ubs_reserve(struct ubs *u, struct kvb_obj *o, uint64_t size)
{
	uint64_t cap = o->cap;
	unsigned char *nb;
	int ret;

	if (size > cap) {
		cap = cap ? cap : UBS_BUF_INITIAL;
		while (cap < size)
			cap = cap > UINT64_MAX / 2 ? size : cap * 2;
		/* Doubling must not be what breaks the bound. */
		if (cap > u->c.buffer_max && size <= u->c.buffer_max)
			cap = u->c.buffer_max;
	}
	ret = ubs_charge(u, o, size, cap);
	if (ret)
		return ret;
	if (cap > o->cap) {
		nb = realloc(o->buf, (size_t)cap);
		if (!nb)
			return -ENOMEM;
		u->buffered += cap - o->cap;
		o->buf = nb;
		o->cap = cap;
	}
	return 0;
}

/* A working value for o's view; under u->lock. */
static int ubs_new_working(struct ubs *u, struct kvb_obj *o)
{
	o->w = ubs_val_new(u, u->next_vid++, 0, NULL, UBS_WORKING);
	if (!o->w)
		return -ENOMEM;
	o->w->obj = o;
	return 0;
}

/*
 * Bring the committed bytes into the buffer before the first change.  The
 * fields obj_view reads (loaded, w, size) change under u->lock only:
 * getattr asks for the view without the inode's data lock.
 */
static int ubs_obj_load(struct ubs *u, struct kvb_obj *o, int keep)
{
	uint64_t bad, size = keep ? o->base_size : 0;
	int ret = 0;

	if (o->loaded)
		return 0;
	pthread_mutex_lock(&u->lock);
	ret = ubs_reserve(u, o, size);
	if (!ret && keep && o->base_size) {
		ret = ubs_hold(u, o->base, NULL, &bad);
		if (ret == -ENOENT)
			ret = -EIO; /* a reader finds the value gone and drops the file */
		if (!ret) {
			memcpy(o->buf, o->base->data, o->base_size);
			ubs_unhold(u, o->base);
		}
	}
	if (!ret)
		ret = ubs_new_working(u, o);
	if (ret) {
		ubs_uncharge(u, o);
	} else {
		o->size = size;
		o->loaded = 1;
	}
	pthread_mutex_unlock(&u->lock);
	return ret;
}

/*
 * A change to a staged object: its bytes back into a buffer (with keep;
 * none without), the staged value doomed (never recorded: its P line
 * names it for the cleanup) and a fresh working value.  Under u->lock,
 * dropped for the fetch (the caller holds the writer out, and obj_view
 * finds w and size unchanged meanwhile).
 */
static int ubs_unstage(struct ubs *u, struct kvb_obj *o, int keep)
{
	struct ubs_val *sv = o->w, *nw = NULL;
	uint64_t bad, size = keep ? o->size : 0;
	int ret = ubs_reserve(u, o, size);

	if (!ret && size) {
		ret = ubs_hold(u, sv, NULL, &bad);
		if (ret == -ENOENT)
			ret = -EIO; /* the library dropped it: as a committed value it would be a miss */
		if (!ret) {
			memcpy(o->buf, sv->data, (size_t)size);
			ubs_unhold(u, sv);
		}
	}
	if (!ret && !(nw = ubs_val_new(u, u->next_vid++, 0, NULL, UBS_WORKING)))
		ret = -ENOMEM;
	if (ret) {
		ubs_uncharge(u, o); /* staged, the value is what counts */
		return ret;
	}
	nw->obj = o;
	if (!sv->refs)
		ubs_uncache(u, sv);
	(void)ubs_doom(u, sv); /* a failed line is written again by the next failed sync's pass */
	assert(u->nputting > 0);
	u->nputting--;
	o->w = nw;
	o->staged = 0;
	o->size = size;
	return 0;
}

static int ubs_obj_unstage(struct ubs *u, struct kvb_obj *o, int keep)
{
	int ret = 0;

	pthread_mutex_lock(&u->lock);
	if (o->staged)
		ret = ubs_unstage(u, o, keep);
	pthread_mutex_unlock(&u->lock);
	return ret;
}

ssize_t ubs_obj_write(void *arg, struct kvb_obj *o, const void *buf, size_t len,
		      uint64_t off)
{
	struct ubs *u = arg;
	uint64_t end = off + len, size;
	int ret;

	if (len == 0)
		return 0;
	if (end < off || end > (uint64_t)SSIZE_MAX)
		return -EFBIG;
	ret = ubs_obj_load(u, o, 1);
	if (!ret)
		ret = ubs_obj_unstage(u, o, 1);
	if (ret)
		return ret;
	size = end > o->size ? end : o->size;
	pthread_mutex_lock(&u->lock);
	ret = ubs_reserve(u, o, size);
	pthread_mutex_unlock(&u->lock);
	if (ret)
		return ret;
	if (off > o->size)
		memset(o->buf + o->size, 0, (size_t)(off - o->size));
	memcpy(o->buf + off, buf, len);
	pthread_mutex_lock(&u->lock);
	o->size = size;
	o->dirty = 1;
	pthread_mutex_unlock(&u->lock);
	return (ssize_t)len;
}

int ubs_obj_truncate(void *arg, struct kvb_obj *o, uint64_t size)
{
	struct ubs *u = arg;
	int ret;

	/* No change needs no bytes fetched (an ftruncate to the same size). */
	if (!o->loaded && size == o->base_size && (size || !o->base))
		return 0;
	/* Truncating to 0 needs none of the old bytes. */
	ret = ubs_obj_load(u, o, size > 0);
	if (ret)
		return ret;
	if (size == o->size && (size || !o->base))
		return 0;
	ret = ubs_obj_unstage(u, o, size > 0);
	if (ret)
		return ret;
	pthread_mutex_lock(&u->lock);
	ret = ubs_reserve(u, o, size);
	if (!ret) {
		if (size > o->size)
			memset(o->buf + o->size, 0, (size_t)(size - o->size));
		o->size = size;
		o->dirty = 1;
	}
	pthread_mutex_unlock(&u->lock);
	return ret;
}

void ubs_obj_view(void *arg, struct kvb_obj *o, struct kvb_map *view)
{
	struct ubs *u = arg;
	uint64_t ps = u->c.page_size;

	memset(view, 0, sizeof(*view));
	pthread_mutex_lock(&u->lock);
	if (!o->loaded) {
		view->bucket = o->base ? 0 : -1;
		view->page = o->base ? o->base->vid : 0;
		view->size = o->base_size;
	} else {
		view->bucket = o->size ? 0 : -1;
		view->page = o->w->vid;
		view->size = o->size;
	}
	pthread_mutex_unlock(&u->lock);
	view->npages = (view->size + ps - 1) / ps;
}

int ubs_obj_dirty(void *arg, struct kvb_obj *o)
{
	(void)arg;
	return o->dirty;
}

/*
 * "<path>#<vid>.<store id>".  A path too long for the library's keys keeps
 * its head and a hash of the whole: the key stays unique through the vid
 * and the store id, and readable through the head.
 */
static char *ubs_make_key(struct ubs *u, const struct kvb_obj *o, uint64_t vid)
{
	size_t max = u->c.key_max, head = o->klen;
	char suffix[64];
	char *k;
	int sl;

	sl = snprintf(suffix, sizeof(suffix), "#%" PRIu64 ".%s", vid, u->sid);
	if (o->klen + (size_t)sl > max) {
		size_t room = max > (size_t)sl + 20 ? max - (size_t)sl - 18 : 0;

		sl = snprintf(suffix, sizeof(suffix), "~%016llx#%" PRIu64 ".%s",
			      (unsigned long long)XXH64(o->key, o->klen, 0), vid, u->sid);
		head = room < o->klen ? room : o->klen;
	}
	k = malloc(head + (size_t)sl + 1);
	if (!k)
		return NULL;
	memcpy(k, o->key, head);
	memcpy(k + head, suffix, (size_t)sl + 1);
	return k;
}

/* o's spare (taken by commit_prepare) as its new working value.  Under u->lock. */
static void ubs_take_spare(struct ubs *u, struct kvb_obj *o)
{
	struct ubs_val *nw = o->spare;

	assert(nw);
	o->spare = NULL;
	nw->vid = u->next_vid++;
	nw->state = UBS_WORKING;
	nw->obj = o;
	ubs_insert(u, nw);
	o->w = nw;
}

/*
 * The value put for o->w will never be recorded: doom it (a failed put may
 * have written part of it) and give the writer a fresh working value for
 * the bytes it still holds.  Under u->lock.
 */
static void ubs_abandon(struct ubs *u, struct kvb_obj *o)
{
	struct ubs_val *w = o->w;

	ubs_take_spare(u, o);
	ubs_doom(u, w);
}

/*
 * The committed value's D line, written and synced before the record lets
 * go of it (a failed sync counts the line lost: written again).  The
 * caller holds off resets meanwhile (nputting).  Under u->lock.
 */
static int ubs_let_go_line(struct ubs *u, struct ubs_val *base)
{
	uint64_t gen;
	off_t end;
	int ret, tries = 0;

	do {
		ret = ubs_journal(u, "D", &base, 1);
		gen = u->jgen;
		end = u->jlen;
		pthread_mutex_unlock(&u->lock);
		if (!ret)
			ret = ubs_jsync(u, gen, end);
		pthread_mutex_lock(&u->lock);
	} while (ret == -ESTALE && ++tries < 3);
	return ret == -ESTALE ? -EIO : ret;
}

/* The per-page sums of o's buffer into o->pcs, and its checksum. */
static int ubs_sums(struct ubs *u, struct kvb_obj *o, uint64_t *csum)
{
	uint64_t ps = u->c.page_size, np = (o->size + ps - 1) / ps, i;

	free(o->pcs);
	o->pcs = malloc(np * sizeof(*o->pcs));
	if (!o->pcs)
		return -ENOMEM;
	for (i = 0; i < np; i++)
		o->pcs[i] = XXH3_64bits(o->buf + i * ps, o->size - i * ps < ps ? o->size - i * ps : ps);
	*csum = XXH3_64bits(o->buf, o->size);
	return 0;
}

/*
 * Put o's buffer as w's value, its key journalled first (with let_go, the
 * committed value's too, which the record change will let go of: whatever
 * a crash keeps of that change, the next start finds both).  A put that
 * fails may have written part of the value (the RFC's orphans after a
 * partial batch): w is doomed and the writer gets a fresh working value.
 * w then counts among the values in the store and in nputting.
 */
static int ubs_put_working(struct ubs *u, struct kvb_obj *o, int let_go)
{
	struct ubs_put put = { 0 };
	struct ubs_val *w = o->w;
	int ret;

	pthread_mutex_lock(&u->lock);
	w->skey = ubs_make_key(u, o, w->vid);
	if (!w->skey) {
		pthread_mutex_unlock(&u->lock);
		return -ENOMEM;
	}
	w->size = o->size;
	w->state = UBS_PUTTING;
	u->nputting++;
	u->stored_bytes += w->size;
	u->stored_keys++;
	{
		struct ubs_val *pd[2] = { w, o->base };

		/* ubs_put_batch syncs the journal before the put. */
		ret = ubs_journal(u, "PD", pd, let_go && o->base ? 2 : 1);
		put.jgen = u->jgen;
		put.jend = u->jlen;
	}
	pthread_mutex_unlock(&u->lock);
	if (!ret) {
		put.key = w->skey;
		put.buf = o->buf;
		put.len = (size_t)o->size;
		ret = ubs_put(u, &put);
	}
	if (ret) {
		pthread_mutex_lock(&u->lock);
		u->nputting--;
		ubs_abandon(u, o);
		pthread_mutex_unlock(&u->lock);
		return ret == -ENOSPC ? -ENOSPC : -EIO;
	}
	return 0;
}

int ubs_obj_commit_prepare(void *arg, struct kvb_obj *o, int sync, struct kvb_map *map,
			   uint64_t *csum, const uint64_t **pcsums)
{
	struct ubs *u = arg;
	uint64_t ps = u->c.page_size;
	int ret;

	(void)sync; /* a put is as durable as the KV store makes it; nothing to flush */
	memset(map, 0, sizeof(*map));
	o->put_new = 0;
	ret = ubs_obj_load(u, o, 1);
	if (ret)
		return ret;
	/* Nothing may fail to allocate once the put is out (see ubs_take_spare). */
	if (!o->spare && !(o->spare = calloc(1, sizeof(*o->spare))))
		return -ENOMEM;
	if (o->size == 0 || o->staged) {
		/*
		 * No put: nothing to store, or the staged value.  The old value's
		 * key goes to the journal, synced, before the record lets go; as
		 * a put's, the line is held from any reset until the record
		 * changes (a staged value's P line holds already).
		 */
		if (o->base) {
			pthread_mutex_lock(&u->lock);
			if (!o->staged) {
				u->nputting++;
				o->holding = 1;
			}
			ret = ubs_let_go_line(u, o->base);
			if (ret && o->holding) {
				u->nputting--;
				o->holding = 0;
			}
			pthread_mutex_unlock(&u->lock);
			if (ret)
				return ret;
		}
		if (o->staged) {
			o->put_new = 1;
			*map = (struct kvb_map){ .bucket = 0, .page = o->w->vid,
						 .npages = (o->size + ps - 1) / ps, .size = o->size,
						 .skey = o->w->skey };
			*csum = o->scsum;
			*pcsums = o->pcs;
			return 0;
		}
		*map = KVB_MAP_EMPTY;
		*csum = XXH3_64bits(NULL, 0);
		*pcsums = NULL;
		return 0;
	}
	ret = ubs_sums(u, o, csum);
	if (!ret)
		ret = ubs_put_working(u, o, 1);
	if (ret)
		return ret;
	o->put_new = 1;
	map->bucket = 0;
	map->page = o->w->vid;
	map->npages = (o->size + ps - 1) / ps;
	map->size = o->size;
	map->skey = o->w->skey;
	*pcsums = o->pcs;
	return 0;
}

void ubs_obj_commit_done(void *arg, struct kvb_obj *o, int ok)
{
	struct ubs *u = arg;
	struct ubs_val *w = o->w;

	pthread_mutex_lock(&u->lock);
	assert(!(o->put_new && o->holding));
	if (!ok && o->staged) {
		/* The record never pointed at it: it stays staged (and held) for the next commit. */
		o->put_new = 0;
		pthread_mutex_unlock(&u->lock);
		return;
	}
	if (o->put_new || o->holding) {
		assert(u->nputting > 0);
		u->nputting--;
	}
	o->holding = 0;
	if (ok) {
		/* The record now points at w (or at nothing): the old value goes (journalled). */
		if (o->base)
			ubs_doom(u, o->base);
		o->base = NULL;
		o->base_size = 0;
		if (o->put_new) {
			assert(w->state == UBS_PUTTING);
			w->state = UBS_COMMITTED;
			w->obj = NULL;
			o->base = w;
			o->base_size = w->size;
			if (o->staged) {
				/* No buffer: the next change fetches the committed bytes, as after an open. */
				o->w = NULL;
				o->staged = 0;
				o->loaded = 0;
			} else {
				/* The buffer stays the writer's, under a new working value. */
				ubs_take_spare(u, o);
			}
		}
		if (u->commit_epoch < u->barrier_epoch)
			u->commit_epoch = u->barrier_epoch; /* never shortens a prepare's hold */
		ubs_uncharge(u, o);
		o->dirty = 0;
	} else if (o->put_new) {
		/* The record never pointed at w: its value goes, the writer keeps its bytes. */
		ubs_abandon(u, o);
	}
	o->put_new = 0;
	pthread_mutex_unlock(&u->lock);
}

/*
 * Put the bytes now rather than at the commit, and free the buffer: a
 * changed object whose bytes are all in the buffer, between commits.  An
 * unchanged one's buffer holds the committed bytes: it is only freed (the
 * next change fetches them again, as after an open).
 */
int ubs_obj_stage(void *arg, struct kvb_obj *o)
{
	struct ubs *u = arg;
	uint64_t csum;
	int ret;

	if (!o->loaded || o->staged || o->put_new || o->holding)
		return 0;
	if (!o->dirty) {
		pthread_mutex_lock(&u->lock);
		assert(o->size == o->base_size);
		ubs_unlink(u, o->w);
		ubs_val_free(u, o->w);
		o->w = NULL;
		o->loaded = 0;
		ubs_buf_release(u, o);
		pthread_mutex_unlock(&u->lock);
		return 0;
	}
	if (o->size == 0)
		return 0;
	if (!o->spare && !(o->spare = calloc(1, sizeof(*o->spare))))
		return -ENOMEM;
	ret = ubs_sums(u, o, &csum);
	if (!ret)
		ret = ubs_put_working(u, o, 0);
	if (ret)
		return ret;
	pthread_mutex_lock(&u->lock);
	o->staged = 1;
	o->scsum = csum;
	/* The value counts among the stored ones now, not as a writer's data. */
	ubs_buf_release(u, o);
	pthread_mutex_unlock(&u->lock);
	return 0;
}

void ubs_obj_close(void *arg, struct kvb_obj *o)
{
	struct ubs *u = arg;

	pthread_mutex_lock(&u->lock);
	if (o->w && o->staged) {
		/* Never recorded: its P line names it until the delete. */
		(void)ubs_doom(u, o->w);
		assert(u->nputting > 0);
		u->nputting--;
	} else if (o->w) {
		ubs_unlink(u, o->w);
		ubs_val_free(u, o->w);
	}
	ubs_buf_release(u, o);
	pthread_mutex_unlock(&u->lock);
	free(o->spare);
	free(o->pcs);
	free(o);
}
