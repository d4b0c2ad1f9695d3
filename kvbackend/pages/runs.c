/*
 * runs.c: page runs of the pages backend.  A run is handed out by its
 * bucket's bitmap allocator (alloc/) and given real blocks at once; a run
 * a committed record pointed at is freed only after the next barrier.
 * Here too: byte I/O over runs, and the checksums of a run's bytes.
 */
#include "pages_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- allocation, under the bucket's lock ---- */

int pages_free_run(struct pages *p, int32_t b, uint64_t page, uint64_t n)
{
	int ret;

	if (b < 0 || n == 0)
		return 0;
	/* Its blocks back to the filesystem first, while no one else can have the run. */
	io_punch(p, (uint32_t)b, page, n);
	pthread_mutex_lock(&p->b[b].lock);
	ret = alloc_free(&p->b[b].a, page, n);
	pthread_mutex_unlock(&p->b[b].lock);
	if (!ret)
		__atomic_add_fetch(&p->st.frees, 1, __ATOMIC_RELAXED);
	if (ret)
		fprintf(stderr, "offloadfs: BUG: free of bucket %d pages %llu+%llu: %s\n", b,
			(unsigned long long)page, (unsigned long long)n, strerror(-ret));
	return ret;
}

/*
 * A run a committed record pointed at: its bits stay set until the next
 * barrier has made the record change durable, so a power cut can never
 * bring back a mapping whose pages were handed to someone else.
 */
int pages_free_later(struct pages *p, int32_t b, uint64_t page, uint64_t n)
{
	int ret = 0;

	if (b < 0 || n == 0)
		return 0;
	pthread_mutex_lock(&p->flock);
	if (p->nfreed == p->freed_cap) {
		uint64_t cap = p->freed_cap ? p->freed_cap * 2 : PAGES_FREED_INITIAL;
		struct pages_freed *f = realloc(p->freed, cap * sizeof(*f));

		if (f) {
			p->freed = f;
			p->freed_cap = cap;
		}
	}
	if (p->nfreed < p->freed_cap)
		p->freed[p->nfreed++] = (struct pages_freed){ b, page, n };
	else
		ret = -ENOMEM; /* the pages stay allocated: leaked until the next rebuild */
	pthread_mutex_unlock(&p->flock);
	return ret;
}

/* Home bucket first, then the next ones in order; -ENOSPC only if all are full. */
int pages_alloc_run(struct pages *p, const char *key, size_t klen, uint64_t n,
		    struct kvb_map *out)
{
	uint32_t home, i;
	uint64_t page;
	int ret = -ENOSPC;

	if (n > p->npages)
		return -EFBIG;
	home = kvb_home_bucket(key, klen, p->nbuckets);
	for (i = 0; i < p->nbuckets; i++) {
		uint32_t b = (home + i) % p->nbuckets;

		pthread_mutex_lock(&p->b[b].lock);
		ret = alloc_alloc(&p->b[b].a, n, &page);
		pthread_mutex_unlock(&p->b[b].lock);
		/*
		 * The run gets its blocks now: a write the kernel acknowledged
		 * and writes back later must not find the disk full.  The
		 * buckets share one filesystem, so no other bucket would do.
		 */
		if (ret == 0 && (ret = io_reserve(p, b, page, n)) != 0) {
			pages_free_run(p, (int32_t)b, page, n);
			break;
		}
		if (ret == 0) {
			__atomic_add_fetch(&p->st.allocations, 1, __ATOMIC_RELAXED);
			out->bucket = (int32_t)b;
			out->page = page;
			out->npages = n;
			return 0;
		}
		if (ret != -ENOSPC)
			return ret;
	}
	__atomic_add_fetch(&p->st.alloc_failures, 1, __ATOMIC_RELAXED);
	return ret;
}

int pages_extend_run(struct pages *p, struct kvb_map *m, uint64_t n)
{
	int ret;

	pthread_mutex_lock(&p->b[m->bucket].lock);
	ret = alloc_extend(&p->b[m->bucket].a, m->page, m->npages, n - m->npages);
	pthread_mutex_unlock(&p->b[m->bucket].lock);
	if (ret == 0 && (ret = io_reserve(p, (uint32_t)m->bucket, m->page + m->npages,
					  n - m->npages)) != 0)
		pages_free_run(p, m->bucket, m->page + m->npages, n - m->npages);
	if (ret == 0) {
		m->npages = n;
		__atomic_add_fetch(&p->st.allocations, 1, __ATOMIC_RELAXED);
	}
	return ret == -EINVAL ? -ENOSPC : ret;
}

/* ---- byte I/O over runs ---- */

/*
 * Copy bytes [off, off + len) of from to the same offset of to: inside the
 * storage when it can (io_copy), else through a buffer.
 */
