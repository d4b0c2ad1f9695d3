/* dram.c: the DRAM tier (see dram.h). */
#include "dram.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "htab.h"

struct ofs_dram_entry {
	struct htab_node node;              /* in tab, keyed by inode number */
	struct ofs_dram_version v;
	char *data;
	struct ofs_dram_entry *prev, *next; /* LRU list */
};

int ofs_dram_init(struct ofs_dram *d, uint64_t capacity)
{
	memset(d, 0, sizeof(*d));
	d->capacity = capacity;
	d->tab = malloc(sizeof(*d->tab));
	if (!d->tab || htab_init(d->tab)) {
		free(d->tab);
		d->tab = NULL;
		return -ENOMEM;
	}
	pthread_mutex_init(&d->lock, NULL);
	return 0;
}

static void dram_unlink(struct ofs_dram *d, struct ofs_dram_entry *e)
{
	htab_remove(d->tab, &e->node);
	if (e->prev)
		e->prev->next = e->next;
	else
		d->mru = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		d->lru = e->prev;
	d->bytes -= e->v.size;
	free(e->data);
	free(e);
}

void ofs_dram_release(struct ofs_dram *d)
{
	if (!d->tab)
		return;
	while (d->mru)
		dram_unlink(d, d->mru);
	htab_release(d->tab);
	free(d->tab);
	d->tab = NULL;
	pthread_mutex_destroy(&d->lock);
}

static struct ofs_dram_entry *dram_find(struct ofs_dram *d, uint64_t ino)
{
	struct htab_node *n = htab_find(d->tab, ino);

	return n ? htab_entry(n, struct ofs_dram_entry, node) : NULL;
}

static int dram_same(const struct ofs_dram_version *a, const struct ofs_dram_version *b)
{
	return a->bucket == b->bucket && a->page == b->page && a->size == b->size &&
	       a->csum == b->csum;
}

static void dram_touch(struct ofs_dram *d, struct ofs_dram_entry *e)
{
	if (d->mru == e)
		return;
	e->prev->next = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		d->lru = e->prev;
	e->prev = NULL;
	e->next = d->mru;
	d->mru->prev = e;
	d->mru = e;
}

ssize_t ofs_dram_read(struct ofs_dram *d, uint64_t ino, const struct ofs_dram_version *v,
		      void *buf, size_t len, uint64_t off)
{
	struct ofs_dram_entry *e;
	ssize_t n = -ENOENT;

	pthread_mutex_lock(&d->lock);
	e = dram_find(d, ino);
	if (e && !dram_same(&e->v, v)) {
		/* A newer version was committed: this one must never be served. */
		dram_unlink(d, e);
		e = NULL;
	}
	if (e) {
		if (off >= e->v.size) {
			n = 0;
		} else {
			if (len > e->v.size - off)
				len = (size_t)(e->v.size - off);
			memcpy(buf, e->data + off, len);
			n = (ssize_t)len;
		}
		dram_touch(d, e);
	}
	pthread_mutex_unlock(&d->lock);
	return n;
}

int ofs_dram_insert(struct ofs_dram *d, uint64_t ino, const struct ofs_dram_version *v,
		    char *data, uint64_t *evicted)
{
	struct ofs_dram_entry *e;

	*evicted = 0;
	if (v->size > d->capacity) {
		free(data);
		return -E2BIG;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		free(data);
		return -ENOMEM;
	}
	e->node.key = ino;
	e->v = *v;
	e->data = data;
	pthread_mutex_lock(&d->lock);
	{
		struct ofs_dram_entry *old = dram_find(d, ino);

		if (old)
			dram_unlink(d, old);
	}
	while (d->bytes + v->size > d->capacity && d->lru) {
		dram_unlink(d, d->lru);
		(*evicted)++;
	}
	htab_insert(d->tab, &e->node);
	e->next = d->mru;
	if (d->mru)
		d->mru->prev = e;
	d->mru = e;
	if (!d->lru)
		d->lru = e;
	d->bytes += v->size;
	pthread_mutex_unlock(&d->lock);
	return 0;
}

void ofs_dram_drop(struct ofs_dram *d, uint64_t ino)
{
	struct ofs_dram_entry *e;

	pthread_mutex_lock(&d->lock);
	e = dram_find(d, ino);
	if (e)
		dram_unlink(d, e);
	pthread_mutex_unlock(&d->lock);
}

int ofs_dram_has(struct ofs_dram *d, uint64_t ino, const struct ofs_dram_version *v)
{
	struct ofs_dram_entry *e;
	int has;

	pthread_mutex_lock(&d->lock);
	e = dram_find(d, ino);
	has = e && dram_same(&e->v, v);
	pthread_mutex_unlock(&d->lock);
	return has;
}

uint64_t *ofs_dram_list(struct ofs_dram *d, size_t *n)
{
	struct ofs_dram_entry *e;
	uint64_t *v;
	size_t i = 0;

	pthread_mutex_lock(&d->lock);
	v = malloc((d->tab->count + 1) * sizeof(*v));
	for (e = d->mru; v && e; e = e->next)
		v[i++] = e->node.key;
	pthread_mutex_unlock(&d->lock);
	*n = i;
	return v;
}

uint64_t ofs_dram_used(struct ofs_dram *d)
{
	uint64_t b;

	if (!d->tab)
		return 0;
	pthread_mutex_lock(&d->lock);
	b = d->bytes;
	pthread_mutex_unlock(&d->lock);
	return b;
}
