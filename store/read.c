/*
 * read.c: the read strategy.  The bytes of a version come from the DRAM
 * tier, the backend's own buffer (zero copy), a copy checked page by page
 * (verify), a bucket file range the caller can splice, or a plain copy, in
 * that order of preference; and the read of what an object holds now,
 * its working state or its committed version.  See object.h.
 */
#include "object.h"
#include "extent.h"
#include "kvb_hash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The committed version's per-page checksums, loaded once per object. */
static int read_load_pcs(struct ofs_store *s, struct ofs_object *o)
{
	uint64_t *pcs;
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	if (!o->pcs) {
		pcs = malloc(o->m.npages * sizeof(*pcs));
		ret = pcs ? meta_pcsums_get(s->meta, o->m.ino, pcs, o->m.npages) : -ENOMEM;
		if (ret)
			free(pcs);
		else
			o->pcs = pcs;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/* A page that failed its checksum: counted and logged with its key and place. */
static void read_log_bad_page(struct ofs_store *s, struct ofs_object *o,
			      const struct kvb_map *map, uint64_t bad)
{
	char key[OFS_KEY_MAX + 1];
	size_t klen = 0;

	pthread_mutex_lock(&s->lock);
	OFS_COUNT(s->metrics.checksum_failures, 1);
	/* The key below its tenant; an unlinked object keeps none. */
	if (meta_path(s->meta, o->m.ino, 0, key, OFS_KEY_MAX, &klen, NULL))
		klen = 0;
	pthread_mutex_unlock(&s->lock);
	key[klen] = '\0';
	ofs_log("checksum mismatch: inode %llu key '%s' bucket %d page %llu (bucket offset "
		"%llu): returning EIO",
		(unsigned long long)o->m.ino, key, map->bucket,
		(unsigned long long)(map->page + bad),
		(unsigned long long)((map->page + bad) * s->geom.page_size));
}

/*
 * Each thread keeps the last buffer of an uncached read for its next one:
 * a fresh buffer of a READ's size is a new mapping whose pages the kernel
 * zeroes and faults in at every read, which cost as much as the read.
 */
#define READ_SPARE_MAX (4u << 20) /* larger ones go back to malloc */

struct read_spare {
	char *buf;
	size_t cap;
};

static pthread_key_t read_spare_key;
static pthread_once_t read_spare_once = PTHREAD_ONCE_INIT;

static void read_spare_free(void *arg)
{
	struct read_spare *sp = arg;

	free(sp->buf);
	free(sp);
}

static void read_spare_init(void)
{
	if (pthread_key_create(&read_spare_key, read_spare_free))
		read_spare_key = (pthread_key_t)-1;
}

static struct read_spare *read_spare(void)
{
	struct read_spare *sp;

	pthread_once(&read_spare_once, read_spare_init);
	if (read_spare_key == (pthread_key_t)-1)
		return NULL;
	sp = pthread_getspecific(read_spare_key);
	if (!sp && (sp = calloc(1, sizeof(*sp))) && pthread_setspecific(read_spare_key, sp)) {
		free(sp);
		sp = NULL;
	}
	return sp;
}

int ofs_bytes_alloc_aligned(struct ofs_store *s, struct ofs_bytes *b, size_t size)
{
	struct read_spare *sp = read_spare();
	size_t cap = size ? size : 1;

	if (sp && sp->buf && sp->cap >= cap) {
		b->own = sp->buf;
		b->cap = sp->cap;
		sp->buf = NULL;
	} else {
		if (posix_memalign((void **)&b->own, s->geom.page_size, cap)) {
			b->own = NULL;
			return -ENOMEM;
		}
		b->cap = cap;
	}
	b->ptr = b->own;
	return 0;
}

void ofs_bytes_release(struct ofs_store *s, struct ofs_bytes *b)
{
	struct read_spare *sp;

	if (b->ref)
		kvb_read_unref(&s->kvb, b->ref);
	if (b->own && b->cap && b->cap <= READ_SPARE_MAX && (sp = read_spare())) {
		free(sp->buf);
		sp->buf = b->own;
		sp->cap = b->cap;
		b->own = NULL;
	}
	free(b->own);
}

/* The DRAM tier's copy, when it has this version: the count, or -ENOENT on a miss. */
static ssize_t read_dram(struct ofs_store *s, struct ofs_object *o, size_t size, uint64_t off,
			 struct ofs_bytes *b)
{
	struct ofs_dram_version v;
	ssize_t n = -ENOENT;

	ofs_version(&o->m, &v);
	b->own = malloc(size ? size : 1);
	if (b->own)
		n = ofs_dram_read(&s->dram, o->m.ino, &v, b->own, size, off);
	if (n < 0) {
		free(b->own);
		b->own = NULL;
		OFS_COUNT(s->metrics.dram_misses, 1);
		return -ENOENT;
	}
	OFS_COUNT(s->metrics.dram_hits, 1);
	b->ptr = b->own;
	return n;
}

ssize_t ofs_object_read(struct ofs_store *s, struct ofs_object *o, const struct kvb_map *map,
			size_t size, uint64_t off, int quiet, struct ofs_bytes *b)
{
	struct kvb *kvb = &s->kvb;
	uint64_t bad = 0;
	ssize_t n;

	memset(b, 0, sizeof(*b));
	b->fd = -1;
	if (s->dram_capacity && !o->obj && (n = read_dram(s, o, size, off, b)) >= 0)
		return n;
	if (!o->obj && map->bucket >= 0 && (!s->verify || read_load_pcs(s, o) == 0)) {
		n = kvb_read_ref(kvb, map, s->verify ? o->pcs : NULL, size, off, &b->ptr, &b->ref,
				 &bad);
		if (n != -EOPNOTSUPP)
			goto checked;
	}
	if (s->verify && !o->obj && map->bucket >= 0 && read_load_pcs(s, o) == 0) {
		b->own = malloc(size ? size : 1);
		n = b->own ? kvb_read_verified(kvb, map, o->pcs, b->own, size, off, &bad) : -ENOMEM;
		b->ptr = b->own;
		goto checked;
	}
	if (kvb_read_fd(kvb, map, off, size, &b->fd, &b->pos) == 0)
		return (ssize_t)size; /* straight from the bucket file: no copy through our memory */
	b->fd = -1;
	b->own = malloc(size ? size : 1);
	b->ptr = b->own;
	n = b->own ? kvb_read(kvb, map, b->own, size, off) : -ENOMEM;
checked:
	if (n == -EBADMSG) {
		if (!quiet)
			read_log_bad_page(s, o, map, bad);
		n = -EIO;
	}
	return n;
}

/*
 * A committed run read past the backend's cache, checked when the store
 * verifies: the count, or -EOPNOTSUPP where it cannot be (then
 * ofs_object_read).  The DRAM tier, when there is one, is asked first.
 */
static ssize_t read_uncached(struct ofs_store *s, struct ofs_object *o, const struct kvb_map *map,
			     size_t size, uint64_t off, struct ofs_bytes *b)
{
	uint64_t bad = 0;
	ssize_t n;

	if (s->dram_capacity || o->obj || map->bucket < 0 || (s->verify && read_load_pcs(s, o)))
		return -EOPNOTSUPP;
	if (ofs_bytes_alloc_aligned(s, b, size))
		return -ENOMEM;
	n = kvb_read_uncached(&s->kvb, map, s->verify ? o->pcs : NULL, b->own, size, off, &bad);
	if (n == -EBADMSG) {
		read_log_bad_page(s, o, map, bad);
		n = -EIO;
	} else if (n == -EOPNOTSUPP) {
		ofs_bytes_release(s, b);
		memset(b, 0, sizeof(*b));
		b->fd = -1;
	}
	return n;
}

ssize_t ofs_object_pread(struct ofs_store *s, struct ofs_object *o, size_t size, uint64_t off,
			 int uncached, struct ofs_bytes *b, struct kvb_map *map)
{
	ssize_t n;
	int ret;

	memset(b, 0, sizeof(*b));
	b->fd = -1;
	if (ofs_is_extents(o)) {
		*map = (struct kvb_map){ .bucket = META_EXTENTS, .size = o->m.size };
		return ofs_extents_pread(s, o, size, off, uncached, b);
	}
	if (o->obj)
		kvb_obj_view(&s->kvb, o->obj, map);
	else
		*map = ofs_committed(&o->m);
	if (off >= map->size)
		return 0;
	if (size > map->size - off)
		size = (size_t)(map->size - off);
	/* A writer's run may still be filling lazily (copy-on-write): the pages read first. */
	if (o->obj && (ret = kvb_obj_settle(&s->kvb, o->obj, off, size)))
		return ret;
	if (uncached && (n = read_uncached(s, o, map, size, off, b)) != -EOPNOTSUPP)
		return n;
	return ofs_object_read(s, o, map, size, off, 0, b);
}

int ofs_object_content_csum(struct ofs_store *s, struct ofs_object *o, uint64_t *csum)
{
	struct kvb_map map;
	uint64_t c;
	int ret;

	pthread_mutex_lock(&s->lock);
	c = o->m.csum;
	map = ofs_committed(&o->m);
	pthread_mutex_unlock(&s->lock);
	*csum = c;
	if (map.bucket < 0 || map.size == 0)
		return 0; /* no pages: both kinds agree */
	ret = read_load_pcs(s, o);
	if (ret)
		return ret;
	/* A sum of the bytes unless it is the sum of the page sums (kvb_hash.h). */
	if (kvb_pcsums_sum(o->pcs, map.npages) != c)
		return 0;
	return kvb_checksum(&s->kvb, &map, csum);
}
