/*
 * promote.c: promotion tasks into the DRAM tier (DESIGN.md, "DRAM tier and
 * promotion tasks"): queued, claimed, carried out never on stale pages and
 * never blocking a reader.  See promote.h.
 */
#include "promote.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kvb_hash.h"

/* Every PROMOTE_PRUNE_EVERY tasks claimed, finished ones beyond PROMOTE_TASKS_KEPT go. */
#define PROMOTE_PRUNE_EVERY 256
#define PROMOTE_TASKS_KEPT 4096

int ofs_promote_queue(struct ofs_store *s, const struct meta_inode *m, const char *reason)
{
	int warmup = !strcmp(reason, "warmup");
	struct ofs_dram_version v;
	struct meta_task t;
	size_t klen = 0;
	int ret;

	if (!s->dram_capacity)
		return -EOPNOTSUPP;
	if (!S_ISREG(m->mode) || m->state != META_COMMITTED)
		return -EINVAL;
	/* The DRAM tier holds KV blocks: a file of extents (a pool) stays where it is. */
	if (m->bucket == META_EXTENTS)
		return -EFBIG;
	ofs_version(m, &v);
	if (m->size == 0 || (!warmup && ofs_dram_has(&s->dram, m->ino, &v)))
		return 0;
	ret = meta_task_pending(s->meta, m->ino);
	if (ret)
		return ret < 0 ? ret : 0;
	memset(&t, 0, sizeof(t));
	t.ino = m->ino;
	if (meta_path(s->meta, m->ino, 1, t.key, sizeof(t.key), &klen, NULL))
		t.key[0] = '\0';
	snprintf(t.reason, sizeof(t.reason), "%s", reason);
	t.size = m->size;
	t.bucket = m->bucket;
	t.page = m->page;
	t.csum = m->csum;
	ret = meta_task_add(s->meta, &t);
	if (ret)
		return ret;
	OFS_COUNT(s->metrics.promotions_queued, 1);
	return 1;
}

/* The record of ino as it is now (the copy in memory is the freshest). */
static int promote_current(struct ofs_store *s, uint64_t ino, struct meta_inode *m)
{
	struct ofs_object *o;
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	o = ofs_object_find(s, ino);
	if (o)
		*m = o->m;
	else
		ret = meta_get(s->meta, ino, m);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

void ofs_promote_run(struct ofs_store *s, const struct meta_task *t)
{
	struct ofs_dram_version v = { t->bucket, t->page, t->size, t->csum };
	struct kvb_map map = { t->bucket, t->page,
			       (t->size + s->geom.page_size - 1) / s->geom.page_size, t->size, NULL };
	struct meta_inode m;
	const char *why = NULL;
	int state = META_TASK_DONE, ret;
	uint64_t evicted = 0;
	char *buf = NULL;

	ret = promote_current(s, t->ino, &m);
	if (ret || m.state != META_COMMITTED || m.bucket != t->bucket || m.page != t->page ||
	    m.size != t->size || m.csum != t->csum) {
		state = META_TASK_DROPPED;
		why = ret ? "deleted before the promotion ran" : "overwritten before the promotion ran";
	} else if (!(buf = malloc(t->size ? t->size : 1))) {
		state = META_TASK_FAILED;
		why = "out of memory";
	} else if (kvb_read(&s->kvb, &map, buf, t->size, 0) !=
		   (ssize_t)t->size) {
		state = META_TASK_FAILED;
		why = "read error";
	} else if (!kvb_csum_matches(buf, t->size, s->geom.page_size, t->csum)) {
		/* Never keep those bytes: overwritten while we read, or corrupt. */
		ret = promote_current(s, t->ino, &m);
		if (!ret && m.csum == t->csum && m.bucket == t->bucket && m.page == t->page) {
			state = META_TASK_FAILED;
			why = "its pages do not match its checksum";
			OFS_COUNT(s->metrics.checksum_failures, 1);
		} else {
			state = META_TASK_DROPPED;
			why = "overwritten while being read";
		}
	} else {
		ret = ofs_dram_insert(&s->dram, t->ino, &v, buf, &evicted);
		buf = NULL;
		if (ret) {
			state = META_TASK_FAILED;
			why = ret == -E2BIG ? "larger than the DRAM tier" : strerror(-ret);
		}
		OFS_COUNT(s->metrics.dram_evictions, evicted);
	}
	free(buf);
	if (state == META_TASK_DONE)
		OFS_COUNT(s->metrics.promotions_done, 1);
	else if (state == META_TASK_DROPPED)
		OFS_COUNT(s->metrics.promotions_dropped, 1);
	else
		OFS_COUNT(s->metrics.promotions_failed, 1);
	pthread_mutex_lock(&s->lock);
	ret = meta_task_finish(s->meta, t->id, state, why);
	if (ret)
		ofs_log("promotion task %llu: cannot record its end: %s",
			(unsigned long long)t->id, meta_errmsg(s->meta));
	pthread_mutex_unlock(&s->lock);
}

int ofs_promote_claim(struct ofs_store *s, struct meta_task *t)
{
	int ret;

	pthread_mutex_lock(&s->lock);
	ret = meta_task_claim(s->meta, t);
	if (ret == 0 && ++s->promote_claims % PROMOTE_PRUNE_EVERY == 0)
		meta_task_prune(s->meta, PROMOTE_TASKS_KEPT);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

void ofs_promote_requeue(struct ofs_store *s)
{
	uint64_t n = 0;

	pthread_mutex_lock(&s->lock);
	meta_task_requeue(s->meta, &n);
	pthread_mutex_unlock(&s->lock);
}

void ofs_promote_warmup(struct ofs_store *s)
{
	uint64_t *inos;
	size_t n = 0, i;

	inos = ofs_dram_list(&s->dram, &n);
	pthread_mutex_lock(&s->lock);
	for (i = 0; inos && i < n; i++) {
		struct meta_inode m;

		if (meta_get(s->meta, inos[i], &m) == 0)
			ofs_promote_queue(s, &m, "warmup");
	}
	pthread_mutex_unlock(&s->lock);
	free(inos);
}
