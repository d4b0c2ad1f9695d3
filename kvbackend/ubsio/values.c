/*
 * values.c: the value table (every value the backend knows, by vid) and
 * its doomed list, the read cache of fetched values, and the queue that
 * batches the library calls of concurrent committers (journal.c's puts)
 * and readers (the gets here).
 */
#include "ubsio_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvb_hash.h"

#include "meta.h"

/* Under u->lock, as every function here that takes a struct ubs and no lock. */
struct ubs_val *ubs_find(struct ubs *u, uint64_t vid)
{
	struct htab_node *n = htab_find(&u->tab, vid);

	return n ? htab_entry(n, struct ubs_val, hnode) : NULL;
}

/* Never fails (see htab.h); v->vid must not be in the table. */
void ubs_insert(struct ubs *u, struct ubs_val *v)
{
	assert(!ubs_find(u, v->vid));
	v->hnode.key = v->vid;
	htab_insert(&u->tab, &v->hnode);
}

void ubs_unlink(struct ubs *u, struct ubs_val *v)
{
	htab_remove(&u->tab, &v->hnode);
}

static void ubs_lru_remove(struct ubs *u, struct ubs_val *v)
{
	if (v->lru_prev)
		v->lru_prev->lru_next = v->lru_next;
	else if (u->lru_head == v)
		u->lru_head = v->lru_next;
	if (v->lru_next)
		v->lru_next->lru_prev = v->lru_prev;
	else if (u->lru_tail == v)
		u->lru_tail = v->lru_prev;
	v->lru_prev = v->lru_next = NULL;
}

static void ubs_lru_front(struct ubs *u, struct ubs_val *v)
{
	ubs_lru_remove(u, v);
	v->lru_next = u->lru_head;
	if (u->lru_head)
		u->lru_head->lru_prev = v;
	u->lru_head = v;
	if (!u->lru_tail)
		u->lru_tail = v;
}

/* Drop v's cached bytes (no reader may be copying). */
void ubs_uncache(struct ubs *u, struct ubs_val *v)
{
	if (!v->data)
		return;
	assert(!v->refs && u->cached >= v->size);
	ubs_lru_remove(u, v);
	free(v->data);
	v->data = NULL;
	v->verified = 0;
	u->cached -= v->size;
}

/*
 * Keep the cache within its bound, sparing values being read and the most
 * recently used one even when it alone is larger than the bound: a file
 * read in pieces is then still fetched once, not once per piece.
 */
static void ubs_cache_trim(struct ubs *u)
{
	struct ubs_val *v = u->lru_tail, *prev;

	for (; v && v != u->lru_head && u->cached > u->c.cache_max; v = prev) {
		prev = v->lru_prev;
		if (!v->refs)
			ubs_uncache(u, v);
	}
}

void ubs_val_free(struct ubs *u, struct ubs_val *v)
{
	assert(!v->refs);
	ubs_uncache(u, v);
	free(v->skey);
	free(v);
}

struct ubs_val *ubs_val_new(struct ubs *u, uint64_t vid, uint64_t size, const char *skey,
			    enum ubs_state state)
{
	struct ubs_val *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	v->vid = vid;
	v->size = size;
	v->state = state;
	if (skey && !(v->skey = strdup(skey))) {
		free(v);
		return NULL;
	}
	ubs_insert(u, v);
	return v;
}

/* ---- the doomed list ---- */

/* Put v on the doomed list (no journal line).  Under u->lock. */
void ubs_doom_quiet(struct ubs *u, struct ubs_val *v)
{
	v->state = UBS_DOOMED;
	v->obj = NULL;
	v->doom_seq = u->doom_seq++;
	v->dnext = NULL;
	v->dprev = u->doomed_tail;
	if (u->doomed_tail)
		u->doomed_tail->dnext = v;
	else
		u->doomed_head = v;
	u->doomed_tail = v;
	u->ndoomed++;
}

void ubs_doom_remove(struct ubs *u, struct ubs_val *v)
{
	assert(v->state == UBS_DOOMED && u->ndoomed > 0);
	if (v->dprev)
		v->dprev->dnext = v->dnext;
	else
		u->doomed_head = v->dnext;
	if (v->dnext)
		v->dnext->dprev = v->dprev;
	else
		u->doomed_tail = v->dprev;
	v->dprev = v->dnext = NULL;
	u->ndoomed--;
}

/* ---- batched calls ---- */

/*
 * Queue r and wait until a batch has served it: the first caller in makes
 * the batch call for every request waiting (none waits when alone; many
 * committers or readers share one call).
 */