int pages_copy_at(struct pages *p, const struct kvb_map *from, const struct kvb_map *to,
		  uint64_t off, uint64_t len)
{
	uint64_t end = off + len, done;
	char *buf;
	int ret;

	if (len == 0)
		return 0;
	ret = io_copy(p, (uint32_t)from->bucket, pages_byte(p, from, off), (uint32_t)to->bucket,
		      pages_byte(p, to, off), len, &done);
	if (ret <= 0)
		return ret;
	off += done;
	buf = malloc(PAGES_COPY_CHUNK);
	if (!buf)
		return -ENOMEM;
	ret = 0;
	while (off < end && !ret) {
		size_t n = end - off < PAGES_COPY_CHUNK ? (size_t)(end - off) : PAGES_COPY_CHUNK;

		ret = pages_read_all(p, (uint32_t)from->bucket, buf, n, pages_byte(p, from, off));
		if (!ret)
			ret = pages_write_all(p, (uint32_t)to->bucket, buf, n, pages_byte(p, to, off));
		off += n;
	}
	free(buf);
	return ret;
}

/* ---- checksums ---- */

int hasher_init(struct pages_hasher *h)
{
	memset(h, 0, sizeof(*h));
	h->whole = XXH3_createState();
	h->page = XXH3_createState();
	if (!h->whole || !h->page) {
		XXH3_freeState(h->whole);
		XXH3_freeState(h->page);
		h->whole = h->page = NULL;
		return -ENOMEM;
	}
	XXH3_64bits_reset(h->whole);
	XXH3_64bits_reset(h->page);
	return 0;
}

void hasher_release(struct pages_hasher *h)
{
	XXH3_freeState(h->whole);
	XXH3_freeState(h->page);
	free(h->pcs);
	memset(h, 0, sizeof(*h));
}

int hasher_feed(struct pages_hasher *h, uint64_t ps, const char *buf, size_t len)
{
	XXH3_64bits_update(h->whole, buf, len);
	while (len) {
		uint64_t in_page = h->done % ps;
		size_t n = ps - in_page < len ? (size_t)(ps - in_page) : len;

		XXH3_64bits_update(h->page, buf, n);
		h->done += n;
		buf += n;
		len -= n;
		if (h->done % ps == 0) {
			uint64_t idx = h->done / ps - 1;

			if (idx >= h->cap) {
				uint64_t cap = h->cap ? h->cap * 2 : PAGES_PCS_INITIAL;
				uint64_t *pcs = realloc(h->pcs, cap * sizeof(*pcs));

				if (!pcs)
					return -ENOMEM;
				h->pcs = pcs;
				h->cap = cap;
			}
			h->pcs[idx] = XXH3_64bits_digest(h->page);
			XXH3_64bits_reset(h->page);
		}
	}
	return 0;
}

/* The sums so far, without ending the stream: more appends may follow. */
void hasher_result(const struct pages_hasher *h, uint64_t ps, uint64_t *csum,
		   uint64_t *pcs)
{
	uint64_t full = h->done / ps;

	*csum = XXH3_64bits_digest(h->whole);
	if (full)
		memcpy(pcs, h->pcs, full * sizeof(*pcs));
	if (h->done % ps)
		pcs[full] = XXH3_64bits_digest(h->page);
}

/*
 * Hash an object's bytes as stored: whole and, when pcs is set, per page.
 * With diff, the sums of pages below nknown whose bit is clear are in pcs
 * already (pages unchanged since they were hashed): only the whole sum
 * reads them.
 */
int pages_hash_map(struct pages *p, const struct kvb_map *m, uint64_t *csum, uint64_t *pcs,
		   const uint64_t *diff, uint64_t nknown)
{
	struct pages_hasher h;
	char *buf;
	uint64_t done = 0;
	int ret;

	if (m->size == 0 || m->bucket < 0) {
		*csum = XXH3_64bits(NULL, 0);
		return 0;
	}
	buf = malloc(PAGES_COPY_CHUNK);
	if (!buf)
		return -ENOMEM;
	ret = hasher_init(&h);
	/* Chunks hold whole pages when a page fits in one; else every page is hashed. */
	if (!pcs || p->page_size > PAGES_COPY_CHUNK)
		diff = NULL;
	while (!ret && done < m->size) {
		size_t n = m->size - done < PAGES_COPY_CHUNK ? (size_t)(m->size - done)
							     : PAGES_COPY_CHUNK;
		uint64_t at;

		ret = pages_read_all(p, (uint32_t)m->bucket, buf, n, pages_byte(p, m, done));
		if (ret)
			break;
		if (!diff) {
			ret = hasher_feed(&h, p->page_size, buf, n);
			done += n;
			continue;
		}
		XXH3_64bits_update(h.whole, buf, n);
		for (at = 0; at < n; at += p->page_size) {
			uint64_t pg = (done + at) / p->page_size;
			size_t len = n - at < p->page_size ? (size_t)(n - at) : (size_t)p->page_size;

			if (pg >= nknown || ((diff[pg / 64] >> (pg % 64)) & 1))
				pcs[pg] = XXH3_64bits(buf + at, len);
		}
		done += n;
	}
	if (!ret && diff) {
		*csum = XXH3_64bits_digest(h.whole);
	} else if (!ret) {
		uint64_t *tmp = pcs ? pcs : malloc((m->npages + 1) * sizeof(*tmp));

		if (tmp)
			hasher_result(&h, p->page_size, csum, tmp);
		else
			ret = -ENOMEM;
		if (!pcs)
			free(tmp);
	}
	hasher_release(&h);
	free(buf);
	return ret;
}