void ubs_queue_run(struct ubs *u, struct ubs_queue *q, struct ubs_req *r,
		   void (*batch)(struct ubs *, struct ubs_req *))
{
	pthread_mutex_lock(&q->lock);
	r->next = NULL;
	r->done = 0;
	*q->tail = r;
	q->tail = &r->next;
	while (!r->done) {
		if (!q->busy) {
			struct ubs_req *list = q->head, *it;

			q->head = NULL;
			q->tail = &q->head;
			q->busy = 1;
			pthread_mutex_unlock(&q->lock);
			batch(u, list);
			pthread_mutex_lock(&q->lock);
			for (it = list; it; it = it->next)
				it->done = 1;
			q->busy = 0;
			pthread_cond_broadcast(&q->cond);
		} else {
			pthread_cond_wait(&q->cond, &q->lock);
		}
	}
	pthread_mutex_unlock(&q->lock);
}

void ubs_queue_init(struct ubs_queue *q)
{
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	q->head = NULL;
	q->tail = &q->head;
	q->busy = 0;
}

void ubs_queue_destroy(struct ubs_queue *q)
{
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
}

/* ---- fetching ---- */

/* A read waiting in the get queue. */
struct ubs_get {
	struct ubs_req r;
	const char *key;
	unsigned char *buf;     /* the caller's, len bytes */
	size_t len;
	int rc;
};

/*
 * Take what a successful BatchGet left in *slot for g.  Older releases put
 * a pool block of their own there (4 MiB, given back with BatchFree: the
 * python binding's PyKvcKvBatchGetData at 7e38ed07); current ones fill our
 * buffer, or zero the slot when the key failed (boostio's mirror_client.cpp,
 * releaseValues).  Both are told apart by what came back.
 */
static void ubs_get_collect(struct ubs_get *g, void *got, int res, void **pool, uint32_t *npool)
{
	g->rc = ubs_errno(res);
	if (got == g->buf || !got)
		return;
	if (!g->rc)
		memcpy(g->buf, got, g->len);
	pool[(*npool)++] = got;
}

/*
 * Fetch a batch: values that fit a pool block with BatchGet, longer ones
 * (which older releases cut to a block without a word) one by one with
 * Get.  The lengths asked for are our records' sizes: a current release
 * fails a key whose value is shorter, and neither call says how long the
 * value was.  A call that fails as a whole is retried key by key, each
 * with its own buffer again (a failed call may have zeroed the slots).
 */
static void ubs_get_batch(struct ubs *u, struct ubs_req *list)
{
	const char *keys[UBS_BATCH];
	void *bufs[UBS_BATCH], *pool[UBS_BATCH];
	size_t lens[UBS_BATCH];
	int res[UBS_BATCH];
	struct ubs_get *q[UBS_BATCH];
	struct ubs_req *it = list;
	uint32_t i, m, npool;
	unsigned calls, errors;

	while (it) {
		calls = errors = 0;
		for (m = 0; it && m < UBS_BATCH; it = it->next) {
			struct ubs_get *g = (struct ubs_get *)it;

			if (!ubs_key_ok(g->key) || !g->len || !g->buf) {
				g->rc = -EINVAL;
			} else if (g->len > UBS_POOL_BLOCK) {
				g->rc = ubs_errno(ubs_get_call(g->key, g->buf, g->len));
				calls++;
				errors += g->rc != 0;
			} else {
				q[m] = g;
				keys[m] = g->key;
				bufs[m] = g->buf;
				lens[m] = g->len;
				res[m++] = UBS_NO_RESULT;
			}
		}
		npool = 0;
		if (m) {
			calls++;
			if (ubs_bget_call(keys, bufs, lens, res, m) == 0) {
				for (i = 0; i < m; i++)
					ubs_get_collect(q[i], bufs[i], res[i], pool, &npool);
			} else {
				for (i = 0; i < m; i++) {
					bufs[i] = q[i]->buf;
					res[i] = UBS_NO_RESULT;
					if (m > 1 && (calls++, ubs_bget_call(keys + i, bufs + i, lens + i,
									      res + i, 1) == 0))
						ubs_get_collect(q[i], bufs[i], res[i], pool, &npool);
					else
						q[i]->rc = -EIO;
				}
			}
			if (npool)
				ubs_bfree_call(pool, npool);
		}
		for (i = 0; i < m; i++)
			errors += q[i]->rc != 0;
		pthread_mutex_lock(&u->lock);
		u->st.calls[KVB_CALL_READ] += calls;
		u->st.errors[KVB_CALL_READ] += errors;
		pthread_mutex_unlock(&u->lock);
	}
}

/* Read the value under key, len bytes long, into buf: 0, -ENOENT (gone) or -errno. */
static int ubs_fetch(struct ubs *u, const char *key, unsigned char *buf, size_t len)
{
	struct ubs_get g = { .key = key, .buf = buf, .len = len, .rc = -EIO };

	ubs_queue_run(u, &u->gets, &g.r, ubs_get_batch);
	return g.rc;
}

/*
 * The bytes of committed value v, fetched once into the cache and held
 * with a reference; with pcs, checked page by page first (-EBADMSG, *bad =
 * the first bad page).  -ENOENT: the store no longer has the value (the
 * library evicts by itself).  Under u->lock, which is dropped for the
 * fetch.
 */
int ubs_hold(struct ubs *u, struct ubs_val *v, const uint64_t *pcs, uint64_t *bad)
{
	unsigned char *buf;
	char *skey;
	int ret;

	if (!v->skey || v->deleting || !v->size || v->size > SIZE_MAX)
		return -EIO;
	v->refs++; /* v cannot be freed while we fetch */
	if (v->data)
		goto check;
	skey = strdup(v->skey);
	buf = malloc((size_t)v->size);
	if (!skey || !buf) {
		free(skey);
		free(buf);
		v->refs--;
		return -ENOMEM;
	}
	pthread_mutex_unlock(&u->lock);
	ret = ubs_fetch(u, skey, buf, (size_t)v->size);
	pthread_mutex_lock(&u->lock);
	if (ret) {
		fprintf(stderr, "offloadfs: ubsio: fetching '%s' (%" PRIu64 " bytes) failed: %s\n",
			skey, v->size, ret == -ENOENT ? "the store has no such value" : strerror(-ret));
		free(skey);
		free(buf);
		v->refs--;
		return ret;
	}
	free(skey);
	if (v->data) {
		free(buf); /* another reader fetched it meanwhile */
	} else {
		v->data = buf;
		u->cached += v->size;
	}
check:
	ubs_lru_front(u, v);
	if (pcs && !v->verified) {
		uint64_t i, ps = u->c.page_size, np = (v->size + ps - 1) / ps;

		for (i = 0; i < np; i++) {
			uint64_t len = v->size - i * ps < ps ? v->size - i * ps : ps;

			if (XXH3_64bits(v->data + i * ps, len) != pcs[i]) {
				*bad = i;
				v->refs--;
				ubs_cache_trim(u);
				return -EBADMSG;
			}
		}
		v->verified = 1;
	}
	return 0;
}

void ubs_unhold(struct ubs *u, struct ubs_val *v)
{
	assert(v->refs > 0);
	v->refs--;
	ubs_cache_trim(u);
}

/*
 * Zero copy: the reply is sent straight from the library's buffer (the
 * RFC's extra memcpy after BatchGetDirect, gone), held until unref.
 */
ssize_t ubs_read_ref(void *arg, const struct kvb_map *m, const uint64_t *pcs, size_t len,
		     uint64_t off, const void **ptr, void **ref, uint64_t *bad)
{
	struct ubs *u = arg;
	struct ubs_val *v;
	int ret;

	*ptr = NULL;
	*ref = NULL;
	if (m->bucket < 0 || off >= m->size)
		return 0;
	if (len > m->size - off)
		len = (size_t)(m->size - off);
	pthread_mutex_lock(&u->lock);
	v = ubs_find(u, m->page);
	if (!v || (v->obj && v->obj->w == v && !v->obj->staged)) {
		/*
		 * Gone, or a writer's buffer: the copying path knows what to do.
		 * A staged writer's bytes are in its value, read as a committed one's.
		 */
		pthread_mutex_unlock(&u->lock);
		return v ? -EOPNOTSUPP : -EIO;
	}
	ret = ubs_hold(u, v, pcs, bad);
	pthread_mutex_unlock(&u->lock);
	if (ret)
		return ret;
	*ptr = v->data + off;
	*ref = v;
	return (ssize_t)len;
}

void ubs_read_unref(void *arg, void *ref)
{
	struct ubs *u = arg;

	pthread_mutex_lock(&u->lock);
	ubs_unhold(u, ref);
	pthread_mutex_unlock(&u->lock);
}

/* A copy of committed bytes (through ubs_read_ref), or of a writer's buffer. */
static ssize_t ubs_read_any(struct ubs *u, const struct kvb_map *m, const uint64_t *pcs,
			    void *buf, size_t len, uint64_t off, uint64_t *bad)
{
	const void *ptr;
	struct ubs_val *v;
	void *ref;
	ssize_t n = ubs_read_ref(u, m, pcs, len, off, &ptr, &ref, bad);

	if (n == -EOPNOTSUPP) {
		/* A writer's view: its buffer (the caller holds the writer out). */
		pthread_mutex_lock(&u->lock);
		v = ubs_find(u, m->page);
		if (v && v->obj && v->obj->w == v) {
			struct kvb_obj *o = v->obj;

			n = off < o->size ? (ssize_t)(o->size - off < len ? o->size - off : len) : 0;
			memcpy(buf, o->buf + off, (size_t)n);
		} else {
			n = -EIO;
		}
		pthread_mutex_unlock(&u->lock);
		return n;
	}
	if (n > 0)
		memcpy(buf, ptr, (size_t)n);
	if (ref)
		ubs_read_unref(u, ref);
	return n;
}

ssize_t ubs_read(void *arg, const struct kvb_map *m, void *buf, size_t len, uint64_t off)
{
	uint64_t bad;

	return ubs_read_any(arg, m, NULL, buf, len, off, &bad);
}

ssize_t ubs_read_verified(void *arg, const struct kvb_map *m, const uint64_t *pcsums,
			  void *buf, size_t len, uint64_t off, uint64_t *bad_page)
{
	return ubs_read_any(arg, m, pcsums, buf, len, off, bad_page);
}

/* ---- loading ---- */

/* Load the value table from the records (current and previous keys). */
static int ubs_load_one(void *ctx, const struct meta_inode *in, const char *skey,
			const char *prev_skey)
{
	struct ubs *u = ctx;
	struct ubs_val *v;

	if (skey && in->bucket >= 0 && !ubs_find(u, in->page)) {
		v = ubs_val_new(u, in->page, in->size, skey, UBS_COMMITTED);
		if (!v)
			return -ENOMEM;
		u->stored_bytes += v->size;
		u->stored_keys++;
	}
	if (prev_skey && in->prev_bucket >= 0 && !ubs_find(u, in->prev_page)) {
		v = ubs_val_new(u, in->prev_page, in->prev_size, prev_skey, UBS_COMMITTED);
		if (!v)
			return -ENOMEM;
		u->stored_bytes += v->size;
		u->stored_keys++;
	}
	if (in->page >= u->next_vid)
		u->next_vid = in->page + 1;
	if (in->prev_page >= u->next_vid)
		u->next_vid = in->prev_page + 1;
	return 0;
}

void ubs_table_clear(struct ubs *u)
{
	struct htab_node *n;

	while ((n = htab_pop(&u->tab)))
		ubs_val_free(u, htab_entry(n, struct ubs_val, hnode));
	u->stored_bytes = u->stored_keys = 0;
	u->ndoomed = 0;
	u->doomed_head = u->doomed_tail = NULL;
}

int ubs_load(struct ubs *u)
{
	int ret;

	ubs_table_clear(u);
	ret = meta_foreach_value(u->m, ubs_load_one, u);
	u->loaded = !ret;
	return ret;
}

/*
 * Reload the table after recovery and doom every value the records held
 * before it and hold no more (a file unlinked while open, a write that
 * never finished, a version recovery dropped): the pages backend's bitmap
 * rebuild frees those pages; here their keys must be deleted.  Returns how
 * many were doomed.
 */
int ubs_reload(struct ubs *u, uint64_t *dropped)
{
	struct htab old = u->tab;
	struct htab_node *n;
	int ret;

	*dropped = 0;
	if (htab_init(&u->tab)) {
		u->tab = old;
		return -ENOMEM;
	}
	u->stored_bytes = u->stored_keys = 0;
	u->ndoomed = 0;
	u->doomed_head = u->doomed_tail = NULL;
	ret = meta_foreach_value(u->m, ubs_load_one, u);
	while ((n = htab_pop(&old))) {
		struct ubs_val *v = htab_entry(n, struct ubs_val, hnode);

		if (!ret && !ubs_find(u, v->vid)) {
			v->lru_prev = v->lru_next = NULL;
			ubs_insert(u, v);
			ubs_doom_quiet(u, v);
			u->stored_keys++;
			u->stored_bytes += v->size;
			(*dropped)++;
			continue;
		}
		ubs_val_free(u, v);
	}
	htab_release(&old);
	return ret;
}
